package pods

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/agent/runtime"
)

// Condition reasons and messages the kubelet writes; the strings are
// upstream's.
const (
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonPodCompleted             = "PodCompleted"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	// PodReadyToStartContainers is the condition that the pod's sandbox
	// is ready (on by default since 1.29).
	PodReadyToStartContainers corev1.PodConditionType = "PodReadyToStartContainers"

	messageContainerStatusUnknown = "The container could not be located when the pod was terminated"
	exitCodeStatusUnknown         = 137
)

// kubeletConditions are the condition types the agent owns on a pod; any
// other condition (DisruptionTarget, readiness gates) is kept as found.
var kubeletConditions = []corev1.PodConditionType{
	PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled,
}

// View is what BuildStatus reads besides the pod and the runtime's status.
type View struct {
	// HostIPs are the node's addresses, primary first.
	HostIPs []string
	// PodNetwork says the runtime gives pods networks of their own: a pod's
	// IPs are its sandbox's (runtime.PodStatus.IPs), except for hostNetwork
	// pods. Without it every pod shares the host's network and addresses.
	PodNetwork bool
	// Probes gives a running container's started and ready from its
	// probes; nil means no probes run: a running container is both.
	Probes func(uid types.UID, container string) (started, ready bool)
}

// podIPs are the pod's addresses: its sandbox's with a pod network (the
// ones last reported while the sandbox has none yet, or none any more),
// the host's otherwise.
func (v View) podIPs(pod *corev1.Pod, rs runtime.PodStatus) []string {
	if !v.PodNetwork || pod.Spec.HostNetwork {
		return v.HostIPs
	}
	if len(rs.IPs) > 0 {
		return rs.IPs
	}
	var old []string
	for _, ip := range pod.Status.PodIPs {
		old = append(old, ip.IP)
	}
	if len(old) == 0 && pod.Status.PodIP != "" {
		old = []string{pod.Status.PodIP}
	}
	return old
}

// BuildStatus is pod's API status from the runtime's view rs at now, on a
// node seen as v. terminal says the pod is done here (deleted and
// stopped): the phase is then Succeeded or Failed, and containers still
// waiting are reported terminated.
func BuildStatus(pod *corev1.Pod, rs runtime.PodStatus, v View, terminal bool, now time.Time) corev1.PodStatus {
	old := &pod.Status
	st := corev1.PodStatus{
		QOSClass:          old.QOSClass,
		NominatedNodeName: old.NominatedNodeName,
		StartTime:         old.StartTime,
	}
	if st.StartTime == nil {
		st.StartTime = ptr.To(metav1.NewTime(now))
	}
	for i, ip := range v.HostIPs {
		if i == 0 {
			st.HostIP = ip
		}
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
	}
	for i, ip := range v.podIPs(pod, rs) {
		if i == 0 {
			st.PodIP = ip
		}
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
	}
	st.InitContainerStatuses = containerStatuses(pod.UID, pod.Spec.InitContainers, rs.InitContainers, v.Probes, terminal)
	st.ContainerStatuses = containerStatuses(pod.UID, pod.Spec.Containers, rs.Containers, v.Probes, terminal)
	st.Phase = Phase(&pod.Spec, st.InitContainerStatuses, st.ContainerStatuses, terminal)

	var conds []corev1.PodCondition
	for _, c := range old.Conditions {
		if !isKubeletCondition(c.Type) {
			conds = append(conds, c)
		}
	}
	initialized := initializedCondition(&pod.Spec, st.InitContainerStatuses, st.Phase)
	containersReady := containersReadyCondition(&pod.Spec, st.InitContainerStatuses, st.ContainerStatuses, st.Phase)
	ready := containersReady
	ready.Type = corev1.PodReady
	if ready.Status == corev1.ConditionTrue {
		ready = readinessGates(&pod.Spec, old.Conditions, ready)
	}
	sandbox := corev1.ConditionTrue
	if rs.Stopped() {
		sandbox = corev1.ConditionFalse
	}
	conds = append(conds,
		corev1.PodCondition{Type: PodReadyToStartContainers, Status: sandbox},
		initialized,
		ready,
		containersReady,
		corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	)
	for i := range conds {
		if isKubeletCondition(conds[i].Type) {
			conds[i].LastTransitionTime = transitionTime(old.Conditions, conds[i], now)
		}
	}
	st.Conditions = conds
	normalizeTimes(&st)
	return st
}

func isKubeletCondition(t corev1.PodConditionType) bool {
	for _, k := range kubeletConditions {
		if t == k {
			return true
		}
	}
	return false
}

// transitionTime keeps the old condition's time while its status holds.
func transitionTime(old []corev1.PodCondition, c corev1.PodCondition, now time.Time) metav1.Time {
	for _, o := range old {
		if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
			return o.LastTransitionTime
		}
	}
	return metav1.NewTime(now)
}

