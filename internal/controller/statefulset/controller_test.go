package statefulset_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/statefulset"
	"knode/internal/registry"
	crreg "knode/internal/registry/controllerrevision"
	ssreg "knode/internal/registry/statefulset"
)

var quiet = slog.New(slog.DiscardHandler)

// world is apitest's World serving StatefulSets and ControllerRevisions,
// with this package's helpers.
type world struct{ *apitest.World }

func newWorld(t *testing.T) *world {
	return &world{apitest.NewWorld(t, apitest.Options{Kinds: []registry.Kind{ssreg.Kind(), crreg.Kind()}})}
}

// newSet is StatefulSet default/name of replicas pods (labels app=name,
// service name), as a user writes it; opts adjust it.
func newSet(name string, replicas int32, opts ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1", Command: []string{"sleep", "3600"}}}},
			},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func parallel(s *appsv1.StatefulSet) { s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }

func withClaims(s *appsv1.StatefulSet) {
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
}

func (w *world) controller() *statefulset.Controller {
	w.T.Helper()
	c, err := statefulset.New(statefulset.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	return c
}

func (w *world) create(s *appsv1.StatefulSet) *appsv1.StatefulSet {
	w.T.Helper()
	got, err := w.Client.AppsV1().StatefulSets(s.Namespace).Create(w.Ctx, s, metav1.CreateOptions{})
	w.Must("creating statefulset", err)
	return got
}

func (w *world) set(name string) *appsv1.StatefulSet {
	w.T.Helper()
	s, err := w.Client.AppsV1().StatefulSets("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting statefulset", err)
	return s
}

// change applies fn to StatefulSet name and writes it.
func (w *world) change(name string, fn func(*appsv1.StatefulSet)) {
	w.T.Helper()
	s := w.set(name)
	fn(s)
	_, err := w.Client.AppsV1().StatefulSets("default").Update(w.Ctx, s, metav1.UpdateOptions{})
	w.Must("updating statefulset", err)
}

func (w *world) sync(c *statefulset.Controller) {
	w.T.Helper()
	w.Must("sync", c.Sync(w.Ctx))
}

// podNames are the names of the pods of default not being deleted.
func (w *world) podNames() []string {
	w.T.Helper()
	out := []string{}
	for _, p := range w.Pods() {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

func (w *world) pod(name string) *corev1.Pod {
	w.T.Helper()
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting pod "+name, err)
	return p
}

func (w *world) claim(name string) *corev1.PersistentVolumeClaim {
	w.T.Helper()
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting claim "+name, err)
	return c
}

func (w *world) claimNames() []string {
	w.T.Helper()
	l, err := w.Client.CoreV1().PersistentVolumeClaims("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing claims", err)
	out := []string{}
	for _, c := range l.Items {
		out = append(out, c.Name)
	}
	sort.Strings(out)
	return out
}

// revisions are the ControllerRevisions of default as "name@revision",
// by revision number.
func (w *world) revisions() []string {
	w.T.Helper()
	l, err := w.Client.AppsV1().ControllerRevisions("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing revisions", err)
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Revision < l.Items[j].Revision })
	out := []string{}
	for _, r := range l.Items {
		out = append(out, fmt.Sprintf("%s@%d", r.Name, r.Revision))
	}
	return out
}

// events are the events about StatefulSet name, "Type Reason Message",
// in the order they were written.
func (w *world) events(name string) []string {
	w.T.Helper()
	l, err := w.Client.CoreV1().Events("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	out := []string{}
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "StatefulSet" && e.InvolvedObject.Name == name {
			out = append(out, e.Type+" "+e.Reason+" "+e.Message)
		}
	}
	return out
}

// readyAll marks the named pods Running and Ready.
func (w *world) readyAll(names ...string) {
	w.T.Helper()
	for _, n := range names {
		w.SetReady(n, true)
	}
}

// bind puts pod name on node n1 (so that deleting it is graceful).
func (w *world) bind(name string) {
	w.T.Helper()
	w.Must("binding "+name, w.Client.CoreV1().Pods("default").Bind(w.Ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "n1"},
	}, metav1.CreateOptions{}))
}

