package daemonset

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"

	"knode/internal/controller/ownership"
	"knode/internal/controller/podstate"
	dsreg "knode/internal/registry/daemonset"
)

// Labels the controller puts on the pods it creates, upstream's.
const (
	// LabelHash carries the hash of the template the pod was made from.
	LabelHash = appsv1.DefaultDaemonSetUniqueLabelKey
	// LabelTemplateGeneration carries the DaemonSet's template generation.
	LabelTemplateGeneration = "pod-template-generation"
)

// BurstReplicas caps the pods one pass creates or deletes for one
// DaemonSet.
const BurstReplicas = 250

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// NodeShuttingDownMessage is the phrase an agent puts in its node's Ready
// message while the node shuts down gracefully. The message may hold other
// errors beside it ("[container runtime is down, node is shutting down]").
const NodeShuttingDownMessage = "node is shutting down"

// notReadyReason is the reason an agent gives a Ready condition that is
// False.
const notReadyReason = "KubeletNotReady"

// ShuttingDown reports whether node is shutting down gracefully: its
// Ready condition is False with reason KubeletNotReady and a message that
// contains NodeShuttingDownMessage. Ready Unknown (the agent is silent),
// True, or absent is not shutting down, whatever the message says. An
// agent that is shutting down rejects new pods, so Manage creates none
// there.
func ShuttingDown(node *corev1.Node) bool {
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionFalse && c.Reason == notReadyReason &&
				strings.Contains(c.Message, NodeShuttingDownMessage)
		}
	}
	return false
}

// AddTolerations gives a daemon pod spec the tolerations every DaemonSet
// pod gets (section 6.4 of the reference), all operator Exists without
// tolerationSeconds: not-ready and unreachable NoExecute; disk-pressure,
// memory-pressure, pid-pressure and unschedulable NoSchedule; and
// network-unavailable NoSchedule for host-network pods. A toleration the
// spec already has with the same key, operator, value and effect is
// replaced by the plain one (so a tolerationSeconds on it goes), as
// upstream.
func AddTolerations(spec *corev1.PodSpec) {
	add := func(key string, effect corev1.TaintEffect) {
		t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
		for i := range spec.Tolerations {
			if t.MatchToleration(&spec.Tolerations[i]) {
				spec.Tolerations[i] = t
				return
			}
		}
		spec.Tolerations = append(spec.Tolerations, t)
	}
	add(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)
	add(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	add(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)
	if spec.HostNetwork {
		add(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)
	}
}

// ShouldRun decides whether ds wants a pod on node, as upstream's
// NodeShouldRunDaemonPod: run when the template's nodeName (if any), node
// selector and required node affinity match the node and the pod, with
// AddTolerations applied, tolerates the node's NoSchedule and NoExecute
// taints. keep says whether a daemon pod already there may stay: it may
// when everything but NoSchedule taints matches.
//
// A cordoned node carries node.kubernetes.io/unschedulable:NoSchedule,
// which daemon pods tolerate; spec.unschedulable itself is not looked at.
func ShouldRun(ds *appsv1.DaemonSet, node *corev1.Node) (run, keep bool) {
	spec := ds.Spec.Template.Spec.DeepCopy()
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false, false
	}
	if !MatchesNode(spec, node) {
		return false, false
	}
	AddTolerations(spec)
	if _, bad := untolerated(node.Spec.Taints, spec.Tolerations, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute); !bad {
		return true, true
	}
	_, badNoExecute := untolerated(node.Spec.Taints, spec.Tolerations, corev1.TaintEffectNoExecute)
	return false, !badNoExecute
}

// untolerated finds the first taint with one of effects that no toleration
// tolerates.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration, effects ...corev1.TaintEffect) (corev1.Taint, bool) {
	for _, taint := range taints {
		considered := false
		for _, e := range effects {
			considered = considered || taint.Effect == e
		}
		if !considered {
			continue
		}
		ok := false
		for i := range tolerations {
			if Tolerates(&tolerations[i], &taint) {
				ok = true
				break
			}
		}
		if !ok {
			return taint, true
		}
	}
	return corev1.Taint{}, false
}

