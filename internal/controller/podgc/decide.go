package podgc

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/volume"
)

// Reason is why a pod is force-deleted: the value of the metrics' reason
// label, upstream's strings.
type Reason string

const (
	// ReasonTerminated: a finished pod over the terminated-pod threshold.
	ReasonTerminated Reason = "terminated"
	// ReasonOutOfService: a terminating pod on a node that is not Ready
	// and carries the out-of-service taint.
	ReasonOutOfService Reason = "out-of-service"
	// ReasonOrphaned: a pod bound to a node that no longer exists.
	ReasonOrphaned Reason = "orphaned"
	// ReasonUnscheduled: a terminating pod never bound to a node.
	ReasonUnscheduled Reason = "unscheduled"
)

// The DisruptionTarget condition an orphaned pod gets, upstream's strings.
const (
	ConditionReason  = "DeletionByPodGC"
	ConditionMessage = "PodGC: node no longer exists"
)

// evictedReason is the status reason the node agent gives a pod it evicted
// (upstream's eviction.Reason).
const evictedReason = "Evicted"

// Deletion is one pod to force-delete.
type Deletion struct {
	// Pod is the pod as listed; read-only.
	Pod *corev1.Pod
	// Reason is the path that chose it.
	Reason Reason
}

// Quarantine maps the name of each node that pods are bound to, but that a
// node list lacked, to the time its quarantine ends. It is the state the
// orphan path keeps between passes (upstream keeps it in a delaying queue).
type Quarantine map[string]time.Time

// Observe is the orphan path's bookkeeping for one pass at now, given the
// pass's pods and nodes, in the order of upstream's delaying queue:
//
//  1. every quarantine that has ended by now (end <= now) is taken out;
//  2. every node name some pod is bound to that is not among nodes, and is
//     not in a quarantine still running, starts one of d (so the first
//     sighting counts; a name just taken out starts a new one, which is
//     what retries a failed check or deletion d later). A d <= 0 ends it
//     at once, in this pass;
//  3. check lists, sorted, the names whose quarantine ended that are still
//     missing from nodes and still have pods bound to them: each must be
//     confirmed gone by a direct GET of the node before its pods go. A
//     name whose node came back, or that no pod uses any more, is dropped
//     (upstream would still GET it, to no effect).
//
// q is not changed; next is the quarantine after the pass.
func Observe(q Quarantine, pods []*corev1.Pod, nodes []*corev1.Node, now time.Time, d time.Duration) (next Quarantine, check []string) {
	exists := nodeNames(nodes)
	next = make(Quarantine, len(q))
	ended := map[string]bool{}
	for name, end := range q {
		if end.After(now) {
			next[name] = end
		} else {
			ended[name] = true
		}
	}
	used := map[string]bool{}
	for _, p := range pods {
		name := p.Spec.NodeName
		if name == "" || exists[name] {
			continue
		}
		used[name] = true
		if _, waiting := next[name]; waiting {
			continue
		}
		if d > 0 {
			next[name] = now.Add(d)
		} else {
			ended[name] = true
		}
	}
	for name := range ended {
		if used[name] {
			check = append(check, name)
		}
	}
	sort.Strings(check)
	return next, check
}

// Next is when the earliest quarantine of q ends; zero when q is empty.
func (q Quarantine) Next() time.Time {
	var first time.Time
	for _, end := range q {
		if first.IsZero() || end.Before(first) {
			first = end
		}
	}
	return first
}

