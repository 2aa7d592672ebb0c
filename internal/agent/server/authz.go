package server

import (
	"net/http"
	"strings"

	"knode/internal/auth"
)

// Paths this server answers.
const (
	healthzPath = "/healthz"
	metricsPath = "/metrics"
)

// verb is the authorization verb of an HTTP method, as the kubelet derives
// it: GET and HEAD read, the others write.
func verb(method string) string {
	if v := auth.MethodVerb(method); v != "" {
		return v
	}
	return strings.ToLower(method)
}

// public reports whether a request needs no credentials: only reading
// /healthz.
func public(method, path string) bool {
	return path == healthzPath && (method == http.MethodGet || method == http.MethodHead)
}

// allowed decides whether user may do verb on path of the agent serving
// nodeName:
//
//   - members of auth.MastersGroup may do anything (what they ask for may
//     still not exist: 404 or 405);
//   - the node's own identity, system:node:<nodeName> in auth.NodesGroup, may
//     get /metrics;
//   - nobody else may do anything, other nodes included.
func allowed(user *auth.User, nodeName, verb, path string) bool {
	if user.InGroup(auth.MastersGroup) {
		return true
	}
	if name, ok := auth.NodeName(user); ok && name != "" && name == nodeName {
		return verb == "get" && path == metricsPath
	}
	return false
}
