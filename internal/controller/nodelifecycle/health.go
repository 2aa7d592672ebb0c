package nodelifecycle

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons and messages the controller writes into node conditions.
const (
	ReasonNodeStatusUnknown      = "NodeStatusUnknown"
	MessageNodeStatusUnknown     = "Kubelet stopped posting node status."
	ReasonNodeStatusNeverUpdated = "NodeStatusNeverUpdated"
	MessageNodeNeverUpdated      = "Kubelet never posted node status."
)

// watchedConditions are the conditions set Unknown when a node goes
// silent. NetworkUnavailable is left alone: the network plugin, not the
// kubelet, owns it.
var watchedConditions = [...]corev1.NodeConditionType{
	corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure,
}

// Params are the controller's tunables, as kube-controller-manager's flags
// name them. Plan and Judge read them and never change them.
type Params struct {
	// NodeMonitorGracePeriod (--node-monitor-grace-period) is how long a
	// node that has posted Ready may stay silent before it is Unknown.
	NodeMonitorGracePeriod time.Duration
	// NodeStartupGracePeriod (--node-startup-grace-period) replaces it for a
	// node that has never posted a Ready condition.
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate (--node-eviction-rate) is the NoExecute tainting rate,
	// in nodes a second per zone, of a Normal or fully disrupted zone.
	NodeEvictionRate float64
	// SecondaryNodeEvictionRate (--secondary-node-eviction-rate) is the rate
	// of a partially disrupted zone larger than LargeClusterSizeThreshold.
	SecondaryNodeEvictionRate float64
	// UnhealthyZoneThreshold (--unhealthy-zone-threshold) is the fraction of
	// not-Ready nodes (with more than 2 of them) at which a zone is
	// PartialDisruption.
	UnhealthyZoneThreshold float64
	// LargeClusterSizeThreshold (--large-cluster-size-threshold): a
	// partially disrupted zone of at most this many nodes is not tainted.
	LargeClusterSizeThreshold int
}

// Health is what the controller remembers about one node between passes
// (upstream's nodeHealthData). All times except those copied from the
// node are on the controller's clock.
type Health struct {
	// ProbeTime is when a heartbeat (a new status post or Lease renewal)
	// was last observed. The node is timed out once now > ProbeTime+grace.
	ProbeTime time.Time
	// ReadyTransitionTime is when Ready was last seen to change.
	ReadyTransitionTime time.Time
	// Ready is the node's Ready condition as last recorded.
	Ready ReadySeen
	// Lease is the node's Lease as last recorded.
	Lease LeaseSeen
	// Zone and UID are the node's at the last pass.
	Zone string
	UID  types.UID
}

// ReadySeen is the part of a Ready condition the controller compares.
type ReadySeen struct {
	Present            bool // false: the node had no Ready condition
	Status             corev1.ConditionStatus
	LastHeartbeatTime  time.Time
	LastTransitionTime time.Time
}

// LeaseSeen is the part of a node Lease the controller compares.
type LeaseSeen struct {
	Present      bool // false: no Lease recorded
	HasRenewTime bool
	RenewTime    time.Time
}

// Verdict is Judge's decision about one node.
type Verdict struct {
	// Health is the node's new remembered health.
	Health Health
	// Grace is the grace period that applies to the node.
	Grace time.Duration
	// TimedOut: now is past Health.ProbeTime + Grace.
	TimedOut bool
	// Observed is Ready's status as the node carried it into this pass
	// (Unknown when it has no Ready condition).
	Observed corev1.ConditionStatus
	// Current is Ready's status after this pass, or "" when the node has no
	// Ready condition and is still within its startup grace period.
	Current corev1.ConditionStatus
	// Conditions, when non-nil, is the node's complete new condition list,
	// to be written with UpdateStatus because Ready changed.
	Conditions []corev1.NodeCondition
}

// Judge decides one node's health at now, given what was remembered (nil
// the first time the node is seen) and its Lease (nil if none). It follows upstream's tryUpdateNodeHealth, without the write:
//
//   - a heartbeat is a changed Ready lastHeartbeatTime, a Ready condition
//     appearing, or a Lease renewTime later than the one recorded, and sets
//     ProbeTime = now;
//   - a node without a Ready condition gets the startup grace period,
//     counted from its creationTimestamp when first seen;
//   - when now > ProbeTime + grace, the four watched conditions become
//     Unknown (NodeStatusUnknown, keeping lastHeartbeatTime) or, when
//     missing, are added (NodeStatusNeverUpdated, lastHeartbeatTime =
//     creationTimestamp); lastTransitionTime is now. Conditions is set only
//     when Ready itself changed, as upstream writes only then.
//
// node, lease and prev are not modified.
func Judge(node *corev1.Node, lease *coordinationv1.Lease, prev *Health, now time.Time, p Params) Verdict {
	var v Verdict
	r, grace := judge(&v.Health, node, lease, prev, now, p, ZoneKey(node))
	v.Grace, v.TimedOut, v.Observed, v.Current, v.Conditions = grace, r.timedOut, r.observed, r.current, r.conditions
	return v
}

