package auth

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeName(t *testing.T) {
	tests := []struct {
		name     string
		user     *User
		wantName string
		wantOK   bool
	}{
		{name: "nil"},
		{name: "node", user: &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}, wantName: "n1", wantOK: true},
		{name: "not in the group", user: &User{Name: "system:node:n1", Groups: []string{"system:authenticated"}}},
		{name: "in the group with another name", user: &User{Name: "n1", Groups: []string{"system:nodes"}}},
		{name: "empty node name", user: &User{Name: "system:node:", Groups: []string{"system:nodes"}}, wantName: "", wantOK: true},
		{name: "prefix is case-sensitive", user: &User{Name: "System:Node:n1", Groups: []string{"system:nodes"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, ok := NodeName(tc.user)
			if name != tc.wantName || ok != tc.wantOK {
				t.Errorf("got (%q, %v), want (%q, %v)", name, ok, tc.wantName, tc.wantOK)
			}
		})
	}
}

func TestNewUser(t *testing.T) {
	tests := []struct {
		name   string
		groups []string
		want   []string
	}{
		{name: "none", want: []string{"system:authenticated"}},
		{name: "empty entries dropped", groups: []string{"", "a", ""}, want: []string{"a", "system:authenticated"}},
		{name: "not doubled", groups: []string{"system:authenticated", "a"}, want: []string{"system:authenticated", "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string(nil), tc.groups...)
			u := newUser("u", "1", in)
			if diff := cmp.Diff(tc.want, u.Groups); diff != "" {
				t.Error(diff)
			}
			if diff := cmp.Diff(tc.groups, in); diff != "" {
				t.Errorf("input changed: %s", diff)
			}
		})
	}
}

func TestUserContext(t *testing.T) {
	ctx := context.Background()
	if _, ok := UserFrom(ctx); ok {
		t.Error("user found in an empty context")
	}
	if _, ok := UserFrom(WithUser(ctx, nil)); ok {
		t.Error("nil user reported as found")
	}
	u := &User{Name: "alice"}
	if got, ok := UserFrom(WithUser(ctx, u)); !ok || got != u {
		t.Errorf("UserFrom = %v, %v", got, ok)
	}
}
