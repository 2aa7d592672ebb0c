package pods

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Admission reasons a rejected pod carries in status.reason; the strings
// are the kubelet's.
const (
	ReasonOutOfCPU                           = "OutOfcpu"
	ReasonOutOfMemory                        = "OutOfmemory"
	ReasonOutOfEphemeralStorage              = "OutOfephemeral-storage"
	ReasonOutOfPods                          = "OutOfpods"
	ReasonNodeAffinity                       = "NodeAffinity"
	ReasonNodePorts                          = "NodePorts"
	ReasonTaintToleration                    = "TaintToleration"
	ReasonPodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonPodOSNotSupported                  = "PodOSNotSupported"

	// reasonPrefixOutOf prefixes the resource name for other resources.
	reasonPrefixOutOf = "OutOf"
	// RejectedMessagePrefix starts the status.message of a rejected pod.
	RejectedMessagePrefix = "Pod was rejected: "
)

// The scheduler filters' words, which the kubelet reuses.
const (
	nodeAffinityDesc    = "node(s) didn't match Pod's node affinity/selector"
	nodePortsDesc       = "node(s) didn't have free ports for the requested pod ports"
	taintTolerationDesc = "node(s) had taints that the pod didn't tolerate"
)

// Rejection is why a pod may not run on this node. Message is the
// kubelet's, without RejectedMessagePrefix.
type Rejection struct {
	Reason  string
	Message string
}

// Admit decides whether pod may run on node beside others, the pods
// already admitted here that have not finished, as the kubelet's predicate
// admission does. It checks, stopping at the first failure: the
// kubernetes.io/os label and spec.os against this OS; the pod count and
// resource requests against allocatable; the node selector and required
// node affinity; host ports; NoExecute taints. A nil result admits the pod.
func Admit(pod *corev1.Pod, node *corev1.Node, allocatable corev1.ResourceList, others []*corev1.Pod) *Rejection {
	// The node's OS label is taken to be this OS whatever it says, as
	// the kubelet does.
	if os, ok := pod.Labels[corev1.LabelOSStable]; ok {
		if os != goruntime.GOOS {
			return &Rejection{ReasonPodOSSelectorNodeLabelDoesNotMatch, "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
		}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != goruntime.GOOS {
		return &Rejection{ReasonPodOSNotSupported, "Failed to admit pod as the OS field doesn't match node OS"}
	}
	if r := fitResources(pod, allocatable, others); r != nil {
		return r
	}
	if !MatchesNode(pod, node) {
		return predicateFailure(ReasonNodeAffinity, nodeAffinityDesc)
	}
	if portsConflict(pod, others) {
		return predicateFailure(ReasonNodePorts, nodePortsDesc)
	}
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect == corev1.TaintEffectNoExecute && !tolerated(pod.Spec.Tolerations, taint) {
			return predicateFailure(ReasonTaintToleration, taintTolerationDesc)
		}
	}
	return nil
}

func predicateFailure(name, desc string) *Rejection {
	return &Rejection{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, desc)}
}

func tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, false) {
			return true
		}
	}
	return false
}