// rollout is kubectl rollout status's verdict on a StatefulSet
// (kubectl's StatefulSetStatusViewer): done, or what it waits for.
func rollout(s *appsv1.StatefulSet) (string, bool) {
	switch {
	case s.Spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType:
		return "rollout status is only available for RollingUpdate", true
	case s.Status.ObservedGeneration == 0 || s.Generation > s.Status.ObservedGeneration:
		return "waiting for statefulset spec update to be observed", false
	case s.Spec.Replicas != nil && s.Status.ReadyReplicas < *s.Spec.Replicas:
		return fmt.Sprintf("waiting for %d pods to be ready", *s.Spec.Replicas-s.Status.ReadyReplicas), false
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		if s.Spec.Replicas != nil && s.Status.UpdatedReplicas < *s.Spec.Replicas-*ru.Partition {
			return "waiting for partitioned roll out to finish", false
		}
		return "partitioned roll out complete", true
	}
	if s.Status.UpdateRevision != s.Status.CurrentRevision {
		return "waiting for statefulset rolling update to complete", false
	}
	return "rolling update complete", true
}

// OrderedReady: one pod at a time, each after the one before is Ready,
// each with its claim, identity and owner; events and status as upstream.
func TestOrderedReadyCreatesInOrder(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	created := w.create(newSet("web", 3, withClaims))

	w.sync(c)
	if diff := cmp.Diff([]string{"web-0"}, w.podNames()); diff != "" {
		t.Fatalf("pods after the first pass (-want +got):\n%s", diff)
	}
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0"}, w.podNames()); diff != "" {
		t.Fatalf("a pending web-0 let more pods start (-want +got):\n%s", diff)
	}
	s := w.set("web")
	p := w.pod("web-0")
	wantLabels := map[string]string{
		"app": "web", "statefulset.kubernetes.io/pod-name": "web-0", "apps.kubernetes.io/pod-index": "0",
		"controller-revision-hash": s.Status.UpdateRevision,
	}
	if diff := cmp.Diff(wantLabels, p.Labels); diff != "" {
		t.Errorf("pod labels (-want +got):\n%s", diff)
	}
	if p.Spec.Hostname != "web-0" || p.Spec.Subdomain != "web" {
		t.Errorf("hostname %q subdomain %q, want web-0 and web", p.Spec.Hostname, p.Spec.Subdomain)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != created.UID || ref.Kind != "StatefulSet" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("pod controller = %+v, want the StatefulSet, blocking deletion", ref)
	}
	if len(p.Spec.Volumes) == 0 || p.Spec.Volumes[0].PersistentVolumeClaim == nil || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-web-0" {
		t.Errorf("pod volumes %+v, want data from claim data-web-0", p.Spec.Volumes)
	}
	claim := w.claim("data-web-0")
	if diff := cmp.Diff(map[string]string{"app": "web", "tier": "db"}, claim.Labels); diff != "" {
		t.Errorf("claim labels (-want +got):\n%s", diff)
	}
	if len(claim.OwnerReferences) != 0 {
		t.Errorf("claim owners %+v under the Retain policy, want none", claim.OwnerReferences)
	}

	w.readyAll("web-0")
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods once web-0 is Ready (-want +got):\n%s", diff)
	}
	w.readyAll("web-1")
	w.sync(c)
	w.readyAll("web-2")
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1", "web-2"}, w.podNames()); diff != "" {
		t.Fatalf("pods at the end (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"data-web-0", "data-web-1", "data-web-2"}, w.claimNames()); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	s = w.set("web")
	rev := s.Status.UpdateRevision
	want := appsv1.StatefulSetStatus{
		ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
		CurrentRevision: rev, UpdateRevision: rev, CollisionCount: ptr.To[int32](0),
	}
	if diff := cmp.Diff(want, s.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if msg, done := rollout(s); !done {
		t.Errorf("kubectl rollout status: %s", msg)
	}
	if diff := cmp.Diff([]string{rev + "@1"}, w.revisions()); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(rev, "web-") {
		t.Errorf("revision name %q, want web-<hash>", rev)
	}
	var wantEvents []string
	for i := range 3 {
		wantEvents = append(wantEvents,
			fmt.Sprintf("Normal SuccessfulCreate create Claim data-web-%d Pod web-%d in StatefulSet web success", i, i),
			fmt.Sprintf("Normal SuccessfulCreate create Pod web-%d in StatefulSet web successful", i))
	}
	if diff := cmp.Diff(wantEvents, w.events("web")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Parallel starts every pod in one pass.
func TestParallelCreatesAllAtOnce(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 4, parallel))
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1", "web-2", "web-3"}, w.podNames()); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	if s := w.set("web").Status; s.Replicas != 4 || s.UpdatedReplicas != 4 || s.ReadyReplicas != 0 {
		t.Errorf("status replicas %d updated %d ready %d, want 4, 4, 0", s.Replicas, s.UpdatedReplicas, s.ReadyReplicas)
	}
}

