package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/auth"
)

var (
	leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")
	nodesGVR  = corev1.SchemeGroupVersion.WithResource("nodes")
)

const (
	n1Token = "n1token"
	n1Line  = n1Token + `,system:node:n1,uid1,"system:nodes"`
)

// writes is one way of sending the writes UpdateAs and PatchAs stand for.
type writes interface {
	updateLease(ctx context.Context, admin bool, namespace string, l *coordinationv1.Lease) (runtime.Object, error)
	patchNode(ctx context.Context, name, subresource string, pt types.PatchType, data []byte) (runtime.Object, error)
	patchLease(ctx context.Context, name, subresource string, pt types.PatchType, data []byte) (runtime.Object, error)
}

// wire sends them over HTTP with client-go, speaking protobuf.
type wire struct{ node, admin kubernetes.Interface }

func (c wire) updateLease(ctx context.Context, admin bool, namespace string, l *coordinationv1.Lease) (runtime.Object, error) {
	cs := c.node
	if admin {
		cs = c.admin
	}
	return orNil(cs.CoordinationV1().Leases(namespace).Update(ctx, l, metav1.UpdateOptions{}))
}

func (c wire) patchNode(ctx context.Context, name, subresource string, pt types.PatchType, data []byte) (runtime.Object, error) {
	return orNil(c.node.CoreV1().Nodes().Patch(ctx, name, pt, data, metav1.PatchOptions{}, subresources(subresource)...))
}

func (c wire) patchLease(ctx context.Context, name, subresource string, pt types.PatchType, data []byte) (runtime.Object, error) {
	return orNil(c.node.CoordinationV1().Leases("kube-node-lease").Patch(ctx, name, pt, data, metav1.PatchOptions{}, subresources(subresource)...))
}

// orNil turns a typed nil into an untyped one.
func orNil[T runtime.Object](obj T, err error) (runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func subresources(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// inProcess makes them with UpdateAs and PatchAs.
type inProcess struct {
	api         *apitest.Server
	node, admin *auth.User
}

func (c inProcess) updateLease(ctx context.Context, admin bool, namespace string, l *coordinationv1.Lease) (runtime.Object, error) {
	user := c.node
	if admin {
		user = c.admin
	}
	return c.api.API.UpdateAs(ctx, user, leasesGVR, namespace, l.Name, "", l)
}

func (c inProcess) patchNode(ctx context.Context, name, subresource string, pt types.PatchType, data []byte) (runtime.Object, error) {
	return c.api.API.PatchAs(ctx, c.node, nodesGVR, "", name, subresource, pt, data)
}

func (c inProcess) patchLease(ctx context.Context, name, subresource string, pt types.PatchType, data []byte) (runtime.Object, error) {
	return c.api.API.PatchAs(ctx, c.node, leasesGVR, "kube-node-lease", name, subresource, pt, data)
}

// twinServer starts a server with the node rules, nodes n1 and n2 and
// their Leases, at a fixed time; two twins hold the same objects at the
// same revisions, apart from UIDs.
func twinServer(t *testing.T) *apitest.Server {
	t.Helper()
	s := apitest.Start(t, apitest.Options{
		Tokens:    []string{n1Line},
		NodeRules: true,
		Clock:     clocktesting.NewFakeClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)),
	})
	ctx := context.Background()
	for _, name := range []string{"n1", "n2"} {
		if _, err := s.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40))}}
		if _, err := s.Admin.CoordinationV1().Leases("kube-node-lease").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// userOf is the user the servers' token file makes of token.
