package auth

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMastersAuthorizer(t *testing.T) {
	tests := []struct {
		name string
		user *User
		want Decision
	}{
		{name: "no user", user: nil, want: NoOpinion},
		{name: "master", user: &User{Name: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}, want: Allow},
		{name: "node", user: &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}, want: NoOpinion},
		{name: "named like a master but not in the group", user: &User{Name: "system:masters"}, want: NoOpinion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := MastersAuthorizer{}.Authorize(context.Background(), Attributes{User: tc.user, Verb: "delete", Resource: "nodes", ResourceRequest: true})
			if d != tc.want || reason != "" || err != nil {
				t.Errorf("got (%v, %q, %v), want (%v, \"\", nil)", d, reason, err, tc.want)
			}
		})
	}
}

type fakeAuthorizer struct {
	d      Decision
	reason string
	err    error
	called *int
}

func (f fakeAuthorizer) Authorize(context.Context, Attributes) (Decision, string, error) {
	if f.called != nil {
		*f.called++
	}
	return f.d, f.reason, f.err
}

func TestUnionAuthorizer(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	tests := []struct {
		name       string
		union      []fakeAuthorizer
		want       Decision
		wantReason string
		wantErrs   []error
		// wantCalls: how many authorizers were asked.
		wantCalls int
	}{
		{name: "empty chain has no opinion", want: NoOpinion},
		{name: "allow stops", union: []fakeAuthorizer{{d: NoOpinion}, {d: Allow, reason: "ok"}, {d: Deny}},
			want: Allow, wantReason: "ok", wantCalls: 2},
		{name: "deny stops", union: []fakeAuthorizer{{d: Deny, reason: "no", err: errA}, {d: Allow}},
			want: Deny, wantReason: "no", wantErrs: []error{errA}, wantCalls: 1},
		{name: "all no opinion joins reasons and errors", union: []fakeAuthorizer{
			{d: NoOpinion, reason: "r1", err: errA}, {d: NoOpinion}, {d: NoOpinion, reason: "r2", err: errB}},
			want: NoOpinion, wantReason: "r1\nr2", wantErrs: []error{errA, errB}, wantCalls: 3},
		{name: "an error does not stop the chain", union: []fakeAuthorizer{{d: NoOpinion, err: errA}, {d: Allow}},
			want: Allow, wantCalls: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var union UnionAuthorizer
			for _, f := range tc.union {
				f.called = &calls
				union = append(union, f)
			}
			d, reason, err := union.Authorize(context.Background(), Attributes{})
			if d != tc.want || reason != tc.wantReason {
				t.Errorf("got (%v, %q), want (%v, %q)", d, reason, tc.want, tc.wantReason)
			}
			if (err != nil) != (len(tc.wantErrs) > 0) {
				t.Errorf("err = %v, want %v", err, tc.wantErrs)
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want it to wrap %v", err, want)
				}
			}
			if calls != tc.wantCalls {
				t.Errorf("%d authorizers asked, want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestChain(t *testing.T) {
	master := &User{Name: "admin", Groups: []string{MastersGroup}}
	node := &User{Name: "system:node:n1", Groups: []string{NodesGroup}}
	nodeAuthz := fakeAuthorizer{d: Allow}
	tests := []struct {
		name  string
		chain UnionAuthorizer
		user  *User
		want  Decision
	}{
		{name: "masters without node authorizer", chain: Chain(nil), user: master, want: Allow},
		{name: "node without node authorizer", chain: Chain(nil), user: node, want: NoOpinion},
		{name: "node with node authorizer", chain: Chain(nodeAuthz), user: node, want: Allow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := tc.chain.Authorize(context.Background(), Attributes{User: tc.user})
			if d != tc.want {
				t.Errorf("decision = %v, want %v", d, tc.want)
			}
		})
	}
}

func TestDecisionString(t *testing.T) {
	got := []string{Deny.String(), Allow.String(), NoOpinion.String(), Decision(7).String()}
	if diff := cmp.Diff([]string{"Deny", "Allow", "NoOpinion", "Decision(7)"}, got); diff != "" {
		t.Error(diff)
	}
	var zero Decision
	if zero != Deny {
		t.Error("the zero Decision must deny")
	}
}

func TestForbidden(t *testing.T) {
	node2 := &User{Name: "system:node:node-2", Groups: []string{NodesGroup}}
	tests := []struct {
		name   string
		attrs  Attributes
		reason string
		want   string
	}{
		{name: "cluster-scoped with reason",
			attrs:  Attributes{User: node2, Verb: "patch", Resource: "nodes", Name: "node-1", APIVersion: "v1", ResourceRequest: true},
			reason: "node 'node-2' cannot modify node 'node-1'",
			want:   `nodes "node-1" is forbidden: User "system:node:node-2" cannot patch resource "nodes" in API group "" at the cluster scope: node 'node-2' cannot modify node 'node-1'`},
		{name: "namespaced, grouped, no reason",
			attrs: Attributes{User: node2, Verb: "update", APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: "kube-node-lease", Name: "node-1", ResourceRequest: true},
			want:  `leases.coordination.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease"`},
		{name: "subresource",
			attrs: Attributes{User: node2, Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p", ResourceRequest: true},
			want:  `pods "p" is forbidden: User "system:node:node-2" cannot update resource "pods/status" in API group "" in the namespace "default"`},
		{name: "collection",
			attrs: Attributes{User: &User{Name: "bob"}, Verb: "list", Resource: "nodes", ResourceRequest: true},
			want:  `nodes is forbidden: User "bob" cannot list resource "nodes" in API group "" at the cluster scope`},
		{name: "non-resource",
			attrs: Attributes{User: &User{Name: "bob"}, Verb: "get", Path: "/foo"},
			want:  `forbidden: User "bob" cannot get path "/foo"`},
		{name: "no user",
			attrs: Attributes{Verb: "get", Path: "/metrics"},
			want:  `forbidden: User "" cannot get path "/metrics"`},
		{name: "HTML in the attributes is escaped, not in the reason",
			attrs:  Attributes{User: &User{Name: "<b>&"}, Verb: "get", Path: "/x<y>"},
			reason: "<kept>",
			want:   `forbidden: User "&lt;b&gt;&amp;" cannot get path "/x&lt;y&gt;": <kept>`},
		{name: "percent signs survive",
			attrs: Attributes{User: &User{Name: "u"}, Verb: "get", Path: "/a%2Fb"},
			want:  `forbidden: User "u" cannot get path "/a%2Fb"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Forbidden(tc.attrs, tc.reason)); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForbiddenError(t *testing.T) {
	a := Attributes{User: &User{Name: "u"}, Verb: "delete", APIGroup: "apps", APIVersion: "v1", Resource: "daemonsets", Subresource: "status",
		Namespace: "kube-system", Name: "ds", ResourceRequest: true}
	err := ForbiddenError(a, "")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("not a Forbidden error: %v", err)
	}
	want := metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Group: "apps", Kind: "daemonsets", Name: "ds"},
		Message: `daemonsets.apps "ds" is forbidden: User "u" cannot delete resource "daemonsets/status" in API group "apps" in the namespace "kube-system"`,
	}
	if diff := cmp.Diff(want, err.ErrStatus); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestFieldValue(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		field    string
		want     string
		wantOK   bool
	}{
		{name: "none", field: "spec.nodeName"},
		{name: "pinned", selector: "spec.nodeName=n1", field: "spec.nodeName", want: "n1", wantOK: true},
		{name: "double equals among others", selector: "status.phase!=Failed,spec.nodeName==n1", field: "spec.nodeName", want: "n1", wantOK: true},
		{name: "not equal does not pin", selector: "spec.nodeName!=n1", field: "spec.nodeName"},
		{name: "other field", selector: "metadata.name=x", field: "spec.nodeName"},
		{name: "unparsable", selector: "spec.nodeName", field: "spec.nodeName"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Attributes{FieldSelector: tc.selector}.FieldValue(tc.field)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("got (%q, %v), want (%q, %v)", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