// OrderedReady scales down from the highest ordinal, one pod per pass,
// and not while a pod in range is not Ready.
func TestScaleDownHighestFirst(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 3))
	for _, n := range []string{"web-0", "web-1", "web-2"} {
		w.sync(c)
		w.readyAll(n)
	}
	w.SetReady("web-0", false)
	w.change("web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1", "web-2"}, w.podNames()); diff != "" {
		t.Fatalf("scaled down while web-0 was not Ready (-want +got):\n%s", diff)
	}
	w.readyAll("web-0")
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("first scale-down pass (-want +got):\n%s", diff)
	}
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0"}, w.podNames()); diff != "" {
		t.Fatalf("second scale-down pass (-want +got):\n%s", diff)
	}
	ev := w.events("web")
	if got := ev[len(ev)-2:]; !cmp.Equal(got, []string{
		"Normal SuccessfulDelete delete Pod web-2 in StatefulSet web successful",
		"Normal SuccessfulDelete delete Pod web-1 in StatefulSet web successful",
	}) {
		t.Errorf("last events %q, want web-2's deletion then web-1's", got)
	}
}

// A pod being deleted keeps its ordinal until the API server has removed
// it: nothing replaces it, and with OrderedReady nothing after it moves.
// Once it is gone (force-deleted, as PodGC does for a dead node's pods),
// it is recreated.
func TestTerminatingPodBlocksItsOrdinal(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 2))
	w.sync(c)
	w.bind("web-0")
	w.readyAll("web-0")
	w.sync(c)
	w.bind("web-1")
	w.readyAll("web-1")
	w.sync(c)
	oldUID := w.pod("web-0").UID

	w.Must("deleting web-0", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-0", metav1.DeleteOptions{}))
	if w.pod("web-0").DeletionTimestamp == nil {
		t.Fatal("web-0 was removed at once; the test needs it Terminating")
	}
	w.Must("force-deleting web-1", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	w.sync(c)
	w.sync(c)
	if diff := cmp.Diff([]string{}, w.podNames()); diff != "" {
		t.Fatalf("pods while web-0 terminates (-want +got):\n%s", diff)
	}
	if p := w.pod("web-0"); p.UID != oldUID {
		t.Fatalf("web-0 was replaced while terminating")
	}
	s := w.set("web").Status
	if s.Replicas != 1 || s.CurrentReplicas != 0 || s.ReadyReplicas != 1 {
		t.Errorf("status replicas %d current %d ready %d, want the terminating pod counted as a replica only: 1, 0, 1", s.Replicas, s.CurrentReplicas, s.ReadyReplicas)
	}

	w.Must("force-deleting web-0", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0"}, w.podNames()); diff != "" {
		t.Fatalf("pods once web-0 is gone (-want +got):\n%s", diff)
	}
	if w.pod("web-0").UID == oldUID {
		t.Fatal("web-0 not recreated")
	}
	w.readyAll("web-0")
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods once the new web-0 is Ready (-want +got):\n%s", diff)
	}
}

