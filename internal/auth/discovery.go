package auth

import (
	"context"
	"strings"
)

// DiscoveryAuthorizer allows every authenticated user to read the paths
// upstream's system:discovery and system:public-info-viewer roles grant
// to system:authenticated: get on /api, /apis, /openapi and everything
// below them, and on /healthz, /livez, /readyz, /version and /version/.
// Without it, a client that is neither in system:masters nor allowed by
// RBAC (knode has none) cannot discover resources, so kubectl run with a
// node's kubeconfig fails before it reaches the request the node
// authorizer would judge. It has no opinion about anything else.
type DiscoveryAuthorizer struct{}

// Authorize implements Authorizer.
func (DiscoveryAuthorizer) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if a.User == nil || a.ResourceRequest || a.Verb != "get" || !discoveryPath(a.Path) {
		return NoOpinion, "", nil
	}
	return Allow, "", nil
}

// discoveryPath matches the role's URLs: exact paths, and a trailing /*
// as a prefix.
func discoveryPath(p string) bool {
	switch p {
	case "/healthz", "/livez", "/readyz", "/version", "/version/", "/api", "/apis", "/openapi":
		return true
	}
	for _, prefix := range []string{"/api/", "/apis/", "/openapi/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}
