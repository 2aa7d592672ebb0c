package scheduler

import (
	"fmt"
	"sort"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons the filters give, exactly as upstream's plugins word them; the
// unschedulable message counts nodes per reason.
const (
	ReasonUnschedulable    = "node(s) were unschedulable"
	ReasonNodeName         = "node(s) didn't match the requested node name"
	ReasonUntoleratedTaint = "node(s) had untolerated taint(s)"
	ReasonNodeAffinity     = "node(s) didn't match Pod's node affinity/selector"
	ReasonTooManyPods      = "Too many pods"
	// ReasonAffinityConflict is the whole message part (not a per-node
	// reason) when the pod's required terms name disjoint node sets.
	ReasonAffinityConflict = "pod affinity terms conflict"
	// reasonPreFilterNodeAffinity is given to the nodes that the pod's
	// matchFields terms rule out before any filter runs.
	reasonPreFilterNodeAffinity = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
)

// insufficient is the reason for a resource the node lacks:
// "Insufficient cpu", "Insufficient memory", "Insufficient
// example.com/gpu".
func insufficient(name corev1.ResourceName) string {
	return "Insufficient " + string(name)
}

// Code says whether a rejection could be undone by evicting pods from the
// node (what upstream's preemption looks for).
type Code int

const (
	// Unschedulable: the node could take the pod if some of its pods
	// went.
	Unschedulable Code = iota + 1
	// UnschedulableAndUnresolvable: removing pods would not help.
	UnschedulableAndUnresolvable
)

// Status is why a node was rejected for a pod. Statuses are shared and
// must not be changed.
type Status struct {
	Code    Code
	Reasons []string
}

// Preallocated statuses of the filters that always give one reason.
var (
	statusUnschedulable    = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonUnschedulable}}
	statusNodeName         = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonNodeName}}
	statusUntoleratedTaint = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonUntoleratedTaint}}
	statusNodeAffinity     = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonNodeAffinity}}
	statusPreFilter        = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{reasonPreFilterNodeAffinity}}
)

// PodInfo is a pod with what the filters and the score need computed
// once. Build it with NewPodInfo; it must not be changed afterwards, and
// it reads Pod, which the caller must not change either.
type PodInfo struct {
	Pod *corev1.Pod
	Key types.NamespacedName
	// Priority is spec.priority, 0 when unset.
	Priority int32
	// Requests is what the filters count (PodRequests without defaults);
	// NonZero is what the score counts.
	Requests Resources
	NonZero  Resources
	affinity requiredAffinity
	// claims are the names of the PVCs the pod's volumes use, in the
	// pod's namespace; nil for a pod without any, which the volume
	// filters then skip at no cost.
	claims []string
}

// NewPodInfo computes pod's scheduling facts.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	pi := &PodInfo{
		Pod:      pod,
		Key:      types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		Requests: PodRequests(pod, false),
		NonZero:  PodRequests(pod, true),
		affinity: newRequiredAffinity(pod),
		claims:   podClaims(pod),
	}
	if pod.Spec.Priority != nil {
		pi.Priority = *pod.Spec.Priority
	}
	return pi
}

// A Filter decides whether node may take pod: nil means it may.
type Filter func(pod *PodInfo, node *NodeInfo) *Status

// Filters are the filters in the order the default scheduler runs them;
// a node is judged by the first that rejects it.
var Filters = []struct {
	Name   string
	Filter Filter
}{
	{"NodeUnschedulable", NodeUnschedulable},
	{"NodeName", NodeName},
	{"TaintToleration", TaintToleration},
	{"NodeAffinity", NodeAffinity},
	{"NodeResourcesFit", NodeResourcesFit},
}

// RunFilters applies Filters in order and returns the first rejection,
// or nil.
func RunFilters(pod *PodInfo, node *NodeInfo) *Status {
	for _, f := range Filters {
		if st := f.Filter(pod, node); st != nil {
			return st
		}
	}
	return nil
}

// unschedulableTaint is what a pod must tolerate to go to a cordoned
// node.
var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// NodeUnschedulable rejects a cordoned node (spec.unschedulable) unless
// the pod tolerates node.kubernetes.io/unschedulable:NoSchedule. It reads
// the spec field, not the taint, so it holds before the taint is added.
func NodeUnschedulable(pod *PodInfo, node *NodeInfo) *Status {
	if !node.Node.Spec.Unschedulable {
		return nil
	}
	if tolerates(pod.Pod.Spec.Tolerations, &unschedulableTaint) {
		return nil
	}
	return statusUnschedulable
}

