package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/storage"
)

func nodeUser(name string) *User {
	return &User{Name: NodeUser(name), Groups: []string{NodesGroup, AuthenticatedGroup}}
}

// fakePods serves pods keyed "namespace/name"; the key "boom/boom" fails.
func fakePods(pods map[string]*corev1.Pod) PodGetter {
	return func(_ context.Context, namespace, name string) (*corev1.Pod, error) {
		if namespace == "boom" {
			return nil, errors.New("store down")
		}
		if p, ok := pods[namespace+"/"+name]; ok {
			return p, nil
		}
		if namespace == "wrapped" {
			return nil, fmt.Errorf("get: %w", storage.ErrNotFound)
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
}

func boundPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

func TestNodeAuthorizer(t *testing.T) {
	pods := fakePods(map[string]*corev1.Pod{
		"default/mine":    boundPod("default", "mine", "node-2"),
		"default/theirs":  boundPod("default", "theirs", "node-1"),
		"default/pending": boundPod("default", "pending", ""),
	})
	const (
		node2 = "node-2"
		lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
	)
	tests := []struct {
		name   string
		user   *User
		method string
		path   string
		want   Decision
		reason string
		// wantErr: the lookup error is reported.
		wantErr bool
	}{
		// Who is judged.
		{name: "not a node", user: &User{Name: "alice", Groups: []string{AuthenticatedGroup}}, method: "GET", path: "/api/v1/nodes/node-1", want: NoOpinion},
		{name: "node name without the group", user: &User{Name: "system:node:node-2"}, method: "GET", path: "/api/v1/nodes/node-2", want: NoOpinion},
		{name: "no user", method: "GET", path: "/api/v1/nodes/node-2", want: NoOpinion},
		{name: "empty node name", user: nodeUser(""), method: "GET", path: "/api/v1/nodes/node-2", want: NoOpinion, reason: `unknown node for user "system:node:"`},
		{name: "non-resource path", user: nodeUser(node2), method: "GET", path: "/metrics", want: NoOpinion},

		// Nodes.
		{name: "get own node", method: "GET", path: "/api/v1/nodes/node-2", want: Allow},
		{name: "get own node before it exists is a name check", method: "GET", path: "/api/v1/nodes/node-2?resourceVersion=0", want: Allow},
		{name: "get other node", method: "GET", path: "/api/v1/nodes/node-1", want: NoOpinion, reason: "node 'node-2' cannot read 'node-1', only its own Node object"},
		{name: "list all nodes", method: "GET", path: "/api/v1/nodes", want: NoOpinion, reason: "node 'node-2' cannot read all nodes, only its own Node object"},
		{name: "list own node by field selector", method: "GET", path: "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-2", want: Allow},
		{name: "watch own node by field selector", method: "GET", path: "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dnode-2", want: Allow},
		{name: "watch other node by field selector", method: "GET", path: "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dnode-1", want: NoOpinion, reason: "node 'node-2' cannot read 'node-1', only its own Node object"},
		{name: "list with a label selector only", method: "GET", path: "/api/v1/nodes?labelSelector=a%3Db", want: NoOpinion, reason: "node 'node-2' cannot read all nodes, only its own Node object"},
		{name: "create node (admission checks the name)", method: "POST", path: "/api/v1/nodes", want: Allow},
		{name: "update own node", method: "PUT", path: "/api/v1/nodes/node-2", want: Allow},
		{name: "patch other node (admission refuses)", method: "PATCH", path: "/api/v1/nodes/node-1", want: Allow},
		{name: "delete own node", method: "DELETE", path: "/api/v1/nodes/node-2", want: NoOpinion},
		{name: "deletecollection nodes", method: "DELETE", path: "/api/v1/nodes", want: NoOpinion},
		{name: "patch own status", method: "PATCH", path: "/api/v1/nodes/node-2/status", want: Allow},
		{name: "update other status (admission refuses)", method: "PUT", path: "/api/v1/nodes/node-1/status", want: Allow},
		{name: "get own status", method: "GET", path: "/api/v1/nodes/node-2/status", want: NoOpinion},
		{name: "proxy to node", method: "GET", path: "/api/v1/nodes/node-2/proxy/metrics", want: NoOpinion},

		// Leases.
		{name: "get own lease", method: "GET", path: lease + "node-2", want: Allow},
		{name: "create lease (admission checks the name)", method: "POST", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", want: Allow},
		{name: "update own lease", method: "PUT", path: lease + "node-2", want: Allow},
		{name: "patch own lease", method: "PATCH", path: lease + "node-2", want: Allow},
		{name: "delete own lease", method: "DELETE", path: lease + "node-2", want: Allow},
		{name: "update other lease", method: "PUT", path: lease + "node-1", want: NoOpinion, reason: "can only access node lease with the same name as the requesting node"},
		{name: "get other lease", method: "GET", path: lease + "node-1", want: NoOpinion, reason: "can only access node lease with the same name as the requesting node"},
		{name: "list leases", method: "GET", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", want: NoOpinion, reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "watch own lease", method: "GET", path: "/apis/coordination.k8s.io/v1/watch/namespaces/kube-node-lease/leases/node-2", want: NoOpinion, reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "lease in another namespace", method: "PUT", path: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-2", want: NoOpinion, reason: `can only access leases in the "kube-node-lease" system namespace`},

		// Pods.
		{name: "get pod bound to it", method: "GET", path: "/api/v1/namespaces/default/pods/mine", want: Allow},
		{name: "get pod bound elsewhere", method: "GET", path: "/api/v1/namespaces/default/pods/theirs", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get unscheduled pod", method: "GET", path: "/api/v1/namespaces/default/pods/pending", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get missing pod", method: "GET", path: "/api/v1/namespaces/default/pods/ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get missing pod, storage not found", method: "GET", path: "/api/v1/namespaces/wrapped/pods/ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "lookup failure", method: "GET", path: "/api/v1/namespaces/boom/pods/boom", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object", wantErr: true},
		{name: "list own pods", method: "GET", path: "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2", want: Allow},
		{name: "watch own pods with another requirement", method: "GET", path: "/api/v1/pods?watch=1&fieldSelector=status.phase%3DRunning,spec.nodeName%3Dnode-2", want: Allow},
		{name: "watch own pods in a namespace", method: "GET", path: "/api/v1/watch/namespaces/default/pods?fieldSelector=spec.nodeName%3D%3Dnode-2", want: Allow},
		{name: "list other node's pods", method: "GET", path: "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list pods not on a node", method: "GET", path: "/api/v1/pods?fieldSelector=spec.nodeName!%3Dnode-2", want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list all pods", method: "GET", path: "/api/v1/pods", want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "watch one bound pod by name", method: "GET", path: "/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dmine", want: Allow},
		{name: "watch one foreign pod by name", method: "GET", path: "/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dtheirs", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "create pod (admission allows mirror pods only)", method: "POST", path: "/api/v1/namespaces/default/pods", want: Allow},
		{name: "delete pod (admission checks binding)", method: "DELETE", path: "/api/v1/namespaces/default/pods/theirs", want: Allow},
		{name: "update pod", method: "PUT", path: "/api/v1/namespaces/default/pods/mine", want: NoOpinion},
		{name: "patch pod status", method: "PATCH", path: "/api/v1/namespaces/default/pods/mine/status", want: Allow},
		{name: "update pod status", method: "PUT", path: "/api/v1/namespaces/default/pods/theirs/status", want: Allow},
		{name: "get pod status", method: "GET", path: "/api/v1/namespaces/default/pods/mine/status", want: NoOpinion},
		{name: "evict pod", method: "POST", path: "/api/v1/namespaces/default/pods/mine/eviction", want: Allow},
		{name: "bind pod", method: "POST", path: "/api/v1/namespaces/default/pods/mine/binding", want: NoOpinion},
		{name: "deletecollection pods", method: "DELETE", path: "/api/v1/namespaces/default/pods", want: NoOpinion},

		// The static system:node rules.
		{name: "create event", method: "POST", path: "/api/v1/namespaces/default/events", want: Allow},
		{name: "patch event", method: "PATCH", path: "/api/v1/namespaces/default/events/e1", want: Allow},
		{name: "update event", method: "PUT", path: "/api/v1/namespaces/default/events/e1", want: Allow},
		{name: "list events", method: "GET", path: "/api/v1/namespaces/default/events", want: NoOpinion},
		{name: "delete event", method: "DELETE", path: "/api/v1/namespaces/default/events/e1", want: NoOpinion},
		{name: "events.k8s.io events", method: "POST", path: "/apis/events.k8s.io/v1/namespaces/default/events", want: NoOpinion},
		{name: "read services", method: "GET", path: "/api/v1/services", want: Allow},
		{name: "write services", method: "POST", path: "/api/v1/namespaces/default/services", want: NoOpinion},
		{name: "create CSR", method: "POST", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests", want: Allow},
		{name: "tokenreview", method: "POST", path: "/apis/authentication.k8s.io/v1/tokenreviews", want: Allow},
		{name: "runtimeclasses", method: "GET", path: "/apis/node.k8s.io/v1/runtimeclasses", want: Allow},
		{name: "namespaces", method: "GET", path: "/api/v1/namespaces/default", want: NoOpinion},
		{name: "secrets (no graph yet)", method: "GET", path: "/api/v1/namespaces/default/secrets/s", want: NoOpinion},
	}
	az := NewNodeAuthorizer(NodeAuthorizerConfig{Pods: pods})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := RequestAttributes(httptest.NewRequest(tc.method, tc.path, nil))
			a.User = tc.user
			if tc.user == nil && tc.name != "no user" {
				a.User = nodeUser(node2)
			}
			d, reason, err := az.Authorize(context.Background(), a)
			if diff := cmp.Diff([]any{tc.want.String(), tc.reason}, []any{d.String(), reason}); diff != "" {
				t.Errorf("%s %s (attrs %+v): (-want +got)\n%s", tc.method, tc.path, a, diff)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestNodeAuthorizerWithoutPodGetter(t *testing.T) {
	a := RequestAttributes(httptest.NewRequest("GET", "/api/v1/namespaces/default/pods/mine", nil))
	a.User = nodeUser("node-2")
	d, reason, err := NewNodeAuthorizer(NodeAuthorizerConfig{}).Authorize(context.Background(), a)
	if d != NoOpinion || reason != "no relationship found between node 'node-2' and this object" || err != nil {
		t.Errorf("got (%v, %q, %v), want NoOpinion with the no-relationship reason", d, reason, err)
	}
}

// The chain with the node authorizer: the 403 message a node sees names
// the reason.
func TestChainNodeForbiddenMessage(t *testing.T) {
	a := RequestAttributes(httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", nil))
	a.User = nodeUser("node-2")
	d, reason, _ := Chain(NewNodeAuthorizer(NodeAuthorizerConfig{})).Authorize(context.Background(), a)
	if d == Allow {
		t.Fatal("allowed node-2 to update node-1's lease")
	}
	want := `leases.coordination.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`
	if got := Forbidden(a, reason); got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

func TestDiscoveryAuthorizer(t *testing.T) {
	tests := []struct {
		method, path string
		user         *User
		want         Decision
	}{
		{method: "GET", path: "/api", want: Allow},
		{method: "GET", path: "/api/v1", want: Allow},
		{method: "GET", path: "/apis", want: Allow},
		{method: "GET", path: "/apis/coordination.k8s.io/v1", want: Allow},
		{method: "GET", path: "/openapi/v2", want: Allow},
		{method: "GET", path: "/openapi/v3/api/v1", want: Allow},
		{method: "GET", path: "/version", want: Allow},
		{method: "GET", path: "/readyz", want: Allow},
		{method: "GET", path: "/readyz/etcd", want: NoOpinion},
		{method: "GET", path: "/metrics", want: NoOpinion},
		{method: "GET", path: "/apisx", want: NoOpinion},
		{method: "POST", path: "/api", want: NoOpinion},
		{method: "GET", path: "/api/v1/nodes", want: NoOpinion},
		{method: "GET", path: "/api/v1/watch", want: NoOpinion},
		{method: "GET", path: "/api", user: &User{}, want: Allow},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := RequestAttributes(httptest.NewRequest(tc.method, tc.path, nil))
			a.User = tc.user
			if a.User == nil {
				a.User = nodeUser("node-2")
			}
			d, reason, err := DiscoveryAuthorizer{}.Authorize(context.Background(), a)
			if d != tc.want || reason != "" || err != nil {
				t.Errorf("got (%v, %q, %v), want %v", d, reason, err, tc.want)
			}
		})
	}
	a := RequestAttributes(httptest.NewRequest("GET", "/api", nil))
	if d, _, _ := (DiscoveryAuthorizer{}).Authorize(context.Background(), a); d != NoOpinion {
		t.Errorf("no user: got %v, want NoOpinion", d)
	}
}
