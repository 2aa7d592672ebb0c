package statefulset

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var (
	epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now   = epoch.Add(time.Hour)
)

// testSet is StatefulSet ns/web of replicas pods, OrderedReady,
// RollingUpdate with partition 0, as the API server defaults it.
func testSet(replicas int32, opts ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid", Generation: 2},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			ServiceName: "web-svc",
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}},
			},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
			},
		},
	}
	for _, o := range opts {
		o(set)
	}
	return set
}

func parallel(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }

// withClaims adds the volumeClaimTemplate "data", labelled tier=db.
func withClaims(s *appsv1.StatefulSet) {
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
}

func retention(whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: whenDeleted, WhenScaled: whenScaled}
	}
}

func partition(p int32) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(p) }
}

func onDelete(s *appsv1.StatefulSet) {
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
}

func minReady(secs int32) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = secs }
}

func mustRevision(t *testing.T, set *appsv1.StatefulSet, n int64) *appsv1.ControllerRevision {
	t.Helper()
	cr, err := NewRevision(set, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// newer is set with image v2: its template's next revision.
func newer(set *appsv1.StatefulSet) *appsv1.StatefulSet {
	s := set.DeepCopy()
	s.Spec.Template.Spec.Containers[0].Image = "v2"
	return s
}

// stsPod is the pod of set at ordinal, as the API server returns it
// (uid, phase Pending), labelled with revision; opts adjust it.
func stsPod(set *appsv1.StatefulSet, ordinal int, revision string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := NewPod(set, ordinal, revision)
	p.UID = types.UID("uid-" + p.Name)
	p.Status.Phase = corev1.PodPending
	for _, o := range opts {
		o(p)
	}
	return p
}

// ready marks a pod Running and Ready since ago before now.
func ready(ago time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	}
}

func running(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }

func phase(ph corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Minute))) }

// summary is one line per action: "<kind> <pod>[ (<reason>)]".
func summary(plan Plan) []string {
	out := []string{}
	for _, a := range plan.Actions() {
		s := a.Kind.String() + " " + a.Pod.Name
		if a.Reason != "" {
			s += " (" + a.Reason + ")"
		}
		out = append(out, s)
	}
	return out
}

