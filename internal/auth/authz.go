package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Attributes describe one request for an authorization decision; see
// RequestAttributes for how they come from HTTP.
type Attributes struct {
	// User is the authenticated user; nil before authentication.
	User *User
	// Verb is the Kubernetes verb (get, list, watch, create, update, patch,
	// delete, deletecollection, proxy) of a resource request, or the
	// lower-case HTTP method of a non-resource request.
	Verb       string
	Namespace  string
	APIGroup   string
	APIVersion string
	Resource   string
	// Subresource such as "status"; empty for the main resource.
	Subresource string
	// Name of the object; for list and watch also taken from a
	// metadata.name field selector, as upstream does.
	Name string
	// Path is the URL path, for resource and non-resource requests alike.
	Path string
	// ResourceRequest is false for paths outside the API groups, such as
	// /healthz, /version, /api and /apis.
	ResourceRequest bool
	// FieldSelector and LabelSelector are the raw query parameters of a
	// list, watch or deletecollection; empty otherwise.
	FieldSelector string
	LabelSelector string
}

// FieldValue returns the value a field selector requires field to equal
// exactly (for example spec.nodeName=node-1), or false if the selector does
// not pin it or does not parse. Authorizers use it to allow a list or watch
// that can only return permitted objects.
func (a Attributes) FieldValue(field string) (string, bool) {
	if a.FieldSelector == "" {
		return "", false
	}
	sel, err := fields.ParseSelector(a.FieldSelector)
	if err != nil {
		return "", false
	}
	return sel.RequiresExactMatch(field)
}

// Decision is an authorizer's answer. The zero value is Deny, so a decision
// that was never set refuses.
type Decision int

const (
	// Deny refuses the request and stops the chain.
	Deny Decision = iota
	// Allow permits the request and stops the chain.
	Allow
	// NoOpinion leaves the request to the next authorizer; at the end of
	// the chain it refuses.
	NoOpinion
)

func (d Decision) String() string {
	switch d {
	case Deny:
		return "Deny"
	case Allow:
		return "Allow"
	case NoOpinion:
		return "NoOpinion"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Authorizer decides whether a request may proceed. reason, when not empty,
// is shown to the client after the 403 message. An error means the
// authorizer could not decide; the decision returned with it still counts
// (normally NoOpinion).
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (Decision, string, error)
}

// MastersAuthorizer allows everything to members of MastersGroup and has no
// opinion about anyone else.
type MastersAuthorizer struct{}

// Authorize implements Authorizer.
func (MastersAuthorizer) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User.InGroup(MastersGroup) {
		return Allow, "", nil
	}
	return NoOpinion, "", nil
}

// UnionAuthorizer asks each authorizer in order. The first Allow or Deny is
// the answer, with that authorizer's reason and error. If all have no
// opinion, the answer is NoOpinion with every reason joined by newlines and
// every error joined.
type UnionAuthorizer []Authorizer

// Authorize implements Authorizer.
func (u UnionAuthorizer) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var reasons []string
	var errs []error
	for _, az := range u {
		d, reason, err := az.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if d == Allow || d == Deny {
			return d, reason, err
		}
	}
	return NoOpinion, strings.Join(reasons, "\n"), errors.Join(errs...)
}

// Chain returns the authorizer the API server uses, in upstream's order for
// a privileged group in front of --authorization-mode=Node,RBAC:
//
//  1. MastersAuthorizer;
//  2. node, the node authorizer (section 13 of the reference), when not nil.
//
// There is no RBAC yet: whatever is left at NoOpinion is refused with 403.
func Chain(node Authorizer) UnionAuthorizer {
	chain := UnionAuthorizer{MastersAuthorizer{}}
	if node != nil {
		chain = append(chain, node)
	}
	return chain
}

// htmlSanitizer keeps the user-controlled parts of a refusal from reading as
// HTML, as upstream does; quotes stay.
var htmlSanitizer = strings.NewReplacer(`&`, "&amp;", `<`, "&lt;", `>`, "&gt;")

// ForbiddenError returns the 403 Status error upstream sends for a refused
// request: group and resource (without subresource) and name in the
// details, and the message Forbidden describes.
func ForbiddenError(a Attributes, reason string) *apierrors.StatusError {
	msg := htmlSanitizer.Replace(refusal(a))
	if reason != "" {
		msg += ": " + reason
	}
	gr := schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}
	return apierrors.NewForbidden(gr, a.Name, errors.New(msg))
}

// Forbidden returns the message of ForbiddenError, for example
//
//	nodes "node-1" is forbidden: User "system:node:node-2" cannot patch resource "nodes" in API group "" at the cluster scope: <reason>
//	leases.coordination.k8s.io "node-1" is forbidden: User "u" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease"
//	forbidden: User "u" cannot get path "/metrics"
func Forbidden(a Attributes, reason string) string {
	return ForbiddenError(a, reason).Error()
}

// refusal is the sentence naming who cannot do what.
func refusal(a Attributes) string {
	name := ""
	if a.User != nil {
		name = a.User.Name
	}
	if !a.ResourceRequest {
		return fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.Verb, resource, a.APIGroup, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.Verb, resource, a.APIGroup)
}
