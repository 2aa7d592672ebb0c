package cloudnode

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"knode/internal/cloudprovider"
)

// UninitializedGrace is how long the lifecycle check leaves alone a node
// that still waits for initialization and has no provider ID (upstream's
// uninitializedNodeDelay): the cloud may not know it yet.
const UninitializedGrace = time.Minute

// step is what the lifecycle check does with one node before asking the
// cloud anything.
type step int

const (
	// stepNone: Ready, nothing to do.
	stepNone step = iota
	// stepUntaint: Ready but still tainted shut down; remove the taint.
	stepUntaint
	// stepWait: not Ready, uninitialized and young; ask again later.
	stepWait
	// stepAskCloud: not Ready; ask whether the instance exists and is
	// shut down.
	stepAskCloud
)

func (s step) String() string {
	return [...]string{"none", "untaint", "wait", "ask-cloud"}[s]
}

// lifecycleStep decides what the lifecycle check does with a node at now.
// A node without a Ready condition counts as Unknown.
func lifecycleStep(n *corev1.Node, now time.Time) step {
	ready := corev1.ConditionUnknown
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status
		}
	}
	if ready == corev1.ConditionTrue {
		if hasTaint(n, cloudprovider.TaintShutdown, corev1.TaintEffectNoSchedule) {
			return stepUntaint
		}
		return stepNone
	}
	if n.Spec.ProviderID == "" && hasTaint(n, cloudprovider.TaintUninitialized, corev1.TaintEffectNoSchedule) &&
		now.Sub(n.CreationTimestamp.Time) < UninitializedGrace {
		return stepWait
	}
	return stepAskCloud
}

// cloudVerdict is what the lifecycle check does once the cloud answered.
type cloudVerdict int

const (
	verdictKeep   cloudVerdict = iota // the instance runs (or shutdown is unknown)
	verdictDelete                     // the instance is gone: delete the node
	verdictTaint                      // the instance is shut down: taint the node
)

// verdict combines the cloud's answers. shutdownKnown is false when the
// provider could not say (not implemented, or an error).
func verdict(exists, shutdown, shutdownKnown bool) cloudVerdict {
	switch {
	case !exists:
		return verdictDelete
	case shutdownKnown && shutdown:
		return verdictTaint
	default:
		return verdictKeep
	}
}

// shutdownTaint is the taint a shut-down node gets: no value and, as
// upstream's, no timeAdded.
var shutdownTaint = corev1.Taint{Key: cloudprovider.TaintShutdown, Effect: corev1.TaintEffectNoSchedule}

// hasTaint reports whether n carries the taint key:effect.
func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// isUninitialized reports whether n waits for the cloud-node controller
// (the taint key, whatever its effect).
func isUninitialized(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudprovider.TaintUninitialized {
			return true
		}
	}
	return false
}

// withTaint returns taints plus t, unless a taint with t's key and effect
// is there already.
func withTaint(taints []corev1.Taint, t corev1.Taint) []corev1.Taint {
	for _, have := range taints {
		if have.Key == t.Key && have.Effect == t.Effect {
			return taints
		}
	}
	return append(slices.Clone(taints), t)
}

// withoutTaint returns taints without those whose key matches and, if
// effect is not empty, whose effect matches.
func withoutTaint(taints []corev1.Taint, key string, effect corev1.TaintEffect) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(taints))
	for _, t := range taints {
		if t.Key == key && (effect == "" || t.Effect == effect) {
			continue
		}
		out = append(out, t)
	}
	return out
}

// kubernetesNamespace matches label keys under kubernetes.io or k8s.io,
// which a cloud's additional labels may not use (upstream's rule).
var kubernetesNamespace = regexp.MustCompile(`(^|\.)(kubernetes|k8s)\.io/`)

// initialize applies instance metadata to a copy of n as the cloud-node
// controller does when it initializes a node: provider ID (only if the
// node has none), instance type, zone and region labels under their
// stable and beta keys, additional labels the node does not have yet
// (never in the Kubernetes namespaces), and no uninitialized taint.
// Addresses go through the status and are handled by addresses.
func initialize(n *corev1.Node, md *cloudprovider.InstanceMetadata) *corev1.Node {
	out := n.DeepCopy()
	if out.Spec.ProviderID == "" {
		out.Spec.ProviderID = md.ProviderID
	}
	set := func(value string, keys ...string) {
		if value == "" {
			return
		}
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		for _, k := range keys {
			out.Labels[k] = value
		}
	}
	set(md.InstanceType, corev1.LabelInstanceType, corev1.LabelInstanceTypeStable)
	set(md.Zone, corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyZone)
	set(md.Region, corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyRegion)
	for k, v := range md.AdditionalLabels {
		if kubernetesNamespace.MatchString(k) {
			continue
		}
		if _, taken := out.Labels[k]; taken {
			continue
		}
		set(v, k)
	}
	out.Spec.Taints = withoutTaint(out.Spec.Taints, cloudprovider.TaintUninitialized, "")
	return out
}

// addresses returns the status addresses a node should have given the
// cloud's, or nil if the cloud gave none (the node's stay). The node's
// Hostname address is kept if the cloud has none. If the kubelet was given
// --node-ip (the provided-node-ip annotation, one IP or a dual-stack
// pair), every such IP must be among the cloud's addresses; the matching
// addresses come first and replace the cloud's other addresses of their
// types.
func addresses(n *corev1.Node, cloud []corev1.NodeAddress) ([]corev1.NodeAddress, error) {
	if len(cloud) == 0 {
		return nil, nil
	}
	out := slices.Clone(cloud)
	if !slices.ContainsFunc(out, func(a corev1.NodeAddress) bool { return a.Type == corev1.NodeHostName }) {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeHostName {
				out = append(out, a)
			}
		}
	}
	provided, ok := n.Annotations[cloudprovider.AnnotationProvidedNodeIP]
	if !ok {
		return out, nil
	}
	var ips []string
	for _, s := range strings.Split(provided, ",") {
		ip := netutils.ParseIPSloppy(strings.TrimSpace(s))
		if ip == nil || len(ips) == 2 {
			return nil, fmt.Errorf("failed to parse node IP %q", provided)
		}
		ips = append(ips, ip.String())
	}
	var kept []corev1.NodeAddress
	types := map[corev1.NodeAddressType]bool{}
	for _, ip := range ips {
		matched := false
		for _, a := range out {
			if parsed := netutils.ParseIPSloppy(a.Address); parsed != nil && parsed.String() == ip {
				kept = append(kept, a)
				types[a.Type] = true
				matched = true
			}
		}
		if !matched {
			return nil, fmt.Errorf("failed to get node address from cloud provider that matches ip: %s", ip)
		}
	}
	for _, a := range out {
		if !types[a.Type] {
			kept = append(kept, a)
		}
	}
	return kept, nil
}
