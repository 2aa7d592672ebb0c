package pod

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// schedulingGatedMessage is the message of the PodScheduled condition a
// gated pod is created with.
const schedulingGatedMessage = "Scheduling is blocked due to non-empty scheduling gates"

// prepareForCreate is Kind.PrepareForCreate: whatever status the client sent
// is replaced by Pending with the computed QoS class, and a pod created with
// scheduling gates starts with PodScheduled=False/SchedulingGated.
func prepareForCreate(obj runtime.Object) {
	pod := obj.(*v1.Pod)
	pod.Status = v1.PodStatus{
		Phase:    v1.PodPending,
		QOSClass: QOSClass(&pod.Spec),
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		pod.Status.Conditions = []v1.PodCondition{{
			Type:    v1.PodScheduled,
			Status:  v1.ConditionFalse,
			Reason:  v1.PodReasonSchedulingGated,
			Message: schedulingGatedMessage,
		}}
	}
}

// PodQOS is the class the API server recorded in pod's status.qosClass,
// or, when that is empty, QOSClass of its spec (upstream's GetPodQOS).
func PodQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return QOSClass(&pod.Spec)
}

// QOSClass classifies a pod as upstream's ComputePodQOS does, counting only
// cpu and memory with positive quantities over regular and init containers:
// BestEffort when nothing is requested or limited; Guaranteed when every
// container limits both cpu and memory and the summed requests equal the
// summed limits; Burstable otherwise. When pod-level resources name cpu or
// memory they decide instead of the containers.
//
// A pod holding a quantity too large to add up (see maxQuantityDigits) is
// called Burstable without adding; validation refuses such a pod anyway.
func QOSClass(spec *v1.PodSpec) v1.PodQOSClass {
	if hasTooLargeQuantity(spec) {
		return v1.PodQOSBurstable
	}
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	if podLevelResourcesSet(spec) {
		addQOSResources(requests, spec.Resources.Requests)
		if len(spec.Resources.Limits) > 0 {
			found := addQOSResources(limits, spec.Resources.Limits)
			if !found.HasAll(string(v1.ResourceCPU), string(v1.ResourceMemory)) {
				guaranteed = false
			}
		}
	} else {
		all := append(append([]v1.Container{}, spec.Containers...), spec.InitContainers...)
		for i := range all {
			addQOSResources(requests, all[i].Resources.Requests)
			found := addQOSResources(limits, all[i].Resources.Limits)
			if !found.HasAll(string(v1.ResourceCPU), string(v1.ResourceMemory)) {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// addQOSResources adds list's positive cpu and memory quantities into sum and
// returns the names it added.
func addQOSResources(sum, list v1.ResourceList) sets.Set[string] {
	found := sets.New[string]()
	for name, q := range list {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			continue
		}
		if q.Cmp(resource.Quantity{}) <= 0 {
			continue
		}
		found.Insert(string(name))
		total := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			total.Add(prev)
		}
		sum[name] = total
	}
	return found
}

func podLevelResourcesSet(spec *v1.PodSpec) bool {
	if spec.Resources == nil {
		return false
	}
	for _, list := range []v1.ResourceList{spec.Resources.Requests, spec.Resources.Limits} {
		for name := range list {
			if name == v1.ResourceCPU || name == v1.ResourceMemory {
				return true
			}
		}
	}
	return false
}

// prepareForStatusUpdate is StatusRules.PrepareForUpdate: the status
// subresource changes status only. The spec is old's; a status that omits
// qosClass or observedGeneration keeps old's values (old kubelets drop
// them); the IP fields are brought into step.
func prepareForStatusUpdate(obj, old runtime.Object) {
	newPod, oldPod := obj.(*v1.Pod), old.(*v1.Pod)
	newPod.Spec = *oldPod.Spec.DeepCopy()
	if newPod.Status.QOSClass == "" {
		newPod.Status.QOSClass = oldPod.Status.QOSClass
	}
	if newPod.Status.ObservedGeneration == 0 {
		newPod.Status.ObservedGeneration = oldPod.Status.ObservedGeneration
	}
	// A condition without observedGeneration keeps the value of the old
	// condition of the same type, matched in order.
	oldGens := map[v1.PodConditionType][]int64{}
	for _, c := range oldPod.Status.Conditions {
		oldGens[c.Type] = append(oldGens[c.Type], c.ObservedGeneration)
	}
	for i := range newPod.Status.Conditions {
		c := &newPod.Status.Conditions[i]
		var prev int64
		if gens := oldGens[c.Type]; len(gens) > 0 {
			prev, oldGens[c.Type] = gens[0], gens[1:]
		}
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = prev
		}
	}
	normalizeStatusIPs(&newPod.Status)
}

var (
	validPhases = []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown}
	// systemConditions are condition types exempt from the name rule.
	systemConditions = sets.New(v1.PodScheduled, v1.PodReady, v1.PodInitialized)
)

