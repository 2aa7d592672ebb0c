package persistentvolume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCompareQuantities(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1Gi", "1Gi", 0},
		{"1Gi", "1024Mi", 0},
		{"1G", "1Gi", -1},
		{"0", "0", 0},
		{"0", "1m", -1},
		{"-1", "0", -1},
		{"-1", "-2", 1},
		{"1e9999999", "1Gi", 1},
		{"1Gi", "1e9999999", -1},
		{"-1e9999999", "-1Gi", -1},
		{"1e9999999", "1e9999998", 1},
		{"999999999999999999999", "1e21", -1},
		{"1e-9", "1m", -1},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			if got := CompareQuantities(qty(tt.a), qty(tt.b)); got != tt.want {
				t.Errorf("compareQuantities = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSemantic(t *testing.T) {
	a := corev1.ResourceList{corev1.ResourceStorage: qty("1e9999999")}
	b := corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")}
	if Semantic.DeepEqual(a, b) {
		t.Error("1e9999999 equals 1Gi")
	}
	if !Semantic.DeepEqual(corev1.ResourceList{"storage": qty("1Gi")}, corev1.ResourceList{"storage": qty("1024Mi")}) {
		t.Error("1Gi differs from 1024Mi")
	}
	if !Semantic.DeepEqual(&corev1.PersistentVolumeSpec{AccessModes: nil}, &corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{}}) {
		t.Error("nil and empty slices differ")
	}
}