func TestDecide(t *testing.T) {
	base := testSet(3)
	rev1 := mustRevision(t, base, 1)
	rev2 := mustRevision(t, newer(base), 2)
	r1, r2 := rev1.Name, rev2.Name
	tests := []struct {
		name     string
		set      *appsv1.StatefulSet
		current  *appsv1.ControllerRevision // default rev1
		update   *appsv1.ControllerRevision // default rev1
		pods     []*corev1.Pod
		want     []string
		wantWait string
	}{
		{
			name: "ordered: creates the first pod and waits", set: base,
			want: []string{"CreatePod web-0"}, wantWait: "waiting for Pod web-0 to be created",
		},
		{
			name: "ordered: a pending pod holds the next", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1)},
			want: []string{}, wantWait: "waiting for Pod web-0 to be Running and Ready",
		},
		{
			name: "ordered: running but not ready holds", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, running)},
			want: []string{}, wantWait: "waiting for Pod web-0 to be Running and Ready",
		},
		{
			name: "ordered: next pod once the previous is ready", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute))},
			want: []string{"CreatePod web-1"}, wantWait: "waiting for Pod web-1 to be created",
		},
		{
			name: "ordered: a gap is filled first", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 2, r1, ready(time.Minute))},
			want: []string{"CreatePod web-1"}, wantWait: "waiting for Pod web-1 to be created",
		},
		{
			name: "ordered: minReadySeconds holds the next until available", set: testSet(3, minReady(30)),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(30*time.Second))},
			want: []string{}, wantWait: "waiting for Pod web-0 to be Available",
		},
		{
			name: "ordered: available after minReadySeconds", set: testSet(3, minReady(30)),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(31*time.Second))},
			want: []string{"CreatePod web-1"}, wantWait: "waiting for Pod web-1 to be created",
		},
		{
			name: "parallel: creates every missing pod", set: testSet(3, parallel),
			pods: []*corev1.Pod{stsPod(base, 1, r1)},
			want: []string{"CreatePod web-0", "CreatePod web-2"}, wantWait: "waiting for Pod web-2 to update",
		},
		{
			name: "ordered: a terminating pod keeps its ordinal and halts", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute), deleting)},
			want: []string{}, wantWait: "waiting for Pod web-0 to Terminate",
		},
		{
			name: "parallel: a terminating pod keeps its ordinal, the others go on", set: testSet(2, parallel),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute), deleting)},
			want: []string{"CreatePod web-1"}, wantWait: "waiting for Pod web-1 to update",
		},
		{
			name: "ordered: a failed pod is deleted, and the pass stops", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, phase(corev1.PodFailed))},
			want: []string{"DeletePod web-1 (failed)"}, wantWait: "waiting for failed Pod web-1 to be gone",
		},
		{
			name: "ordered: a succeeded pod is deleted too", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, phase(corev1.PodSucceeded))},
			want: []string{"DeletePod web-0 (succeeded)"}, wantWait: "waiting for succeeded Pod web-0 to be gone",
		},
		{
			name: "a failed pod being deleted is waited for", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, phase(corev1.PodFailed), deleting)},
			want: []string{}, wantWait: "waiting for failed Pod web-0 to be gone",
		},
		{
			name: "ordered scale down: highest first, one per pass", set: testSet(1),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(base, 2, r1, ready(time.Minute))},
			want: []string{"DeletePod web-2 (scale down)"},
		},
		{
			name: "ordered scale down waits for the pods in range", set: testSet(1),
			pods: []*corev1.Pod{stsPod(base, 0, r1, running), stsPod(base, 1, r1, ready(time.Minute))},
			want: []string{}, wantWait: "waiting for Pod web-0 to be Running and Ready",
		},
		{
			name: "ordered scale down waits for a terminating condemned pod", set: testSet(1),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(base, 2, r1, ready(time.Minute), deleting)},
			want: []string{}, wantWait: "waiting for Pod web-2 to Terminate prior to scale down",
		},
		{
			name: "ordered scale down deletes the first unhealthy pod", set: testSet(1),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, running)},
			want: []string{"DeletePod web-1 (scale down)"},
		},
		{
			name: "ordered scale down: an unhealthy pod above the first unhealthy waits", set: testSet(1),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, running), stsPod(base, 2, r1, running)},
			want: []string{}, wantWait: "waiting for Pod web-1 to be Running and Ready prior to scale down",
		},
		{
			name: "ordered scale down waits for availability", set: testSet(1, minReady(60)),
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Hour)), stsPod(base, 1, r1, ready(time.Hour)), stsPod(base, 2, r1, ready(time.Second))},
			want: []string{}, wantWait: "waiting for Pod web-2 to be Available prior to scale down",
		},
		{
			name: "parallel scale down deletes them all", set: testSet(1, parallel),
			pods: []*corev1.Pod{stsPod(base, 0, r1, running), stsPod(base, 1, r1), stsPod(base, 2, r1, ready(time.Minute))},
			want: []string{"DeletePod web-2 (scale down)", "DeletePod web-1 (scale down)"}, wantWait: "waiting for Pod web-0 to update",
		},
		{
			name: "rolling update deletes the highest old pod", set: newer(base), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(base, 2, r1, ready(time.Minute))},
			want: []string{"DeletePod web-2 (update)"},
		},
		{
			name: "rolling update: the updated pod is waited for (ordered)", set: newer(base), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(newer(base), 2, r2, running)},
			want: []string{}, wantWait: "waiting for Pod web-2 to be Running and Ready",
		},
		{
			name: "rolling update: the updated pod is waited for (parallel)", set: testSet(3, parallel, func(s *appsv1.StatefulSet) { *s = *newer(s) }), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(newer(base), 2, r2, running)},
			want: []string{}, wantWait: "waiting for Pod web-2 to update",
		},
		{
			name: "rolling update: a terminating old pod is waited for", set: testSet(3, parallel, func(s *appsv1.StatefulSet) { *s = *newer(s) }), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(base, 2, r1, ready(time.Minute), deleting)},
			want: []string{}, wantWait: "waiting for Pod web-2 to update",
		},
		{
			name: "rolling update goes on below an updated ready pod", set: newer(base), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(newer(base), 2, r2, ready(time.Second))},
			want: []string{"DeletePod web-1 (update)"},
		},
		{
			name: "rolling update stops at the partition", set: testSet(3, partition(2), func(s *appsv1.StatefulSet) { *s = *newer(s) }), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(newer(base), 2, r2, ready(time.Second))},
			want: []string{},
		},
		{
			name: "OnDelete never deletes for an update", set: testSet(3, onDelete, func(s *appsv1.StatefulSet) { *s = *newer(s) }), update: rev2,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute)), stsPod(base, 1, r1, ready(time.Minute)), stsPod(base, 2, r1, ready(time.Minute))},
			want: []string{},
		},
		{
			name: "a set being deleted gets nothing", set: testSet(3, func(s *appsv1.StatefulSet) { s.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }),
			pods: []*corev1.Pod{stsPod(base, 0, r1, phase(corev1.PodFailed)), stsPod(base, 5, r1, ready(time.Minute))},
			want: []string{},
		},
		{
			name: "start ordinal 5", set: testSet(2, func(s *appsv1.StatefulSet) { s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }),
			pods: []*corev1.Pod{stsPod(base, 5, r1, ready(time.Minute)), stsPod(base, 0, r1, ready(time.Minute))},
			want: []string{"CreatePod web-6"}, wantWait: "waiting for Pod web-6 to be created",
		},
		{
			name: "a pod without its pod-name label is updated", set: base,
			pods: []*corev1.Pod{stsPod(base, 0, r1, ready(time.Minute), func(p *corev1.Pod) { delete(p.Labels, appsv1.StatefulSetPodNameLabel) })},
			want: []string{"UpdatePod web-0", "CreatePod web-1"}, wantWait: "waiting for Pod web-1 to be created",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, upd := tt.current, tt.update
			if cur == nil {
				cur = rev1
			}
			if upd == nil {
				upd = rev1
			}
			plan, err := Decide(tt.set, cur, upd, tt.pods, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summary(plan)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if plan.Wait != tt.wantWait {
				t.Errorf("wait = %q, want %q", plan.Wait, tt.wantWait)
			}
		})
	}
}