// judge is Judge with the node's zone key already worked out. It writes
// the new Health to *dst and returns the rest of the verdict (of judged,
// only the fields Verdict has) and the grace period.
func judge(dst *Health, node *corev1.Node, lease *coordinationv1.Lease, prevp *Health, now time.Time, p Params, zone string) (judged, time.Duration) {
	created := node.CreationTimestamp.Time
	readyIdx := conditionIndex(node.Status.Conditions, corev1.NodeReady)
	hasReady := readyIdx >= 0

	known := prevp != nil
	var h Health
	if known {
		h = *prevp
	}
	var observed ReadySeen
	grace := p.NodeMonitorGracePeriod
	if hasReady {
		observed = readySeen(&node.Status.Conditions[readyIdx])
	} else {
		// Never posted: a synthetic Unknown dated from creation, and the
		// startup grace period counted from creation when first seen.
		observed = ReadySeen{Status: corev1.ConditionUnknown, LastHeartbeatTime: created, LastTransitionTime: created}
		grace = p.NodeStartupGracePeriod
		if !known {
			h = Health{ProbeTime: created, ReadyTransitionTime: created}
		}
		h.Ready = ReadySeen{}
	}

	switch saved := h.Ready; {
	case !hasReady:
		// Nothing posted, nothing to compare; only the Lease can tell.
	case !known || !saved.Present:
		// First sight, or Ready appeared: start the clock now.
		h.ProbeTime, h.ReadyTransitionTime = now, now
		h.Ready = observed
	case !saved.LastHeartbeatTime.Equal(observed.LastHeartbeatTime):
		// A status post.
		h.ProbeTime = now
		if !saved.LastTransitionTime.Equal(observed.LastTransitionTime) {
			h.ReadyTransitionTime = now
		}
		h.Ready = observed
	}
	if lease != nil && (!h.Lease.Present || leaseRenewed(h.Lease, lease)) {
		h.Lease = leaseSeen(lease)
		h.ProbeTime = now
	}
	h.Zone = zone
	h.UID = node.UID

	v := judged{observed: observed.Status}
	if hasReady {
		v.current = observed.Status
	}
	v.timedOut = now.After(h.ProbeTime.Add(grace))
	// Ready changes, and so is written, when it is missing or not yet
	// Unknown; a Ready already Unknown leaves the node untouched, as
	// upstream writes only when Ready differs.
	if v.timedOut && (!hasReady || observed.Status != corev1.ConditionUnknown) {
		v.conditions = unknownConditions(node, now)
		v.current = corev1.ConditionUnknown
		h.Ready = readySeen(&v.conditions[conditionIndex(v.conditions, corev1.NodeReady)])
		h.ReadyTransitionTime = now
		h.Lease = leaseSeen(lease)
	}
	*dst = h
	return v, grace
}

// unknownConditions returns a copy of node's conditions with the watched
// ones set Unknown.
func unknownConditions(node *corev1.Node, now time.Time) []corev1.NodeCondition {
	conds := make([]corev1.NodeCondition, len(node.Status.Conditions), len(node.Status.Conditions)+len(watchedConditions))
	copy(conds, node.Status.Conditions)
	stamp := metav1.NewTime(now)
	for _, t := range watchedConditions {
		i := conditionIndex(conds, t)
		if i < 0 {
			conds = append(conds, corev1.NodeCondition{
				Type:               t,
				Status:             corev1.ConditionUnknown,
				Reason:             ReasonNodeStatusNeverUpdated,
				Message:            MessageNodeNeverUpdated,
				LastHeartbeatTime:  node.CreationTimestamp,
				LastTransitionTime: stamp,
			})
			continue
		}
		if conds[i].Status != corev1.ConditionUnknown {
			conds[i].Status = corev1.ConditionUnknown
			conds[i].Reason = ReasonNodeStatusUnknown
			conds[i].Message = MessageNodeStatusUnknown
			conds[i].LastTransitionTime = stamp
		}
	}
	return conds
}

func readySeen(c *corev1.NodeCondition) ReadySeen {
	return ReadySeen{Present: true, Status: c.Status, LastHeartbeatTime: c.LastHeartbeatTime.Time, LastTransitionTime: c.LastTransitionTime.Time}
}

func leaseSeen(l *coordinationv1.Lease) LeaseSeen {
	if l == nil {
		return LeaseSeen{}
	}
	s := LeaseSeen{Present: true}
	if l.Spec.RenewTime != nil {
		s.HasRenewTime = true
		s.RenewTime = l.Spec.RenewTime.Time
	}
	return s
}

// leaseRenewed: both renew times are set and the lease's is later.
func leaseRenewed(saved LeaseSeen, l *coordinationv1.Lease) bool {
	return saved.HasRenewTime && l.Spec.RenewTime != nil && saved.RenewTime.Before(l.Spec.RenewTime.Time)
}

func conditionIndex(conds []corev1.NodeCondition, t corev1.NodeConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
