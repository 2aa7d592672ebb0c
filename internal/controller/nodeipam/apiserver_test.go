package nodeipam_test

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"knode/internal/apitest"
)

// hook runs before a request reaches the API server; tests use it to
// change the world between the controller's read and its write.
type hook func(r *http.Request)

// newAPI serves the real kinds from a memory store over httptest and
// returns an admin client. Requests through the returned client pass
// through *before first (if set).
func newAPI(t *testing.T, before *hook) kubernetes.Interface {
	t.Helper()
	var opts apitest.Options
	if before != nil {
		opts.Wrap = func(api http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if *before != nil {
					(*before)(r)
				}
				api.ServeHTTP(w, r)
			})
		}
	}
	return apitest.Start(t, opts).Admin
}

func createNode(t *testing.T, c kubernetes.Interface, name string, podCIDRs ...string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDRs[0], podCIDRs
	}
	created, err := c.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	return created
}

func deleteNode(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if err := c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete node %s: %v", name, err)
	}
}

// podCIDRs returns each node's spec.podCIDRs by name, checking that
// spec.podCIDR is the first of them.
func podCIDRs(t *testing.T, c kubernetes.Interface) map[string][]string {
	t.Helper()
	list, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, n := range list.Items {
		out[n.Name] = n.Spec.PodCIDRs
		first := ""
		if len(n.Spec.PodCIDRs) > 0 {
			first = n.Spec.PodCIDRs[0]
		}
		if n.Spec.PodCIDR != first {
			t.Errorf("node %s: podCIDR %q, podCIDRs %v", n.Name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
	}
	return out
}

// nodeEvents returns the events about one node as "type reason: message
// (source)".
func nodeEvents(t *testing.T, c kubernetes.Interface, node string) []string {
	t.Helper()
	list, err := c.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", node).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind != "Node" {
			t.Errorf("event %s: involved kind %q", e.Name, e.InvolvedObject.Kind)
		}
		out = append(out, e.Type+" "+e.Reason+": "+e.Message+" ("+e.Source.Component+")")
	}
	return out
}