// Missing pods are made from the current revision below the partition
// and from the update revision at and above it; OnDelete, and
// RollingUpdate without rollingUpdate above status.currentReplicas, use
// the update revision.
func TestDecideRevisionOfNewPods(t *testing.T) {
	base := testSet(3, parallel)
	rev1 := mustRevision(t, base, 1)
	rev2 := mustRevision(t, newer(base), 2)
	tests := []struct {
		name string
		set  *appsv1.StatefulSet
		want map[string]string // pod → revision
	}{
		{"partition 2", testSet(3, parallel, partition(2)), map[string]string{"web-0": rev1.Name, "web-1": rev1.Name, "web-2": rev2.Name}},
		{"partition 0", testSet(3, parallel), map[string]string{"web-0": rev2.Name, "web-1": rev2.Name, "web-2": rev2.Name}},
		{"OnDelete", testSet(3, parallel, onDelete), map[string]string{"web-0": rev2.Name, "web-1": rev2.Name, "web-2": rev2.Name}},
		{"no rollingUpdate, 1 current replica", testSet(3, parallel, func(s *appsv1.StatefulSet) {
			s.Spec.UpdateStrategy.RollingUpdate = nil
			s.Status.CurrentReplicas = 1
		}), map[string]string{"web-0": rev1.Name, "web-1": rev2.Name, "web-2": rev2.Name}},
	}
	for _, tt := range tests {
		set := newer(tt.set)
		plan, err := Decide(set, rev1, rev2, nil, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, a := range plan.Replicas {
			got[a.Pod.Name] = revisionOf(a.Pod)
			wantImage := "v2"
			if revisionOf(a.Pod) == rev1.Name {
				wantImage = "v1"
			}
			if img := a.Pod.Spec.Containers[0].Image; img != wantImage {
				t.Errorf("%s: pod %s at %s has image %s, want %s", tt.name, a.Pod.Name, revisionOf(a.Pod), img, wantImage)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: revisions (-want +got):\n%s", tt.name, diff)
		}
	}
}

// Parallel plans are ordered by position within each phase, with the
// positions the executor batches by.
func TestDecideParallelIndexes(t *testing.T) {
	set := testSet(4, parallel)
	rev := mustRevision(t, set, 1)
	pods := []*corev1.Pod{stsPod(set, 1, rev.Name), stsPod(set, 6, rev.Name), stsPod(set, 5, rev.Name)}
	plan, err := Decide(set, rev, rev, pods, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range plan.Actions() {
		got = append(got, fmt.Sprintf("%s %s @%d", a.Kind, a.Pod.Name, a.Index))
	}
	want := []string{"CreatePod web-0 @0", "CreatePod web-2 @2", "CreatePod web-3 @3", "DeletePod web-6 @0", "DeletePod web-5 @1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if len(plan.InRange) != 4 || len(plan.Condemned) != 2 || plan.Monotonic {
		t.Errorf("plan has %d in range, %d condemned, monotonic %v; want 4, 2, false", len(plan.InRange), len(plan.Condemned), plan.Monotonic)
	}
}

func claimOf(set *appsv1.StatefulSet, ordinal int, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := Claims(set, ordinal)[0]
	c.UID = types.UID("uid-" + c.Name)
	for _, o := range opts {
		o(c)
	}
	return c
}

func ownedByRef(kind, name string, uid types.UID) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		apiVersion := "v1"
		if kind == "StatefulSet" {
			apiVersion = "apps/v1"
		}
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)})
	}
}