// Plan decides one pass: the pods to force-delete, on upstream's four
// paths in upstream's order, each pod at most once (under the first path
// that chose it):
//
//  1. terminated, only when threshold > 0: the pods whose phase is not
//     Pending, Running or Unknown (Succeeded, Failed, or, as upstream, no
//     phase at all) beyond the first threshold of them are deleted, the
//     evicted ones first (phase Failed, reason Evicted), then the oldest by
//     creationTimestamp, ties by name;
//  2. out-of-service: pods being deleted (deletionTimestamp set) bound to
//     a node in nodes that is not Ready (no Ready condition with status
//     True) and carries a taint with key node.kubernetes.io/out-of-service,
//     whatever its effect and value;
//  3. orphaned: pods bound to a node named in gone (confirmed missing by
//     Observe's check) that is not in nodes;
//  4. unscheduled: pods being deleted that are bound to no node.
//
// Within a path the order is deterministic: terminated and out-of-service
// pods in the eviction-then-age order above, the others by namespace and
// name. pods and nodes are not changed.
func Plan(pods []*corev1.Pod, nodes []*corev1.Node, gone map[string]bool, threshold int) []Deletion {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var out []Deletion
	planned := map[*corev1.Pod]bool{}
	add := func(reason Reason, ps []*corev1.Pod) {
		for _, p := range ps {
			if !planned[p] {
				planned[p] = true
				out = append(out, Deletion{Pod: p, Reason: reason})
			}
		}
	}

	if threshold > 0 {
		var terminated []*corev1.Pod
		for _, p := range pods {
			if Terminated(p) {
				terminated = append(terminated, p)
			}
		}
		if surplus := len(terminated) - threshold; surplus > 0 {
			sortForDeletion(terminated)
			add(ReasonTerminated, terminated[:surplus])
		}
	}

	var outOfService, orphaned, unscheduled []*corev1.Pod
	for _, p := range pods {
		node := p.Spec.NodeName
		switch {
		case node == "":
			if p.DeletionTimestamp != nil {
				unscheduled = append(unscheduled, p)
			}
		case byName[node] != nil:
			if n := byName[node]; p.DeletionTimestamp != nil && !NodeReady(n) && volume.OutOfService(n) {
				outOfService = append(outOfService, p)
			}
		case gone[node]:
			orphaned = append(orphaned, p)
		}
	}
	sortForDeletion(outOfService)
	sortByName(orphaned)
	sortByName(unscheduled)
	add(ReasonOutOfService, outOfService)
	add(ReasonOrphaned, orphaned)
	add(ReasonUnscheduled, unscheduled)
	return out
}

// Terminated reports whether pod counts as terminated for the threshold:
// its phase is none of Pending, Running and Unknown (upstream's
// isPodTerminated, which also counts an empty phase).
func Terminated(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodRunning, corev1.PodUnknown:
		return false
	}
	return true
}

// NodeReady reports whether node has a Ready condition with status True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// MarkFailed is the strategic-merge patch of pods/status that upstream
// sends before force-deleting pod for reason: phase Failed; for an
// orphaned pod also the DisruptionTarget condition (status True, reason
// DeletionByPodGC), whose lastTransitionTime is now unless the pod already
// has that condition with status True (then it is kept); status
// observedGeneration set to the pod's generation when the pod already
// reports one; and metadata.uid, as upstream puts it there as a
// precondition. ok is false, and no patch is due, when the pod has already
// finished (Succeeded or Failed).
func MarkFailed(pod *corev1.Pod, reason Reason, now time.Time) (patch []byte, ok bool) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, false
	}
	status := map[string]any{"phase": corev1.PodFailed}
	if pod.Status.ObservedGeneration != 0 && pod.Status.ObservedGeneration != pod.Generation {
		status["observedGeneration"] = pod.Generation
	}
	if reason == ReasonOrphaned {
		cond := corev1.PodCondition{
			Type:               corev1.DisruptionTarget,
			Status:             corev1.ConditionTrue,
			Reason:             ConditionReason,
			Message:            ConditionMessage,
			LastTransitionTime: metav1.NewTime(now),
		}
		for _, have := range pod.Status.Conditions {
			if have.Type == corev1.DisruptionTarget {
				if have.Status == cond.Status {
					cond.LastTransitionTime = have.LastTransitionTime
				}
				break
			}
		}
		status["conditions"] = []corev1.PodCondition{cond}
	}
	body := map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	}
	patch, err := json.Marshal(body)
	if err != nil {
		// Strings, a phase, an int64 and a condition always encode.
		panic(fmt.Sprintf("podgc: encoding a status patch: %v", err))
	}
	return patch, true
}

// sortForDeletion orders pods as upstream's byEvictionAndCreationTimestamp:
// evicted first, then oldest first, ties by name, then (for a stable
// result across namespaces) by namespace and UID.
func sortForDeletion(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if ea, eb := evicted(a), evicted(b); ea != eb {
			return ea
		}
		if ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time; !ta.Equal(tb) {
			return ta.Before(tb)
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.UID < b.UID
	})
}

func sortByName(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
}

// evicted: the node agent evicted the pod (upstream's PodIsEvicted).
func evicted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == evictedReason
}

func nodeNames(nodes []*corev1.Node) map[string]bool {
	out := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		out[n.Name] = true
	}
	return out
}
