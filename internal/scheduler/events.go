package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// recorder writes core/v1 events about pods, the way client-go's recorder
// does: a repeat of a pod's previous event (same reason and message) bumps
// that event's count and lastTimestamp instead of adding one. Failures are
// logged, never returned. It is safe for concurrent use; two events about
// one pod recorded at once may both be written as new events.
type recorder struct {
	client kubernetes.Interface
	clock  clock.PassiveClock
	source string
	log    *slog.Logger

	mu   sync.Mutex
	seq  int64
	last map[types.UID]*recorded
}

// recorded is the last event written about a pod.
type recorded struct {
	namespace, name string
	reason, message string
	count           int32
}

func newRecorder(client kubernetes.Interface, clk clock.PassiveClock, source string, log *slog.Logger) *recorder {
	return &recorder{client: client, clock: clk, source: source, log: log, last: map[types.UID]*recorded{}}
}

// record writes an event about pod.
func (r *recorder) record(ctx context.Context, pod *corev1.Pod, eventType, reason, action, message string) {
	message = truncate(message)
	now := metav1.NewTime(r.clock.Now())
	r.mu.Lock()
	prev := r.last[pod.UID]
	r.seq++
	seq := r.seq
	r.mu.Unlock()

	events := r.client.CoreV1().Events(pod.Namespace)
	if prev != nil && prev.reason == reason && prev.message == message {
		count := prev.count + 1
		patch, err := json.Marshal(map[string]any{"count": count, "lastTimestamp": now})
		if err == nil {
			if _, err = events.Patch(ctx, prev.name, types.MergePatchType, patch, metav1.PatchOptions{}); err == nil {
				r.remember(pod.UID, &recorded{namespace: pod.Namespace, name: prev.name, reason: reason, message: message, count: count})
				return
			}
		}
		r.log.Debug("updating event failed; writing a new one", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()+seq),
			Namespace: pod.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind:            "Pod",
			APIVersion:      "v1",
			Namespace:       pod.Namespace,
			Name:            pod.Name,
			UID:             pod.UID,
			ResourceVersion: pod.ResourceVersion,
		},
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Action:              action,
		Source:              corev1.EventSource{Component: r.source},
		ReportingController: r.source,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	created, err := events.Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		r.log.Debug("recording event failed", "pod", pod.Namespace+"/"+pod.Name, "reason", reason, "err", err)
		return
	}
	r.remember(pod.UID, &recorded{namespace: pod.Namespace, name: created.Name, reason: reason, message: message, count: 1})
}

func (r *recorder) remember(uid types.UID, rec *recorded) {
	r.mu.Lock()
	r.last[uid] = rec
	r.mu.Unlock()
}

// forget drops what is remembered about a pod.
func (r *recorder) forget(uid types.UID) {
	r.mu.Lock()
	delete(r.last, uid)
	r.mu.Unlock()
}

// keepOnly forgets every pod not in uids.
func (r *recorder) keepOnly(uids map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.last {
		if !uids[uid] {
			delete(r.last, uid)
		}
	}
}

// noteLengthLimit is the longest message an event may hold.
const noteLengthLimit = 1024

// truncate shortens a message to what an event may hold, as upstream's
// scheduler does.
func truncate(message string) string {
	const suffix = " ..."
	if len(message) <= noteLengthLimit {
		return message
	}
	return message[:noteLengthLimit-len(suffix)] + suffix
}
