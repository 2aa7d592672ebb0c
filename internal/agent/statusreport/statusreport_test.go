package statusreport

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var (
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

func cond(typ corev1.NodeConditionType, status corev1.ConditionStatus, heartbeat, transition time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type: typ, Status: status,
		LastHeartbeatTime:  metav1.NewTime(heartbeat),
		LastTransitionTime: metav1.NewTime(transition),
		Reason:             "KubeletReady", Message: "kubelet is posting ready status",
	}
}

func baseStatus() *corev1.NodeStatus {
	return &corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, t0, t0),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, t0, t0),
		},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "node-1"}},
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110"),
		},
		NodeInfo: corev1.NodeSystemInfo{KernelVersion: "6.1.0", KubeletVersion: "v1.34.0"},
	}
}

func TestChanged(t *testing.T) {
	tests := []struct {
		name   string
		last   *corev1.NodeStatus
		change func(s *corev1.NodeStatus) // applied to a copy of baseStatus
		nilNew bool
		want   bool
	}{
		{name: "both nil", nilNew: true, want: false},
		{name: "nil to empty", change: func(s *corev1.NodeStatus) { *s = corev1.NodeStatus{} }, want: true},
		{name: "identical", last: baseStatus(), change: func(*corev1.NodeStatus) {}, want: false},
		{
			name: "only heartbeats moved",
			last: baseStatus(),
			change: func(s *corev1.NodeStatus) {
				for i := range s.Conditions {
					s.Conditions[i].LastHeartbeatTime = metav1.NewTime(t1)
				}
			},
			want: false,
		},
		{
			name: "same conditions in another order, heartbeats moved",
			last: baseStatus(),
			change: func(s *corev1.NodeStatus) {
				s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0]
				s.Conditions[0].LastHeartbeatTime = metav1.NewTime(t1)
			},
			want: false,
		},
		{name: "condition status", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Conditions[0].Status = corev1.ConditionFalse }, want: true},
		{name: "condition reason", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Conditions[0].Reason = "KubeletNotReady" }, want: true},
		{name: "condition message", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Conditions[1].Message = "x" }, want: true},
		{name: "condition transition time", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Conditions[0].LastTransitionTime = metav1.NewTime(t1) }, want: true},
		{
			name: "condition added",
			last: baseStatus(),
			change: func(s *corev1.NodeStatus) {
				s.Conditions = append(s.Conditions, cond(corev1.NodeDiskPressure, corev1.ConditionFalse, t0, t0))
			},
			want: true,
		},
		{name: "address changed", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Addresses[0].Address = "10.0.0.2" }, want: true},
		{name: "addresses reordered", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Addresses[0], s.Addresses[1] = s.Addresses[1], s.Addresses[0] }, want: true},
		{name: "capacity changed", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Capacity[corev1.ResourceCPU] = resource.MustParse("4") }, want: true},
		{
			name:   "capacity written differently, same amount",
			last:   baseStatus(),
			change: func(s *corev1.NodeStatus) { s.Capacity[corev1.ResourceCPU] = resource.MustParse("2000m") },
			want:   false,
		},
		{name: "allocatable changed", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.Allocatable[corev1.ResourcePods] = resource.MustParse("100") }, want: true},
		{
			name: "a condition replaced by a second of another type",
			last: baseStatus(),
			change: func(s *corev1.NodeStatus) {
				s.Conditions[1] = s.Conditions[0]
			},
			want: true,
		},
		{name: "capacity resource removed", last: baseStatus(), change: func(s *corev1.NodeStatus) { delete(s.Capacity, corev1.ResourceCPU) }, want: true},
		{
			name: "image size changed",
			last: &corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}}},
			change: func(s *corev1.NodeStatus) {
				*s = corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"a"}, SizeBytes: 2}}}
			},
			want: true,
		},
		{name: "daemon endpoint changed", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.DaemonEndpoints.KubeletEndpoint.Port = 1 }, want: true},
		{name: "nodeInfo changed", last: baseStatus(), change: func(s *corev1.NodeStatus) { s.NodeInfo.KernelVersion = "6.2.0" }, want: true},
		{
			name:   "empty list versus nil",
			last:   &corev1.NodeStatus{Addresses: []corev1.NodeAddress{}},
			change: func(s *corev1.NodeStatus) { *s = corev1.NodeStatus{} },
			want:   false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var current *corev1.NodeStatus
			if !tt.nilNew {
				current = baseStatus()
				tt.change(current)
			}
			var before *corev1.NodeStatus
			if tt.last != nil {
				before = tt.last.DeepCopy()
			}
			if got := Changed(tt.last, current); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
			if got := Changed(current, tt.last); got != tt.want {
				t.Errorf("Changed (swapped) = %v, want %v", got, tt.want)
			}
			if diff := cmp.Diff(before, tt.last); diff != "" {
				t.Errorf("Changed modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestShouldPost(t *testing.T) {
	const freq = 5 * time.Minute
	heartbeatOnly := baseStatus()
	heartbeatOnly.Conditions[0].LastHeartbeatTime = metav1.NewTime(t1)
	notReady := baseStatus()
	notReady.Conditions[0].Status = corev1.ConditionFalse
	tests := []struct {
		name     string
		current  *corev1.NodeStatus
		lastPost time.Time
		since    time.Duration // now = lastPost + since
		offset   time.Duration
		want     bool
	}{
		{name: "nothing posted yet", current: baseStatus(), want: true},
		{name: "changed right after a post", current: notReady, lastPost: t0, since: 10 * time.Second, want: true},
		{name: "unchanged within the period", current: baseStatus(), lastPost: t0, since: freq - time.Nanosecond, want: false},
		{name: "heartbeat-only change within the period", current: heartbeatOnly, lastPost: t0, since: 10 * time.Second, want: false},
		{name: "unchanged exactly at the period", current: baseStatus(), lastPost: t0, since: freq, want: true},
		{name: "unchanged after the period", current: heartbeatOnly, lastPost: t0, since: freq + 10*time.Second, want: true},
		{name: "positive offset: not yet at the plain period", current: baseStatus(), lastPost: t0, since: freq, offset: time.Minute, want: false},
		{name: "positive offset: exactly at period plus offset", current: baseStatus(), lastPost: t0, since: freq + time.Minute, offset: time.Minute, want: true},
		{name: "negative offset: before the plain period", current: baseStatus(), lastPost: t0, since: freq - 2*time.Minute, offset: -2 * time.Minute, want: true},
		{name: "negative offset: just before period plus offset", current: baseStatus(), lastPost: t0, since: freq - 2*time.Minute - time.Nanosecond, offset: -2 * time.Minute, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.lastPost.Add(tt.since)
			if tt.lastPost.IsZero() {
				now = t0
			}
			if got := ShouldPost(baseStatus(), tt.current, tt.lastPost, now, freq, tt.offset); got != tt.want {
				t.Errorf("ShouldPost = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOffset(t *testing.T) {
	tests := []struct {
		r    float64
		want time.Duration
	}{
		{r: 0, want: -150 * time.Second},
		{r: 0.25, want: -75 * time.Second},
		{r: 0.5, want: 0},
		{r: 0.9, want: 120 * time.Second},
	}
	for _, tt := range tests {
		if got := Offset(5*time.Minute, tt.r); got != tt.want {
			t.Errorf("Offset(5m, %v) = %v, want %v", tt.r, got, tt.want)
		}
	}
}

// TestScheduleTimeline plays a status loop ticking every 10 s and checks
// which ticks post.
func TestScheduleTimeline(t *testing.T) {
	draws := []float64{0.25, 0.9}
	n := 0
	s := NewSchedule(0, func() float64 { r := draws[n]; n++; return r })
	if !s.ReportDue().IsZero() {
		t.Fatalf("ReportDue before any post = %v, want zero", s.ReportDue())
	}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	changes := map[int]bool{400: true} // a condition flips at 400 s
	var posts []int
	for sec := 0; sec <= 1200; sec += 10 {
		changed := changes[sec]
		if s.Due(changed, at(sec)) {
			posts = append(posts, sec)
			s.Posted(at(sec), changed)
		}
	}
	// 0: first post, offset (0.25-0.5)×300 = -75 s → next at 225 → 230 on the
	// 10 s grid; that post clears the offset → 530; but the change at 400
	// posts and draws (0.9-0.5)×300 = +120 s → 400+420 = 820; then 1120.
	want := []int{0, 230, 400, 820, 1120}
	if diff := cmp.Diff(want, posts); diff != "" {
		t.Errorf("posting ticks (-want +got):\n%s", diff)
	}
	if got, want := s.ReportDue(), at(1420); !got.Equal(want) {
		t.Errorf("ReportDue = %v, want %v", got, want)
	}
	if got := s.LastPost(); !got.Equal(at(1120)) {
		t.Errorf("LastPost = %v, want %v", got, at(1120))
	}
}

func node(status *corev1.NodeStatus) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-1", ResourceVersion: "5", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.0.0/24"},
		Status:     *status,
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("patch %s is not JSON: %v", b, err)
	}
	return m
}

func TestStatusPatch(t *testing.T) {
	hb := t1.Format(time.RFC3339)
	tests := []struct {
		name   string
		change func(n *corev1.Node)
		want   string
	}{
		{name: "nothing changed", change: func(*corev1.Node) {}, want: `{}`},
		{
			name: "heartbeat only: one condition entry and the order",
			change: func(n *corev1.Node) {
				n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t1)
			},
			want: `{"status":{"$setElementOrder/conditions":[{"type":"Ready"},{"type":"MemoryPressure"}],` +
				`"conditions":[{"lastHeartbeatTime":"` + hb + `","type":"Ready"}]}}`,
		},
		{
			name: "spec changes are not sent",
			change: func(n *corev1.Node) {
				n.Spec.Unschedulable = true
				n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			},
			want: `{}`,
		},
		{
			name: "changed addresses replace the whole list",
			change: func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}
			},
			want: `{"status":{"addresses":[{"address":"10.0.0.2","type":"InternalIP"},{"$patch":"replace"}]}}`,
		},
		{
			name: "capacity and a label",
			change: func(n *corev1.Node) {
				n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("4")
				n.Labels["kubernetes.io/os"] = "linux"
			},
			want: `{"metadata":{"labels":{"kubernetes.io/os":"linux"}},"status":{"capacity":{"cpu":"4"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			original := node(baseStatus())
			updated := original.DeepCopy()
			tt.change(updated)
			got, err := StatusPatch(original, updated)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(decode(t, []byte(tt.want)), decode(t, got)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// wholeNodePatch is StatusPatch done the plain way, diffing the whole
// Nodes with updated's spec set to original's.
func wholeNodePatch(t *testing.T, original, updated *corev1.Node) []byte {
	t.Helper()
	oldJSON, err := json.Marshal(original)
	if err != nil {
		t.Fatal(err)
	}
	target := updated.DeepCopy()
	target.Spec = original.Spec
	replace := len(original.Status.Addresses) > 0 && !apiequality.Semantic.DeepEqual(original.Status.Addresses, updated.Status.Addresses)
	if replace {
		target.Status.Addresses = original.Status.Addresses
	}
	newJSON, err := json.Marshal(target)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	if replace {
		if patch, err = withReplacedAddresses(patch, updated.Status.Addresses); err != nil {
			t.Fatal(err)
		}
	}
	return patch
}

// StatusPatch leaves what is equal on both sides out of its diff; the
// patch must be the very bytes the whole Nodes give.
func TestStatusPatchIsTheWholeNodePatch(t *testing.T) {
	managed := func(manager string) []metav1.ManagedFieldsEntry {
		return []metav1.ManagedFieldsEntry{{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &metav1.Time{Time: t0}, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{}}}`)},
		}}
	}
	for _, tc := range []struct {
		name   string
		change func(n *corev1.Node)
	}{
		{name: "nothing changed", change: func(*corev1.Node) {}},
		{name: "heartbeat", change: func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t1) }},
		{name: "spec", change: func(n *corev1.Node) { n.Spec.Unschedulable = true; n.Spec.PodCIDR = "10.1.0.0/24" }},
		{name: "addresses", change: func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}
		}},
		{name: "a label and an annotation dropped", change: func(n *corev1.Node) {
			n.Labels["kubernetes.io/os"] = "linux"
			n.Annotations = nil
		}},
		{name: "managed fields differ", change: func(n *corev1.Node) { n.ManagedFields = managed("someone-else") }},
		{name: "managed fields dropped", change: func(n *corev1.Node) { n.ManagedFields = nil }},
		{name: "pressure", change: func(n *corev1.Node) {
			n.Status.Conditions[1] = cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, t1, t1)
		}},
		{name: "capacity", change: func(n *corev1.Node) { n.Status.Capacity[corev1.ResourceMemory] = resource.MustParse("4Gi") }},
		{name: "allocatable", change: func(n *corev1.Node) { delete(n.Status.Allocatable, corev1.ResourcePods) }},
		// Equal quantities, different JSON: the patch must carry it.
		{name: "quantity written otherwise", change: func(n *corev1.Node) { n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("2e0") }},
		{name: "node info", change: func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.34.1" }},
		{name: "daemon endpoints", change: func(n *corev1.Node) { n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250 }},
		{name: "images", change: func(n *corev1.Node) {
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 320000})
		}},
		{name: "volumes in use", change: func(n *corev1.Node) { n.Status.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/vol-1"} }},
		{name: "volumes attached", change: func(n *corev1.Node) {
			n.Status.VolumesAttached = []corev1.AttachedVolume{{Name: "kubernetes.io/csi/vol-1", DevicePath: "/dev/sdb"}}
		}},
		{name: "runtime handlers", change: func(n *corev1.Node) { n.Status.RuntimeHandlers = nil }},
		{name: "heartbeat and everything else", change: func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t1)
			n.Status.Capacity = nil
			n.Status.NodeInfo = corev1.NodeSystemInfo{}
			n.Status.Images = n.Status.Images[:1]
			n.Labels["extra"] = "yes"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			original := node(baseStatus())
			original.ManagedFields = managed("knode")
			original.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
			original.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			original.Status.DaemonEndpoints.KubeletEndpoint.Port = 10255
			original.Status.Images = []corev1.ContainerImage{{Names: []string{"busybox:1.36"}, SizeBytes: 4300000}, {Names: []string{"nginx:1.27"}, SizeBytes: 70000000}}
			original.Status.RuntimeHandlers = []corev1.NodeRuntimeHandler{{Name: "runc"}}
			updated := original.DeepCopy()
			tc.change(updated)
			got, err := StatusPatch(original, updated)
			if err != nil {
				t.Fatal(err)
			}
			if want := wholeNodePatch(t, original, updated); string(got) != string(want) {
				t.Errorf("patch\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestStatusPatchFirstAddresses(t *testing.T) {
	// With no addresses before, the ordinary merge is right and no
	// replace directive is added.
	st := baseStatus()
	st.Addresses = nil
	original := node(st)
	updated := original.DeepCopy()
	updated.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}
	got, err := StatusPatch(original, updated)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "replace") {
		t.Errorf("patch %s has a replace directive, want a plain merge", got)
	}
}

func patchWorld(t *testing.T, failures int) (*fake.Clientset, *atomic.Int64) {
	t.Helper()
	cs := fake.NewClientset(node(baseStatus()))
	var left atomic.Int64
	left.Store(int64(failures))
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if left.Add(-1) >= 0 {
			return true, nil, apierrors.NewInternalError(errors.New("etcd timeout"))
		}
		return false, nil, nil
	})
	return cs, &left
}

