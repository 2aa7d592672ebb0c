package garbagecollector_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// statefulSet is what makeStatefulSet made: the set and the names of what
// it owns.
type statefulSet struct {
	set       *appsv1.StatefulSet
	pods      []string
	revisions []string
	// ownedClaims name the set as owner (whenDeleted: Delete); keptClaims
	// name no owner.
	ownedClaims, keptClaims []string
}

// makeStatefulSet creates StatefulSet default/name with n pods, one
// revision and a claim per pod, as the StatefulSet controller would: the
// pods and the revision are owned by the set, and so are the claims when
// whenDeleted is Delete.
func (w *world) makeStatefulSet(name string, n int, whenDeleted appsv1.PersistentVolumeClaimRetentionPolicyType, finalizers ...string) statefulSet {
	w.T.Helper()
	labels := map[string]string{"app": name}
	set, err := w.Client.AppsV1().StatefulSets("default").Create(w.Ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Finalizers: finalizers},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "busybox",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: whenDeleted, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}, metav1.CreateOptions{})
	w.Must("creating statefulset", err)
	controller := metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "StatefulSet", Name: set.Name, UID: set.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	s := statefulSet{set: set}
	rev, err := w.Client.AppsV1().ControllerRevisions("default").Create(w.Ctx, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: "default", Labels: labels, OwnerReferences: []metav1.OwnerReference{controller}},
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
		Revision:   1,
	}, metav1.CreateOptions{})
	w.Must("creating revision", err)
	s.revisions = append(s.revisions, rev.Name)
	for i := range n {
		pod := w.createPod(fmt.Sprintf("%s-%d", name, i), nil, controller)
		s.pods = append(s.pods, pod.Name)
		claim := "data-" + pod.Name
		if whenDeleted == appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			w.createClaim(claim, ownerRef("apps/v1", "StatefulSet", set))
			s.ownedClaims = append(s.ownedClaims, claim)
		} else {
			w.createClaim(claim)
			s.keptClaims = append(s.keptClaims, claim)
		}
	}
	return s
}

// contents is what namespace default holds: "kind/name" of every pod not
// being deleted, revision and claim, each with its owners.
func (w *world) contents() map[string][]string {
	w.T.Helper()
	out := map[string][]string{}
	for _, p := range w.Pods() {
		out["pod/"+p.Name] = owners(&p)
	}
	revs, err := w.Client.AppsV1().ControllerRevisions("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing revisions", err)
	for _, r := range revs.Items {
		out["revision/"+r.Name] = owners(&r)
	}
	claims, err := w.Client.CoreV1().PersistentVolumeClaims("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing claims", err)
	for _, c := range claims.Items {
		out["claim/"+c.Name] = owners(&c)
	}
	return out
}

// of is what s puts in contents, every object naming the set as owner
// when owned is true and naming none when it is false.
func (s statefulSet) of(owned bool) map[string][]string {
	var ref []string
	if owned {
		ref = []string{"StatefulSet/" + s.set.Name}
	}
	out := map[string][]string{}
	for _, p := range s.pods {
		out["pod/"+p] = ref
	}
	for _, r := range s.revisions {
		out["revision/"+r] = ref
	}
	for _, c := range s.ownedClaims {
		out["claim/"+c] = ref
	}
	for _, c := range s.keptClaims {
		out["claim/"+c] = nil
	}
	return out
}

// union merges maps.
func union(ms ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Deleting a StatefulSet deletes its pods, its revisions and the claims
// it owns (whenDeleted: Delete); claims it does not own, and another
// set's objects, stay.
func TestDeletingStatefulSet(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	db := w.makeStatefulSet("db", 2, appsv1.DeletePersistentVolumeClaimRetentionPolicyType)
	cache := w.makeStatefulSet("cache", 1, appsv1.DeletePersistentVolumeClaimRetentionPolicyType)
	kept := w.makeStatefulSet("kept", 1, appsv1.RetainPersistentVolumeClaimRetentionPolicyType)
	w.Must("gc sync", g.Sync(w.Ctx))
	if diff := cmp.Diff(union(db.of(true), cache.of(true), kept.of(true)), w.contents()); diff != "" {
		t.Fatalf("before any deletion (-want +got):\n%s", diff)
	}

	w.Must("deleting db", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "db", metav1.DeleteOptions{}))
	w.Must("deleting kept", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "kept", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	want := union(cache.of(true), map[string][]string{"claim/data-kept-0": nil})
	if diff := cmp.Diff(want, w.contents()); diff != "" {
		t.Errorf("after deleting db and kept (-want +got):\n%s", diff)
	}
}

// A StatefulSet recreated under the same name does not keep the old one's
// objects.
func TestRecreatedStatefulSet(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	old := w.makeStatefulSet("db", 1, appsv1.DeletePersistentVolumeClaimRetentionPolicyType)
	w.Must("deleting db", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "db", metav1.DeleteOptions{}))
	_, err := w.Client.AppsV1().StatefulSets("default").Create(w.Ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec:       old.set.Spec,
	}, metav1.CreateOptions{})
	w.Must("recreating db", err)
	w.Must("gc sync", g.Sync(w.Ctx))
	if diff := cmp.Diff(map[string][]string{}, w.contents()); diff != "" {
		t.Errorf("the old set's objects (-want +got):\n%s", diff)
	}
}

