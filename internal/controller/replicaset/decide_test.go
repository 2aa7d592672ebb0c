package replicaset

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func testRS(replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": "web"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "rs-uid", Generation: 3},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}}},
		},
	}
}

// pod builds a pod of namespace ns; opts adjust it.
func pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID(name), Labels: map[string]string{"app": "web", "tier": "front"},
		CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
	}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ownedBy(uid types.UID) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: uid, Controller: ptr.To(true)}}
	}
}

func labelled(l map[string]string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Labels = l } }

func onNode(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func phase(ph corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }

func created(ago time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-ago)) }
}

// ready marks the pod Running and Ready since ago.
func ready(ago time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestClaimPods(t *testing.T) {
	mine, other := ownedBy("rs-uid"), ownedBy("other-uid")
	tests := []struct {
		name        string
		deleting    bool
		pods        []*corev1.Pod
		owned       []string
		adopt       []string
		release     []string
		terminating int32
	}{
		{name: "owned and matching", pods: []*corev1.Pod{pod("a", mine)}, owned: []string{"a"}},
		{name: "orphan matching is adopted", pods: []*corev1.Pod{pod("a")}, adopt: []string{"a"}},
		{name: "orphan not matching is ignored", pods: []*corev1.Pod{pod("a", labelled(map[string]string{"app": "db"}))}},
		{name: "another controller's pod is ignored", pods: []*corev1.Pod{pod("a", other)}},
		{name: "owned but no longer matching is released", pods: []*corev1.Pod{pod("a", mine, labelled(nil))}, release: []string{"a"}},
		{name: "owned, being deleted, counts as terminating", pods: []*corev1.Pod{pod("a", mine, deleting)}, terminating: 1},
		{name: "owned and finished is neither", pods: []*corev1.Pod{pod("a", mine, phase(corev1.PodSucceeded)), pod("b", mine, phase(corev1.PodFailed))}},
		{name: "orphan finished is not adopted", pods: []*corev1.Pod{pod("a", phase(corev1.PodFailed))}},
		{name: "orphan being deleted is not adopted", pods: []*corev1.Pod{pod("a", deleting)}},
		{name: "other namespace is ignored", pods: []*corev1.Pod{pod("a", func(p *corev1.Pod) { p.Namespace = "elsewhere" })}},
		{
			name: "a ReplicaSet being deleted adopts and releases nothing", deleting: true,
			pods:  []*corev1.Pod{pod("a"), pod("b", mine, labelled(nil)), pod("c", mine)},
			owned: []string{"c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := testRS(3)
			if tt.deleting {
				rs.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			}
			c := ClaimPods(rs, tt.pods)
			got := []any{podNames(c.Owned), podNames(c.Adopt), podNames(c.Release), c.Terminating}
			want := []any{orEmpty(tt.owned), orEmpty(tt.adopt), orEmpty(tt.release), tt.terminating}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("owned, adopt, release, terminating (-want +got):\n%s", diff)
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestScale(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		pods     []*corev1.Pod
		create   int
		remove   []string
	}{
		{name: "none yet", replicas: 4, create: 4},
		{name: "one missing", replicas: 3, pods: []*corev1.Pod{pod("a"), pod("b")}, create: 1},
		{name: "exact", replicas: 2, pods: []*corev1.Pod{pod("a"), pod("b")}},
		{name: "scale to zero", replicas: 0, pods: []*corev1.Pod{pod("a"), pod("b")}, remove: []string{"a", "b"}},
		{name: "creation capped at the burst", replicas: 600, create: BurstReplicas},
		{
			name: "one too many: the unscheduled one goes", replicas: 2,
			pods:   []*corev1.Pod{pod("bound-1", onNode("n1"), ready(time.Hour)), pod("unbound"), pod("bound-2", onNode("n2"), ready(time.Hour))},
			remove: []string{"unbound"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create, remove := Scale(testRS(tt.replicas), tt.pods, now)
			if create != tt.create {
				t.Errorf("create = %d, want %d", create, tt.create)
			}
			if diff := cmp.Diff(orEmpty(tt.remove), podNames(remove)); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
		})
	}
}

// Rank orders pods for deletion, first to go first.
func TestRank(t *testing.T) {
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		related []*corev1.Pod // nil: the pods themselves
		want    []string
	}{
		{
			name: "unscheduled before scheduled",
			pods: []*corev1.Pod{pod("bound", onNode("n1")), pod("unbound")},
			want: []string{"unbound", "bound"},
		},
		{
			name: "pending before unknown before running",
			pods: []*corev1.Pod{pod("running", onNode("n"), phase(corev1.PodRunning)), pod("unknown", onNode("n"), phase(corev1.PodUnknown)), pod("pending", onNode("n"), phase(corev1.PodPending))},
			want: []string{"pending", "unknown", "running"},
		},
		{
			name: "not ready before ready",
			pods: []*corev1.Pod{pod("ready", onNode("n"), ready(time.Hour)), pod("unready", onNode("n"), phase(corev1.PodRunning))},
			want: []string{"unready", "ready"},
		},
		{
			name: "lower deletion cost first",
			pods: []*corev1.Pod{
				pod("dear", onNode("n"), ready(time.Hour), func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: "100"} }),
				pod("cheap", onNode("n"), ready(time.Hour), func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.PodDeletionCost: "-5"} }),
			},
			want: []string{"cheap", "dear"},
		},
		{
			name: "doubled up before alone",
			pods: []*corev1.Pod{pod("alone", onNode("n1"), ready(time.Hour)), pod("crowded", onNode("n2"), ready(time.Hour))},
			related: []*corev1.Pod{
				pod("alone", onNode("n1")), pod("crowded", onNode("n2")), pod("sibling", onNode("n2")),
			},
			want: []string{"crowded", "alone"},
		},
		{
			name: "ready for less time first, on a log scale",
			pods: []*corev1.Pod{pod("old", onNode("n"), ready(10*time.Hour)), pod("new", onNode("n"), ready(time.Minute))},
			want: []string{"new", "old"},
		},
		{
			name: "same log bucket of ready time falls through to uid",
			pods: []*corev1.Pod{pod("b", onNode("n"), ready(65*time.Minute)), pod("a", onNode("n"), ready(70*time.Minute))},
			want: []string{"a", "b"},
		},
		{
			name: "more restarts first",
			pods: []*corev1.Pod{
				pod("steady", onNode("n"), ready(time.Hour)),
				pod("flaky", onNode("n"), ready(time.Hour), func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 7}}
				}),
			},
			want: []string{"flaky", "steady"},
		},
		{
			name: "newer first",
			pods: []*corev1.Pod{pod("older", onNode("n"), created(48*time.Hour)), pod("newer", onNode("n"), created(time.Minute))},
			want: []string{"newer", "older"},
		},
		{
			name: "no creation time first",
			pods: []*corev1.Pod{pod("dated", onNode("n")), pod("undated", onNode("n"), func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} })},
			want: []string{"undated", "dated"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			related := tt.related
			if related == nil {
				related = tt.pods
			}
			if diff := cmp.Diff(tt.want, podNames(Rank(tt.pods, related, now))); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	failure := appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: "old"}
	tests := []struct {
		name        string
		minReady    int32
		old         []appsv1.ReplicaSetCondition
		pods        []*corev1.Pod
		terminating int32
		manageErr   error
		want        appsv1.ReplicaSetStatus
		wantNext    time.Time
	}{
		{
			name: "counts",
			pods: []*corev1.Pod{
				pod("full-ready", ready(time.Minute)),
				pod("partial-labels", labelled(map[string]string{"app": "web"})),
				pod("full-unready"),
			},
			terminating: 2,
			want: appsv1.ReplicaSetStatus{
				Replicas: 3, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1,
				TerminatingReplicas: ptr.To[int32](2), ObservedGeneration: 3,
			},
		},
		{
			name: "minReadySeconds holds availability back", minReady: 60,
			pods: []*corev1.Pod{pod("long", ready(2*time.Minute)), pod("fresh", ready(10*time.Second))},
			want: appsv1.ReplicaSetStatus{
				Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1,
				TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 3,
			},
			wantNext: now.Add(50 * time.Second),
		},
		{
			name: "creation failure sets the condition", manageErr: errors.New("quota"),
			want: appsv1.ReplicaSetStatus{
				TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 3,
				Conditions: []appsv1.ReplicaSetCondition{{
					Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
					Message: "quota", LastTransitionTime: metav1.NewTime(now),
				}},
			},
		},
		{
			name: "an existing failure condition is kept while failing", manageErr: errors.New("again"),
			old:  []appsv1.ReplicaSetCondition{failure},
			want: appsv1.ReplicaSetStatus{TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 3, Conditions: []appsv1.ReplicaSetCondition{failure}},
		},
		{
			name: "success removes the failure condition",
			old:  []appsv1.ReplicaSetCondition{failure},
			want: appsv1.ReplicaSetStatus{TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := testRS(int32(len(tt.pods)))
			rs.Spec.MinReadySeconds = tt.minReady
			rs.Status.Conditions = tt.old
			got, next := Status(rs, tt.pods, tt.terminating, tt.manageErr, true, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if !next.Equal(tt.wantNext) {
				t.Errorf("next = %v, want %v", next, tt.wantNext)
			}
		})
	}
}

func TestNewPod(t *testing.T) {
	rs := testRS(1)
	rs.Spec.Template.Annotations = map[string]string{"a": "b"}
	p := NewPod(rs)
	want := metav1.ObjectMeta{
		GenerateName: "web-",
		Namespace:    "ns",
		Labels:       map[string]string{"app": "web", "tier": "front"},
		Annotations:  map[string]string{"a": "b"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
	if diff := cmp.Diff(want, p.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	p.Labels["app"] = "changed"
	if rs.Spec.Template.Labels["app"] != "web" {
		t.Error("NewPod shares the template's labels map")
	}
}