// Parallel: a terminating pod holds only its own ordinal.
func TestTerminatingPodParallel(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 2, parallel))
	w.sync(c)
	w.bind("web-0")
	w.readyAll("web-0", "web-1")
	w.Must("deleting web-0", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-0", metav1.DeleteOptions{}))
	w.Must("deleting web-1", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-1", metav1.DeleteOptions{}))
	w.sync(c)
	if diff := cmp.Diff([]string{"web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	if w.pod("web-0").DeletionTimestamp == nil {
		t.Error("web-0 no longer terminating")
	}
}

// A Failed pod is deleted, and created again once gone.
func TestFailedPodIsRecreated(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 1))
	w.sync(c)
	p := w.pod("web-0")
	p.Status.Phase = corev1.PodFailed
	_, err := w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("failing web-0", err)
	w.sync(c)
	if diff := cmp.Diff([]string{}, w.podNames()); diff != "" {
		t.Fatalf("the failed pod was not deleted (-want +got):\n%s", diff)
	}
	w.sync(c)
	if got := w.pod("web-0"); got.UID == p.UID || got.Status.Phase != corev1.PodPending {
		t.Fatalf("web-0 uid %s phase %s, want a new pending pod", got.UID, got.Status.Phase)
	}
	if diff := cmp.Diff([]string{
		"Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful",
		"Normal SuccessfulDelete delete Pod web-0 in StatefulSet web successful",
		"Normal SuccessfulCreate create Pod web-0 in StatefulSet web successful",
	}, w.events("web")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A rolling update with a partition updates only the ordinals at and above
// it, highest first, each after the one above is Ready; with the partition
// at 0 it completes and currentRevision becomes updateRevision.
func TestRollingUpdateWithPartition(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 3))
	for _, n := range []string{"web-0", "web-1", "web-2"} {
		w.sync(c)
		w.readyAll(n)
	}
	w.sync(c)
	oldRev := w.set("web").Status.CurrentRevision

	w.change("web", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "busybox:2"
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](1)
	})
	w.sync(c)
	s := w.set("web")
	newRev := s.Status.UpdateRevision
	if newRev == oldRev || s.Status.CurrentRevision != oldRev {
		t.Fatalf("revisions current %s update %s, want %s and a new one", s.Status.CurrentRevision, newRev, oldRev)
	}
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("first update pass should delete web-2 (-want +got):\n%s", diff)
	}
	w.sync(c)
	if p := w.pod("web-2"); p.Labels[appsv1.StatefulSetRevisionLabel] != newRev || p.Spec.Containers[0].Image != "busybox:2" {
		t.Fatalf("web-2 recreated at %s with %s, want %s with busybox:2", p.Labels[appsv1.StatefulSetRevisionLabel], p.Spec.Containers[0].Image, newRev)
	}
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1", "web-2"}, w.podNames()); diff != "" {
		t.Fatalf("web-1 went before web-2 was Ready (-want +got):\n%s", diff)
	}
	w.readyAll("web-2")
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-2"}, w.podNames()); diff != "" {
		t.Fatalf("web-1 should go once web-2 is Ready (-want +got):\n%s", diff)
	}
	w.sync(c)
	w.readyAll("web-1")
	w.sync(c)
	w.sync(c)
	if got := w.pod("web-0").Labels[appsv1.StatefulSetRevisionLabel]; got != oldRev {
		t.Errorf("web-0 below the partition is at %s, want %s", got, oldRev)
	}
	s = w.set("web")
	want := appsv1.StatefulSetStatus{
		ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 1, UpdatedReplicas: 2,
		CurrentRevision: oldRev, UpdateRevision: newRev, CollisionCount: ptr.To[int32](0),
	}
	if diff := cmp.Diff(want, s.Status); diff != "" {
		t.Errorf("status at the partition (-want +got):\n%s", diff)
	}
	if msg, done := rollout(s); !done || msg != "partitioned roll out complete" {
		t.Errorf("kubectl rollout status: %s (done %v)", msg, done)
	}

	w.change("web", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0) })
	w.sync(c)
	if msg, done := rollout(w.set("web")); done {
		t.Errorf("kubectl rollout status done (%s) while web-0 is old", msg)
	}
	w.sync(c)
	w.readyAll("web-0")
	w.sync(c)
	s = w.set("web")
	want = appsv1.StatefulSetStatus{
		ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
		CurrentRevision: newRev, UpdateRevision: newRev, CollisionCount: ptr.To[int32](0),
	}
	if diff := cmp.Diff(want, s.Status); diff != "" {
		t.Errorf("status after the rollout (-want +got):\n%s", diff)
	}
	if msg, done := rollout(s); !done {
		t.Errorf("kubectl rollout status: %s", msg)
	}
}

