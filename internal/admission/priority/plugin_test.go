package priority_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/admission/priority"
	"knode/internal/apiserver"
	"knode/internal/apitest"
	nodereg "knode/internal/registry/node"
	podreg "knode/internal/registry/pod"
	pcreg "knode/internal/registry/priorityclass"
)

// world is apitest's World with this package's helpers as methods.
type world struct{ *apitest.World }

// newPriorityWorld serves the API with the Priority plugin, reading
// PriorityClasses back through the server, and the built-in classes
// created as knode server creates them.
func newPriorityWorld(t *testing.T) *world {
	t.Helper()
	var cs kubernetes.Interface
	plugin, err := priority.New(priority.Config{
		Get: func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
			return priority.FromClient(cs).Get(ctx, name)
		},
		List: func(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
			return priority.FromClient(cs).List(ctx)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{apitest.NewWorld(t, apitest.Options{Admission: []apiserver.Admitter{plugin}})}
	cs = w.Client
	for _, pc := range pcreg.System() {
		_, err := w.Client.SchedulingV1().PriorityClasses().Create(w.Ctx, pc, metav1.CreateOptions{})
		w.Must("creating "+pc.Name, err)
	}
	return w
}

func (w *world) createPod(name, class string, prio *int32) (*corev1.Pod, error) {
	return w.Client.CoreV1().Pods("default").Create(w.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			PriorityClassName: class,
			Priority:          prio,
			Containers:        []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}, metav1.CreateOptions{})
}

func (w *world) createClass(name string, value int32, globalDefault bool, policy *corev1.PreemptionPolicy) error {
	_, err := w.Client.SchedulingV1().PriorityClasses().Create(w.Ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault, PreemptionPolicy: policy,
	}, metav1.CreateOptions{})
	return err
}

type resolved struct {
	Class    string
	Priority *int32
	Policy   *corev1.PreemptionPolicy
}

