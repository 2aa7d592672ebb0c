package server

import (
	"testing"

	"knode/internal/auth"
)

func TestAllowed(t *testing.T) {
	node := func(name string) *auth.User {
		return &auth.User{Name: auth.NodeUser(name), Groups: []string{auth.NodesGroup, auth.AuthenticatedGroup}}
	}
	master := &auth.User{Name: "alice", Groups: []string{auth.MastersGroup, auth.AuthenticatedGroup}}
	for _, tc := range []struct {
		name       string
		user       *auth.User
		nodeName   string
		verb, path string
		want       bool
	}{
		{name: "self gets metrics", user: node("n1"), nodeName: "n1", verb: "get", path: "/metrics", want: true},
		{name: "self creates metrics", user: node("n1"), nodeName: "n1", verb: "create", path: "/metrics"},
		{name: "self gets an unknown path", user: node("n1"), nodeName: "n1", verb: "get", path: "/nope"},
		{name: "self gets metrics with a trailing slash", user: node("n1"), nodeName: "n1", verb: "get", path: "/metrics/"},
		{name: "other node gets metrics", user: node("n2"), nodeName: "n1", verb: "get", path: "/metrics"},
		{name: "node name is a prefix", user: node("n"), nodeName: "n1", verb: "get", path: "/metrics"},
		{name: "empty node identity", user: node(""), nodeName: "", verb: "get", path: "/metrics"},
		{name: "self name without the nodes group", user: &auth.User{Name: auth.NodeUser("n1"), Groups: []string{auth.AuthenticatedGroup}}, nodeName: "n1", verb: "get", path: "/metrics"},
		{name: "nodes group with another user name", user: &auth.User{Name: "n1", Groups: []string{auth.NodesGroup}}, nodeName: "n1", verb: "get", path: "/metrics"},
		{name: "master gets metrics", user: master, nodeName: "n1", verb: "get", path: "/metrics", want: true},
		{name: "master creates anywhere", user: master, nodeName: "n1", verb: "create", path: "/nope", want: true},
		{name: "node that is also a master", user: &auth.User{Name: auth.NodeUser("n2"), Groups: []string{auth.NodesGroup, auth.MastersGroup}}, nodeName: "n1", verb: "get", path: "/metrics", want: true},
		{name: "plain user", user: &auth.User{Name: "bob", Groups: []string{auth.AuthenticatedGroup}}, nodeName: "n1", verb: "get", path: "/metrics"},
		{name: "nil user", user: nil, nodeName: "n1", verb: "get", path: "/metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowed(tc.user, tc.nodeName, tc.verb, tc.path); got != tc.want {
				t.Errorf("allowed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVerb(t *testing.T) {
	for method, want := range map[string]string{
		"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
		"PATCH": "patch", "DELETE": "delete", "OPTIONS": "options",
	} {
		if got := verb(method); got != want {
			t.Errorf("verb(%s) = %q, want %q", method, got, want)
		}
	}
}

func TestPublic(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/healthz", true},
		{"HEAD", "/healthz", true},
		{"POST", "/healthz", false},
		{"GET", "/healthz/", false},
		{"GET", "/metrics", false},
		{"GET", "/", false},
	} {
		if got := public(tc.method, tc.path); got != tc.want {
			t.Errorf("public(%s, %s) = %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}