// OnDelete deletes nothing for an update; a pod the user deletes comes
// back at the update revision.
func TestOnDelete(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 2, parallel, func(s *appsv1.StatefulSet) {
		s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}))
	w.sync(c)
	w.readyAll("web-0", "web-1")
	w.sync(c)
	w.change("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "busybox:2" })
	w.sync(c)
	w.sync(c)
	s := w.set("web")
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	if s.Status.UpdatedReplicas != 0 || s.Status.CurrentReplicas != 2 || s.Status.UpdateRevision == s.Status.CurrentRevision {
		t.Errorf("status %+v, want two current pods and a new update revision", s.Status)
	}
	w.Must("deleting web-1", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-1", metav1.DeleteOptions{}))
	w.sync(c)
	if p := w.pod("web-1"); p.Labels[appsv1.StatefulSetRevisionLabel] != s.Status.UpdateRevision || p.Spec.Containers[0].Image != "busybox:2" {
		t.Errorf("web-1 came back at %s with %s, want the update revision", p.Labels[appsv1.StatefulSetRevisionLabel], p.Spec.Containers[0].Image)
	}
	if got := w.pod("web-0").Labels[appsv1.StatefulSetRevisionLabel]; got != s.Status.CurrentRevision {
		t.Errorf("web-0 at %s, want it left at the current revision", got)
	}
}

func refs(c *corev1.PersistentVolumeClaim) []string {
	out := []string{}
	for _, r := range c.OwnerReferences {
		out = append(out, fmt.Sprintf("%s/%s/%s controller=%v", r.Kind, r.Name, r.UID, ptr.Deref(r.Controller, false)))
	}
	return out
}

// The retention policy is carried by the claims' owner references: with
// whenDeleted Delete the set controls them, with whenScaled Delete a
// condemned pod takes its claim before it goes. A claim still owned by a
// previous pod holds a new one back until it is gone.
func TestRetentionPolicyOwnerReferences(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	set := w.create(newSet("web", 2, parallel, withClaims, func(s *appsv1.StatefulSet) {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		}
	}))
	kept := w.create(newSet("db", 1, withClaims))
	w.sync(c)
	bySet := fmt.Sprintf("StatefulSet/web/%s controller=true", set.UID)
	for _, n := range []string{"data-web-0", "data-web-1"} {
		if diff := cmp.Diff([]string{bySet}, refs(w.claim(n))); diff != "" {
			t.Errorf("%s owners (-want +got):\n%s", n, diff)
		}
	}
	if diff := cmp.Diff([]string{}, refs(w.claim("data-db-0"))); diff != "" {
		t.Errorf("data-db-0 of %s (Retain) owners (-want +got):\n%s", kept.Name, diff)
	}

	w.readyAll("web-0", "web-1")
	web1 := w.pod("web-1")
	w.change("web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	w.sync(c)
	if diff := cmp.Diff([]string{"db-0", "web-0"}, w.podNames()); diff != "" {
		t.Fatalf("pods after scaling down (-want +got):\n%s", diff)
	}
	byPod := fmt.Sprintf("Pod/web-1/%s controller=true", web1.UID)
	if diff := cmp.Diff([]string{byPod}, refs(w.claim("data-web-1"))); diff != "" {
		t.Errorf("data-web-1 owners after scaling down (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{bySet}, refs(w.claim("data-web-0"))); diff != "" {
		t.Errorf("data-web-0 owners after scaling down (-want +got):\n%s", diff)
	}

	// Scaled up again before the garbage collector removed data-web-1:
	// web-1 waits for it.
	w.change("web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](2) })
	w.sync(c)
	if diff := cmp.Diff([]string{"db-0", "web-0"}, w.podNames()); diff != "" {
		t.Fatalf("web-1 started on a claim still owned by the old web-1 (-want +got):\n%s", diff)
	}
	w.Must("collecting data-web-1", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, "data-web-1", metav1.DeleteOptions{}))
	w.sync(c)
	if diff := cmp.Diff([]string{"db-0", "web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods once the stale claim is gone (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{bySet}, refs(w.claim("data-web-1"))); diff != "" {
		t.Errorf("new data-web-1 owners (-want +got):\n%s", diff)
	}
}

// A claim being deleted keeps its pod from being created, with upstream's
// FailedCreate warning, until it is gone.
func TestClaimBeingDeletedHoldsThePod(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-web-0", Namespace: "default", Finalizers: []string{"example.com/hold"}},
		Spec:       newSet("web", 1, withClaims).Spec.VolumeClaimTemplates[0].Spec,
	}
	_, err := w.Client.CoreV1().PersistentVolumeClaims("default").Create(w.Ctx, pvc, metav1.CreateOptions{})
	w.Must("creating the claim", err)
	w.Must("deleting the claim", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, "data-web-0", metav1.DeleteOptions{}))
	w.create(newSet("web", 1, withClaims))

	if err := c.Sync(w.Ctx); err == nil || !strings.Contains(err.Error(), "pvc data-web-0 is being deleted") {
		t.Fatalf("Sync = %v, want the claim being deleted", err)
	}
	if diff := cmp.Diff([]string{}, w.podNames()); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		"Warning FailedCreate create Pod web-0 in StatefulSet web failed error: pvc data-web-0 is being deleted",
	}, w.events("web")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	held := w.claim("data-web-0")
	held.Finalizers = nil
	_, err = w.Client.CoreV1().PersistentVolumeClaims("default").Update(w.Ctx, held, metav1.UpdateOptions{})
	w.Must("releasing the claim", err)
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0"}, w.podNames()); diff != "" {
		t.Fatalf("pods once the claim is gone (-want +got):\n%s", diff)
	}
	if w.claim("data-web-0").UID == held.UID {
		t.Error("the old claim is still there")
	}
}

