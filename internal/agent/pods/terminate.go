package pods

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/runtime"
)

// Termination is what the worker knows of a pod it was asked to stop for a
// node shutdown (Terminate). The times are on the worker's clock; a zero
// time has not happened yet.
type Termination struct {
	// Requested is when Terminate was called; Grace is the grace it gave.
	Requested time.Time
	Grace     time.Duration
	// Stopped is when the worker first saw every container stopped.
	Stopped time.Time
	// Posted is when the pod's final status was written to the server.
	Posted time.Time
	// Gone: the pod left the API (or the node) before its final status
	// was written; nothing more will be written.
	Gone bool
}

// Done reports whether nothing more will happen to the pod: its final
// status is written, or it is gone.
func (t Termination) Done() bool { return !t.Posted.IsZero() || t.Gone }

// termination is a Termination in progress.
type termination struct {
	Termination
	final func(*corev1.PodStatus)
}

// Terminate asks the worker to stop pod within grace, then to write its
// final status as BuildStatus makes it for a pod that is done, changed by
// final (which must not keep the pointer). The status final is given
// holds the phase the pod had on the server when it was stopped; final
// sets the phase to report. It returns at once; the work
// happens in the worker's passes, which it wakes. Calling it again for the
// same pod can only shorten the grace. A pod that is being deleted is left
// to its deletion.
func (w *Worker) Terminate(pod *corev1.Pod, grace time.Duration, final func(*corev1.PodStatus)) {
	w.mu.Lock()
	if t, ok := w.terms[pod.UID]; ok {
		t.Grace = min(t.Grace, grace)
	} else {
		w.terms[pod.UID] = &termination{Termination: Termination{Requested: w.cfg.Clock.Now(), Grace: grace}, final: final}
	}
	w.mu.Unlock()
	w.Kick()
}

// Terminated reports the termination of the pod with uid, if Terminate was
// called for it.
func (w *Worker) Terminated(uid types.UID) (Termination, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.terms[uid]
	if !ok {
		return Termination{}, false
	}
	return t.Termination, true
}

// Kick asks Run for a pass as soon as it can; it never blocks.
func (w *Worker) Kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// ActivePods lists the pods that run here: admitted, not terminal and not
// being deleted, ordered by creation, from the same source as a pass.
func (w *Worker) ActivePods(ctx context.Context) ([]*corev1.Pod, error) {
	pods, err := w.podsOn(ctx)
	if err != nil {
		return nil, err
	}
	var active []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || terminal(p.Status.Phase) {
			continue
		}
		if _, err := w.cfg.Runtime.PodStatus(p.UID); err != nil {
			continue
		}
		active = append(active, p)
	}
	sortByCreation(active)
	return active, nil
}

func sortByCreation(pods []*corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// terminationOf is the pending termination of uid, or nil.
func (w *Worker) terminationOf(uid types.UID) *termination {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.terms[uid]
	if t == nil || t.Done() {
		return nil
	}
	return t
}

// syncTerminating moves a pod asked to stop by Terminate one step: stop it
// within its grace and, once stopped, write its final status.
func (w *Worker) syncTerminating(ctx context.Context, ps *pass, pod *corev1.Pod, t *termination, known bool) error {
	var rs runtime.PodStatus
	if known {
		w.mu.Lock()
		grace := t.Grace
		w.mu.Unlock()
		if err := w.cfg.Runtime.StopPod(ctx, pod.UID, grace); err != nil {
			return err
		}
		var err error
		if rs, err = w.cfg.Runtime.PodStatus(pod.UID); err != nil {
			return err
		}
		if !rs.Stopped() {
			return w.writeStatus(ctx, pod, BuildStatus(pod, rs, w.view(ps), false, ps.now))
		}
	}
	now := w.cfg.Clock.Now()
	w.mu.Lock()
	if t.Stopped.IsZero() {
		t.Stopped = now
	}
	w.mu.Unlock()
	st := BuildStatus(pod, rs, w.view(ps), true, ps.now)
	// final decides the phase from the one the pod had when it was
	// stopped, not from how its containers ended.
	st.Phase = pod.Status.Phase
	t.final(&st)
	gone, err := w.writeFinalStatus(ctx, pod, st)
	if err != nil {
		return err
	}
	w.mu.Lock()
	if gone {
		t.Gone = true
	} else {
		t.Posted = w.cfg.Clock.Now()
	}
	w.mu.Unlock()
	w.log.Info("pod terminated for the node shutdown", "pod", klogName(pod), "phase", st.Phase, "posted", !gone)
	return nil
}

// forgetTerminations marks Gone the pending terminations of pods that left
// the node (seen holds the pods of this pass).
func (w *Worker) forgetTerminations(seen map[types.UID]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, t := range w.terms {
		if !seen[uid] && !t.Done() {
			t.Gone = true
		}
	}
}
