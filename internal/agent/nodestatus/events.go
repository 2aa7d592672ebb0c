package nodestatus

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Event is a node event the agent should record against its Node.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type    string
	Reason  string
	Message string
}

// conditionEventReasons maps a kubelet-owned condition and its new status to
// the event reason upstream records.
var conditionEventReasons = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeMemoryPressure: {corev1.ConditionTrue: "NodeHasInsufficientMemory", corev1.ConditionFalse: "NodeHasSufficientMemory"},
	corev1.NodeDiskPressure:   {corev1.ConditionTrue: "NodeHasDiskPressure", corev1.ConditionFalse: "NodeHasNoDiskPressure"},
	corev1.NodePIDPressure:    {corev1.ConditionTrue: "NodeHasInsufficientPID", corev1.ConditionFalse: "NodeHasSufficientPID"},
	corev1.NodeReady:          {corev1.ConditionTrue: "NodeReady", corev1.ConditionFalse: "NodeNotReady"},
}

// Events returns the events upstream's setters record when the status goes
// from before to after (before is the status the setters started from), in
// setter order:
//   - Warning Rebooted "Node <name> has been rebooted, boot id: <id>" when a
//     known boot ID changed;
//   - for MemoryPressure, DiskPressure and PIDPressure, Normal
//     NodeHas... "Node <name> status is now: <reason>" when the status
//     changed, including when the condition is new;
//   - for Ready, NodeReady or NodeNotReady the same way, but not when the
//     condition is new (upstream records none on first creation).
func Events(nodeName string, before, after *corev1.NodeStatus) []Event {
	if before == nil {
		before = &corev1.NodeStatus{}
	}
	if after == nil {
		return nil
	}
	var events []Event
	if old := before.NodeInfo.BootID; old != "" && old != after.NodeInfo.BootID {
		events = append(events, Event{
			Type:    corev1.EventTypeWarning,
			Reason:  "Rebooted",
			Message: fmt.Sprintf("Node %s has been rebooted, boot id: %s", nodeName, after.NodeInfo.BootID),
		})
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		next := findCondition(after.Conditions, t)
		if next == nil {
			continue
		}
		prev := findCondition(before.Conditions, t)
		if prev == nil && t == corev1.NodeReady {
			continue
		}
		if prev != nil && prev.Status == next.Status {
			continue
		}
		reason, ok := conditionEventReasons[t][next.Status]
		if !ok {
			continue
		}
		events = append(events, Event{
			Type:    corev1.EventTypeNormal,
			Reason:  reason,
			Message: fmt.Sprintf("Node %s status is now: %s", nodeName, reason),
		})
	}
	return events
}