// fitResources is the NodeResourcesFit check as the kubelet reports it:
// the first resource short, with amounts in the kubelet's units (cpu in
// millicores, everything else in its base unit).
func fitResources(pod *corev1.Pod, allocatable corev1.ResourceList, others []*corev1.Pod) *Rejection {
	capacity := func(name corev1.ResourceName) int64 { return amount(name, allocatable[name]) }
	if maxPods := capacity(corev1.ResourcePods); int64(len(others))+1 > maxPods {
		return insufficient(corev1.ResourcePods, 1, int64(len(others)), maxPods)
	}
	want := Requests(pod)
	// Extended resources the node does not have are ignored, as upstream
	// does for resources managed outside the node.
	for name := range want {
		if isExtended(name) {
			if _, ok := allocatable[name]; !ok {
				delete(want, name)
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	used := map[corev1.ResourceName]int64{}
	for _, o := range others {
		for name, v := range Requests(o) {
			used[name] += v
		}
	}
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	var scalars []corev1.ResourceName
	for name := range want {
		if !slices.Contains(names, name) {
			scalars = append(scalars, name)
		}
	}
	slices.Sort(scalars)
	for _, name := range append(names, scalars...) {
		req := want[name]
		if req > 0 && req > capacity(name)-used[name] {
			return insufficient(name, req, used[name], capacity(name))
		}
	}
	return nil
}

func insufficient(name corev1.ResourceName, requested, used, capacity int64) *Rejection {
	reason := reasonPrefixOutOf + string(name)
	return &Rejection{
		Reason:  reason,
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, requested, used, capacity),
	}
}

// isExtended reports whether name is an extended resource: one in a
// domain other than kubernetes.io, and not a requests.* quota name.
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.HasPrefix(s, "requests.") {
		return false
	}
	domain, _, _ := strings.Cut(s, "/")
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

// amount is a quantity in the kubelet's unit for name: millicores for cpu,
// the base unit otherwise.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// Requests is what pod asks of a node, per resource, in the units of
// amount: the larger of the regular containers (plus sidecars) and the
// largest init container (plus the sidecars started before it), plus the
// pod overhead. Pod-level requests, when given, replace the containers'
// for the resources they name.
func Requests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	reqs := map[corev1.ResourceName]int64{}
	addAll := func(dst map[corev1.ResourceName]int64, list corev1.ResourceList) {
		for name, q := range list {
			dst[name] += amount(name, q)
		}
	}
	for _, c := range pod.Spec.Containers {
		addAll(reqs, c.Resources.Requests)
	}
	sidecars := map[corev1.ResourceName]int64{}
	initMax := map[corev1.ResourceName]int64{}
	for _, c := range pod.Spec.InitContainers {
		this := map[corev1.ResourceName]int64{}
		addAll(this, c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addAll(reqs, c.Resources.Requests)
			addAll(sidecars, c.Resources.Requests)
			this = sidecars
		} else {
			for name, v := range sidecars {
				this[name] += v
			}
		}
		for name, v := range this {
			initMax[name] = max(initMax[name], v)
		}
	}
	for name, v := range initMax {
		reqs[name] = max(reqs[name], v)
	}
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				reqs[name] = amount(name, q)
			}
		}
	}
	addAll(reqs, pod.Spec.Overhead)
	for name, v := range reqs {
		if v == 0 {
			delete(reqs, name)
		}
	}
	return reqs
}

// MatchesNode reports whether node satisfies pod's nodeSelector and its
// required node affinity.
func MatchesNode(pod *corev1.Pod, node *corev1.Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if have, ok := node.Labels[k]; !ok || have != v {
			return false
		}
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

// termMatches: every expression holds on the labels and every field
// requirement on the fields (only metadata.name); an empty term matches
// nothing.
func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, r := range term.MatchExpressions {
		if !requirementHolds(r, node.Labels) {
			return false
		}
	}
	for _, r := range term.MatchFields {
		if r.Key != "metadata.name" || (r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn) {
			return false
		}
		if !requirementHolds(r, map[string]string{"metadata.name": node.Name}) {
			return false
		}
	}
	return true
}

func requirementHolds(r corev1.NodeSelectorRequirement, labels map[string]string) bool {
	value, has := labels[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !has || !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// portsConflict reports whether one of pod's host ports is taken by
// another pod (same protocol and port, and the same host IP or a wildcard
// on either side).
func portsConflict(pod *corev1.Pod, others []*corev1.Pod) bool {
	type hostPort struct {
		ip       string
		protocol corev1.Protocol
		port     int32
	}
	ports := func(p *corev1.Pod) []hostPort {
		var out []hostPort
		for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range list {
				for _, cp := range c.Ports {
					if cp.HostPort <= 0 {
						continue
					}
					proto := cp.Protocol
					if proto == "" {
						proto = corev1.ProtocolTCP
					}
					ip := cp.HostIP
					if ip == "" {
						ip = "0.0.0.0"
					}
					out = append(out, hostPort{ip, proto, cp.HostPort})
				}
			}
		}
		return out
	}
	mine := ports(pod)
	if len(mine) == 0 {
		return false
	}
	for _, o := range others {
		for _, theirs := range ports(o) {
			for _, want := range mine {
				if want.protocol == theirs.protocol && want.port == theirs.port &&
					(want.ip == theirs.ip || want.ip == "0.0.0.0" || theirs.ip == "0.0.0.0") {
					return true
				}
			}
		}
	}
	return false
}
