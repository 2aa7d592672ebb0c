package statusreport

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkStatusPatchHeartbeat is the patch of a status report with
// nothing new: every condition's heartbeat moves.
func BenchmarkStatusPatchHeartbeat(b *testing.B) {
	original := node(baseStatus())
	original.Labels = map[string]string{"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "a"}
	original.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
	original.Status.Conditions = append(original.Status.Conditions,
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, t0, t0),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, t0, t0))
	updated := original.DeepCopy()
	for i := range updated.Status.Conditions {
		updated.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(t1)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StatusPatch(original, updated); err != nil {
			b.Fatal(err)
		}
	}
}
