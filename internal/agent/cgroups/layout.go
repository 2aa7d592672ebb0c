package cgroups

import (
	"path"

	corev1 "k8s.io/api/core/v1"
)

// Upstream's cgroupfs names.
const (
	KubepodsName   = "kubepods"
	BurstableName  = "burstable"
	BestEffortName = "besteffort"
	PodPrefix      = "pod"
)

// Layout names cgroups as upstream's cgroupfs driver does. Every path it
// returns is relative to a hierarchy's mount (or to whatever base directory
// the Manager was given), slash-separated, without a leading slash; ""
// names the base itself.
type Layout struct {
	// Root is the kubelet's cgroupRoot ("" and "/" mean the hierarchy's
	// root).
	Root string
	// PerQOS is cgroupsPerQOS: pods live in <Root>/kubepods[/<qos>]/pod<uid>.
	// Without it upstream makes no kubepods, QoS or pod cgroups; pods then
	// share Root, and containers are placed directly under it.
	PerQOS bool
}

func (l Layout) root() string {
	p := path.Clean("/" + l.Root)
	if p == "/" {
		return ""
	}
	return p[1:]
}

// Kubepods is the cgroup all pods live under: <Root>/kubepods with PerQOS,
// Root without.
func (l Layout) Kubepods() string {
	if !l.PerQOS {
		return l.root()
	}
	return path.Join(l.root(), KubepodsName)
}

// QOS is the cgroup of a QoS class: Guaranteed pods live directly in
// Kubepods; Burstable and BestEffort in its burstable and besteffort
// children.
func (l Layout) QOS(class corev1.PodQOSClass) string {
	if !l.PerQOS {
		return l.root()
	}
	switch class {
	case corev1.PodQOSBurstable:
		return path.Join(l.Kubepods(), BurstableName)
	case corev1.PodQOSBestEffort:
		return path.Join(l.Kubepods(), BestEffortName)
	}
	return l.Kubepods()
}

// Pod is the cgroup of pod uid of QoS class: <QOS>/pod<uid> with PerQOS,
// Root without.
func (l Layout) Pod(class corev1.PodQOSClass, uid string) string {
	if !l.PerQOS {
		return l.root()
	}
	return path.Join(l.QOS(class), PodPrefix+uid)
}

// Container is the cgroup of a container inside podPath; id names it (the
// container ID, as runc's cgroupfs layout does).
func (l Layout) Container(podPath, id string) string {
	return path.Join(podPath, id)
}
