package auth

import (
	"context"
	"slices"
	"strings"
)

// Well-known identities. The strings are Kubernetes' own.
const (
	// MastersGroup may do anything.
	MastersGroup = "system:masters"
	// AuthenticatedGroup is added to every authenticated user.
	AuthenticatedGroup = "system:authenticated"
	// NodesGroup is the group of every node identity.
	NodesGroup = "system:nodes"
	// NodeUserPrefix prefixes a node's name to form its user name.
	NodeUserPrefix = "system:node:"
	// AdminUser is the user of the admin kubeconfig.
	AdminUser = "kubernetes-admin"
	// KubeletClientUser is the API server's own identity towards node
	// agents (kubeadm's apiserver-kubelet-client), in MastersGroup.
	KubeletClientUser = "kube-apiserver-kubelet-client"
)

// User is an authenticated identity. Authenticators return a fresh value on
// every call; the caller may keep or change it.
type User struct {
	Name string
	// UID is empty for certificate users.
	UID string
	// Groups always holds AuthenticatedGroup once authenticated.
	Groups []string
}

// InGroup reports whether u is a member of group. A nil user is in no group.
func (u *User) InGroup(group string) bool {
	return u != nil && slices.Contains(u.Groups, group)
}

// newUser returns an authenticated user: groups copied, empty entries
// dropped, AuthenticatedGroup added once.
func newUser(name, uid string, groups []string) *User {
	out := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		if g != "" {
			out = append(out, g)
		}
	}
	if !slices.Contains(out, AuthenticatedGroup) {
		out = append(out, AuthenticatedGroup)
	}
	return &User{Name: name, UID: uid, Groups: out}
}

func (u *User) clone() *User {
	c := *u
	c.Groups = slices.Clone(u.Groups)
	return &c
}

// NodeName returns the node a user speaks for: the user must be named
// "system:node:<name>" and be in NodesGroup, as upstream's node identifier
// requires. The name may be empty ("system:node:"); callers treat that as
// an identity that matches no node.
func NodeName(u *User) (name string, ok bool) {
	if u == nil || !strings.HasPrefix(u.Name, NodeUserPrefix) || !u.InGroup(NodesGroup) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, NodeUserPrefix), true
}

// NodeUser returns the user name of a node identity.
func NodeUser(nodeName string) string { return NodeUserPrefix + nodeName }

type userKey struct{}

// WithUser returns ctx carrying u, for handlers and admission downstream of
// authentication.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user stored by WithUser.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok && u != nil
}
