package nodelifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// EventSource is the component named on the events this controller writes.
const EventSource = "node-controller"

// Pod event for a pod marked not Ready.
const (
	EventPodNodeNotReady   = "NodeNotReady"
	MessagePodNodeNotReady = "Node is not ready"
)

// taintWriteTries bounds the attempts at one taint change.
const taintWriteTries = 5

// writeStatus writes conds as node's conditions. After a failure other than
// NotFound it reads the node again and judges it afresh against the health
// remembered before this pass (prev): the write is retried only if still
// needed. rejudged is that fresh verdict (nil when the first write went
// through); ok reports that the node's status is settled.
func (c *Controller) writeStatus(ctx context.Context, node *corev1.Node, lease *coordinationv1.Lease, prev State, conds []corev1.NodeCondition, now time.Time, freshGrace bool) (rejudged *Verdict, ok bool, err error) {
	n := node.DeepCopy()
	n.Status.Conditions = conds
	for try := 0; try < statusWriteTries; try++ {
		if _, err = c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err == nil {
			return rejudged, true, nil
		}
		if apierrors.IsNotFound(err) || ctx.Err() != nil {
			return nil, false, err
		}
		fresh, gerr := c.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if gerr != nil {
			return nil, false, gerr
		}
		v := Judge(fresh, lease, prev.Health[node.Name], now, c.params)
		if freshGrace {
			v.Health.ProbeTime, v.Health.ReadyTransitionTime = now, now
		}
		rejudged = &v
		h := v.Health
		c.mu.Lock()
		c.state.Health[node.Name] = &h
		c.mu.Unlock()
		if v.Conditions == nil {
			return rejudged, true, nil
		}
		n = fresh.DeepCopy()
		n.Status.Conditions = v.Conditions
	}
	return nil, false, err
}

// swapTaints adds (replacing same key and effect) and removes taints on a
// node in one patch, guarded by the resourceVersion it was computed from.
// The first attempt uses node as given; after a conflict the node is read
// again.
func (c *Controller) swapTaints(ctx context.Context, node *corev1.Node, add, remove []corev1.Taint) error {
	cur := node
	var err error
	for try := 0; try < taintWriteTries; try++ {
		if try > 0 {
			if cur, err = c.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		taints, changed := ApplyTaints(cur.Spec.Taints, add, remove)
		if !changed {
			return nil
		}
		var body []byte
		if body, err = taintPatch(cur.ResourceVersion, taints); err != nil {
			return err
		}
		_, err = c.client.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// taintPatch replaces spec.taints, failing with a conflict unless the node
// is still at resourceVersion rv.
func taintPatch(rv string, taints []corev1.Taint) ([]byte, error) {
	var p struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Spec struct {
			Taints []corev1.Taint `json:"taints"`
		} `json:"spec"`
	}
	p.Metadata.ResourceVersion = rv
	if len(taints) > 0 {
		p.Spec.Taints = taints
	}
	return json.Marshal(p)
}

// patchLabels sets labels on a node.
func (c *Controller) patchLabels(ctx context.Context, name string, labels map[string]string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// markPodsNotReady sets the Ready condition of pods bound to nodeName to
// False (lastTransitionTime now) and records a Warning NodeNotReady event on
// each pod changed. Pods without a Ready condition, or already not Ready,
// are left alone; a pod deleted meanwhile is skipped.
func (c *Controller) markPodsNotReady(ctx context.Context, nodeName string, pods []*corev1.Pod, now time.Time) error {
	var errs []error
	for _, pod := range pods {
		if pod.Spec.NodeName != nodeName {
			continue
		}
		i := podConditionIndex(pod.Status.Conditions, corev1.PodReady)
		if i < 0 || pod.Status.Conditions[i].Status == corev1.ConditionFalse {
			continue
		}
		p := pod.DeepCopy()
		p.Status.Conditions[i].Status = corev1.ConditionFalse
		p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
		updated, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		c.events.pod(ctx, updated, corev1.EventTypeWarning, EventPodNodeNotReady, MessagePodNodeNotReady)
	}
	return errors.Join(errs...)
}

func podConditionIndex(conds []corev1.PodCondition, t corev1.PodConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}

// eventWriter creates core/v1 Events the way client-go's recorder shapes
// them (name "<object>.<hex nanoseconds>", count 1, source node-controller),
// stamped with the controller's clock. Events are best effort: failures are
// logged, never returned.
type eventWriter struct {
	client kubernetes.Interface
	clock  clock.PassiveClock
	log    *slog.Logger

	mu   sync.Mutex
	last int64 // last nanosecond stamp used in a name, to keep names unique
}

func (w *eventWriter) node(ctx context.Context, name string, uid types.UID, typ, reason, message string) {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: name, UID: uid}
	w.write(ctx, ref, metav1.NamespaceDefault, typ, reason, message)
}

func (w *eventWriter) pod(ctx context.Context, p *corev1.Pod, typ, reason, message string) {
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion}
	w.write(ctx, ref, p.Namespace, typ, reason, message)
}

// nodes writes a pass's node events, up to workers at once, all stamped
// now. Their names are given in the plan's order before any is written,
// so they list in that order however the writes interleave. A new
// leader's first pass has a RegisteredNode for every node: written one
// at a time, each would add a write's round trip to the pass.
func (w *eventWriter) nodes(ctx context.Context, evs []Event, workers int) {
	now := w.clock.Now()
	names := make([]int64, len(evs))
	for i := range evs {
		names[i] = w.stamp(now)
	}
	parallel(ctx, len(evs), workers, func(i int) {
		ev := evs[i]
		ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: ev.Node, UID: ev.UID}
		w.create(ctx, ref, metav1.NamespaceDefault, corev1.EventTypeNormal, ev.Reason, ev.Message, now, names[i])
	})
}

// stamp is a nanosecond stamp for an event's name, at now or after the
// last one given, so that no two names repeat.
func (w *eventWriter) stamp(now time.Time) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = max(now.UnixNano(), w.last+1)
	return w.last
}

func (w *eventWriter) write(ctx context.Context, ref corev1.ObjectReference, namespace, typ, reason, message string) {
	now := w.clock.Now()
	w.create(ctx, ref, namespace, typ, reason, message, now, w.stamp(now))
}

// create writes one event named with nanos; a name taken already (by an
// earlier controller's event) is replaced with a later stamp, twice at
// most.
func (w *eventWriter) create(ctx context.Context, ref corev1.ObjectReference, namespace, typ, reason, message string, now time.Time, nanos int64) {
	stamp := metav1.NewTime(now)
	for try := 0; try < 3; try++ {
		if try > 0 {
			nanos = w.stamp(now)
		}
		ev := &corev1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, nanos), Namespace: namespace},
			InvolvedObject:      ref,
			Reason:              reason,
			Message:             message,
			Source:              corev1.EventSource{Component: EventSource},
			FirstTimestamp:      stamp,
			LastTimestamp:       stamp,
			Count:               1,
			Type:                typ,
			ReportingController: EventSource,
		}
		_, err := w.client.CoreV1().Events(namespace).Create(ctx, ev, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil && ctx.Err() == nil {
			w.log.Warn("writing event", "reason", reason, "object", ref.Name, "err", err)
		}
		return
	}
}