// NodeName rejects every node but the one spec.nodeName names, when it
// names one.
func NodeName(pod *PodInfo, node *NodeInfo) *Status {
	if pod.Pod.Spec.NodeName == "" || pod.Pod.Spec.NodeName == node.Node.Name {
		return nil
	}
	return statusNodeName
}

// TaintToleration rejects a node with a NoSchedule or NoExecute taint the
// pod does not tolerate. PreferNoSchedule taints only matter to upstream's
// score, which knode does not have. Like upstream since late 2025, the
// reason does not name the taint: taints may be sensitive.
func TaintToleration(pod *PodInfo, node *NodeInfo) *Status {
	for i := range node.Node.Spec.Taints {
		t := &node.Node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(pod.Pod.Spec.Tolerations, t) {
			return statusUntoleratedTaint
		}
	}
	return nil
}

// tolerates reports whether any toleration tolerates the taint (without
// the alpha numeric comparison operators).
func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, false) {
			return true
		}
	}
	return false
}

// NodeAffinity rejects a node that lacks a label of spec.nodeSelector, or
// matches none of the required node affinity terms.
func NodeAffinity(pod *PodInfo, node *NodeInfo) *Status {
	if pod.affinity.match(node.Node) {
		return nil
	}
	return statusNodeAffinity
}

// NodeResourcesFit rejects a node whose pod count would pass
// allocatable pods, or that has less of a requested resource left
// (allocatable minus what its pods request) than the pod requests. Every
// shortfall is a reason; the code is UnschedulableAndUnresolvable when
// the pod asks for more than the node's whole allocatable of some
// resource, since evicting pods cannot help then.
func NodeResourcesFit(pod *PodInfo, node *NodeInfo) *Status {
	return fit(&pod.Requests, &node.Allocatable, &node.Requested, node.NumPods())
}

// fit is NodeResourcesFit over explicit amounts, so that the preemption
// check can ask it about a node without some of its pods.
func fit(req, alloc, used *Resources, pods int) *Status {
	var st *Status
	reject := func(reason string, unresolvable bool) {
		if st == nil {
			st = &Status{Code: Unschedulable}
		}
		st.Reasons = append(st.Reasons, reason)
		if unresolvable {
			st.Code = UnschedulableAndUnresolvable
		}
	}
	if int64(pods)+1 > alloc.Pods {
		reject(ReasonTooManyPods, false)
	}
	if req.isEmpty() {
		return st
	}
	if req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU {
		reject(insufficient(corev1.ResourceCPU), req.MilliCPU > alloc.MilliCPU)
	}
	if req.Memory > 0 && req.Memory > alloc.Memory-used.Memory {
		reject(insufficient(corev1.ResourceMemory), req.Memory > alloc.Memory)
	}
	if req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		reject(insufficient(corev1.ResourceEphemeralStorage), req.EphemeralStorage > alloc.EphemeralStorage)
	}
	if len(req.Scalar) > 0 {
		// Upstream walks a map here; sorting keeps the reasons stable.
		names := make([]corev1.ResourceName, 0, len(req.Scalar))
		for name, v := range req.Scalar {
			if v != 0 {
				names = append(names, name)
			}
		}
		sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
		for _, name := range names {
			v := req.Scalar[name]
			if v > alloc.Scalar[name]-used.Scalar[name] {
				reject(insufficient(name), v > alloc.Scalar[name])
			}
		}
	}
	return st
}

// requiredAffinity is a pod's spec.nodeSelector and required node
// affinity, parsed once.
type requiredAffinity struct {
	// nodeSelector is spec.nodeSelector as a list, cheaper to walk per
	// node than the map.
	nodeSelector []labelPair
	// required is false when the pod has no required node affinity;
	// then terms is ignored. With required set, no terms matches nothing.
	required bool
	terms    []nodeTerm
	// nodeNames, when not nil, are the only nodes the terms can match:
	// every term pins metadata.name with In. Empty means none can.
	nodeNames map[string]bool
}

