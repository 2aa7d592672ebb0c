package pods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/runtime"
	"knode/internal/agent/server"
)

// ContainerLog implements server.LogSource over the pods this worker runs:
// the runtime's log file of the container's current run (or, with
// previous, of the run before), and whether that run still goes on. The
// messages are the kubelet's.
func (w *Worker) ContainerLog(namespace, name, container string, previous bool) (server.LogFile, error) {
	var pod *corev1.Pod
	if w.pods != nil {
		if pods, ok := w.pods.PodsOn(w.cfg.NodeName); ok {
			for _, p := range pods {
				if p.Namespace == namespace && p.Name == name {
					pod = p
					break
				}
			}
		}
	}
	if pod == nil {
		return server.LogFile{}, fmt.Errorf("%w: pod %q does not exist", server.ErrLogNotFound, name)
	}
	if !hasContainer(pod, container) {
		return server.LogFile{}, fmt.Errorf("%w: container %q not found in pod %q", server.ErrLogNotFound, container, name)
	}
	st, ok := w.containerStatus(pod.UID, container)
	switch {
	case previous && (!ok || st.PreviousLogPath == ""):
		return server.LogFile{}, fmt.Errorf("%w: previous terminated container %q in pod %q not found", server.ErrLogUnavailable, container, name)
	case previous:
		return server.LogFile{Path: st.PreviousLogPath, CRI: st.LogFormat == runtime.LogFormatCRI}, nil
	case !ok || st.LogPath == "":
		reason := "ContainerCreating"
		if ok && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
			reason = st.State.Waiting.Reason
		}
		return server.LogFile{}, fmt.Errorf("%w: container %q in pod %q is waiting to start: %s", server.ErrLogUnavailable, container, name, reason)
	}
	path := st.LogPath
	live := func() bool {
		now, ok := w.containerStatus(pod.UID, container)
		return ok && now.LogPath == path && now.State.Running != nil
	}
	return server.LogFile{Path: path, Live: live, CRI: st.LogFormat == runtime.LogFormatCRI}, nil
}

// containerStatus is the runtime's status of one of a pod's containers.
func (w *Worker) containerStatus(uid types.UID, container string) (runtime.ContainerStatus, bool) {
	rs, err := w.cfg.Runtime.PodStatus(uid)
	if err != nil {
		return runtime.ContainerStatus{}, false
	}
	for _, list := range [][]runtime.ContainerStatus{rs.InitContainers, rs.Containers} {
		for _, c := range list {
			if c.Name == container {
				return c, true
			}
		}
	}
	return runtime.ContainerStatus{}, false
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// Pods is the node's pods as the worker last saw them (none before its
// first list), for the agent server's /pods; the objects are shared and
// read-only.
func (w *Worker) Pods() []*corev1.Pod {
	pods, _ := w.pods.PodsOn(w.cfg.NodeName)
	return pods
}
