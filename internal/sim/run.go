package sim

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/registry/priorityclass"
	"knode/internal/sim/script"
)

// PodRequests are what every scenario pod asks for.
var PodRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("10m"),
	corev1.ResourceMemory: resource.MustParse("10Mi"),
}

// AddPods creates p.Count pods in namespace default, named pod-<i> after
// those created so far, for the scheduler to place. With
// p.Toleration.Given, each pod tolerates the not-ready and unreachable
// NoExecute taints for its Seconds (or for ever); otherwise
// DefaultTolerationSeconds admission gives it the defaults. With
// p.Priority.Given, each pod names a PriorityClass of its Value (see
// priorityClass); otherwise none, so its priority is 0. With p.Stop.Given,
// each pod's container answers a stop request as it says (see image);
// otherwise it exits at once. With p.Resources given, each pod is
// Guaranteed (see resources). With p.Volume, each pod mounts a volume of
// its own (see volumes.go).
func (w *World) AddPods(p script.Pods) error {
	if err := w.start(); err != nil {
		return err
	}
	class := ""
	if p.Priority.Given {
		var err error
		if class, err = w.priorityClass(p.Priority.Value); err != nil {
			return err
		}
	}
	for range p.Count {
		w.pods++
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-" + strconv.Itoa(w.pods), Namespace: metav1.NamespaceDefault},
			Spec:       podSpec(p, class),
		}
		if p.Volume {
			v, err := w.volumeFor(pod.Name)
			if err != nil {
				return err
			}
			pod.Spec.Volumes = []corev1.Volume{v}
			mount(&pod.Spec)
		}
		if _, err := w.admin.CoreV1().Pods(pod.Namespace).Create(w.ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
	}
	w.settle()
	return w.err
}

// podSpec is the spec of a pod of p, naming the PriorityClass class
// (none when ""); p.Volume and p.Count are not read.
func podSpec(p script.Pods, class string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:      "app",
			Image:     image(p.Stop),
			Resources: resources(p.Resources),
		}},
		Tolerations:       tolerations(p.Toleration),
		PriorityClassName: class,
	}
}

// resources are the container's requests and limits: PodRequests, or,
// when r names cpu or memory, those as both requests and limits (PodRequests
// for the one not named), so the pod is Guaranteed.
func resources(r script.Resources) corev1.ResourceRequirements {
	if !r.Given() {
		return corev1.ResourceRequirements{Requests: PodRequests}
	}
	want := PodRequests.DeepCopy()
	if !r.CPU.IsZero() {
		want[corev1.ResourceCPU] = r.CPU
	}
	if !r.Memory.IsZero() {
		want[corev1.ResourceMemory] = r.Memory
	}
	return corev1.ResourceRequirements{Requests: want, Limits: want.DeepCopy()}
}

// mount has spec's container mount the volume named volumeName at
// mountPath.
func mount(spec *corev1.PodSpec) {
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: volumeName, MountPath: mountPath}}
}

// podImage is the image of every scenario pod's container.
const podImage = "registry.k8s.io/pause:3.10"

// image is podImage with the fake runtime's directive for stop: term:ignore
// to ignore a stop request until the grace period ends, term:0@<d> to
// exit cleanly d after it; without stop, none, so the container exits at
// once (143).
func image(stop script.Termination) string {
	switch {
	case !stop.Given:
		return podImage
	case stop.Ignore:
		return podImage + ",term:ignore"
	default:
		return podImage + ",term:0@" + stop.After.String()
	}
}

func tolerations(tol script.Toleration) []corev1.Toleration {
	if !tol.Given {
		return nil
	}
	var seconds *int64
	if !tol.Forever {
		seconds = ptr.To(tol.Seconds)
	}
	var out []corev1.Toleration
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds})
	}
	return out
}

// priorityClass is the name of a PriorityClass of value v, made on first
// use: one of the built-in system classes for their values, else
// priority-<v>.
func (w *World) priorityClass(v int32) (string, error) {
	switch v {
	case script.SystemClusterCritical:
		return priorityclass.SystemClusterCritical, nil
	case script.SystemNodeCritical:
		return priorityclass.SystemNodeCritical, nil
	}
	name := "priority-" + strconv.FormatInt(int64(v), 10)
	if w.classes[name] {
		return name, nil
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
	if _, err := w.admin.SchedulingV1().PriorityClasses().Create(w.ctx, pc, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating PriorityClass %s: %w", name, err)
	}
	w.classes[name] = true
	return name, nil
}

// At applies a (see Act) at virtual time a.Time, which must not have
// passed.
func (w *World) At(a script.At) error {
	if a.Time < w.Now() {
		return fmt.Errorf("time %v has passed (virtual time is %v)", a.Time, w.Now())
	}
	if err := w.start(); err != nil {
		return err
	}
	w.after(a.Time-w.Now(), func() {
		if err := w.Act(a); err != nil {
			w.fail(err)
		}
	})
	return nil
}

// Run builds a World and replays the script in it.
func Run(ctx context.Context, sc *script.Script, cfg Config) (*World, error) {
	w, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for _, st := range sc.Statements {
		if err := w.Exec(st); err != nil {
			w.Close()
			return nil, fmt.Errorf("%s: %w", st.Pos(), err)
		}
	}
	return w, nil
}

// Exec carries out one statement.
func (w *World) Exec(st script.Statement) error {
	switch st := st.(type) {
	case script.Set:
		for _, s := range st.Settings {
			if err := w.Set(s.Name, s.Value); err != nil {
				return fmt.Errorf("set: %w", err)
			}
		}
		return nil
	case script.Nodes:
		return w.AddMachines(st)
	case script.Pods:
		return w.AddPods(st)
	case script.StatefulSet:
		return w.AddStatefulSet(st)
	case script.At:
		return w.At(st)
	case script.Run:
		return w.RunFor(st.Duration)
	default:
		return fmt.Errorf("unknown statement %T", st)
	}
}
