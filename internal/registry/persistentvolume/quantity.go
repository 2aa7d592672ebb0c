package persistentvolume

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// CompareQuantities is a.Cmp(b) without its worst case. Cmp rescales one
// value to the other's exponent, which takes seconds for "1e9999999"
// against "1Gi", and any client may send such a value. Values of
// different signs, or whose magnitudes are clearly apart, are ordered
// without rescaling; the rest are close enough for Cmp to be cheap.
func CompareQuantities(a, b resource.Quantity) int {
	sa, sb := a.Sign(), b.Sign()
	if sa != sb || sa == 0 {
		return cmpInt(sa, sb)
	}
	loA, hiA := magnitude(a)
	loB, hiB := magnitude(b)
	switch {
	case hiA < loB:
		return -sa
	case hiB < loA:
		return sa
	}
	return a.Cmp(b)
}

// magnitude bounds floor(log10(|q|)) of a non-zero q from below and above.
func magnitude(q resource.Quantity) (lo, hi int64) {
	d := q.AsDec()
	bits := int64(d.UnscaledBig().BitLen())
	scale := int64(d.Scale())
	// log10(2) lies between 0.301 and 0.302.
	return (bits-1)*301/1000 - scale - 1, bits*302/1000 - scale + 1
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Semantic is apimachinery's semantic equality (nil and empty maps and
// slices are equal, quantities compare by value, times by instant) with
// CompareQuantities in place of Cmp, so that comparing specs that hold
// extreme quantities stays cheap.
var Semantic = conversion.EqualitiesOrDie(
	func(a, b resource.Quantity) bool { return CompareQuantities(a, b) == 0 },
	func(a, b metav1.MicroTime) bool { return a.UTC() == b.UTC() },
	func(a, b metav1.Time) bool { return a.UTC() == b.UTC() },
	func(a, b metav1.FieldsV1) bool { return a.Equal(b) },
	func(a, b labels.Selector) bool { return a.String() == b.String() },
	func(a, b fields.Selector) bool { return a.String() == b.String() },
)
