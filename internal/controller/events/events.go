// Package events writes core/v1 Events for the controllers, one API object
// per call.
//
// What the caller must do: give the Recorder a client that may create
// events and the component name that goes into each event's source, and
// share one Recorder per controller, so its sequence keeps the event names
// of that controller apart.
//
// What it does not do: it neither aggregates nor counts repeats (every
// event has count 1), keeps no queue, and never retries: a failed write is
// logged and dropped, as an event is advice, not state.
package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// nameTries is how many names Record tries for one event.
const nameTries = 5

// Recorder creates events. Its zero value is not usable: Client and Source
// must be set. Safe for concurrent use.
type Recorder struct {
	// Client creates the events. Required.
	Client corev1client.EventsGetter
	// Source is the component written as the event's source.
	Source string
	// Logger receives failed writes; nil means slog.Default().
	Logger *slog.Logger

	seq atomic.Int64
}

// Record creates one event about ref in namespace, stamped now, named
// "<ref.Name>.<hex of now in nanoseconds plus the recorder's sequence>" so
// two events of one recorder in the same instant differ. A name another
// recorder took in that instant (common on the simulator's virtual clock)
// is tried again with the next sequence number, up to nameTries times. It
// blocks until the write is done; a failure is only logged.
func (r *Recorder) Record(ctx context.Context, ref corev1.ObjectReference, namespace, typ, reason, msg string, now time.Time) {
	t := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: namespace},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        msg,
		Type:           typ,
		Source:         corev1.EventSource{Component: r.Source},
		FirstTimestamp: t,
		LastTimestamp:  t,
		Count:          1,
	}
	var err error
	for range nameTries {
		ev.Name = fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()+r.seq.Add(1))
		if _, err = r.Client.Events(namespace).Create(ctx, ev, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	if err != nil {
		log := r.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("recording event failed", "kind", ref.Kind, "object", ref.Name, "reason", reason, "err", err)
	}
}
