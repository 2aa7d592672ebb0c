package pod

import (
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// nodeLostReason is the status.reason the node lifecycle controller sets on
// pods of an unreachable node; such a pod being deleted prints "Unknown".
const nodeLostReason = "NodeLost"

// columns are upstream's pod column definitions. The last four have
// priority 1: kubectl shows them only with -o wide.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
	{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
	{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "IP", Type: "string", Priority: 1, Description: v1.PodStatus{}.SwaggerDoc()["podIP"]},
	{Name: "Node", Type: "string", Priority: 1, Description: v1.PodSpec{}.SwaggerDoc()["nodeName"]},
	{Name: "Nominated Node", Type: "string", Priority: 1, Description: v1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
	{Name: "Readiness Gates", Type: "string", Priority: 1, Description: v1.PodSpec{}.SwaggerDoc()["readinessGates"]},
}

// row is Kind.Row: the cells kubectl's pod printer produces, all of them
// strings, at time now.
func row(obj runtime.Object, now time.Time) []interface{} {
	pod := obj.(*v1.Pod)
	s := summarize(pod)

	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, since(s.lastRestart, now))
	}

	podIP := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		podIP = pod.Status.PodIPs[0].IP
	}
	return []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.reason,
		restarts,
		since(pod.CreationTimestamp.Time, now),
		podIP,
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}
}

// since is kubectl's age rendering; a zero time is "<unknown>".
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// readinessGates is "true gates/all gates", or "<none>" without gates.
func readinessGates(pod *v1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	trueCount := 0
	for _, gate := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == gate.ConditionType {
				if c.Status == v1.ConditionTrue {
					trueCount++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", trueCount, len(pod.Spec.ReadinessGates))
}

// podSummary is what the READY, STATUS and RESTARTS cells are built from.
type podSummary struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  time.Time
}

// summarize follows kubectl's printPod. STATUS starts as the phase (or
// status.reason), is replaced by SchedulingGated for a gated pod, by an
// "Init:" reason while init containers have not all finished, then by the
// reason of the last waiting or terminated regular container. A pod whose
// containers completed but one still runs shows Running (or NotReady without
// the Ready condition); a deleted pod shows Terminating, or Unknown when its
// node was lost. Sidecars (restartable init containers) count towards READY
// and, once init is over, their restarts are the only init restarts shown.
func summarize(pod *v1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonSchedulingGated {
			s.reason = v1.PodReasonSchedulingGated
		}
	}

	initSpecs := make(map[string]*v1.Container, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		initSpecs[pod.Spec.InitContainers[i].Name] = &pod.Spec.InitContainers[i]
		if isRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			s.total++
		}
	}

	sidecarRestarts := 0
	var sidecarLastRestart time.Time
	initializing := false
	for i, st := range pod.Status.InitContainerStatuses {
		s.restarts += int(st.RestartCount)
		s.lastRestart = later(s.lastRestart, st.LastTerminationState.Terminated)
		sidecar := isRestartableInitContainer(initSpecs[st.Name])
		if sidecar {
			sidecarRestarts += int(st.RestartCount)
			sidecarLastRestart = later(sidecarLastRestart, st.LastTerminationState.Terminated)
		}
		switch {
		case st.State.Terminated != nil && st.State.Terminated.ExitCode == 0:
			continue
		case sidecar && st.Started != nil && *st.Started:
			if st.Ready {
				s.ready++
			}
			continue
		case st.State.Terminated != nil:
			t := st.State.Terminated
			switch {
			case t.Reason != "":
				s.reason = "Init:" + t.Reason
			case t.Signal != 0:
				s.reason = fmt.Sprintf("Init:Signal:%d", t.Signal)
			default:
				s.reason = fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
			}
		case st.State.Waiting != nil && st.State.Waiting.Reason != "" && st.State.Waiting.Reason != "PodInitializing":
			s.reason = "Init:" + st.State.Waiting.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || initializedTrue(pod.Status.Conditions) {
		s.restarts = sidecarRestarts
		s.lastRestart = sidecarLastRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			st := pod.Status.ContainerStatuses[i]
			s.restarts += int(st.RestartCount)
			s.lastRestart = later(s.lastRestart, st.LastTerminationState.Terminated)
			switch {
			case st.State.Waiting != nil && st.State.Waiting.Reason != "":
				s.reason = st.State.Waiting.Reason
			case st.State.Terminated != nil && st.State.Terminated.Reason != "":
				s.reason = st.State.Terminated.Reason
			case st.State.Terminated != nil && st.State.Terminated.Signal != 0:
				s.reason = fmt.Sprintf("Signal:%d", st.State.Terminated.Signal)
			case st.State.Terminated != nil:
				s.reason = fmt.Sprintf("ExitCode:%d", st.State.Terminated.ExitCode)
			case st.Ready && st.State.Running != nil:
				hasRunning = true
				s.ready++
			}
		}
		if s.reason == "Completed" && hasRunning {
			if readyTrue(pod.Status.Conditions) {
				s.reason = "Running"
			} else {
				s.reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		if pod.Status.Reason == nodeLostReason {
			s.reason = "Unknown"
		} else if pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
			s.reason = "Terminating"
		}
	}
	return s
}

// later returns the later of t and the finish time of a previous
// termination, if there was one.
func later(t time.Time, prev *v1.ContainerStateTerminated) time.Time {
	if prev != nil && t.Before(prev.FinishedAt.Time) {
		return prev.FinishedAt.Time
	}
	return t
}

// initializedTrue looks at the first Initialized condition only.
func initializedTrue(conds []v1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == v1.PodInitialized {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// readyTrue is true when any Ready condition is True.
func readyTrue(conds []v1.PodCondition) bool {
	for _, c := range conds {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}