func TestPatchStatus(t *testing.T) {
	tests := []struct {
		name        string
		failures    int
		wantErr     bool
		wantPatches int
	}{
		{name: "accepted", failures: 0, wantPatches: 1},
		// The agent's status pass retries, from a fresh read.
		{name: "refused once", failures: 1, wantErr: true, wantPatches: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, _ := patchWorld(t, tt.failures)
			original := node(baseStatus())
			updated := original.DeepCopy()
			updated.Status.Conditions[0] = cond(corev1.NodeReady, corev1.ConditionFalse, t1, t1)
			updated.Status.Conditions[0].Reason = "KubeletNotReady"
			updated.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}}
			updated.Spec.Unschedulable = true

			got, err := PatchStatus(context.Background(), cs, original, updated)
			if (err != nil) != tt.wantErr {
				t.Fatalf("PatchStatus error = %v, want error %v", err, tt.wantErr)
			}
			var patches int
			for _, a := range cs.Actions() {
				p, ok := a.(k8stesting.PatchAction)
				if !ok {
					t.Errorf("unexpected call %s %s", a.GetVerb(), a.GetResource().Resource)
					continue
				}
				patches++
				if p.GetSubresource() != "status" || p.GetPatchType() != types.StrategicMergePatchType || p.GetName() != "node-1" {
					t.Errorf("patch went to %s/%s as %s, want node-1/status as strategic merge", p.GetName(), p.GetSubresource(), p.GetPatchType())
				}
			}
			if patches != tt.wantPatches {
				t.Errorf("patches = %d, want %d", patches, tt.wantPatches)
			}
			if tt.wantErr {
				if !strings.Contains(err.Error(), `node "node-1"`) || !apierrors.IsInternalError(errors.Unwrap(err)) {
					t.Errorf("error = %v, want the node named and the cause wrapped", err)
				}
				return
			}
			if diff := cmp.Diff(updated.Status.Conditions, got.Status.Conditions); diff != "" {
				t.Errorf("stored conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(updated.Status.Addresses, got.Status.Addresses); diff != "" {
				t.Errorf("stored addresses (-want +got):\n%s", diff)
			}
			if got.Spec.Unschedulable {
				t.Error("the status patch changed the spec")
			}
		})
	}
}