// validateStatusUpdate is StatusRules.ValidateUpdate, following upstream's
// ValidatePodStatusUpdate, plus one rule upstream lacks: a non-empty phase
// must be one of the five known phases.
func validateStatusUpdate(obj, old runtime.Object) field.ErrorList {
	newPod, oldPod := obj.(*v1.Pod), old.(*v1.Pod)
	allErrs := validateMirrorAnnotationUpdate(newPod.Annotations, oldPod.Annotations, field.NewPath("metadata", "annotations"))

	// Upstream roots the condition path at "metadata" (and capitalises
	// "Type"); clients see that path, so it is kept.
	condPath := field.NewPath("metadata", "conditions")
	for i, c := range newPod.Status.Conditions {
		if systemConditions.Has(c.Type) {
			continue
		}
		allErrs = append(allErrs, validateQualifiedName(string(c.Type), condPath.Index(i).Child("Type"))...)
	}

	statusPath := field.NewPath("status")
	if p := newPod.Status.Phase; p != "" && !phaseKnown(p) {
		allErrs = append(allErrs, field.NotSupported(statusPath.Child("phase"), p, validPhases))
	}
	if newPod.Spec.NodeName != oldPod.Spec.NodeName {
		allErrs = append(allErrs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	if nn := newPod.Status.NominatedNodeName; nn != oldPod.Status.NominatedNodeName && nn != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(nn, false) {
			allErrs = append(allErrs, field.Invalid(statusPath.Child("nominatedNodeName"), nn, msg))
		}
	}
	allErrs = append(allErrs, apivalidation.ValidateImmutableField(newPod.Status.QOSClass, oldPod.Status.QOSClass, statusPath.Child("qosClass"))...)

	allErrs = append(allErrs, validateStateTransitions(newPod.Status.ContainerStatuses, oldPod.Status.ContainerStatuses, statusPath.Child("containerStatuses"), oldPod.Spec.RestartPolicy, nil)...)
	allErrs = append(allErrs, validateStateTransitions(newPod.Status.InitContainerStatuses, oldPod.Status.InitContainerStatuses, statusPath.Child("initContainerStatuses"), oldPod.Spec.RestartPolicy, sidecarNames(&oldPod.Spec))...)
	// Ephemeral containers are never restarted.
	allErrs = append(allErrs, validateStateTransitions(newPod.Status.EphemeralContainerStatuses, oldPod.Status.EphemeralContainerStatuses, statusPath.Child("ephemeralContainerStatuses"), v1.RestartPolicyNever, nil)...)

	allErrs = append(allErrs, validatePodIPs(&newPod.Status, statusPath)...)
	allErrs = append(allErrs, validateHostIPs(&newPod.Status, statusPath)...)
	return allErrs
}

func phaseKnown(p v1.PodPhase) bool {
	for _, known := range validPhases {
		if p == known {
			return true
		}
	}
	return false
}

func sidecarNames(spec *v1.PodSpec) sets.Set[string] {
	names := sets.New[string]()
	for _, c := range spec.InitContainers {
		if isRestartableInitContainer(&c) {
			names.Insert(c.Name)
		}
	}
	return names
}

func isRestartableInitContainer(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// validateStateTransitions: unless the pod restarts containers, a terminated
// container may not be reported running or waiting again. OnFailure lets a
// failed container restart; restartable (sidecar) init containers may
// always restart.
func validateStateTransitions(newStatuses, oldStatuses []v1.ContainerStatus, fldPath *field.Path, restart v1.RestartPolicy, restartable sets.Set[string]) field.ErrorList {
	if restart == v1.RestartPolicyAlways {
		return nil
	}
	var allErrs field.ErrorList
	for i, oldSt := range oldStatuses {
		if oldSt.State.Terminated == nil {
			continue
		}
		if oldSt.State.Terminated.ExitCode != 0 && restart == v1.RestartPolicyOnFailure {
			continue
		}
		if restartable.Has(oldSt.Name) {
			continue
		}
		for _, newSt := range newStatuses {
			if newSt.Name == oldSt.Name && newSt.State.Terminated == nil {
				allErrs = append(allErrs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return allErrs
}

// validatePodIPs: every entry is an IP, at most one per family, no
// duplicates, and the first agrees with podIP.
func validatePodIPs(st *v1.PodStatus, statusPath *field.Path) field.ErrorList {
	p := statusPath.Child("podIPs")
	var allErrs field.ErrorList
	if len(st.PodIPs) > 0 && st.PodIP != st.PodIPs[0].IP {
		allErrs = append(allErrs, field.Invalid(p.Index(0).Child("ip"), st.PodIPs[0].IP, "must be equal to `podIP`"))
	}
	ips := make([]string, len(st.PodIPs))
	for i, ip := range st.PodIPs {
		ips[i] = ip.IP
		allErrs = append(allErrs, validation.IsValidIP(p.Index(i), ip.IP)...)
	}
	if len(ips) > 1 {
		allErrs = append(allErrs, validateDualStack(ips, p, st.PodIPs)...)
		seen := sets.New[string]()
		for i, ip := range st.PodIPs {
			if seen.Has(ip.IP) {
				allErrs = append(allErrs, field.Duplicate(p.Index(i), ip))
			}
			seen.Insert(ip.IP)
		}
	}
	return allErrs
}

// validateHostIPs is validatePodIPs for the node's addresses.
func validateHostIPs(st *v1.PodStatus, statusPath *field.Path) field.ErrorList {
	if len(st.HostIPs) == 0 {
		return nil
	}
	p := statusPath.Child("hostIPs")
	var allErrs field.ErrorList
	if st.HostIP != st.HostIPs[0].IP {
		allErrs = append(allErrs, field.Invalid(p.Index(0).Child("ip"), st.HostIPs[0].IP, "must be equal to `hostIP`"))
	}
	ips := make([]string, len(st.HostIPs))
	for i, ip := range st.HostIPs {
		ips[i] = ip.IP
		allErrs = append(allErrs, validation.IsValidIP(p.Index(i), ip.IP)...)
	}
	if len(ips) > 1 {
		seen := sets.New[string]()
		for i, ip := range st.HostIPs {
			if seen.Has(ip.IP) {
				allErrs = append(allErrs, field.Duplicate(p.Index(i), ip))
			}
			seen.Insert(ip.IP)
		}
		allErrs = append(allErrs, validateDualStack(ips, p, st.HostIPs)...)
	}
	return allErrs
}

func validateDualStack(ips []string, p *field.Path, badValue interface{}) field.ErrorList {
	var allErrs field.ErrorList
	dual, err := netutils.IsDualStackIPStrings(ips)
	if err != nil {
		allErrs = append(allErrs, field.InternalError(p, fmt.Errorf("failed to check for dual stack with error:%v", err)))
	}
	if !dual || len(ips) > 2 {
		allErrs = append(allErrs, field.Invalid(p, badValue, "may specify no more than one IP for each IP family"))
	}
	return allErrs
}