// Tolerates is the toleration rule: an effect, when set, must equal the
// taint's; a key, when set, must equal the taint's (an empty key with
// Exists tolerates every key); Exists matches any value, Equal (or no
// operator) an equal value.
func Tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return t.Value == taint.Value
	}
	return false
}

// MatchesNode reports whether spec's nodeSelector and required node
// affinity match node: every nodeSelector label present with its value,
// and (when set) one of the required terms matching, where a term matches
// when all its expressions and fields do and an empty term matches
// nothing.
func MatchesNode(spec *corev1.PodSpec, node *corev1.Node) bool {
	for k, v := range spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(&term, node) {
			return true
		}
	}
	return false
}

var operators = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

func termMatches(term *corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, e := range term.MatchExpressions {
		op, ok := operators[e.Operator]
		if !ok {
			return false
		}
		req, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil || !req.Matches(labels.Set(node.Labels)) {
			return false
		}
	}
	for _, f := range term.MatchFields {
		if f.Key != metav1.ObjectNameField {
			return false
		}
		in := false
		for _, v := range f.Values {
			in = in || v == node.Name
		}
		switch f.Operator {
		case corev1.NodeSelectorOpIn:
			if !in {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if in {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// TargetNode is the node a daemon pod is for: spec.nodeName once bound,
// otherwise the metadata.name In [node] field term of its required node
// affinity; "" when it names none.
func TargetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// Hash is the hash of ds's template that the controller-revision-hash
// label of its current pods carries: stable for equal templates, short,
// and safe in a label value.
func Hash(ds *appsv1.DaemonSet) string {
	b, _ := json.Marshal(&ds.Spec.Template)
	h := fnv.New32a()
	h.Write(b)
	if ds.Status.CollisionCount != nil {
		fmt.Fprint(h, *ds.Status.CollisionCount)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// NewPod is the pod ds creates for node: the template with AddTolerations,
// the hash and template-generation labels, and required node affinity to
// exactly that node (matchFields metadata.name In [node], replacing any
// required terms the template has), named <ds>-<random> with ds as
// controller. spec.nodeName stays empty: the scheduler binds it.
func NewPod(ds *appsv1.DaemonSet, node, hash string) *corev1.Pod {
	t := ds.Spec.Template.DeepCopy()
	AddTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[LabelTemplateGeneration] = strconv.FormatInt(dsreg.TemplateGeneration(ds), 10)
	t.Labels[LabelHash] = hash
	t.Spec.Affinity = pinToNode(t.Spec.Affinity, node)
	prefix := ds.Name + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		prefix = ds.Name
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       ds.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Spec: t.Spec,
	}
}

// pinToNode sets the required node affinity to the one term
// metadata.name In [node], keeping preferred terms and pod affinities.
func pinToNode(a *corev1.Affinity, node string) *corev1.Affinity {
	term := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
	}}}
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
	return a
}

// Updated reports whether pod was made from ds's current template: its
// hash label is hash, or its template-generation label is ds's.
func Updated(ds *appsv1.DaemonSet, pod *corev1.Pod, hash string) bool {
	if hash != "" && pod.Labels[LabelHash] == hash {
		return true
	}
	gen, ok := ds.Annotations[appsv1.DeprecatedTemplateGeneration]
	return ok && pod.Labels[LabelTemplateGeneration] == gen
}

// Claim is how the pods of a DaemonSet's namespace relate to it.
type Claim struct {
	// ByNode are the pods it controls and selects, by target node,
	// oldest (and bound) first; finished pods that are being deleted are
	// left out.
	ByNode map[string][]*corev1.Pod
	// Adopt are orphans the selector matches that are not being deleted.
	Adopt []*corev1.Pod
	// Release are pods it controls that its selector no longer matches.
	Release []*corev1.Pod
}

// ClaimPods sorts pods (those of ds's namespace) as upstream's claim does.
// Adoptable pods are not in ByNode; the caller adds them once adopted.
func ClaimPods(ds *appsv1.DaemonSet, pods []*corev1.Pod) Claim {
	c := Claim{ByNode: map[string][]*corev1.Pod{}}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return c
	}
	for _, pod := range pods {
		switch ownership.Relate(ds, sel, pod) {
		case ownership.Stray:
			c.Release = append(c.Release, pod)
		case ownership.Owned:
			c.Add(pod)
		case ownership.Orphan:
			if pod.DeletionTimestamp == nil {
				c.Adopt = append(c.Adopt, pod)
			}
		}
	}
	for _, pods := range c.ByNode {
		sortOldestFirst(pods)
	}
	return c
}

// Add puts an owned pod in ByNode, unless it is finished and being
// deleted.
func (c *Claim) Add(pod *corev1.Pod) {
	if finished(pod) && pod.DeletionTimestamp != nil {
		return
	}
	node := TargetNode(pod)
	c.ByNode[node] = append(c.ByNode[node], pod)
}

// sortOldestFirst orders a node's pods bound first, then by creation time
// and name (upstream's podByCreationTimestampAndPhase).
func sortOldestFirst(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			return a.Spec.NodeName != ""
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// Plan is what one pass does for one DaemonSet.
type Plan struct {
	// CreateOn names the nodes that need a daemon pod, sorted.
	CreateOn []string
	// Delete are pods to delete now: surplus pods on a node (all but the
	// oldest), pods on nodes the DaemonSet must leave, finished
	// (Succeeded) pods, and unbound pods for nodes that do not exist.
	Delete []*corev1.Pod
	// Failed are failed daemon pods to delete, subject to the caller's
	// back-off per node.
	Failed []*corev1.Pod
}

// Manage decides, for each node, what upstream's manage loop does, except
// that a node that is ShuttingDown gets no new pod: its agent would reject
// it (upstream's pile-up of NodeShutdown pods, kubernetes#100184 and
// #130490). The pods already there are handled as on any node, so a
// failed one is still deleted, but nothing replaces it until the node is
// Ready again. nodes are all the cluster's nodes; byNode is Claim.ByNode.
func Manage(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod) Plan {
	var p Plan
	known := map[string]bool{}
	for _, node := range nodes {
		known[node.Name] = true
		run, keep := ShouldRun(ds, node)
		pods := byNode[node.Name]
		switch {
		case run && len(pods) == 0 && ShuttingDown(node):
			// Wanted but not created yet; Status still counts it.
		case run && len(pods) == 0:
			p.CreateOn = append(p.CreateOn, node.Name)
		case keep:
			var running []*corev1.Pod
			for _, pod := range pods {
				switch {
				case pod.DeletionTimestamp != nil:
				case pod.Status.Phase == corev1.PodFailed:
					p.Failed = append(p.Failed, pod)
				case pod.Status.Phase == corev1.PodSucceeded:
					p.Delete = append(p.Delete, pod)
				default:
					running = append(running, pod)
				}
			}
			// Pods are oldest first: keep the first.
			if len(running) > 1 {
				p.Delete = append(p.Delete, running[1:]...)
			}
		case len(pods) > 0:
			for _, pod := range pods {
				if pod.DeletionTimestamp == nil {
					p.Delete = append(p.Delete, pod)
				}
			}
		}
	}
	for node, pods := range byNode {
		if known[node] {
			continue
		}
		for _, pod := range pods {
			if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
				p.Delete = append(p.Delete, pod)
			}
		}
	}
	sort.Strings(p.CreateOn)
	sortByName(p.Delete)
	sortByName(p.Failed)
	if len(p.CreateOn) > BurstReplicas {
		p.CreateOn = p.CreateOn[:BurstReplicas]
	}
	return p
}

func sortByName(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
}

// RollingUpdate picks the old pods to delete so that new ones replace
// them, keeping at most maxUnavailable (of the nodes that should run a
// pod, rounded up, at least 1) daemon pods unavailable, as upstream's
// rolling update without surge: old pods that are not available go first
// and do not count; then available old pods while the budget lasts. A
// node with several pods, or with none, counts as unavailable and is left
// to Manage. Only RollingUpdate DaemonSets update; maxSurge is treated as
// 0.
func RollingUpdate(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) []*corev1.Pod {
	s := ds.Spec.UpdateStrategy
	if s.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return nil
	}
	desired := 0
	for _, node := range nodes {
		if run, _ := ShouldRun(ds, node); run {
			desired++
		}
	}
	maxUnavailable := 1
	if s.RollingUpdate != nil && s.RollingUpdate.MaxUnavailable != nil {
		if v, err := intstr.GetScaledValueFromIntOrPercent(s.RollingUpdate.MaxUnavailable, desired, true); err == nil && v > 0 {
			maxUnavailable = v
		}
	}
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	unavailable := 0
	var replace, candidates []*corev1.Pod
	names := make([]string, 0, len(byNode))
	for n := range byNode {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		newPod, oldPod, ok := splitByTemplate(ds, byNode[n], hash)
		switch {
		case !ok, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			unavailable++
		case newPod != nil:
			if !podstate.Available(newPod, minReady, now) {
				unavailable++
			}
		case !podstate.Available(oldPod, minReady, now):
			replace = append(replace, oldPod)
		default:
			candidates = append(candidates, oldPod)
		}
	}
	room := max(maxUnavailable-unavailable, 0)
	room = min(room, len(candidates))
	return append(replace, candidates[:room]...)
}

// splitByTemplate finds a node's one current and one old pod, ignoring
// pods being deleted; ok is false when there are two of either.
func splitByTemplate(ds *appsv1.DaemonSet, pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if Updated(ds, pod, hash) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// Status is ds's status at now (upstream's updateDaemonSetStatus): over
// the nodes that should run a pod, desiredNumberScheduled; those that have
// one, currentNumberScheduled, and of their oldest pods the Ready
// (numberReady), available for minReadySeconds (numberAvailable) and
// current-template (updatedNumberScheduled) ones; numberMisscheduled
// counts nodes that have a pod but should not; numberUnavailable is
// desired - available. next is when a Ready pod becomes available (zero:
// none pending).
//
// A node that is ShuttingDown is counted like any node that should run a
// pod but does not have one yet (as one past BurstReplicas, say): it is in
// desiredNumberScheduled, in currentNumberScheduled only if a pod is still
// there, and in numberUnavailable while no available pod is; shutting down
// alone never makes it misscheduled. ShouldRun, and so RollingUpdate's
// maxUnavailable base, is unchanged too: shutting down defers a create, it
// does not make the node ineligible.
func Status(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string, now time.Time) (s appsv1.DaemonSetStatus, next time.Time) {
	s = *ds.Status.DeepCopy()
	var desired, current, ready, available, updated, mis int32
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	for _, node := range nodes {
		run, _ := ShouldRun(ds, node)
		pods := byNode[node.Name]
		if !run {
			if len(pods) > 0 {
				mis++
			}
			continue
		}
		desired++
		if len(pods) == 0 {
			continue
		}
		current++
		pod := pods[0]
		if podstate.Ready(pod) {
			ready++
			if at, ok := podstate.AvailableAt(pod, minReady); ok && (minReady == 0 || at.Before(now)) {
				available++
			} else if ok && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		if Updated(ds, pod, hash) {
			updated++
		}
	}
	s.DesiredNumberScheduled = desired
	s.CurrentNumberScheduled = current
	s.NumberReady = ready
	s.NumberAvailable = available
	s.UpdatedNumberScheduled = updated
	s.NumberMisscheduled = mis
	s.NumberUnavailable = desired - available
	s.ObservedGeneration = ds.Generation
	return s, next
}

// StatusEqual reports whether writing b over a would change nothing.
func StatusEqual(a, b appsv1.DaemonSetStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