func TestPodPriorityIsResolved(t *testing.T) {
	w := newPriorityWorld(t)
	lower, never := corev1.PreemptLowerPriority, corev1.PreemptNever
	w.Must("creating class", w.createClass("batch", 100, false, &never))

	tests := []struct {
		name  string
		class string
		prio  *int32
		want  resolved
	}{
		{name: "no class and no default: 0", want: resolved{"", ptr.To[int32](0), &lower}},
		{name: "built-in class", class: "system-node-critical", want: resolved{"system-node-critical", ptr.To[int32](2000001000), &lower}},
		{name: "cluster critical", class: "system-cluster-critical", want: resolved{"system-cluster-critical", ptr.To[int32](2000000000), &lower}},
		{name: "user class with its preemption policy", class: "batch", want: resolved{"batch", ptr.To[int32](100), &never}},
		{name: "a matching priority is accepted", class: "batch", prio: ptr.To[int32](100), want: resolved{"batch", ptr.To[int32](100), &never}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := w.createPod("p"+string(rune('a'+i)), tt.class, tt.prio)
			if err != nil {
				t.Fatal(err)
			}
			got := resolved{p.Spec.PriorityClassName, p.Spec.Priority, p.Spec.PreemptionPolicy}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resolved (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodPriorityIsRefused(t *testing.T) {
	w := newPriorityWorld(t)
	_, err := w.createPod("ghost", "missing", nil)
	if !apierrors.IsForbidden(err) || err.Error() != `pods "ghost" is forbidden: no PriorityClass with name missing was found` {
		t.Errorf("unknown class: %v", err)
	}
	_, err = w.createPod("liar", "system-node-critical", ptr.To[int32](5))
	if !apierrors.IsForbidden(err) || err.Error() != `pods "liar" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 2000001000 from the given PriorityClass name` {
		t.Errorf("mismatched priority: %v", err)
	}
}

func TestGlobalDefault(t *testing.T) {
	w := newPriorityWorld(t)
	w.Must("creating default", w.createClass("normal", 1000, true, nil))
	p, err := w.createPod("plain", "", nil)
	w.Must("creating pod", err)
	if p.Spec.PriorityClassName != "normal" || ptr.Deref(p.Spec.Priority, -1) != 1000 {
		t.Errorf("pod got class %q priority %v, want normal/1000", p.Spec.PriorityClassName, p.Spec.Priority)
	}

	err = w.createClass("another", 5, true, nil)
	if !apierrors.IsForbidden(err) || err.Error() != `priorityclasses.scheduling.k8s.io "another" is forbidden: PriorityClass normal is already marked as default. Only one default can exist` {
		t.Errorf("second default: %v", err)
	}
	// Updating the default itself is fine.
	pc, err := w.Client.SchedulingV1().PriorityClasses().Get(w.Ctx, "normal", metav1.GetOptions{})
	w.Must("getting class", err)
	pc.Description = "the usual"
	_, err = w.Client.SchedulingV1().PriorityClasses().Update(w.Ctx, pc, metav1.UpdateOptions{})
	w.Must("updating the default class", err)
}

func TestBuiltInClassesStay(t *testing.T) {
	w := newPriorityWorld(t)
	err := w.Client.SchedulingV1().PriorityClasses().Delete(w.Ctx, "system-node-critical", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("deleting a built-in class: %v, want 403", err)
	}
	// The registry's rules apply too: a reserved name with another value.
	err = w.createClass("system-custom", 10, false, nil)
	if !apierrors.IsInvalid(err) {
		t.Errorf("reserved name: %v, want 422", err)
	}
}

// A pod update that leaves the priority out keeps the stored one. (Called
// directly: the API server validates updates before admission, so through
// it the pod rules would refuse the update first.)
func TestUpdateKeepsPriority(t *testing.T) {
	plugin, err := priority.New(priority.Config{
		Get: func(context.Context, string) (*schedulingv1.PriorityClass, error) {
			t.Fatal("an update looked a class up")
			return nil, nil
		},
		List: func(context.Context) ([]schedulingv1.PriorityClass, error) {
			t.Fatal("an update listed classes")
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	lower := corev1.PreemptLowerPriority
	old := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "system-cluster-critical", Priority: ptr.To[int32](2000000000), PreemptionPolicy: &lower}}
	pod := old.DeepCopy()
	pod.Spec.Priority, pod.Spec.PreemptionPolicy = nil, nil
	kind := podreg.Kind()
	err = plugin.Admit(context.Background(), apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: &kind, Name: "p", Object: pod, Old: old})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(old.Spec, pod.Spec); diff != "" {
		t.Errorf("spec after admission (-want +got):\n%s", diff)
	}
}

// Subresources and other kinds pass untouched.
func TestIgnoresOtherWrites(t *testing.T) {
	plugin, err := priority.New(priority.Config{
		Get: func(context.Context, string) (*schedulingv1.PriorityClass, error) {
			t.Fatal("looked a class up")
			return nil, nil
		},
		List: func(context.Context) ([]schedulingv1.PriorityClass, error) {
			t.Fatal("listed classes")
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	pods, nodes := podreg.Kind(), nodereg.Kind()
	pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "missing"}}
	for _, a := range []apiserver.AdmissionAttributes{
		{Operation: "CREATE", Kind: &pods, Subresource: "binding", Object: pod},
		{Operation: "UPDATE", Kind: &pods, Subresource: "status", Object: pod, Old: pod},
		{Operation: "CREATE", Kind: &nodes, Object: &corev1.Node{}},
		{Operation: "DELETE", Kind: &pods, Name: "p"},
	} {
		if err := plugin.Admit(context.Background(), a); err != nil {
			t.Errorf("%s %s/%s: %v", a.Operation, a.Kind.Resource, a.Subresource, err)
		}
	}
	if _, err := priority.New(priority.Config{}); err == nil {
		t.Error("New accepted a Config without Get and List")
	}
}
