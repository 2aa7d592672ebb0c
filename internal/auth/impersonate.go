package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Identities impersonation treats specially. The strings are Kubernetes'.
const (
	// AnonymousUser is the user of unauthenticated requests.
	AnonymousUser = "system:anonymous"
	// UnauthenticatedGroup is the group of AnonymousUser.
	UnauthenticatedGroup = "system:unauthenticated"
	// ServiceAccountUserPrefix starts the user name of a service account,
	// system:serviceaccount:<namespace>:<name>.
	ServiceAccountUserPrefix = "system:serviceaccount:"
	// ServiceAccountsGroup holds every service account; its per-namespace
	// groups are ServiceAccountsGroup + ":" + namespace.
	ServiceAccountsGroup = "system:serviceaccounts"
)

// VerbImpersonate is the verb an impersonation is authorized on.
const VerbImpersonate = "impersonate"

// Impersonation is what a request's Impersonate-* headers (kubectl --as,
// --as-group, --as-uid; client-go's rest.Config.Impersonate) ask to act as.
type Impersonation struct {
	// User to act as; never empty in a parsed Impersonation.
	User string
	// UID of the user; empty when not asked for.
	UID string
	// Groups asked for, in header order. Empty means "the groups the user
	// implies": none for a user, the service account groups for a service
	// account.
	Groups []string
	// Extra holds Impersonate-Extra-<key> values by key, the key lower-cased
	// and %-decoded as upstream reads it.
	Extra map[string][]string
}

// ParseImpersonation reads the impersonation headers of h. ok is false when
// there are none (or only empty ones). Groups, a uid or extras without
// Impersonate-User are refused with a 400 BadRequest Status error, as
// upstream does.
func ParseImpersonation(h http.Header) (imp Impersonation, ok bool, err error) {
	imp.User = h.Get(authenticationv1.ImpersonateUserHeader)
	imp.UID = h.Get(authenticationv1.ImpersonateUIDHeader)
	imp.Groups = slices.Clone(h.Values(authenticationv1.ImpersonateGroupHeader))
	for name, values := range h {
		key, isExtra := extraKey(name)
		if !isExtra {
			continue
		}
		if imp.Extra == nil {
			imp.Extra = map[string][]string{}
		}
		imp.Extra[key] = append(imp.Extra[key], values...)
	}
	if imp.User == "" {
		if len(imp.Groups) > 0 || imp.UID != "" || len(imp.Extra) > 0 {
			return Impersonation{}, false, apierrors.NewBadRequest(fmt.Sprintf("requested %s without impersonating a user", imp.describe()))
		}
		return Impersonation{}, false, nil
	}
	return imp, true, nil
}

// extraKey returns the extra key an Impersonate-Extra-<key> header names.
// Header names arrive canonicalized, so the prefix is matched without
// regard to case.
func extraKey(header string) (string, bool) {
	prefix := authenticationv1.ImpersonateUserExtraHeaderPrefix
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", false
	}
	key := strings.ToLower(header[len(prefix):])
	if unescaped, err := url.PathUnescape(key); err == nil {
		key = unescaped
	}
	return key, true
}

