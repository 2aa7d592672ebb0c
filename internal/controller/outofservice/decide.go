package outofservice

import (
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

// Event reasons.
const (
	// ReasonNodeAlive (Warning): the taint was newly seen on a node whose
	// Lease is still being renewed.
	ReasonNodeAlive = "OutOfServiceNodeAlive"
	// ReasonTaintRemovable (Normal): a tainted node is Ready and no pod is
	// bound to it.
	ReasonTaintRemovable = "OutOfServiceTaintRemovable"
)

// DefaultLeaseDuration is taken for a Lease without
// spec.leaseDurationSeconds: the kubelet's default.
const DefaultLeaseDuration = 40 * time.Second

// Memory is what the controller remembers between passes: one entry per
// node that carried the out-of-service taint in the last pass, by node
// name. A node without an entry has not been seen tainted, so its taint
// is new. The zero value (nil) remembers nothing. Decide never changes
// the Memory it is given.
type Memory map[string]Seen

// Seen is what is remembered of one tainted node.
type Seen struct {
	// UID is the node's; a node of the same name with another UID is a
	// new node, whose taint is new.
	UID types.UID
	// Announced: the ReasonTaintRemovable event was recorded in the
	// node's current stretch of being Ready while tainted. It is cleared
	// when the node is seen not Ready.
	Announced bool
}

// Event is one event to record on a Node.
type Event struct {
	Node    string
	UID     types.UID
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
}

// Decide looks at the nodes at now and returns the events to record, in
// node name order, and the Memory for the next pass.
//
// leases and pods are by node name and must hold an entry for every node
// of nodes that carries the out-of-service taint: its Lease in
// kube-node-lease (nil or absent: none) and the number of pod objects
// whose spec.nodeName is the node, in any phase, being deleted or not
// (absent: none). Nodes without the taint need no entry.
//
// For each node carrying the taint key (any value or effect):
//   - if it has no entry in mem (newly seen) and its Lease is being
//     renewed (renewTime + leaseDurationSeconds is after now), a Warning
//     ReasonNodeAlive;
//   - if it is Ready (condition Ready True) and no pod is bound to it, a
//     Normal ReasonTaintRemovable, unless already announced in this Ready
//     stretch.
//
// Nodes that are absent from nodes or carry no taint are forgotten, so a
// taint removed and added again is new.
func Decide(mem Memory, nodes []*corev1.Node, leases map[string]*coordinationv1.Lease, pods map[string]int, now time.Time) ([]Event, Memory) {
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var events []Event
	next := Memory{}
	for _, n := range sorted {
		if !volume.OutOfService(n) {
			continue
		}
		seen, known := mem[n.Name]
		if known && seen.UID != n.UID {
			known = false
		}
		if !known {
			seen = Seen{UID: n.UID}
			if ago, live := renewing(leases[n.Name], now); live {
				events = append(events, Event{
					Node: n.Name, UID: n.UID, Type: corev1.EventTypeWarning, Reason: ReasonNodeAlive,
					Message: fmt.Sprintf("Node %s has the %s taint but still renews its Lease (last renewed %v ago): "+
						"it may still be running, and detaching its volumes may corrupt data. "+
						"Remove the taint unless the machine is confirmed off: kubectl taint nodes %s %s-",
						n.Name, volume.TaintOutOfService, ago, n.Name, volume.TaintOutOfService),
				})
			}
		}
		switch {
		case !ready(n):
			seen.Announced = false
		case !seen.Announced && pods[n.Name] == 0:
			seen.Announced = true
			events = append(events, Event{
				Node: n.Name, UID: n.UID, Type: corev1.EventTypeNormal, Reason: ReasonTaintRemovable,
				Message: fmt.Sprintf("Node %s is Ready and no pods are bound to it; the %s taint can be removed: kubectl taint nodes %s %s-",
					n.Name, volume.TaintOutOfService, n.Name, volume.TaintOutOfService),
			})
		}
		next[n.Name] = seen
	}
	return events, next
}

// renewing reports whether lease is still being renewed at now, and how
// long ago it was last renewed, in whole seconds (0 if renewTime is ahead
// of now).
func renewing(lease *coordinationv1.Lease, now time.Time) (time.Duration, bool) {
	if lease == nil || lease.Spec.RenewTime == nil {
		return 0, false
	}
	d := DefaultLeaseDuration
	if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	renewed := lease.Spec.RenewTime.Time
	return max(now.Sub(renewed), 0).Truncate(time.Second), renewed.Add(d).After(now)
}

// ready reports whether the node's Ready condition is True.
func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