// containerStatuses pairs the spec's containers with the runtime's; a
// container the runtime does not report is waiting to be created.
func containerStatuses(uid types.UID, specs []corev1.Container, have []runtime.ContainerStatus, probes func(types.UID, string) (bool, bool), terminal bool) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for _, spec := range specs {
		cs := corev1.ContainerStatus{
			Name:    spec.Name,
			Image:   spec.Image,
			State:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: runtime.ReasonContainerCreating}},
			Started: ptr.To(false),
		}
		for _, h := range have {
			if h.Name != spec.Name {
				continue
			}
			cs.ContainerID = h.ID
			cs.State = *h.State.DeepCopy()
			cs.LastTerminationState = *h.LastTerminationState.DeepCopy()
			cs.RestartCount = h.RestartCount
		}
		if terminal && cs.State.Waiting != nil {
			// A finished pod has no waiting containers: the last run's end
			// stands, or an unknown end for one that never ran.
			if cs.LastTerminationState.Terminated != nil {
				cs.State, cs.LastTerminationState = cs.LastTerminationState, corev1.ContainerState{}
			} else {
				cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: exitCodeStatusUnknown,
					Reason:   runtime.ReasonContainerStatusUnknown,
					Message:  messageContainerStatusUnknown,
				}}
			}
		}
		running := cs.State.Running != nil
		started, ready := running, running
		if running && probes != nil {
			started, ready = probes(uid, spec.Name)
		}
		cs.Started = ptr.To(started)
		cs.Ready = ready
		out = append(out, cs)
	}
	return out
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// Phase is the pod phase the kubelet derives from its containers.
func Phase(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, terminal bool) corev1.PodPhase {
	pendingInit, failedInit := 0, 0
	for i, cs := range initStatuses {
		if isSidecar(&spec.InitContainers[i]) {
			if cs.State.Running == nil && cs.State.Terminated == nil && cs.LastTerminationState.Terminated == nil {
				pendingInit++
			}
			continue
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
		case cs.State.Terminated != nil:
			failedInit++
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0:
			failedInit++
		default:
			pendingInit++
		}
	}
	var waiting, running, stopped, succeeded int
	for _, cs := range statuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	policy := spec.RestartPolicy
	if policy == "" {
		policy = corev1.RestartPolicyAlways
	}
	switch {
	case failedInit > 0 && policy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	case terminal:
		if running == 0 && waiting == 0 && stopped > 0 && stopped == succeeded && failedInit == 0 {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	case pendingInit > 0 || failedInit > 0:
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch {
		case policy == corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case stopped == succeeded:
			return corev1.PodSucceeded
		case policy == corev1.RestartPolicyNever:
			return corev1.PodFailed
		}
		return corev1.PodRunning
	}
	return corev1.PodPending
}

func initializedCondition(spec *corev1.PodSpec, initStatuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
	if phase == corev1.PodSucceeded {
		c.Reason = ReasonPodCompleted
		return c
	}
	var pending []string
	for i, cs := range initStatuses {
		done := cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		if isSidecar(&spec.InitContainers[i]) {
			done = cs.State.Running != nil || cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil
		}
		if !done {
			pending = append(pending, cs.Name)
		}
	}
	if len(pending) > 0 {
		c.Status = corev1.ConditionFalse
		c.Reason = ReasonContainersNotInitialized
		c.Message = fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(pending, " "))
	}
	return c
}

func containersReadyCondition(spec *corev1.PodSpec, initStatuses, statuses []corev1.ContainerStatus, phase corev1.PodPhase) corev1.PodCondition {
	c := corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
	if phase == corev1.PodSucceeded {
		c.Status, c.Reason = corev1.ConditionFalse, ReasonPodCompleted
		return c
	}
	var unready []string
	for i, cs := range initStatuses {
		if isSidecar(&spec.InitContainers[i]) && !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range statuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	if len(unready) > 0 {
		c.Status = corev1.ConditionFalse
		c.Reason = ReasonContainersNotReady
		c.Message = fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	}
	return c
}

// readinessGates turns a Ready condition False when a readiness gate's
// condition is missing or not True.
func readinessGates(spec *corev1.PodSpec, conds []corev1.PodCondition, ready corev1.PodCondition) corev1.PodCondition {
	var msgs []string
	for _, gate := range spec.ReadinessGates {
		found := false
		for _, c := range conds {
			if c.Type != gate.ConditionType {
				continue
			}
			found = true
			if c.Status != corev1.ConditionTrue {
				msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, c.Status))
			}
		}
		if !found {
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType))
		}
	}
	if len(msgs) > 0 {
		ready.Status = corev1.ConditionFalse
		ready.Reason = ReasonReadinessGatesNotReady
		ready.Message = strings.Join(msgs, ", ")
	}
	return ready
}

// normalizeTimes truncates every time in st to whole seconds, as the API
// stores them, so that a status read back compares equal.
func normalizeTimes(st *corev1.PodStatus) {
	fix := func(t *metav1.Time) {
		if t != nil && !t.IsZero() {
			*t = t.Rfc3339Copy()
		}
	}
	fix(st.StartTime)
	for i := range st.Conditions {
		fix(&st.Conditions[i].LastTransitionTime)
		fix(&st.Conditions[i].LastProbeTime)
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			for _, s := range []*corev1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if s.Running != nil {
					fix(&s.Running.StartedAt)
				}
				if s.Terminated != nil {
					fix(&s.Terminated.StartedAt)
					fix(&s.Terminated.FinishedAt)
				}
			}
		}
	}
}

// HostIPs are the node's addresses a pod reports: the first InternalIP (or,
// without one, ExternalIP), then the first address of the other IP family.
func HostIPs(node *corev1.Node) []string {
	var all []netip.Addr
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				all = append(all, ip.Unmap())
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	out := []string{all[0].String()}
	for _, ip := range all[1:] {
		if ip.Is4() != all[0].Is4() {
			out = append(out, ip.String())
			break
		}
	}
	return out
}
