package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func popAll(q *queue) []string {
	var out []string
	for e := q.pop(); e != nil; e = q.pop() {
		out = append(out, e.info.Key.Name)
	}
	return out
}

func TestQueueOrder(t *testing.T) {
	created := func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t0.Add(d)) }
	}
	q := newQueue()
	for _, p := range []*corev1.Pod{
		mkPod("young", "", "", created(2*time.Second)),
		mkPod("old", "", "", created(time.Second)),
		mkPod("b-twin", "", "", created(time.Second)),
		mkPod("urgent", "", "", withPriority(1000), created(time.Hour)),
		mkPod("a-twin", "", "", created(time.Second)),
		mkPod("negative", "", "", withPriority(-1)),
	} {
		q.upsert(NewPodInfo(p), t0)
	}
	want := []string{"urgent", "a-twin", "b-twin", "old", "young", "negative"}
	if diff := cmp.Diff(want, popAll(q)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestQueueBackoff(t *testing.T) {
	cases := []struct {
		attempts int
		want     time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {4, 8 * time.Second}, {5, 10 * time.Second}, {50, 10 * time.Second}}
	for _, tc := range cases {
		e := &queued{attempts: tc.attempts, failedAt: t0}
		if got := e.backoffEnd().Sub(t0); got != tc.want {
			t.Errorf("after %d failures: backoff %v, want %v", tc.attempts, got, tc.want)
		}
	}
}

// TestQueueRetry walks a pod through failure, a move that comes too
// early, its backoff ending, and the five-minute flush.
func TestQueueRetry(t *testing.T) {
	q := newQueue()
	q.upsert(NewPodInfo(mkPod("p", "", "")), t0)
	stats := func() [3]int {
		a, b, u := q.counts()
		return [3]int{a, b, u}
	}
	check := func(when string, want [3]int) {
		t.Helper()
		if got := stats(); got != want {
			t.Fatalf("%s: active/backoff/unschedulable = %v, want %v", when, got, want)
		}
	}
	e := q.pop()
	q.failed(e, t0)
	check("after failing", [3]int{0, 0, 1})

	q.flush(t0.Add(time.Minute))
	check("a flush before five minutes", [3]int{0, 0, 1})

	q.moveAll(t0.Add(500 * time.Millisecond))
	check("moved within the backoff", [3]int{0, 1, 0})
	if at, ok := q.nextBackoffEnd(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("next backoff end %v %v, want t0+1s", at, ok)
	}
	q.flush(t0.Add(999 * time.Millisecond))
	check("flushed before the backoff ends", [3]int{0, 1, 0})
	q.flush(t0.Add(time.Second))
	check("flushed as the backoff ends", [3]int{1, 0, 0})

	e = q.pop()
	t1 := t0.Add(10 * time.Second)
	q.failed(e, t1)
	q.moveAll(t1.Add(2 * time.Second))
	check("moved after a second failure's 2 s backoff", [3]int{1, 0, 0})

	e = q.pop()
	t2 := t0.Add(time.Hour)
	q.failed(e, t2)
	q.flush(t2.Add(maxUnschedulable - time.Second))
	check("just before five minutes", [3]int{0, 0, 1})
	q.flush(t2.Add(maxUnschedulable))
	check("at five minutes", [3]int{1, 0, 0})
}

func TestQueueUpsertFailedPod(t *testing.T) {
	q := newQueue()
	pod := mkPod("p", "", "")
	q.upsert(NewPodInfo(pod), t0)
	q.failed(q.pop(), t0)

	status := pod.DeepCopy()
	status.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	if q.upsert(NewPodInfo(status), t0.Add(time.Minute)) {
		t.Fatal("a status change made the pod active")
	}
	spec := status.DeepCopy()
	spec.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	if !q.upsert(NewPodInfo(spec), t0.Add(time.Minute)) {
		t.Fatal("a spec change did not make the pod active")
	}
	got := q.pop()
	if got == nil || len(got.info.Pod.Spec.Tolerations) != 1 {
		t.Fatalf("popped %+v, want the updated pod", got)
	}
	if got.attempts != 1 {
		t.Errorf("attempts %d, want 1 kept across the update", got.attempts)
	}
}

func TestQueueRemove(t *testing.T) {
	q := newQueue()
	for _, name := range []string{"a", "b", "c"} {
		q.upsert(NewPodInfo(mkPod(name, "", "")), t0)
	}
	q.failed(q.pop(), t0) // a
	q.remove(NewPodInfo(mkPod("a", "", "")).Key)
	q.remove(NewPodInfo(mkPod("b", "", "")).Key)
	if diff := cmp.Diff([]string{"c"}, popAll(q)); diff != "" {
		t.Errorf("left (-want +got):\n%s", diff)
	}
	q.moveAll(t0.Add(time.Hour))
	if got := popAll(q); len(got) != 0 {
		t.Errorf("removed pods came back: %v", got)
	}
}

// TestQueueMoveDuringAttempt: a change that arrives while a pod is being
// tried (a claim bound meanwhile, say) sends the pod to back off instead of
// waiting for another change; without such a change it waits.
func TestQueueMoveDuringAttempt(t *testing.T) {
	q := newQueue()
	q.upsert(NewPodInfo(mkPod("moved", "", "")), t0)
	e := q.pop()
	q.moveAll(t0)
	q.failed(e, t0)
	if got := q.pods[e.info.Key].place; got != backingOff {
		t.Fatalf("place after a move during the attempt = %v, want backingOff", got)
	}
	q.flush(t0.Add(time.Second))
	if got := popAll(q); len(got) != 1 || got[0] != "moved" {
		t.Fatalf("after the backoff, popped %v, want [moved]", got)
	}

	q.upsert(NewPodInfo(mkPod("quiet", "", "")), t0)
	e = q.pop()
	q.failed(e, t0)
	if got := q.pods[e.info.Key].place; got != unschedulable {
		t.Fatalf("place with no move = %v, want unschedulable", got)
	}
}

// TestQueueMoveClaimPodsReportsBackoff: a claim pod sent to back off counts
// as moved, so that the loop sets a timer for its backoff's end.
func TestQueueMoveClaimPodsReportsBackoff(t *testing.T) {
	q := newQueue()
	info := NewPodInfo(mkPod("p", "", ""))
	info.claims = []string{"data"}
	q.upsert(info, t0)
	q.failed(q.pop(), t0)
	if !q.moveClaimPods(t0) {
		t.Fatal("moveClaimPods = false for a pod sent to back off")
	}
	if got := q.pods[info.Key].place; got != backingOff {
		t.Fatalf("place = %v, want backingOff", got)
	}
	if q.moveClaimPods(t0) {
		t.Fatal("moveClaimPods = true with no unschedulable claim pod")
	}
}
