package pod

import (
	"fmt"
	"math"
	"strings"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// updatablePodSpecFields is the list upstream prints when an update touches
// any other part of the spec. It is the same list from v1.30 through v1.36:
// scheduling gates and, for gated pods, node selector and node affinity are
// also mutable but upstream does not name them here.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// prepareForUpdate is Kind.PrepareForUpdate: the main resource never changes
// status, so obj takes old's.
func prepareForUpdate(obj, old runtime.Object) {
	obj.(*v1.Pod).Status = *old.(*v1.Pod).Status.DeepCopy()
}

// validateUpdate is Kind.ValidateUpdate. On top of the create rules (except
// the two that only apply on create), a pod's spec is frozen apart from
// container images, a shrinking activeDeadlineSeconds, added tolerations,
// removed scheduling gates and one grace-period repair. spec.nodeName is
// frozen too: binding is the only way to set it.
func validateUpdate(obj, old runtime.Object) field.ErrorList {
	newPod, oldPod := obj.(*v1.Pod), old.(*v1.Pod)
	opts := validateOptions{allowInvalidDeletionCost: !validDeletionCost(oldPod.Annotations)}
	allErrs := validatePodMetaAndSpec(newPod, opts)
	allErrs = append(allErrs, validateMirrorAnnotationUpdate(newPod.Annotations, oldPod.Annotations, field.NewPath("metadata", "annotations"))...)

	specPath := field.NewPath("spec")
	errs, stop := validateContainerUpdates(newPod.Spec.Containers, oldPod.Spec.Containers, specPath.Child("containers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}
	errs, stop = validateContainerUpdates(newPod.Spec.InitContainers, oldPod.Spec.InitContainers, specPath.Child("initContainers"))
	allErrs = append(allErrs, errs...)
	if stop {
		return allErrs
	}

	// activeDeadlineSeconds may be set from nothing, or lowered; never raised
	// or removed.
	deadlinePath := specPath.Child("activeDeadlineSeconds")
	if d := newPod.Spec.ActiveDeadlineSeconds; d != nil {
		if *d < 0 || *d > math.MaxInt32 {
			return append(allErrs, field.Invalid(deadlinePath, *d, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if od := oldPod.Spec.ActiveDeadlineSeconds; od != nil && *od < *d {
			return append(allErrs, field.Invalid(deadlinePath, *d, "must be less than or equal to previous value"))
		}
	} else if oldPod.Spec.ActiveDeadlineSeconds != nil {
		allErrs = append(allErrs, field.Invalid(deadlinePath, newPod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	allErrs = append(allErrs, validateOnlyAddedTolerations(newPod.Spec.Tolerations, oldPod.Spec.Tolerations, specPath.Child("tolerations"))...)
	allErrs = append(allErrs, validateOnlyDeletedSchedulingGates(newPod.Spec.SchedulingGates, oldPod.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	// A quantity too large to compare has been reported above; comparing
	// specs that hold one would take minutes.
	if hasTooLargeQuantity(&newPod.Spec) || apiequality.Semantic.DeepEqual(newPod.Spec, oldPod.Spec) {
		return allErrs
	}
	// Put old values into the fields that may change; whatever still differs
	// is a forbidden change.
	munged := newPod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = oldPod.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = oldPod.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = oldPod.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = oldPod.Spec.SchedulingGates
	munged.Tolerations = oldPod.Spec.Tolerations
	if og := oldPod.Spec.TerminationGracePeriodSeconds; og != nil && *og < 0 {
		if ng := munged.TerminationGracePeriodSeconds; ng != nil && *ng == 1 {
			munged.TerminationGracePeriodSeconds = og
		}
	}
	if !apiequality.Semantic.DeepEqual(*munged, oldPod.Spec) {
		msg := fmt.Sprintf("pod updates may not change fields other than %s\n%v", strings.Join(updatablePodSpecFields, ","), specDiff(oldPod.Spec, *munged))
		allErrs = append(allErrs, field.Forbidden(specPath, msg))
	}
	return allErrs
}

// specDiff renders the difference for the error message. The type names in
// it are v1's (upstream shows its internal core.PodSpec).
func specDiff(old, new v1.PodSpec) (diff string) {
	defer func() {
		// cmp refuses some unexported state; the message is a courtesy, so
		// a refusal must not turn a 422 into a 500.
		if recover() != nil {
			diff = ""
		}
	}()
	return cmp.Diff(old, new)
}

func validateContainerUpdates(newContainers, oldContainers []v1.Container, fldPath *field.Path) (field.ErrorList, bool) {
	if len(newContainers) != len(oldContainers) {
		return field.ErrorList{field.Forbidden(fldPath, "pod updates may not add or remove containers")}, true
	}
	var allErrs field.ErrorList
	for i, c := range newContainers {
		// Upstream repeats these two image checks here, so an update reports
		// them twice (once from the create rules); clients see both.
		if c.Image == "" {
			allErrs = append(allErrs, field.Required(fldPath.Index(i).Child("image"), ""))
		}
		if len(strings.TrimSpace(c.Image)) != len(c.Image) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return allErrs, false
}

// validateOnlyAddedTolerations: every old toleration must still be present,
// unchanged apart from tolerationSeconds.
func validateOnlyAddedTolerations(newTolerations, oldTolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, old := range oldTolerations {
		found := false
		for _, nt := range newTolerations {
			candidate := old
			candidate.TolerationSeconds = nt.TolerationSeconds
			if apiequality.Semantic.DeepEqual(candidate, nt) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// validateOnlyDeletedSchedulingGates refuses any gate the old pod did not have.
func validateOnlyDeletedSchedulingGates(newGates, oldGates []v1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	old := make(map[string]bool, len(oldGates))
	for _, g := range oldGates {
		old[g.Name] = true
	}
	var allErrs field.ErrorList
	reported := make(map[string]bool)
	for i, g := range newGates {
		if old[g.Name] || reported[g.Name] {
			continue
		}
		reported[g.Name] = true
		allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
	}
	return allErrs
}

// validateMirrorAnnotationUpdate: the mirror-pod annotation is fixed for the
// life of the pod.
func validateMirrorAnnotationUpdate(newAnn, oldAnn map[string]string, fldPath *field.Path) field.ErrorList {
	oldVal, hadOld := oldAnn[v1.MirrorPodAnnotationKey]
	newVal, hasNew := newAnn[v1.MirrorPodAnnotationKey]
	p := fldPath.Key(v1.MirrorPodAnnotationKey)
	switch {
	case hadOld && (!hasNew || newVal != oldVal):
		return field.ErrorList{field.Forbidden(p, "may not remove or update mirror pod annotation")}
	case !hadOld && hasNew:
		return field.ErrorList{field.Forbidden(p, "may not add mirror pod annotation")}
	}
	return nil
}
