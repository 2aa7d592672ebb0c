package persistentvolume

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"knode/internal/volume"
)

// accessModeOrder is the canonical order of access modes in a mode set's
// key, upstream's (RWO, ROX, RWX, RWOP).
var accessModeOrder = []corev1.PersistentVolumeAccessMode{
	corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod,
}

// modeSet is the set of a volume's access modes, each once, in
// accessModeOrder; modes knode does not know come last, sorted.
func modeSet(modes []corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	var out []corev1.PersistentVolumeAccessMode
	for _, m := range accessModeOrder {
		if has[m] {
			out = append(out, m)
			delete(has, m)
		}
	}
	var rest []string
	for m := range has {
		rest = append(rest, string(m))
	}
	sort.Strings(rest)
	for _, m := range rest {
		out = append(out, corev1.PersistentVolumeAccessMode(m))
	}
	return out
}

// HasAccessModes reports whether the volume offers every access mode the
// claim asks for.
func HasAccessModes(claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	offered := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range pv.Spec.AccessModes {
		offered[m] = true
	}
	for _, m := range claim.Spec.AccessModes {
		if !offered[m] {
			return false
		}
	}
	return true
}

// VolumeModeMismatch reports whether the claim and the volume disagree on
// the volume mode; an unset mode is Filesystem on both sides.
func VolumeModeMismatch(claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	want, have := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeFilesystem
	if claim.Spec.VolumeMode != nil {
		want = *claim.Spec.VolumeMode
	}
	if pv.Spec.VolumeMode != nil {
		have = *pv.Spec.VolumeMode
	}
	return want != have
}

// BoundToClaim reports whether pv is bound or pre-bound to claim: its
// claimRef names the claim's namespace and name, and its UID, when the
// claimRef has one, is the claim's.
func BoundToClaim(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name != claim.Name || ref.Namespace != claim.Namespace {
		return false
	}
	return ref.UID == "" || ref.UID == claim.UID
}

// attributesClass is the volumeAttributesClassName of a claim or volume,
// "" when unset.
func attributesClass(name *string) string {
	if name == nil {
		return ""
	}
	return *name
}

// FindVolume picks the volume the claim should be bound to among volumes,
// as upstream's PV controller does, or nil when none fits.
//
// The volumes are grouped by their set of access modes; only the groups
// offering every mode the claim asks for are searched, those with the
// fewest modes first (ties by the set's name). Within a group, a volume
// pre-bound to the claim (BoundToClaim) that is large enough and has the
// claim's volume mode and attributes class wins at once, even when the
// claim's storage class, selector or the volume's phase disagree; otherwise
// the smallest Available, unclaimed volume of the claim's class whose
// labels the claim's selector matches, with storage >= the request, wins
// (ties by name). Volumes being deleted never match. With delayBinding
// (WaitForFirstConsumer) only pre-bound volumes are considered: the
// scheduler picks the others.
//
// The error is only for a selector that cannot be parsed.
func FindVolume(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, delayBinding bool) (*corev1.PersistentVolume, error) {
	var selector labels.Selector
	if claim.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("error creating internal label selector for claim: %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		selector = s
	}

	groups := map[string][]*corev1.PersistentVolume{}
	sizes := map[string]int{}
	for _, pv := range volumes {
		set := modeSet(pv.Spec.AccessModes)
		names := make([]string, len(set))
		for i, m := range set {
			names[i] = string(m)
		}
		key := strings.Join(names, ",")
		groups[key] = append(groups[key], pv)
		sizes[key] = len(set)
	}
	keys := make([]string, 0, len(groups))
	for k, vols := range groups {
		if HasAccessModes(claim, vols[0]) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if sizes[keys[i]] != sizes[keys[j]] {
			return sizes[keys[i]] < sizes[keys[j]]
		}
		return keys[i] < keys[j]
	})

	for _, k := range keys {
		vols := groups[k]
		sort.Slice(vols, func(i, j int) bool { return vols[i].Name < vols[j].Name })
		if pv := findInGroup(claim, vols, selector, delayBinding); pv != nil {
			return pv, nil
		}
	}
	return nil, nil
}

// findInGroup is FindVolume over volumes that all offer the claim's access
// modes, in the order given.
func findInGroup(claim *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, selector labels.Selector, delayBinding bool) *corev1.PersistentVolume {
	request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	class := volume.ClaimClass(claim)
	var best *corev1.PersistentVolume
	for _, pv := range volumes {
		if pv.Spec.ClaimRef != nil && !BoundToClaim(pv, claim) {
			continue
		}
		size := pv.Spec.Capacity[corev1.ResourceStorage]
		if size.Cmp(request) < 0 {
			continue
		}
		if VolumeModeMismatch(claim, pv) {
			continue
		}
		if attributesClass(claim.Spec.VolumeAttributesClassName) != attributesClass(pv.Spec.VolumeAttributesClassName) {
			continue
		}
		if pv.DeletionTimestamp != nil {
			continue
		}
		if BoundToClaim(pv, claim) {
			return pv
		}
		if delayBinding {
			continue
		}
		if pv.Status.Phase != corev1.VolumeAvailable {
			continue
		}
		if selector != nil && !selector.Matches(labels.Set(pv.Labels)) {
			continue
		}
		if volume.VolumeClass(pv) != class {
			continue
		}
		if best == nil {
			best = pv
			continue
		}
		bestSize := best.Spec.Capacity[corev1.ResourceStorage]
		if bestSize.Cmp(size) > 0 {
			best = pv
		}
	}
	return best
}

// Reasons CheckVolume gives, upstream's words.
var (
	errVolumeDeleting      = errors.New("the volume is marked for deletion")
	errVolumeTooSmall      = errors.New("requested PV is too small")
	errClassMismatch       = errors.New("storageClassName does not match")
	errVolumeModeMismatch  = errors.New("incompatible volumeMode")
	errAccessModesMismatch = errors.New("incompatible accessMode")
)

// CheckVolume says why pv cannot serve a claim that asked for it by name
// (spec.volumeName), or nil when it can: it is not being deleted, is large
// enough, and has the claim's class, volume mode and access modes.
func CheckVolume(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	if pv.DeletionTimestamp != nil {
		return fmt.Errorf("%w %q", errVolumeDeleting, pv.Name)
	}
	request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	if size.Value() < request.Value() {
		return errVolumeTooSmall
	}
	if volume.VolumeClass(pv) != volume.ClaimClass(claim) {
		return errClassMismatch
	}
	if VolumeModeMismatch(claim, pv) {
		return errVolumeModeMismatch
	}
	if !HasAccessModes(claim, pv) {
		return errAccessModesMismatch
	}
	return nil
}

// DefaultClass is the StorageClass a claim without one gets: among the
// classes marked default, the newest, and of those created in the same
// instant the first by name; nil when none is marked.
func DefaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if !volume.IsDefaultClass(sc) {
			continue
		}
		if best == nil {
			best = sc
			continue
		}
		bt, st := best.CreationTimestamp.UnixNano(), sc.CreationTimestamp.UnixNano()
		if st > bt || (st == bt && sc.Name < best.Name) {
			best = sc
		}
	}
	return best
}

// HasClass reports whether the claim names a class, in the field or in the
// beta annotation (even an empty one: "" asks for no class).
func HasClass(claim *corev1.PersistentVolumeClaim) bool {
	if _, ok := claim.Annotations[volume.AnnBetaStorageClass]; ok {
		return true
	}
	return claim.Spec.StorageClassName != nil
}
