package swap

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestNodeSwapStatus(t *testing.T) {
	tests := []struct {
		name     string
		capacity int64
		enabled  bool
		want     *corev1.NodeSwapStatus
	}{
		{name: "swap on", capacity: 40 * gi, enabled: true, want: &corev1.NodeSwapStatus{Capacity: ptr.To(40 * gi)}},
		{name: "swap off reports 0", capacity: 0, enabled: false, want: &corev1.NodeSwapStatus{Capacity: ptr.To[int64](0)}},
		{name: "swap off ignores a stale capacity", capacity: gi, enabled: false, want: &corev1.NodeSwapStatus{Capacity: ptr.To[int64](0)}},
		{name: "zero-sized device", capacity: 0, enabled: true, want: &corev1.NodeSwapStatus{Capacity: ptr.To[int64](0)}},
		{name: "negative capacity is 0", capacity: -1, enabled: true, want: &corev1.NodeSwapStatus{Capacity: ptr.To[int64](0)}},
		{name: "MaxInt64", capacity: math.MaxInt64, enabled: true, want: &corev1.NodeSwapStatus{Capacity: ptr.To[int64](math.MaxInt64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, NodeSwapStatus(tt.capacity, tt.enabled)); diff != "" {
				t.Errorf("NodeSwapStatus(%d, %v) (-want +got):\n%s", tt.capacity, tt.enabled, diff)
			}
		})
	}
	a, b := NodeSwapStatus(gi, true), NodeSwapStatus(gi, true)
	if a.Capacity == b.Capacity {
		t.Error("two calls share one Capacity pointer; the caller must own the value")
	}
}