// describe lists what was asked for, for the 400 message.
func (imp Impersonation) describe() string {
	var parts []string
	for _, g := range imp.Groups {
		parts = append(parts, fmt.Sprintf("group %q", g))
	}
	for _, k := range imp.extraKeys() {
		for _, v := range imp.Extra[k] {
			parts = append(parts, fmt.Sprintf("userextra %q=%q", k, v))
		}
	}
	if imp.UID != "" {
		parts = append(parts, fmt.Sprintf("uid %q", imp.UID))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (imp Impersonation) extraKeys() []string {
	keys := make([]string, 0, len(imp.Extra))
	for k := range imp.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// serviceAccount splits a service account user name into its namespace and
// name; ok is false for any other user name, including malformed ones,
// which upstream impersonates as plain users.
func serviceAccount(user string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(user, ServiceAccountUserPrefix)
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 2 {
		return "", "", false
	}
	namespace, name = parts[0], parts[1]
	if len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}

// Checks returns what requester must be allowed to do, one Attributes per
// thing impersonated, each with verb "impersonate": the user (resource
// users, or serviceaccounts in its namespace), each group (groups), each
// extra value (userextras/<key> in authentication.k8s.io, keys sorted) and
// the uid (uids in authentication.k8s.io). The object's name is the thing
// impersonated.
func (imp Impersonation) Checks(requester *User) []Attributes {
	check := func(group, resource, subresource, namespace, name string) Attributes {
		return Attributes{
			User:            requester,
			Verb:            VerbImpersonate,
			APIGroup:        group,
			APIVersion:      "v1",
			Resource:        resource,
			Subresource:     subresource,
			Namespace:       namespace,
			Name:            name,
			ResourceRequest: true,
		}
	}
	var checks []Attributes
	if ns, name, ok := serviceAccount(imp.User); ok {
		checks = append(checks, check("", "serviceaccounts", "", ns, name))
	} else {
		checks = append(checks, check("", "users", "", "", imp.User))
	}
	for _, g := range imp.Groups {
		checks = append(checks, check("", "groups", "", "", g))
	}
	for _, k := range imp.extraKeys() {
		for _, v := range imp.Extra[k] {
			checks = append(checks, check(authenticationv1.GroupName, "userextras", k, "", v))
		}
	}
	if imp.UID != "" {
		checks = append(checks, check(authenticationv1.GroupName, "uids", "", "", imp.UID))
	}
	return checks
}

// Impersonated returns the user the request acts as once every check
// passed. Groups are those asked for; without any, a service account gets
// its two groups. A user other than system:anonymous is then also in
// system:authenticated, unless system:authenticated or
// system:unauthenticated was asked for; system:anonymous is in
// system:unauthenticated.
//
// Extras are authorized by Checks but not carried: knode's User has no
// field for them, and nothing in knode reads them.
func (imp Impersonation) Impersonated() *User {
	groups := slices.Clone(imp.Groups)
	if len(groups) == 0 {
		if ns, _, ok := serviceAccount(imp.User); ok {
			groups = []string{ServiceAccountsGroup, ServiceAccountsGroup + ":" + ns}
		}
	}
	switch {
	case imp.User == AnonymousUser:
		if !slices.Contains(groups, UnauthenticatedGroup) {
			groups = append(groups, UnauthenticatedGroup)
		}
	case !slices.Contains(groups, AuthenticatedGroup) && !slices.Contains(groups, UnauthenticatedGroup):
		groups = append(groups, AuthenticatedGroup)
	}
	return &User{Name: imp.User, UID: imp.UID, Groups: groups}
}

// Impersonate applies r's impersonation headers to requester, the user
// authentication found. Without such headers it returns requester. With
// them it asks az about every check of Checks, in order, and returns the
// impersonated user once all are allowed; it then removes the headers
// from r, so handlers downstream see only the user it returned.
//
// Errors are Status errors for the client: 400 for malformed headers
// (ParseImpersonation), 403 with upstream's message for the first check
// that is not allowed (an authorizer error refuses too), 500 without a
// requester.
func Impersonate(ctx context.Context, r *http.Request, requester *User, az Authorizer) (*User, error) {
	imp, ok, err := ParseImpersonation(r.Header)
	if err != nil || !ok {
		return requester, err
	}
	if requester == nil {
		return nil, apierrors.NewInternalError(errors.New("no user found for request"))
	}
	for _, a := range imp.Checks(requester) {
		decision, reason, err := az.Authorize(ctx, a)
		if err != nil || decision != Allow {
			return nil, ForbiddenError(a, reason)
		}
	}
	r.Header.Del(authenticationv1.ImpersonateUserHeader)
	r.Header.Del(authenticationv1.ImpersonateUIDHeader)
	r.Header.Del(authenticationv1.ImpersonateGroupHeader)
	for name := range r.Header {
		if _, isExtra := extraKey(name); isExtra {
			r.Header.Del(name)
		}
	}
	return imp.Impersonated(), nil
}