// History: revisions are numbered, truncated to revisionHistoryLimit
// beyond the live ones, and an old template coming back renumbers its
// revision instead of making a new one.
func TestRevisionHistory(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 0, func(s *appsv1.StatefulSet) { s.Spec.RevisionHistoryLimit = ptr.To[int32](2) }))
	names := map[string]string{}
	for _, img := range []string{"v1", "v2", "v3", "v4"} {
		if img != "v1" {
			w.change("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = img })
		}
		w.sync(c)
		s := w.set("web")
		names[img] = s.Status.UpdateRevision
		if s.Status.CurrentRevision != s.Status.UpdateRevision {
			t.Errorf("%s: current %s, update %s; with no replicas the rollout is complete at once", img, s.Status.CurrentRevision, s.Status.UpdateRevision)
		}
	}
	// The pass that made v4 still had v3 as its current revision, so
	// both were live; the next pass drops v1.
	if diff := cmp.Diff([]string{names["v1"] + "@1", names["v2"] + "@2", names["v3"] + "@3", names["v4"] + "@4"}, w.revisions()); diff != "" {
		t.Errorf("revisions after four templates (-want +got):\n%s", diff)
	}
	w.sync(c)
	if diff := cmp.Diff([]string{names["v2"] + "@2", names["v3"] + "@3", names["v4"] + "@4"}, w.revisions()); diff != "" {
		t.Errorf("revisions one pass later (-want +got):\n%s", diff)
	}

	w.change("web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "v2" })
	w.sync(c)
	if got := w.set("web").Status.UpdateRevision; got != names["v2"] {
		t.Errorf("update revision after rolling back to v2 = %s, want %s", got, names["v2"])
	}
	if diff := cmp.Diff([]string{names["v3"] + "@3", names["v4"] + "@4", names["v2"] + "@5"}, w.revisions()); diff != "" {
		t.Errorf("revisions after the rollback (-want +got):\n%s", diff)
	}
}

// A revision of upstream's compatibility test keeps 1.33's name when the
// API server defaults its template: test-c77f6d978.
func TestRevisionNameMatchesUpstream(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	s := newSet("test", 0)
	s.Spec.Selector.MatchLabels = map[string]string{"app": "foo"}
	s.Spec.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"test": "value"}, Labels: map[string]string{"app": "foo"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Image: "test", Name: "test"}}},
	}
	w.create(s)
	w.sync(c)
	if got := w.set("test").Status.UpdateRevision; got != "test-c77f6d978" {
		t.Errorf("update revision %s, want upstream 1.33's test-c77f6d978", got)
	}
}