func userOf(t *testing.T, token string) *auth.User {
	t.Helper()
	tokens, err := auth.ParseTokenFile(strings.NewReader(apitest.AdminToken + `,admin,1,"system:masters"` + "\n" + n1Line + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := http.NewRequest(http.MethodGet, "https://knode.invalid/", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	user, ok, err := tokens.Authenticate(r)
	if err != nil || !ok {
		t.Fatalf("token %s: %v %v", token, ok, err)
	}
	return user
}

// TestWritesAsMatchHTTP makes the same writes over HTTP on one server and
// in process on its twin: every answer, object or error, must be the same.
func TestWritesAsMatchHTTP(t *testing.T) {
	httpServer, localServer := twinServer(t), twinServer(t)
	protobuf := func(token string) kubernetes.Interface {
		cfg := httpServer.Config(token)
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	overHTTP := wire{node: protobuf(n1Token), admin: protobuf(apitest.AdminToken)}
	local := inProcess{api: localServer, node: userOf(t, n1Token), admin: userOf(t, apitest.AdminToken)}

	renew := func(rv string, seconds int32) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Date(2026, 11, 22, 8, 0, 10, 123456000, time.UTC))
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", ResourceVersion: rv},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(seconds), RenewTime: &now},
		}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	ctx := context.Background()
	type step struct {
		name     string
		do       func(writes) (runtime.Object, error)
		wantCode int32 // 0: success
	}
	condition := []byte(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":"2026-11-22T08:00:10Z","lastTransitionTime":"2026-11-22T08:00:10Z"}]}}`)
	steps := []step{
		{"renew own lease", func(c writes) (runtime.Object, error) {
			return c.updateLease(ctx, false, "kube-node-lease", renew("", 40))
		}, 0},
		{"stale resourceVersion", func(c writes) (runtime.Object, error) {
			return c.updateLease(ctx, false, "kube-node-lease", renew("5", 40))
		}, http.StatusConflict},
		{"another node's lease", func(c writes) (runtime.Object, error) {
			l := renew("", 40)
			l.Name = "n2"
			return c.updateLease(ctx, false, "kube-node-lease", l)
		}, http.StatusForbidden},
		{"lease in another namespace", func(c writes) (runtime.Object, error) { return c.updateLease(ctx, false, "default", renew("", 40)) }, http.StatusForbidden},
		{"invalid duration", func(c writes) (runtime.Object, error) {
			return c.updateLease(ctx, false, "kube-node-lease", renew("", -1))
		}, http.StatusUnprocessableEntity},
		{"missing lease", func(c writes) (runtime.Object, error) {
			l := renew("", 40)
			l.Name = "n3"
			return c.updateLease(ctx, true, "kube-node-lease", l)
		}, http.StatusNotFound},
		{"own status", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n1", "status", types.StrategicMergePatchType, condition)
		}, 0},
		{"own status, merge patch", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n1", "status", types.MergePatchType, []byte(`{"status":{"nodeInfo":{"kubeletVersion":"v1.33.0"}}}`))
		}, 0},
		{"own status, JSON patch", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n1", "status", types.JSONPatchType, []byte(`[{"op":"replace","path":"/status/conditions/0/status","value":"False"}]`))
		}, 0},
		{"another node's status", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n2", "status", types.StrategicMergePatchType, condition)
		}, http.StatusForbidden},
		{"invalid condition", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n1", "status", types.StrategicMergePatchType, []byte(`{"status":{"capacity":{"cpu":"-1"}}}`))
		}, http.StatusUnprocessableEntity},
		{"malformed patch", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n1", "status", types.StrategicMergePatchType, []byte(`{"status":`))
		}, http.StatusBadRequest},
		{"server-side apply", func(c writes) (runtime.Object, error) {
			return c.patchNode(ctx, "n1", "status", types.ApplyYAMLPatchType, []byte(`{}`))
		}, http.StatusUnsupportedMediaType},
		{"lease has no status", func(c writes) (runtime.Object, error) {
			return c.patchLease(ctx, "n1", "status", types.MergePatchType, []byte(`{}`))
		}, http.StatusNotFound},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			want, wantErr := s.do(overHTTP)
			got, gotErr := s.do(local)
			if s.wantCode == 0 {
				if wantErr != nil || gotErr != nil {
					t.Fatalf("HTTP: %v; in process: %v", wantErr, gotErr)
				}
				if diff := cmp.Diff(canonical(t, want), canonical(t, got)); diff != "" {
					t.Errorf("object (-HTTP +in process):\n%s", diff)
				}
				return
			}
			var wantStatus, gotStatus *apierrors.StatusError
			if !errors.As(wantErr, &wantStatus) || !errors.As(gotErr, &gotStatus) {
				t.Fatalf("want Status errors; HTTP: %v; in process: %v", wantErr, gotErr)
			}
			if wantStatus.ErrStatus.Code != s.wantCode {
				t.Fatalf("HTTP answered %d (%v), the step expects %d", wantStatus.ErrStatus.Code, wantErr, s.wantCode)
			}
			if diff := cmp.Diff(wantStatus.ErrStatus, gotStatus.ErrStatus); diff != "" {
				t.Errorf("Status (-HTTP +in process):\n%s", diff)
			}
		})
	}
	t.Run("ended context", func(t *testing.T) {
		_, wantErr := overHTTP.updateLease(canceled, false, "kube-node-lease", renew("", 40))
		_, gotErr := local.updateLease(canceled, false, "kube-node-lease", renew("", 40))
		if !errors.Is(wantErr, context.Canceled) || !errors.Is(gotErr, context.Canceled) {
			t.Fatalf("HTTP: %v; in process: %v", wantErr, gotErr)
		}
	})
	t.Run("the caller's object is not changed", func(t *testing.T) {
		l := renew("", 40)
		before := l.DeepCopy()
		out, err := local.updateLease(ctx, false, "kube-node-lease", l)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, l); diff != "" {
			t.Errorf("UpdateAs changed its argument:\n%s", diff)
		}
		if kind := out.GetObjectKind().GroupVersionKind(); !kind.Empty() {
			t.Errorf("result has kind %v; client-go's typed results have none", kind)
		}
	})
	t.Run("the server keeps neither the argument nor the result", func(t *testing.T) {
		// The first update writes; the second changes nothing and so
		// answers with the object the server already holds.
		for _, seconds := range []int32{41, 41} {
			l := renew("", seconds)
			out, err := local.updateLease(ctx, false, "kube-node-lease", l)
			if err != nil {
				t.Fatal(err)
			}
			l.Spec.HolderIdentity = ptr.To("argument changed")
			out.(*coordinationv1.Lease).Spec.HolderIdentity = ptr.To("result changed")
			stored, err := localServer.API.Get(ctx, leasesGVR, "kube-node-lease", "n1")
			if err != nil {
				t.Fatal(err)
			}
			spec := stored.(*coordinationv1.Lease).Spec
			if *spec.HolderIdentity != "n1" || *spec.LeaseDurationSeconds != seconds {
				t.Fatalf("stored lease holder %q, duration %d; want n1, %d", *spec.HolderIdentity, *spec.LeaseDurationSeconds, seconds)
			}
		}
	})
}

// canonical is obj as JSON with its UID (random per server) left out.
func canonical(t *testing.T, obj runtime.Object) string {
	t.Helper()
	obj = obj.DeepCopyObject()
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		o.UID = ""
	case *corev1.Node:
		o.UID = ""
	}
	data, err := json.MarshalIndent(obj, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
