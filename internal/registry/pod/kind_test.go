package pod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestKindDescribesPods(t *testing.T) {
	k := Kind()
	type desc struct {
		GV, Resource, Kind, ListKind, Singular string
		Short, Categories                      []string
		Namespaced, HasStatus                  bool
	}
	want := desc{"v1", "pods", "Pod", "PodList", "pod", []string{"po"}, []string{"all"}, true, true}
	got := desc{k.GroupVersion.String(), k.Resource, k.Kind, k.ListKind, k.SingularName, k.ShortNames, k.Categories, k.Namespaced, k.HasStatus}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kind (-want +got):\n%s", diff)
	}
	if _, ok := k.New().(*v1.Pod); !ok {
		t.Errorf("New() = %T, want *v1.Pod", k.New())
	}
	if _, ok := k.NewList().(*v1.PodList); !ok {
		t.Errorf("NewList() = %T, want *v1.PodList", k.NewList())
	}
	if k.Default == nil || k.PrepareForCreate == nil || k.PrepareForUpdate == nil || k.Validate == nil ||
		k.ValidateUpdate == nil || k.Status == nil || k.Status.PrepareForUpdate == nil || k.Status.ValidateUpdate == nil ||
		k.DeleteGracePeriod == nil || k.Row == nil || k.Fields == nil {
		t.Error("a Kind function is missing")
	}
	if len(k.Columns) != len(k.Row(newPod(), tableNow)) {
		t.Errorf("%d columns but %d cells", len(k.Columns), len(k.Row(newPod(), tableNow)))
	}
}

func TestSelectableFields(t *testing.T) {
	pod := newPod()
	pod.Spec.NodeName = "node-1"
	pod.Spec.ServiceAccountName = "builder"
	pod.Spec.HostNetwork = true
	pod.Status.Phase = v1.PodRunning
	pod.Status.PodIP = "10.0.0.1"
	pod.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	pod.Status.NominatedNodeName = "node-2"

	want := fields.Set{
		"metadata.name":            "p",
		"metadata.namespace":       "ns",
		"spec.nodeName":            "node-1",
		"spec.restartPolicy":       "Always",
		"spec.schedulerName":       "default-scheduler",
		"spec.serviceAccountName":  "builder",
		"spec.hostNetwork":         "true",
		"status.phase":             "Running",
		"status.podIP":             "10.0.0.1",
		"status.nominatedNodeName": "node-2",
	}
	if diff := cmp.Diff(want, selectableFields(pod)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}

	// An unscheduled pod matches spec.nodeName= (how the scheduler finds
	// its work) and hostNetwork reads "false".
	bare := newPod()
	got := selectableFields(bare)
	if !fields.OneTermEqualSelector("spec.nodeName", "").Matches(got) {
		t.Error("unscheduled pod does not match spec.nodeName=")
	}
	if got["spec.hostNetwork"] != "false" || got["status.podIP"] != "" {
		t.Errorf("hostNetwork = %q, podIP = %q; want \"false\" and \"\"", got["spec.hostNetwork"], got["status.podIP"])
	}
}

func TestDeleteGracePeriod(t *testing.T) {
	cases := []struct {
		name      string
		nodeName  string
		phase     v1.PodPhase
		specGrace *int64
		requested *int64
		want      int64
	}{
		{name: "scheduled pod uses its own period", nodeName: "n", phase: v1.PodRunning, specGrace: ptr(int64(30)), want: 30},
		{name: "spec period other than the default", nodeName: "n", phase: v1.PodRunning, specGrace: ptr(int64(120)), want: 120},
		{name: "requested period wins", nodeName: "n", phase: v1.PodRunning, specGrace: ptr(int64(30)), requested: ptr(int64(5)), want: 5},
		{name: "requested zero deletes at once", nodeName: "n", phase: v1.PodRunning, specGrace: ptr(int64(30)), requested: ptr(int64(0)), want: 0},
		{name: "requested negative becomes 1", nodeName: "n", phase: v1.PodRunning, specGrace: ptr(int64(30)), requested: ptr(int64(-1)), want: 1},
		{name: "negative spec period becomes 1", nodeName: "n", phase: v1.PodRunning, specGrace: ptr(int64(-7)), want: 1},
		{name: "spec period unset means 0", nodeName: "n", phase: v1.PodRunning, want: 0},
		{name: "never scheduled", phase: v1.PodPending, specGrace: ptr(int64(30)), requested: ptr(int64(60)), want: 0},
		{name: "succeeded", nodeName: "n", phase: v1.PodSucceeded, specGrace: ptr(int64(30)), want: 0},
		{name: "failed", nodeName: "n", phase: v1.PodFailed, specGrace: ptr(int64(30)), requested: ptr(int64(10)), want: 0},
		{name: "pending but bound", nodeName: "n", phase: v1.PodPending, specGrace: ptr(int64(30)), want: 30},
		{name: "unknown phase is not finished", nodeName: "n", phase: v1.PodUnknown, specGrace: ptr(int64(30)), want: 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{NodeName: tc.nodeName, TerminationGracePeriodSeconds: tc.specGrace}, Status: v1.PodStatus{Phase: tc.phase}}
			if got := deleteGracePeriod(pod, tc.requested); got != tc.want {
				t.Errorf("deleteGracePeriod = %d, want %d", got, tc.want)
			}
		})
	}
}
