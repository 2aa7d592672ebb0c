package statefulset

import (
	"fmt"
	"regexp"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The identity of a StatefulSet's pods and claims, as upstream's
// stateful_set_utils.go gives it.

var (
	controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind        = corev1.SchemeGroupVersion.WithKind("Pod")
)

// podNameRE splits a pod name into its set's name and its ordinal.
var podNameRE = regexp.MustCompile("(.*)-([0-9]+)$")

// parentAndOrdinal splits pod's name as upstream's getParentNameAndOrdinal:
// "" and -1 when the name does not end in -<number>; the ordinal is -1 when
// the number does not fit an int32.
func parentAndOrdinal(pod *corev1.Pod) (string, int) {
	m := podNameRE.FindStringSubmatch(pod.Name)
	if len(m) < 3 {
		return "", -1
	}
	ord, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(ord)
}

// Ordinal is the ordinal in pod's name, -1 when it has none.
func Ordinal(pod *corev1.Pod) int {
	_, ord := parentAndOrdinal(pod)
	return ord
}

// isMember: pod's name says it belongs to set (upstream's isMemberOf).
func isMember(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, _ := parentAndOrdinal(pod)
	return parent == set.Name
}

// startOrdinal is spec.ordinals.start, 0 when unset.
func startOrdinal(set *appsv1.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

// replicaCount is spec.replicas, 1 when unset (the API default).
func replicaCount(set *appsv1.StatefulSet) int {
	if set.Spec.Replicas == nil {
		return 1
	}
	return int(*set.Spec.Replicas)
}

// inRange: pod's ordinal is one set keeps, [start, start+replicas).
func inRange(pod *corev1.Pod, set *appsv1.StatefulSet) bool {
	ord := Ordinal(pod)
	return ord >= startOrdinal(set) && ord < startOrdinal(set)+replicaCount(set)
}

// PodName is <set>-<ordinal>.
func PodName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// ClaimName is <template>-<set>-<ordinal>, the claim the pod of ordinal
// gets from the volumeClaimTemplate named template.
func ClaimName(set *appsv1.StatefulSet, template string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", template, set.Name, ordinal)
}

// revisionOf is the pod's controller-revision-hash label.
func revisionOf(pod *corev1.Pod) string {
	return pod.Labels[appsv1.StatefulSetRevisionLabel]
}

// NewPod is the pod of set at ordinal, made from set's template as
// upstream's newStatefulSetPod makes it and labelled with revision: named
// <set>-<ordinal> (generateName <set>-), the template's labels,
// annotations and finalizers, the pod-name and pod-index labels, hostname
// and subdomain (spec.serviceName), the claims' volumes, and set as its
// controller (blockOwnerDeletion).
func NewPod(set *appsv1.StatefulSet, ordinal int, revision string) *corev1.Pod {
	t := set.Spec.Template.DeepCopy()
	prefix := set.Name + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		prefix = set.Name
	}
	labels := make(map[string]string, len(t.Labels)+3)
	for k, v := range t.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(set, ordinal),
			GenerateName:    prefix,
			Namespace:       set.Namespace,
			Labels:          labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	updateIdentity(set, pod)
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	updateStorage(set, pod)
	pod.Labels[appsv1.StatefulSetRevisionLabel] = revision
	return pod
}

// versionedPod is the pod to create at ordinal, as upstream's
// newVersionedStatefulSetPod: from the current revision below the
// partition of a RollingUpdate set, else from the update revision (so
// OnDelete recreates deleted pods at the update revision). The condition
// keeps upstream's operator precedence.
func versionedPod(currentSet, updateSet *appsv1.StatefulSet, currentRevision, updateRevision string, ordinal int) *corev1.Pod {
	s := currentSet.Spec.UpdateStrategy
	partition := 0
	if s.RollingUpdate != nil && s.RollingUpdate.Partition != nil {
		partition = int(*s.RollingUpdate.Partition)
	}
	start := startOrdinal(currentSet)
	if s.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		(s.RollingUpdate == nil && ordinal < start+int(currentSet.Status.CurrentReplicas)) ||
		(s.RollingUpdate != nil && ordinal < start+partition) {
		return NewPod(currentSet, ordinal, currentRevision)
	}
	return NewPod(updateSet, ordinal, updateRevision)
}

// updateIdentity gives pod its name, namespace, pod-name and pod-index
// labels from its ordinal.
func updateIdentity(set *appsv1.StatefulSet, pod *corev1.Pod) {
	ord := Ordinal(pod)
	pod.Name = PodName(set, ord)
	pod.Namespace = set.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
}

// identityMatches: pod has the name, namespace and pod-name label of a
// member of set.
func identityMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	parent, ord := parentAndOrdinal(pod)
	return ord >= 0 && parent == set.Name && pod.Name == PodName(set, ord) &&
		pod.Namespace == set.Namespace && pod.Labels[appsv1.StatefulSetPodNameLabel] == pod.Name
}

// Claims are the claims the pod of ordinal uses, one per
// volumeClaimTemplate in order: the template named ClaimName in set's
// namespace, its labels plus the selector's matchLabels. No owner
// references are set.
func Claims(set *appsv1.StatefulSet, ordinal int) []*corev1.PersistentVolumeClaim {
	out := make([]*corev1.PersistentVolumeClaim, 0, len(set.Spec.VolumeClaimTemplates))
	var match map[string]string
	if set.Spec.Selector != nil {
		match = set.Spec.Selector.MatchLabels
	}
	for i := range set.Spec.VolumeClaimTemplates {
		claim := set.Spec.VolumeClaimTemplates[i].DeepCopy()
		claim.Name = ClaimName(set, set.Spec.VolumeClaimTemplates[i].Name, ordinal)
		claim.Namespace = set.Namespace
		if claim.Labels == nil && match != nil {
			claim.Labels = make(map[string]string, len(match))
		}
		for k, v := range match {
			claim.Labels[k] = v
		}
		out = append(out, claim)
	}
	return out
}

// updateStorage points pod's volumes named like a volumeClaimTemplate at
// the pod's claims; the claims' volumes come first, in template order,
// then the pod's other volumes.
func updateStorage(set *appsv1.StatefulSet, pod *corev1.Pod) {
	ord := Ordinal(pod)
	templates := map[string]bool{}
	volumes := make([]corev1.Volume, 0, len(pod.Spec.Volumes)+len(set.Spec.VolumeClaimTemplates))
	for _, t := range set.Spec.VolumeClaimTemplates {
		templates[t.Name] = true
		volumes = append(volumes, corev1.Volume{
			Name: t.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: ClaimName(set, t.Name, ord),
			}},
		})
	}
	for _, v := range pod.Spec.Volumes {
		if !templates[v.Name] {
			volumes = append(volumes, v)
		}
	}
	pod.Spec.Volumes = volumes
}

// storageMatches: every volumeClaimTemplate has a volume of its name that
// uses the pod's claim.
func storageMatches(set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	ord := Ordinal(pod)
	if ord < 0 {
		return false
	}
	byName := make(map[string]corev1.Volume, len(pod.Spec.Volumes))
	for _, v := range pod.Spec.Volumes {
		byName[v.Name] = v
	}
	for _, t := range set.Spec.VolumeClaimTemplates {
		v, ok := byName[t.Name]
		if !ok || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != ClaimName(set, t.Name, ord) {
			return false
		}
	}
	return true
}
