package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestWatchFromCompactedRevision checks that a watch resumed from a
// resourceVersion that compaction has removed ends with a 410 Expired
// ERROR event, which is what tells client-go's reflector to relist.
func TestWatchFromCompactedRevision(t *testing.T) {
	s := startServer(t, serverOptions{Args: []string{"--etcd-compaction-interval=1s"}})
	cs := s.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leases := cs.CoordinationV1().Leases("default")

	holder := "e2e"
	lease, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "compaction"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	firstRV := lease.ResourceVersion
	// write moves the revision on, so compaction has history to remove.
	writes := 0
	write := func() {
		t.Helper()
		writes++
		h := fmt.Sprintf("e2e-%d", writes)
		lease.Spec.HolderIdentity = &h
		lease, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update %d: %v", writes, err)
		}
	}
	for range 5 {
		write()
	}

	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last string
	for attempt := 1; ; attempt++ {
		done, what := watchExpired(ctx, t, s, firstRV)
		if done {
			t.Logf("watch from resourceVersion %s expired after %d attempts (%d writes)", firstRV, attempt, writes)
			return
		}
		last = what
		write()
		select {
		case <-deadline:
			t.Fatalf("a watch from resourceVersion %s never ended with 410 Expired within 30s (compaction every 1s); last answer: %s", firstRV, last)
		case <-tick.C:
		}
	}
}

// watchExpired watches leases from rv and reports whether the first event
// is the ERROR that compaction calls for. It fails the test when the
// answer is an error of the wrong shape; otherwise it describes what came.
func watchExpired(ctx context.Context, t *testing.T, s *server, rv string) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w, err := s.Clientset(t).CoordinationV1().Leases("default").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		// Upstream answers 200 and sends the error as a watch event, so a
		// reflector sees it as a watch event; an error here is a deviation.
		t.Fatalf("watch from resourceVersion %s: the request failed (%v); want HTTP 200 and an ERROR event", rv, err)
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return false, "the watch closed without an event"
		}
		if ev.Type != watch.Error {
			return false, fmt.Sprintf("first event %s", ev.Type)
		}
		status, ok := ev.Object.(*metav1.Status)
		if !ok {
			t.Fatalf("ERROR event carries %T, want *v1.Status", ev.Object)
		}
		if status.Code != http.StatusGone || status.Reason != metav1.StatusReasonExpired || status.Status != metav1.StatusFailure {
			t.Fatalf("ERROR event status = code %d reason %q status %q message %q; want code 410 reason Expired status Failure",
				status.Code, status.Reason, status.Status, status.Message)
		}
		if !strings.Contains(status.Message, "too old resource version") {
			t.Errorf("ERROR event message %q, want it to say \"too old resource version\" as upstream does", status.Message)
		}
		return true, ""
	case <-ctx.Done():
		return false, "no event within 5s"
	}
}
