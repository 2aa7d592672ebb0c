package nodelifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The NoExecute taints that drive eviction. They carry no value; the
// controller stamps timeAdded when it adds one.
var (
	NotReadyTaint    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	UnreachableTaint = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
)

// conditionTaints maps a condition and status to the NoSchedule taint it
// calls for.
var conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady: {
		corev1.ConditionFalse:   corev1.TaintNodeNotReady,
		corev1.ConditionUnknown: corev1.TaintNodeUnreachable,
	},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
}

// managedNoSchedule are the NoSchedule taint keys this controller owns.
var managedNoSchedule = map[string]bool{
	corev1.TaintNodeNotReady:           true,
	corev1.TaintNodeUnreachable:        true,
	corev1.TaintNodeMemoryPressure:     true,
	corev1.TaintNodeDiskPressure:       true,
	corev1.TaintNodeNetworkUnavailable: true,
	corev1.TaintNodePIDPressure:        true,
	corev1.TaintNodeUnschedulable:      true,
}

// NoScheduleChange compares the NoSchedule taints node's conditions and
// spec.unschedulable call for with the managed ones it carries (other keys
// and effects are never touched), and returns what to add, stamped with
// timeAdded = now, and what to remove.
func NoScheduleChange(node *corev1.Node, now time.Time) (add, remove []corev1.Taint) {
	var want []string
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if key, ok := conditionTaints[c.Type][c.Status]; ok {
			want = appendUnique(want, key)
		}
	}
	if node.Spec.Unschedulable {
		want = appendUnique(want, corev1.TaintNodeUnschedulable)
	}
	stamp := metav1.NewTime(now)
	for _, key := range want {
		if !hasTaint(node.Spec.Taints, key, corev1.TaintEffectNoSchedule) {
			add = append(add, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &stamp})
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule && managedNoSchedule[t.Key] && !contains(want, t.Key) {
			remove = append(remove, t)
		}
	}
	return add, remove
}

// betaLabels pairs each GA label with the beta label kept equal to it.
var betaLabels = [...][2]string{
	{corev1.LabelOSStable, "beta.kubernetes.io/os"},
	{corev1.LabelArchStable, "beta.kubernetes.io/arch"},
}

// BetaLabelChange returns the beta.kubernetes.io/os and /arch labels to set
// so that they match kubernetes.io/os and /arch, or nil when they do.
func BetaLabelChange(node *corev1.Node) map[string]string {
	var out map[string]string
	for _, pair := range betaLabels {
		v, ok := node.Labels[pair[0]]
		if !ok {
			continue
		}
		if old, ok := node.Labels[pair[1]]; ok && old == v {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[pair[1]] = v
	}
	return out
}

// NoExecuteTaintFor is the tainting pass's decision for a node it takes
// from a queue: the NoExecute taint to add (stamped with timeAdded = now)
// and its opposite to remove, or ok=false when the node needs none (gone,
// or Ready again). A node with no Ready condition yet is retried after
// retryAfter.
func NoExecuteTaintFor(node *corev1.Node, now time.Time) (add, remove corev1.Taint, ok bool, retryAfter time.Duration) {
	if node == nil {
		return add, remove, false, 0
	}
	i := conditionIndex(node.Status.Conditions, corev1.NodeReady)
	if i < 0 {
		return add, remove, false, 50 * time.Millisecond
	}
	switch node.Status.Conditions[i].Status {
	case corev1.ConditionFalse:
		return stamped(NotReadyTaint, now), UnreachableTaint, true, 0
	case corev1.ConditionUnknown:
		return stamped(UnreachableTaint, now), NotReadyTaint, true, 0
	}
	return add, remove, false, 0
}

// stamped is t with timeAdded = now.
func stamped(t corev1.Taint, now time.Time) corev1.Taint {
	stamp := metav1.NewTime(now)
	t.TimeAdded = &stamp
	return t
}

// ApplyTaints returns taints with add applied (replacing any taint of the
// same key and effect) and then remove taken out (matched on key and
// effect), and whether anything changed. taints is not modified.
func ApplyTaints(taints, add, remove []corev1.Taint) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(taints)+len(add))
	out = append(out, taints...)
	changed := false
	for _, a := range add {
		replaced := false
		for i := range out {
			if out[i].Key == a.Key && out[i].Effect == a.Effect {
				replaced = true
				if !equality.Semantic.DeepEqual(out[i], a) {
					out[i] = a
					changed = true
				}
				break
			}
		}
		if !replaced {
			out = append(out, a)
			changed = true
		}
	}
	for _, r := range remove {
		for i := 0; i < len(out); i++ {
			if out[i].Key == r.Key && out[i].Effect == r.Effect {
				out = append(out[:i], out[i+1:]...)
				changed = true
				i--
			}
		}
	}
	return out, changed
}

func hasTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) bool {
	for i := range taints {
		if taints[i].Key == key && taints[i].Effect == effect {
			return true
		}
	}
	return false
}

func appendUnique(s []string, v string) []string {
	if contains(s, v) {
		return s
	}
	return append(s, v)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