type labelPair struct{ key, value string }

// nodeTerm is one node selector term: its expressions and fields are
// ANDed. A term with neither matches nothing; an invalid term fails the
// whole affinity, as upstream's lazy parser does.
type nodeTerm struct {
	invalid bool
	labels  labels.Selector // nil: no matchExpressions
	fields  []fieldTerm
}

// fieldTerm is a matchFields entry on metadata.name.
type fieldTerm struct {
	name string
	in   bool // In; else NotIn
}

func newRequiredAffinity(pod *corev1.Pod) requiredAffinity {
	var a requiredAffinity
	for k, v := range pod.Spec.NodeSelector {
		a.nodeSelector = append(a.nodeSelector, labelPair{k, v})
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return a
	}
	a.required = true
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		a.terms = append(a.terms, newNodeTerm(&terms[i]))
	}
	a.nodeNames = pinnedNodeNames(terms)
	return a
}

// newNodeTerm parses a term the way upstream's node affinity helper does.
func newNodeTerm(t *corev1.NodeSelectorTerm) nodeTerm {
	var nt nodeTerm
	if len(t.MatchExpressions) > 0 {
		sel := labels.NewSelector()
		for _, e := range t.MatchExpressions {
			op, ok := selectorOps[e.Operator]
			if !ok {
				return nodeTerm{invalid: true}
			}
			r, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				return nodeTerm{invalid: true}
			}
			sel = sel.Add(*r)
		}
		nt.labels = sel
	}
	for _, f := range t.MatchFields {
		if f.Key != metav1.ObjectNameField || len(f.Values) != 1 {
			return nodeTerm{invalid: true}
		}
		switch f.Operator {
		case corev1.NodeSelectorOpIn:
			nt.fields = append(nt.fields, fieldTerm{name: f.Values[0], in: true})
		case corev1.NodeSelectorOpNotIn:
			nt.fields = append(nt.fields, fieldTerm{name: f.Values[0]})
		default:
			return nodeTerm{invalid: true}
		}
	}
	return nt
}

var selectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// pinnedNodeNames is the set of nodes the terms can match when every term
// pins metadata.name with In (the union over terms of the intersection
// within each), as upstream's NodeAffinity PreFilter computes it; nil when
// some term leaves every node possible.
func pinnedNodeNames(terms []corev1.NodeSelectorTerm) map[string]bool {
	if len(terms) == 0 {
		return nil
	}
	union := map[string]bool{}
	for i := range terms {
		var inTerm map[string]bool
		for _, f := range terms[i].MatchFields {
			if f.Key != metav1.ObjectNameField || f.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			values := map[string]bool{}
			for _, v := range f.Values {
				if inTerm == nil || inTerm[v] {
					values[v] = true
				}
			}
			inTerm = values
		}
		if inTerm == nil {
			return nil
		}
		for name := range inTerm {
			union[name] = true
		}
	}
	return union
}

func (a *requiredAffinity) match(node *corev1.Node) bool {
	for _, l := range a.nodeSelector {
		if have, ok := node.Labels[l.key]; !ok || have != l.value {
			return false
		}
	}
	if !a.required {
		return true
	}
	for i := range a.terms {
		t := &a.terms[i]
		if t.invalid {
			return false
		}
		if t.matches(node) {
			return true
		}
	}
	return false
}

func (t *nodeTerm) matches(node *corev1.Node) bool {
	return t.matchesNode(node.Name, node.Labels)
}

// matchesNode matches the term against a node's name and labels; a
// volume's node affinity is matched with the labels alone (name "").
func (t *nodeTerm) matchesNode(name string, nodeLabels map[string]string) bool {
	if t.labels == nil && t.fields == nil {
		return false
	}
	if t.labels != nil && !t.labels.Matches(labels.Set(nodeLabels)) {
		return false
	}
	for _, f := range t.fields {
		if (name == f.name) != f.in {
			return false
		}
	}
	return true
}

// String shows a status as its code and reasons, for tests and logs.
func (s *Status) String() string {
	if s == nil {
		return "<fits>"
	}
	code := "Unschedulable"
	if s.Code == UnschedulableAndUnresolvable {
		code = "UnschedulableAndUnresolvable"
	}
	return fmt.Sprintf("%s%q", code, s.Reasons)
}