func claimMap(cs ...*corev1.PersistentVolumeClaim) map[string]*corev1.PersistentVolumeClaim {
	m := map[string]*corev1.PersistentVolumeClaim{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func refsOf(c *corev1.PersistentVolumeClaim) []string {
	out := []string{}
	for _, r := range c.OwnerReferences {
		out = append(out, fmt.Sprintf("%s/%s controller=%v", r.Kind, r.Name, ptr.Deref(r.Controller, false)))
	}
	return out
}

func TestDecideClaims(t *testing.T) {
	retainAll := retention(retain, retain)
	deleteAll := retention(remove, remove)
	type want struct {
		actions  []string
		wait     string
		newRefs  map[string][]string // new claim → its refs
		updRefs  map[string][]string // updated claim → its refs
		deleting []string
	}
	mkSet := func(opts ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
		return testSet(2, append([]func(*appsv1.StatefulSet){withClaims}, opts...)...)
	}
	base := mkSet()
	rev := mustRevision(t, base, 1).Name
	tests := []struct {
		name   string
		set    *appsv1.StatefulSet
		pods   []*corev1.Pod
		claims map[string]*corev1.PersistentVolumeClaim
		want   want
	}{
		{
			name: "retain: claims are created without owners", set: mkSet(retainAll),
			want: want{actions: []string{"CreatePod web-0"}, wait: "waiting for Pod web-0 to be created", newRefs: map[string][]string{"data-web-0": {}}},
		},
		{
			name: "whenDeleted Delete: the set controls new claims", set: mkSet(retention(remove, retain)),
			want: want{actions: []string{"CreatePod web-0"}, wait: "waiting for Pod web-0 to be created", newRefs: map[string][]string{"data-web-0": {"StatefulSet/web controller=true"}}},
		},
		{
			name: "an existing claim is reused", set: mkSet(retainAll), claims: claimMap(claimOf(base, 0)),
			want: want{actions: []string{"CreatePod web-0"}, wait: "waiting for Pod web-0 to be created", newRefs: map[string][]string{}},
		},
		{
			name: "a claim being deleted holds the pod back", set: mkSet(retainAll),
			claims: claimMap(claimOf(base, 0, func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = ptr.To(metav1.NewTime(now)) })),
			want:   want{actions: []string{"CreatePod web-0"}, wait: "waiting for Pod web-0 to be created", newRefs: map[string][]string{}, deleting: []string{"pvc data-web-0 is being deleted"}},
		},
		{
			name: "whenScaled Delete: a claim of a previous pod is waited for", set: mkSet(retention(retain, remove)),
			claims: claimMap(claimOf(base, 0, ownedByRef("Pod", "web-0", "old-uid"))),
			want:   want{actions: []string{}, wait: "waiting for the stale claims of Pod web-0 to be deleted"},
		},
		{
			name: "whenScaled Retain: a claim of a previous pod is reused", set: mkSet(retainAll),
			claims: claimMap(claimOf(base, 0, ownedByRef("Pod", "web-0", "old-uid"))),
			want:   want{actions: []string{"CreatePod web-0"}, wait: "waiting for Pod web-0 to be created", newRefs: map[string][]string{}},
		},
		{
			name: "policy changed to whenDeleted Delete: running pods' claims get the set", set: mkSet(retention(remove, retain)),
			pods:   []*corev1.Pod{stsPod(base, 0, rev, ready(time.Minute)), stsPod(base, 1, rev, ready(time.Minute))},
			claims: claimMap(claimOf(base, 0), claimOf(base, 1)),
			want: want{actions: []string{"UpdatePod web-0", "UpdatePod web-1"}, updRefs: map[string][]string{
				"data-web-0": {"StatefulSet/web controller=true"}, "data-web-1": {"StatefulSet/web controller=true"},
			}},
		},
		{
			name: "a pending pod's missing claim is created again", set: mkSet(retainAll),
			pods: []*corev1.Pod{stsPod(base, 0, rev)},
			want: want{actions: []string{"EnsureClaims web-0"}, wait: "waiting for Pod web-0 to be Running and Ready", newRefs: map[string][]string{"data-web-0": {}}},
		},
		{
			name: "whenScaled Delete: a condemned pod takes its claim, then goes", set: testSet(1, withClaims, deleteAll),
			pods: []*corev1.Pod{stsPod(base, 0, rev, ready(time.Minute)), stsPod(base, 1, rev, ready(time.Minute))},
			claims: claimMap(claimOf(base, 0, ownedByRef("StatefulSet", "web", "set-uid")),
				claimOf(base, 1, ownedByRef("StatefulSet", "web", "set-uid"))),
			want: want{actions: []string{"FixClaims web-1", "DeletePod web-1 (scale down)"}, updRefs: map[string][]string{
				"data-web-1": {"Pod/web-1 controller=true"},
			}},
		},
		{
			name: "another controller's claim is left alone", set: testSet(1, withClaims, deleteAll),
			pods: []*corev1.Pod{stsPod(base, 0, rev, ready(time.Minute)), stsPod(base, 1, rev, ready(time.Minute))},
			claims: claimMap(claimOf(base, 0, ownedByRef("StatefulSet", "web", "set-uid")),
				claimOf(base, 1, ownedByRef("Other", "boss", "boss-uid"))),
			want: want{actions: []string{"DeletePod web-1 (scale down)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRevision(t, tt.set, 1)
			plan, err := Decide(tt.set, r, r, tt.pods, tt.claims, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want.actions, summary(plan)); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if plan.Wait != tt.want.wait {
				t.Errorf("wait = %q, want %q", plan.Wait, tt.want.wait)
			}
			newRefs, updRefs := map[string][]string{}, map[string][]string{}
			var deletingErrs []string
			for _, a := range plan.Actions() {
				for _, c := range a.NewClaims {
					newRefs[c.Name] = refsOf(c)
					if c.Labels["app"] != "web" || c.Labels["tier"] != "db" || c.Namespace != "ns" {
						t.Errorf("claim %s: labels %v namespace %q, want the template's and the selector's, in ns", c.Name, c.Labels, c.Namespace)
					}
				}
				for _, c := range a.ClaimUpdates {
					updRefs[c.Name] = refsOf(c)
				}
				for _, e := range a.DeletingClaims {
					deletingErrs = append(deletingErrs, e.Error())
				}
			}
			if tt.want.newRefs != nil {
				if diff := cmp.Diff(tt.want.newRefs, newRefs); diff != "" {
					t.Errorf("new claims' refs (-want +got):\n%s", diff)
				}
			}
			if tt.want.updRefs == nil {
				tt.want.updRefs = map[string][]string{}
			}
			if diff := cmp.Diff(tt.want.updRefs, updRefs); diff != "" {
				t.Errorf("updated claims' refs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.deleting, deletingErrs); diff != "" {
				t.Errorf("claims being deleted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaimPods(t *testing.T) {
	set := testSet(3)
	mine := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "set-uid", Controller: ptr.To(true)}}
	}
	theirs := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
	}
	orphan := func(p *corev1.Pod) { p.OwnerReferences = nil }
	named := func(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Name = n } }
	relabel := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} }
	otherNS := func(p *corev1.Pod) { p.Namespace = "elsewhere" }
	pods := []*corev1.Pod{
		stsPod(set, 0, "r", mine),
		stsPod(set, 1, "r", mine, phase(corev1.PodFailed), deleting),
		stsPod(set, 2, "r", orphan),
		stsPod(set, 3, "r", orphan, deleting),
		stsPod(set, 4, "r", orphan, named("other-4")),
		stsPod(set, 5, "r", mine, relabel),
		stsPod(set, 6, "r", mine, named("webby")),
		stsPod(set, 7, "r", theirs),
		stsPod(set, 8, "r", orphan, otherNS),
	}
	names := func(ps []*corev1.Pod) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	c := ClaimPods(set, pods)
	if diff := cmp.Diff([]string{"web-0", "web-1"}, names(c.Owned)); diff != "" {
		t.Errorf("owned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web-2"}, names(c.Adopt)); diff != "" {
		t.Errorf("adopt (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"web-5", "webby"}, names(c.Release)); diff != "" {
		t.Errorf("release (-want +got):\n%s", diff)
	}
	set.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	c = ClaimPods(set, pods)
	if len(c.Adopt)+len(c.Release) != 0 || len(c.Owned) != 2 {
		t.Errorf("a set being deleted: owned %v adopt %v release %v; want only the two owned", names(c.Owned), names(c.Adopt), names(c.Release))
	}
}

func TestNewPod(t *testing.T) {
	set := testSet(3, withClaims, func(s *appsv1.StatefulSet) {
		s.Spec.Template.Annotations = map[string]string{"a": "b"}
		s.Spec.Template.Spec.Volumes = []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
	})
	p := NewPod(set, 2, "web-abc")
	want := metav1.ObjectMeta{
		Name: "web-2", GenerateName: "web-", Namespace: "ns",
		Labels: map[string]string{
			"app": "web", appsv1.StatefulSetPodNameLabel: "web-2", appsv1.PodIndexLabel: "2", appsv1.StatefulSetRevisionLabel: "web-abc",
		},
		Annotations: map[string]string{"a": "b"},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "set-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
	if diff := cmp.Diff(want, p.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if p.Spec.Hostname != "web-2" || p.Spec.Subdomain != "web-svc" {
		t.Errorf("hostname %q subdomain %q, want web-2 and web-svc", p.Spec.Hostname, p.Spec.Subdomain)
	}
	wantVolumes := []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-2"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if diff := cmp.Diff(wantVolumes, p.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if len(set.Spec.Template.Labels) != 1 || set.Spec.Template.Spec.Volumes[0].EmptyDir == nil {
		t.Error("NewPod changed the set's template")
	}
	if !identityMatches(set, p) || !storageMatches(set, p) {
		t.Error("a new pod does not match its own identity or storage")
	}
}

func TestOrdinal(t *testing.T) {
	tests := []struct {
		name       string
		wantParent string
		want       int
	}{
		{"web-0", "web", 0},
		{"web-12", "web", 12},
		{"my-web-3", "my-web", 3},
		{"web", "", -1},
		{"web-", "", -1},
		{"web-x", "", -1},
		{"web-99999999999", "web", -1},
	}
	for _, tt := range tests {
		parent, ord := parentAndOrdinal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.name}})
		if parent != tt.wantParent || ord != tt.want {
			t.Errorf("%s: parent %q ordinal %d, want %q %d", tt.name, parent, ord, tt.wantParent, tt.want)
		}
	}
}