// A revision name taken by other data is a collision: the next name is
// the hash with collisionCount 1, which the status records.
func TestRevisionNameCollision(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	set := w.create(newSet("web", 0))
	want, err := statefulset.NewRevision(set, 1, 0)
	w.Must("making the revision", err)
	squatter := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: "default", Labels: map[string]string{"app": "other"}},
		Data:       want.Data,
		Revision:   1,
	}
	squatter.Data.Raw = []byte(`{"other":true}`)
	_, err = w.Client.AppsV1().ControllerRevisions("default").Create(w.Ctx, squatter, metav1.CreateOptions{})
	w.Must("creating the squatter", err)
	w.sync(c)
	s := w.set("web")
	if wantName := statefulset.RevisionName("web", statefulset.Hash(want, ptr.To[int32](1))); s.Status.UpdateRevision != wantName {
		t.Errorf("update revision %s, want %s (collision count 1)", s.Status.UpdateRevision, wantName)
	}
	if got := ptr.Deref(s.Status.CollisionCount, -1); got != 1 {
		t.Errorf("collisionCount %d, want 1", got)
	}
	// The next pass finds the revision it made and keeps the count.
	w.sync(c)
	if got := w.revisions(); len(got) != 2 {
		t.Errorf("revisions %v, want the squatter and one of ours", got)
	}
}

// Orphans are adopted: a matching pod named like a member, and a
// matching revision; a pod relabelled out of the selector is released
// (and, holding its name, keeps a replacement out). Once Ready, the adopted pod gets its identity labels and,
// lacking the update revision, is replaced by the rolling update.
func TestAdoptsAndReleases(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox:1"}}},
	}
	made, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, orphan, metav1.CreateOptions{})
	w.Must("creating the orphan pod", err)
	stranger := orphan.DeepCopy()
	stranger.Name = "other-0"
	_, err = w.Client.CoreV1().Pods("default").Create(w.Ctx, stranger, metav1.CreateOptions{})
	w.Must("creating a pod with another name", err)
	set := w.create(newSet("web", 1))
	rev, err := statefulset.NewRevision(newSet("web", 1, func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "old" }), 1, 0)
	w.Must("making a revision", err)
	rev.OwnerReferences = nil
	_, err = w.Client.AppsV1().ControllerRevisions("default").Create(w.Ctx, rev, metav1.CreateOptions{})
	w.Must("creating the orphan revision", err)

	w.sync(c)
	p := w.pod("web-0")
	if p.UID != made.UID || !metav1.IsControlledBy(p, set) {
		t.Fatalf("web-0 uid %s controller %+v, want the orphan adopted", p.UID, metav1.GetControllerOf(p))
	}
	if metav1.GetControllerOf(w.pod("other-0")) != nil {
		t.Error("other-0 adopted although its name is not a member's")
	}
	r, err := w.Client.AppsV1().ControllerRevisions("default").Get(w.Ctx, rev.Name, metav1.GetOptions{})
	w.Must("getting the revision", err)
	if !metav1.IsControlledBy(r, set) {
		t.Errorf("orphan revision not adopted: %+v", r.OwnerReferences)
	}
	if diff := cmp.Diff([]string{"other-0", "web-0"}, w.podNames()); diff != "" {
		t.Fatalf("pods while the adopted web-0 is pending (-want +got):\n%s", diff)
	}

	w.readyAll("web-0")
	w.sync(c)
	if diff := cmp.Diff([]string{
		"Normal SuccessfulUpdate update Pod web-0 in StatefulSet web successful",
		"Normal SuccessfulDelete delete Pod web-0 in StatefulSet web successful",
	}, w.events("web")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	w.sync(c)
	if p := w.pod("web-0"); p.UID == made.UID || p.Labels[appsv1.StatefulSetPodNameLabel] != "web-0" || p.Labels[appsv1.PodIndexLabel] != "0" {
		t.Fatalf("web-0 uid %s labels %v, want a new pod with its identity", p.UID, p.Labels)
	}

	p = w.pod("web-0")
	p.Labels["app"] = "moved"
	_, err = w.Client.CoreV1().Pods("default").Update(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("relabelling web-0", err)
	before := len(w.events("web"))
	// The released pod still holds the name web-0: creating its
	// replacement fails, as upstream's does, without an event.
	if err := c.Sync(w.Ctx); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Sync = %v, want the replacement refused: web-0 exists", err)
	}
	if ref := metav1.GetControllerOf(w.pod("web-0")); ref != nil {
		t.Errorf("relabelled pod still controlled by %+v", ref)
	}
	if got := w.events("web"); len(got) != before {
		t.Errorf("events after the release %q, want none new", got[before:])
	}
}

