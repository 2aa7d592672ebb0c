package nodelifecycle

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var (
	t0     = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	params = Params{
		NodeMonitorGracePeriod:    40 * time.Second,
		NodeStartupGracePeriod:    60 * time.Second,
		NodeEvictionRate:          0.1,
		SecondaryNodeEvictionRate: 0.01,
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
	}
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func mt(d time.Duration) metav1.Time { return metav1.NewTime(at(d)) }

// nodeOpt changes a test node.
type nodeOpt func(*corev1.Node)

// mkNode is a node created at t0 with the given options.
func mkNode(name string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: mt(0)}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// ready adds a Ready condition with the given status, heartbeat and
// transition offsets from t0.
func ready(status corev1.ConditionStatus, heartbeat, transition time.Duration) nodeOpt {
	return cond(corev1.NodeReady, status, heartbeat, transition)
}

func cond(t corev1.NodeConditionType, status corev1.ConditionStatus, heartbeat, transition time.Duration) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: status, Reason: "Kubelet" + string(t), Message: "posted",
			LastHeartbeatTime: mt(heartbeat), LastTransitionTime: mt(transition),
		})
	}
}

func zone(z string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[corev1.LabelTopologyZone] = z
	}
}

func label(k, v string) nodeOpt {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

func taints(ts ...corev1.Taint) nodeOpt {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func mkLease(name string, renew time.Duration) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(at(renew))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &rt},
	}
}

// zkey is the zone key of a node labelled only with topology zone z.
func zkey(z string) string { return ":\x00:" + z }

func emptyState() State {
	return State{Health: map[string]*Health{}, Zones: map[string]ZoneState{}, Rates: map[string]float64{}, Held: map[string]string{}, Retry: map[string]bool{}}
}