func TestClaimsLabels(t *testing.T) {
	set := testSet(1, withClaims)
	set.Spec.VolumeClaimTemplates[0].Labels = nil
	c := Claims(set, 4)[0]
	if c.Name != "data-web-4" || c.Namespace != "ns" || !cmp.Equal(c.Labels, map[string]string{"app": "web"}) {
		t.Errorf("claim %s/%s labels %v, want ns/data-web-4 labelled by the selector", c.Namespace, c.Name, c.Labels)
	}
	c.Labels["x"] = "y"
	if _, ok := set.Spec.Selector.MatchLabels["x"]; ok {
		t.Error("a claim's labels share the selector's map")
	}
}

func TestStatus(t *testing.T) {
	base := testSet(3)
	r1 := mustRevision(t, base, 1)
	r2 := mustRevision(t, newer(base), 2)
	tests := []struct {
		name     string
		set      *appsv1.StatefulSet
		cur, upd *appsv1.ControllerRevision
		pods     []*corev1.Pod
		want     appsv1.StatefulSetStatus
		wantNext time.Time
	}{
		{
			name: "mid rollout", set: newer(base), cur: r1, upd: r2,
			pods: []*corev1.Pod{
				stsPod(base, 0, r1.Name, ready(time.Minute)), stsPod(base, 1, r1.Name, ready(time.Minute), deleting), stsPod(newer(base), 2, r2.Name, running),
			},
			want: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 1, UpdatedReplicas: 1, CurrentRevision: r1.Name, UpdateRevision: r2.Name},
		},
		{
			name: "rollout complete: currentRevision becomes updateRevision", set: newer(base), cur: r1, upd: r2,
			pods: []*corev1.Pod{
				stsPod(newer(base), 0, r2.Name, ready(time.Minute)), stsPod(newer(base), 1, r2.Name, ready(time.Minute)), stsPod(newer(base), 2, r2.Name, ready(time.Minute)),
			},
			want: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3, CurrentRevision: r2.Name, UpdateRevision: r2.Name},
		},
		{
			name: "OnDelete never completes", set: testSet(3, onDelete, func(s *appsv1.StatefulSet) { *s = *newer(s) }), cur: r1, upd: r2,
			pods: []*corev1.Pod{
				stsPod(newer(base), 0, r2.Name, ready(time.Minute)), stsPod(newer(base), 1, r2.Name, ready(time.Minute)), stsPod(newer(base), 2, r2.Name, ready(time.Minute)),
			},
			want: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 0, UpdatedReplicas: 3, CurrentRevision: r1.Name, UpdateRevision: r2.Name},
		},
		{
			name: "minReadySeconds: available later", set: testSet(3, minReady(10)), cur: r1, upd: r1,
			pods: []*corev1.Pod{
				stsPod(base, 0, r1.Name, ready(time.Minute)), stsPod(base, 1, r1.Name, ready(4*time.Second)), stsPod(base, 2, r1.Name, ready(10*time.Second)),
			},
			want:     appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 1, CurrentReplicas: 3, UpdatedReplicas: 3, CurrentRevision: r1.Name, UpdateRevision: r1.Name},
			wantNext: now,
		},
		{
			name: "a pod not yet created does not count", set: base, cur: r1, upd: r1,
			pods: []*corev1.Pod{stsPod(base, 0, r1.Name, phase(""))},
			want: appsv1.StatefulSetStatus{ObservedGeneration: 2, CurrentRevision: r1.Name, UpdateRevision: r1.Name},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, next := Status(tt.set, tt.cur, tt.upd, 0, tt.pods, now)
			tt.want.CollisionCount = ptr.To[int32](0)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if !next.Equal(tt.wantNext) {
				t.Errorf("next = %v, want %v", next, tt.wantNext)
			}
		})
	}
}