// A claim owned by a pod of a deleted StatefulSet (whenScaled: Delete,
// ordinal scaled down) goes once the pod has gone: the collector follows
// the chain set, pod, claim over passes.
func TestStatefulSetChain(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	db := w.makeStatefulSet("db", 1, appsv1.RetainPersistentVolumeClaimRetentionPolicyType)
	pod, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, db.pods[0], metav1.GetOptions{})
	w.Must("getting pod", err)
	w.createClaim("scaled-db-0", ownerRef("v1", "Pod", pod))

	w.Must("deleting db", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "db", metav1.DeleteOptions{}))
	for i := 0; i < 3; i++ {
		w.Must("gc sync", g.Sync(w.Ctx))
	}
	want := map[string][]string{"claim/data-db-0": nil}
	if diff := cmp.Diff(want, w.contents()); diff != "" {
		t.Errorf("after deleting db (-want +got):\n%s", diff)
	}
}

// A StatefulSet deleted with the orphan finalizer leaves its pods,
// revisions and claims without the reference, then goes.
func TestStatefulSetOrphan(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	db := w.makeStatefulSet("db", 2, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, metav1.FinalizerOrphanDependents)
	w.Must("deleting db", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "db", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	if diff := cmp.Diff(db.of(false), w.contents()); diff != "" {
		t.Errorf("after orphaning (-want +got):\n%s", diff)
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, err := w.Client.AppsV1().StatefulSets("default").Get(w.Ctx, "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("orphaning StatefulSet still there: %v", err)
	}
	if diff := cmp.Diff(db.of(false), w.contents()); diff != "" {
		t.Errorf("after the set went (-want +got):\n%s", diff)
	}
}

// A StatefulSet deleted with the foregroundDeletion finalizer sees its
// pods, revisions and claims deleted, then goes.
func TestStatefulSetForeground(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	w.makeStatefulSet("db", 2, appsv1.DeletePersistentVolumeClaimRetentionPolicyType, metav1.FinalizerDeleteDependents)
	w.Must("deleting db", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "db", metav1.DeleteOptions{}))
	set, err := w.Client.AppsV1().StatefulSets("default").Get(w.Ctx, "db", metav1.GetOptions{})
	w.Must("the set waits for its finalizer", err)
	if set.DeletionTimestamp == nil {
		t.Fatal("StatefulSet not marked for deletion")
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if diff := cmp.Diff(map[string][]string{}, w.contents()); diff != "" {
		t.Errorf("dependents left (-want +got):\n%s", diff)
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, err := w.Client.AppsV1().StatefulSets("default").Get(w.Ctx, "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("foreground StatefulSet still there: %v", err)
	}
}

// A StatefulSet being deleted with the foregroundDeletion finalizer and
// no dependents left loses it in the next pass, though nothing names it.
func TestStatefulSetForegroundWithoutDependents(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	w.makeStatefulSet("db", 0, appsv1.RetainPersistentVolumeClaimRetentionPolicyType, metav1.FinalizerDeleteDependents)
	w.Must("deleting the revision", w.Client.AppsV1().ControllerRevisions("default").Delete(w.Ctx, "db-1", metav1.DeleteOptions{}))
	w.Must("deleting db", w.Client.AppsV1().StatefulSets("default").Delete(w.Ctx, "db", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	_, err := w.Client.AppsV1().StatefulSets("default").Get(w.Ctx, "db", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("foreground StatefulSet with no dependents still there: %v", err)
	}
}
