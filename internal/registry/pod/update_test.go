package pod

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// forbiddenSpecPrefix is the start of upstream's message for a change to a
// frozen spec field; a diff follows it.
const forbiddenSpecPrefix = "spec: Forbidden: pod updates may not change fields other than " +
	"`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`," +
	"`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"

func TestValidateUpdate(t *testing.T) {
	cases := []struct {
		name string
		old  func(*v1.Pod)
		new  func(*v1.Pod)
		// want lists exact errors; wantForbidden means exactly one error,
		// the frozen-spec one, whose diff mentions wantField.
		want          []string
		wantForbidden bool
		wantField     string
	}{
		{name: "no change", new: func(*v1.Pod) {}},
		{name: "labels and annotations may change", new: func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} }},
		{name: "container image", new: func(p *v1.Pod) { p.Spec.Containers[0].Image = "busybox:1.37" }},
		{
			name: "init container image",
			old: func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "a", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"}}
			},
			new: func(p *v1.Pod) { p.Spec.InitContainers[0].Image = "b" },
		},
		{
			name: "image removed",
			new:  func(p *v1.Pod) { p.Spec.Containers[0].Image = "" },
			want: []string{"spec.containers[0].image: Required value", "spec.containers[0].image: Required value"},
		},
		{
			name: "container added",
			new: func(p *v1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always"})
			},
			want: []string{"spec.containers: Forbidden: pod updates may not add or remove containers"},
		},
		{name: "restart policy", new: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever }, wantForbidden: true, wantField: "RestartPolicy"},
		{name: "container command", new: func(p *v1.Pod) { p.Spec.Containers[0].Command = []string{"sh"} }, wantForbidden: true, wantField: "Command"},
		{name: "nodeName set by update", new: func(p *v1.Pod) { p.Spec.NodeName = "node-1" }, wantForbidden: true, wantField: "NodeName"},
		{
			name:          "nodeName changed",
			old:           func(p *v1.Pod) { p.Spec.NodeName = "node-1" },
			new:           func(p *v1.Pod) { p.Spec.NodeName = "node-2" },
			wantForbidden: true, wantField: "NodeName",
		},
		{
			name: "nodeName unchanged",
			old:  func(p *v1.Pod) { p.Spec.NodeName = "node-1" },
			new:  func(p *v1.Pod) { p.Labels = map[string]string{"x": "y"} },
		},

		// activeDeadlineSeconds.
		{name: "deadline set from nil", new: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(100)) }},
		{
			name: "deadline lowered",
			old:  func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(100)) },
			new:  func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(50)) },
		},
		{
			name: "deadline raised",
			old:  func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(100)) },
			new:  func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(200)) },
			want: []string{"spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"},
		},
		{
			name: "deadline removed",
			old:  func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(100)) },
			new:  func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = nil },
			want: []string{"spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"},
		},

		// Tolerations.
		{
			name: "toleration added",
			old:  func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: "Exists"}} },
			new: func(p *v1.Pod) {
				p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: "b", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr(int64(5))})
			},
		},
		{
			name: "toleration seconds changed",
			old: func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: ptr(int64(300))}}
			},
			new: func(p *v1.Pod) { p.Spec.Tolerations[0].TolerationSeconds = ptr(int64(10)) },
		},
		{
			name: "toleration modified",
			old:  func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: "Exists"}} },
			new:  func(p *v1.Pod) { p.Spec.Tolerations[0].Key = "b" },
			want: []string{"spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"},
		},
		{
			name: "toleration removed",
			old:  func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: "Exists"}} },
			new:  func(p *v1.Pod) { p.Spec.Tolerations = nil },
			want: []string{"spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"},
		},

		// Grace period.
		{
			name: "negative grace period repaired to 1",
			old:  func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(-1)) },
			new:  func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(1)) },
		},
		{
			name:          "grace period otherwise frozen",
			new:           func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr(int64(1)) },
			wantForbidden: true, wantField: "TerminationGracePeriodSeconds",
		},

		// Scheduling gates.
		{
			name: "scheduling gate removed",
			old:  func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}, {Name: "b"}} },
			new:  func(p *v1.Pod) { p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:] },
		},
		{
			name: "scheduling gate added",
			old:  func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "a"}} },
			new: func(p *v1.Pod) {
				p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, v1.PodSchedulingGate{Name: "c"})
			},
			want: []string{"spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'c'"},
		},

		// Annotations and create rules on the new object.
		{
			name: "mirror annotation added",
			old:  func(p *v1.Pod) { p.Spec.NodeName = "n" },
			new:  func(p *v1.Pod) { p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"} },
			want: []string{"metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror pod annotation"},
		},
		{
			name: "mirror annotation removed",
			old: func(p *v1.Pod) {
				p.Spec.NodeName = "n"
				p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "x"}
			},
			new:  func(p *v1.Pod) { p.Annotations = nil },
			want: []string{"metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not remove or update mirror pod annotation"},
		},
		{
			name: "an old invalid deletion cost does not block updates",
			old:  func(p *v1.Pod) { p.Annotations = map[string]string{v1.PodDeletionCost: "x"} },
			new:  func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} },
		},
		{
			name: "a too-large quantity is reported, not compared",
			old: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Limits = v1.ResourceList{"cpu": q("1")}
			},
			new:  func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits["cpu"] = q("1e99999999") },
			want: []string{"spec.containers[0].resources.limits[cpu]: Invalid value: must be less than 1e40"},
		},
		{
			name: "create rules apply to the new object",
			new:  func(p *v1.Pod) { p.Spec.Containers[0].Image = " busybox" },
			want: []string{
				`spec.containers[0].image: Invalid value: " busybox": must not have leading or trailing whitespace`,
				`spec.containers[0].image: Invalid value: " busybox": must not have leading or trailing whitespace`,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := newPod()
			if tc.old != nil {
				tc.old(old)
			}
			pod := old.DeepCopy()
			tc.new(pod)
			got := validateUpdate(pod, old)
			if !tc.wantForbidden {
				if diff := cmp.Diff(tc.want, errStrings(got)); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d errors %q, want one frozen-spec error", len(got), errStrings(got))
			}
			msg := got[0].Error()
			if !strings.HasPrefix(msg, forbiddenSpecPrefix) {
				t.Errorf("message = %q, want prefix %q", msg, forbiddenSpecPrefix)
			}
			if !strings.Contains(strings.TrimPrefix(msg, forbiddenSpecPrefix), tc.wantField) {
				t.Errorf("diff in message does not mention %s:\n%s", tc.wantField, msg)
			}
		})
	}
}

func TestValidateUpdateDoesNotChangeOld(t *testing.T) {
	old := newPod()
	old.Spec.Tolerations = []v1.Toleration{{Key: "a", Operator: "Exists"}}
	before := old.DeepCopy()
	pod := old.DeepCopy()
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.Containers[0].Image = "other"
	validateUpdate(pod, old)
	if diff := cmp.Diff(before, old); diff != "" {
		t.Errorf("old changed (-before +after):\n%s", diff)
	}
}

func TestPrepareForUpdateKeepsStatus(t *testing.T) {
	old := newPod()
	old.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1", QOSClass: v1.PodQOSBestEffort}
	pod := old.DeepCopy()
	pod.Status = v1.PodStatus{Phase: v1.PodFailed}
	pod.Spec.Containers[0].Image = "new"

	prepareForUpdate(pod, old)
	if diff := cmp.Diff(old.Status, pod.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if pod.Spec.Containers[0].Image != "new" {
		t.Errorf("spec change lost: image = %q", pod.Spec.Containers[0].Image)
	}
	// The copied status must not alias old's.
	pod.Status.Phase = v1.PodSucceeded
	if old.Status.Phase != v1.PodRunning {
		t.Error("status shares memory with old")
	}
}
