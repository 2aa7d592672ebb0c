package disruption_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/registry"
	dsreg "knode/internal/registry/daemonset"
	pdbreg "knode/internal/registry/poddisruptionbudget"
	pcreg "knode/internal/registry/priorityclass"
	rsreg "knode/internal/registry/replicaset"
	"knode/internal/server"
	"knode/internal/storage/memory"
	"knode/internal/version"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// world is the real API server over a memory store, serving the
// workload kinds beside knode's own, on a fake clock.
type world struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	clock  *clocktesting.FakeClock
}

func newWorld(t *testing.T, admission ...apiserver.Admitter) *world {
	t.Helper()
	clk := clocktesting.NewFakeClock(epoch)
	tokens, err := auth.ParseTokenFile(strings.NewReader("admintoken,admin,1,\"system:masters\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.New(apiserver.Config{
		Storage:       memory.New(memory.Config{}),
		Kinds:         kinds(),
		Authenticator: auth.UnionAuthenticator{tokens},
		Admission:     admission,
		Clock:         clk,
		Version:       version.Info(),
		Logger:        quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := api.EnsureNamespaces(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL, BearerToken: "admintoken", QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, ctx: ctx, client: cs, clock: clk}
}

// kinds are the server's kinds plus the workload kinds it does not serve
// yet.
func kinds() []registry.Kind {
	ks := server.Kinds()
	have := map[string]bool{}
	for _, k := range ks {
		have[k.GroupVersion.Group+"/"+k.Resource] = true
	}
	for _, k := range []registry.Kind{rsreg.Kind(), dsreg.Kind(), pdbreg.Kind(), pcreg.Kind()} {
		if !have[k.GroupVersion.Group+"/"+k.Resource] {
			ks = append(ks, k)
		}
	}
	return ks
}

func (w *world) must(what string, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

// pods lists the pods of namespace default that are not being deleted.
func (w *world) pods() []corev1.Pod {
	w.t.Helper()
	l, err := w.client.CoreV1().Pods("default").List(w.ctx, metav1.ListOptions{})
	w.must("listing pods", err)
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// setReady marks a pod Running and Ready (as its agent would).
func (w *world) setReady(name string, ready bool) {
	w.t.Helper()
	p, err := w.client.CoreV1().Pods("default").Get(w.ctx, name, metav1.GetOptions{})
	w.must("getting pod", err)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(w.clock.Now())}}
	_, err = w.client.CoreV1().Pods("default").UpdateStatus(w.ctx, p, metav1.UpdateOptions{})
	w.must("updating pod status", err)
}
