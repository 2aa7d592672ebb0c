package swap

import corev1 "k8s.io/api/core/v1"

// NodeSwapStatus is the node's status.nodeInfo.swap: the host's swap
// capacity in bytes, reported on every node, 0 when swap is off (enabled is
// false) or the capacity is negative. The caller owns the returned value.
//
// Upstream (1.33+, KEP-2400, PR #129954) fills it from cAdvisor's swap
// capacity while the NodeSwap gate is on, which it always is from 1.34, so
// a node without swap reports capacity 0 rather than omitting the field.
func NodeSwapStatus(capacityBytes int64, enabled bool) *corev1.NodeSwapStatus {
	if !enabled || capacityBytes < 0 {
		capacityBytes = 0
	}
	return &corev1.NodeSwapStatus{Capacity: &capacityBytes}
}
