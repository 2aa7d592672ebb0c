package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/auth"
)

func TestParseImpersonation(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string][]string
		want    auth.Impersonation
		wantOK  bool
		// wantErr is the Status message of a 400; empty for none.
		wantErr string
	}{
		{name: "no headers"},
		{name: "empty user header", headers: map[string][]string{"Impersonate-User": {""}}},
		{name: "user", headers: map[string][]string{"Impersonate-User": {"system:node:n1"}},
			want: auth.Impersonation{User: "system:node:n1"}, wantOK: true},
		{name: "everything", headers: map[string][]string{
			"Impersonate-User":                  {"jane"},
			"Impersonate-Group":                 {"g1", "g2"},
			"Impersonate-Uid":                   {"42"},
			"Impersonate-Extra-Scopes":          {"view", "edit"},
			"Impersonate-Extra-Example.com%2fk": {"v"},
		}, want: auth.Impersonation{
			User: "jane", UID: "42", Groups: []string{"g1", "g2"},
			Extra: map[string][]string{"scopes": {"view", "edit"}, "example.com/k": {"v"}},
		}, wantOK: true},
		{name: "group without user", headers: map[string][]string{"Impersonate-Group": {"system:nodes"}},
			wantErr: `requested [group "system:nodes"] without impersonating a user`},
		{name: "uid without user", headers: map[string][]string{"Impersonate-Uid": {"1"}},
			wantErr: `requested [uid "1"] without impersonating a user`},
		{name: "extra without user", headers: map[string][]string{"Impersonate-Extra-Scopes": {"a"}},
			wantErr: `requested [userextra "scopes"="a"] without impersonating a user`},
		{name: "the bare extra prefix is no extra", headers: map[string][]string{"Impersonate-Extra-": {"a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, vs := range tc.headers {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			got, ok, err := auth.ParseImpersonation(h)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want 400 %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if tc.wantOK {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("impersonation (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestImpersonationChecks(t *testing.T) {
	admin := &auth.User{Name: "admin", Groups: []string{auth.MastersGroup, auth.AuthenticatedGroup}}
	check := func(group, resource, subresource, namespace, name string) auth.Attributes {
		return auth.Attributes{User: admin, Verb: "impersonate", APIGroup: group, APIVersion: "v1", Resource: resource,
			Subresource: subresource, Namespace: namespace, Name: name, ResourceRequest: true}
	}
	tests := []struct {
		name string
		imp  auth.Impersonation
		want []auth.Attributes
	}{
		{name: "user and groups", imp: auth.Impersonation{User: "system:node:n1", Groups: []string{"system:nodes", "extra"}},
			want: []auth.Attributes{
				check("", "users", "", "", "system:node:n1"),
				check("", "groups", "", "", "system:nodes"),
				check("", "groups", "", "", "extra"),
			}},
		{name: "extras sorted by key, then uid", imp: auth.Impersonation{User: "u", UID: "7",
			Extra: map[string][]string{"scopes": {"b", "a"}, "acme.io/team": {"x"}}},
			want: []auth.Attributes{
				check("", "users", "", "", "u"),
				check("authentication.k8s.io", "userextras", "acme.io/team", "", "x"),
				check("authentication.k8s.io", "userextras", "scopes", "", "b"),
				check("authentication.k8s.io", "userextras", "scopes", "", "a"),
				check("authentication.k8s.io", "uids", "", "", "7"),
			}},
		{name: "service account", imp: auth.Impersonation{User: "system:serviceaccount:kube-system:default"},
			want: []auth.Attributes{check("", "serviceaccounts", "", "kube-system", "default")}},
		{name: "malformed service account is a user", imp: auth.Impersonation{User: "system:serviceaccount:a:b:c"},
			want: []auth.Attributes{check("", "users", "", "", "system:serviceaccount:a:b:c")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.imp.Checks(admin)); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImpersonated(t *testing.T) {
	tests := []struct {
		name string
		imp  auth.Impersonation
		want *auth.User
	}{
		{name: "user alone is authenticated", imp: auth.Impersonation{User: "jane"},
			want: &auth.User{Name: "jane", Groups: []string{"system:authenticated"}}},
		{name: "node", imp: auth.Impersonation{User: "system:node:n1", Groups: []string{"system:nodes"}},
			want: &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}},
		{name: "authenticated asked for is not repeated", imp: auth.Impersonation{User: "jane", Groups: []string{"system:authenticated", "g"}},
			want: &auth.User{Name: "jane", Groups: []string{"system:authenticated", "g"}}},
		{name: "unauthenticated asked for keeps authenticated out", imp: auth.Impersonation{User: "jane", Groups: []string{"system:unauthenticated"}},
			want: &auth.User{Name: "jane", Groups: []string{"system:unauthenticated"}}},
		{name: "anonymous", imp: auth.Impersonation{User: "system:anonymous"},
			want: &auth.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "uid carried", imp: auth.Impersonation{User: "jane", UID: "42"},
			want: &auth.User{Name: "jane", UID: "42", Groups: []string{"system:authenticated"}}},
		{name: "service account gets its groups", imp: auth.Impersonation{User: "system:serviceaccount:ns1:sa"},
			want: &auth.User{Name: "system:serviceaccount:ns1:sa", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"}}},
		{name: "service account with groups given gets only those", imp: auth.Impersonation{User: "system:serviceaccount:ns1:sa", Groups: []string{"g"}},
			want: &auth.User{Name: "system:serviceaccount:ns1:sa", Groups: []string{"g", "system:authenticated"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.imp.Impersonated()); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

// refuseResource allows everything but impersonation of one resource.
type refuseResource struct {
	resource string
	reason   string
	err      error
}

func (f refuseResource) Authorize(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
	if a.Resource == f.resource {
		return auth.NoOpinion, f.reason, nil
	}
	return auth.Allow, "", f.err
}

func TestImpersonate(t *testing.T) {
	admin := &auth.User{Name: "admin", Groups: []string{auth.MastersGroup, auth.AuthenticatedGroup}}
	node := &auth.User{Name: "system:node:n3", Groups: []string{auth.NodesGroup, auth.AuthenticatedGroup}}
	nodeChain := append(auth.Chain(auth.NewNodeAuthorizer(auth.NodeAuthorizerConfig{})), auth.DiscoveryAuthorizer{})
	asNode1 := map[string][]string{"Impersonate-User": {"system:node:n1"}, "Impersonate-Group": {"system:nodes"}}
	tests := []struct {
		name      string
		headers   map[string][]string
		requester *auth.User
		az        auth.Authorizer
		want      *auth.User
		// wantCode and wantErr describe the Status error; 0 for none.
		wantCode int32
		wantErr  string
	}{
		{name: "no headers keeps the requester", requester: node, az: nodeChain, want: node},
		{name: "masters may impersonate a node", headers: asNode1, requester: admin, az: nodeChain,
			want: &auth.User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}},
		{name: "a node may not impersonate", headers: asNode1, requester: node, az: nodeChain, wantCode: 403,
			wantErr: `users "system:node:n1" is forbidden: User "system:node:n3" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{name: "a refused group names the group, with the reason", headers: asNode1, requester: admin,
			az: refuseResource{resource: "groups", reason: "not this one"}, wantCode: 403,
			wantErr: `groups "system:nodes" is forbidden: User "admin" cannot impersonate resource "groups" in API group "" at the cluster scope: not this one`},
		{name: "a refused extra names its key", headers: map[string][]string{"Impersonate-User": {"u"}, "Impersonate-Extra-Scopes": {"view"}},
			requester: admin, az: refuseResource{resource: "userextras"}, wantCode: 403,
			wantErr: `userextras.authentication.k8s.io "view" is forbidden: User "admin" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope`},
		{name: "a refused service account names its namespace", headers: map[string][]string{"Impersonate-User": {"system:serviceaccount:ns1:sa"}},
			requester: admin, az: refuseResource{resource: "serviceaccounts"}, wantCode: 403,
			wantErr: `serviceaccounts "sa" is forbidden: User "admin" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns1"`},
		{name: "an authorizer error refuses even with Allow", headers: asNode1, requester: admin,
			az: refuseResource{resource: "none", err: errors.New("broken")}, wantCode: 403,
			wantErr: `users "system:node:n1" is forbidden: User "admin" cannot impersonate resource "users" in API group "" at the cluster scope`},
		{name: "group without user is a bad request", headers: map[string][]string{"Impersonate-Group": {"system:nodes"}},
			requester: admin, az: nodeChain, wantCode: 400,
			wantErr: `requested [group "system:nodes"] without impersonating a user`},
		{name: "no requester is an internal error", headers: asNode1, az: nodeChain, wantCode: 500,
			wantErr: "Internal error occurred: no user found for request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil)
			for k, vs := range tc.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			r.Header.Set("Accept", "application/json")
			got, err := auth.Impersonate(context.Background(), r, tc.requester, tc.az)
			if tc.wantCode != 0 {
				var status apierrors.APIStatus
				if !errors.As(err, &status) || status.Status().Code != tc.wantCode || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %d %q", err, tc.wantCode, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
			wantHeaders := http.Header{"Accept": {"application/json"}}
			if diff := cmp.Diff(wantHeaders, r.Header); diff != "" {
				t.Errorf("headers left on the request (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImpersonationThroughAPIServer checks impersonation end to end: the
// admin acting as a node is held to the node's rules, and a node cannot
// impersonate at all.
func TestImpersonationThroughAPIServer(t *testing.T) {
	s := apitest.Start(t, apitest.Options{
		NodeRules: true,
		Tokens:    []string{`node3token,system:node:n3,3,"system:nodes"`},
	})
	ctx := context.Background()
	asNode := func(name string) kubernetes.Interface {
		cfg := s.Config(apitest.AdminToken)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: auth.NodeUser(name), Groups: []string{auth.NodesGroup}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	n1 := asNode("n1")

	// n1 registers itself and creates its own Lease, as a kubelet would.
	node, err := n1.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("n1 registering itself: %v", err)
	}
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: time.Unix(1700000000, 0)}},
		}
	}
	l1 := lease("n1")
	l1.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: node.UID}}
	created, err := n1.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, l1, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("n1 creating its lease: %v", err)
	}
	created.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(1700000010, 0)}
	if _, err := n1.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("n1 renewing its lease: %v", err)
	}

	// Objects of another node, made by the admin itself.
	if _, err := s.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l2, err := s.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease("n2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "n2", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := s.Admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	refused := []struct {
		name    string
		do      func() error
		wantMsg string
	}{
		{name: "renew n2's lease", do: func() error {
			_, err := n1.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(ctx, l2, metav1.UpdateOptions{})
			return err
		}, wantMsg: `leases.coordination.k8s.io "n2" is forbidden: User "system:node:n1" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`},
		{name: "get a pod of n2", do: func() error {
			_, err := n1.CoreV1().Pods("default").Get(ctx, "p2", metav1.GetOptions{})
			return err
		}, wantMsg: `pods "p2" is forbidden: User "system:node:n1" cannot get resource "pods" in API group "" in the namespace "default": no relationship found between node 'n1' and this object`},
		{name: "list the pods of n2", do: func() error {
			_, err := n1.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n2"})
			return err
		}, wantMsg: `pods is forbidden: User "system:node:n1" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`},
		{name: "a node impersonating", do: func() error {
			cfg := s.Config("node3token")
			cfg.Impersonate = rest.ImpersonationConfig{UserName: auth.NodeUser("n1"), Groups: []string{auth.NodesGroup}}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = cs.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
			return err
		}, wantMsg: `users "system:node:n1" is forbidden: User "system:node:n3" cannot impersonate resource "users" in API group "" at the cluster scope`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !apierrors.IsForbidden(err) || err.Error() != tc.wantMsg {
				t.Errorf("error = %v\nwant 403 %q", err, tc.wantMsg)
			}
		})
	}

	t.Run("group without user is a bad request", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, s.URL+"/api/v1/nodes", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
		req.Header.Set("Impersonate-Group", "system:nodes")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status = %d, want 400", resp.StatusCode)
		}
	})
}