// minReadySeconds: the next pod waits until the previous one has been
// Ready for longer than it, and NextDue says when that is.
func TestMinReadySeconds(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 2, func(s *appsv1.StatefulSet) { s.Spec.MinReadySeconds = 10 }))
	w.sync(c)
	if !c.NextDue().IsZero() {
		t.Errorf("NextDue %v with no Ready pod, want zero", c.NextDue())
	}
	w.readyAll("web-0")
	readyAt := w.Clock.Now()
	w.sync(c)
	if due := c.NextDue(); !due.Equal(readyAt.Add(10 * time.Second)) {
		t.Errorf("NextDue = %v, want %v", due, readyAt.Add(10*time.Second))
	}
	if s := w.set("web").Status; s.ReadyReplicas != 1 || s.AvailableReplicas != 0 {
		t.Errorf("ready %d available %d, want 1 and 0", s.ReadyReplicas, s.AvailableReplicas)
	}
	w.Clock.Step(10 * time.Second)
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0"}, w.podNames()); diff != "" {
		t.Fatalf("web-1 started at exactly minReadySeconds (-want +got):\n%s", diff)
	}
	w.Clock.Step(time.Second)
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods after minReadySeconds (-want +got):\n%s", diff)
	}
	if s := w.set("web").Status; s.AvailableReplicas != 1 {
		t.Errorf("available %d, want 1", s.AvailableReplicas)
	}
}

// A StatefulSet being deleted leaves its pods to the garbage collector:
// a failed pod is neither deleted nor replaced.
func TestDeletedSetLeavesPods(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.create(newSet("web", 2, parallel, func(s *appsv1.StatefulSet) { s.Finalizers = []string{"example.com/hold"} }))
	w.sync(c)
	p := w.pod("web-1")
	p.Status.Phase = corev1.PodFailed
	_, err := w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("failing web-1", err)
	w.Must("deleting the set", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "web", metav1.DeleteOptions{}))
	w.sync(c)
	if diff := cmp.Diff([]string{"web-0", "web-1"}, w.podNames()); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	if got := w.set("web").Status.Replicas; got != 2 {
		t.Errorf("status replicas %d, want 2 (status is still written)", got)
	}
}

// Run reacts to a pod deletion without waiting for the resync.
func TestRunReplacesDeletedPods(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	w.create(newSet("web", 2, parallel))
	poll := func(what string, ok func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(w.Ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return ok(), nil })
		w.Must(what, err)
	}
	poll("waiting for the pods", func() bool { return cmp.Equal(w.podNames(), []string{"web-0", "web-1"}) })
	old := w.pod("web-1").UID
	w.Must("deleting web-1", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web-1", metav1.DeleteOptions{}))
	poll("waiting for the replacement", func() bool {
		p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "web-1", metav1.GetOptions{})
		return err == nil && p.UID != old
	})
}