func TestStatusChanged(t *testing.T) {
	old := appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, CurrentRevision: "a", UpdateRevision: "a", CollisionCount: ptr.To[int32](0)}
	tests := []struct {
		name   string
		change func(*appsv1.StatefulSetStatus)
		want   bool
	}{
		{"same", func(*appsv1.StatefulSetStatus) {}, false},
		{"collision count alone", func(s *appsv1.StatefulSetStatus) { s.CollisionCount = ptr.To[int32](1) }, false},
		{"newer generation", func(s *appsv1.StatefulSetStatus) { s.ObservedGeneration = 3 }, true},
		{"older generation", func(s *appsv1.StatefulSetStatus) { s.ObservedGeneration = 1 }, false},
		{"ready", func(s *appsv1.StatefulSetStatus) { s.ReadyReplicas = 1 }, true},
		{"available", func(s *appsv1.StatefulSetStatus) { s.AvailableReplicas = 1 }, true},
		{"update revision", func(s *appsv1.StatefulSetStatus) { s.UpdateRevision = "b" }, true},
	}
	for _, tt := range tests {
		s := *old.DeepCopy()
		tt.change(&s)
		if got := StatusChanged(old, s); got != tt.want {
			t.Errorf("%s: StatusChanged = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// PodsAfter counts a created pod as the server returned it and a deleted
// one as terminating; a pod the pass failed to create is left out.
func TestPodsAfter(t *testing.T) {
	set := testSet(3, parallel)
	r := mustRevision(t, set, 1)
	pods := []*corev1.Pod{stsPod(set, 0, r.Name, phase(corev1.PodFailed)), stsPod(set, 4, r.Name, ready(time.Minute))}
	plan, err := Decide(set, r, r, pods, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	made := stsPod(set, 1, r.Name)
	after := plan.PodsAfter(map[string]*corev1.Pod{"web-1": made}, map[string]bool{"web-0": true, "web-4": true}, now)
	var got []string
	for _, p := range after {
		got = append(got, fmt.Sprintf("%s terminating=%v", p.Name, p.DeletionTimestamp != nil))
	}
	want := []string{"web-0 terminating=true", "web-1 terminating=false", "web-4 terminating=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods after (-want +got):\n%s", diff)
	}
	if pods[0].DeletionTimestamp != nil {
		t.Error("PodsAfter changed its input")
	}
}

func TestDecideBadRevision(t *testing.T) {
	set := testSet(1)
	bad := mustRevision(t, set, 1)
	bad.Data.Raw = []byte("{")
	if _, err := Decide(set, bad, bad, nil, nil, now); err == nil || !strings.Contains(err.Error(), bad.Name) {
		t.Errorf("Decide with undecodable revision: err = %v, want one naming it", err)
	}
}
