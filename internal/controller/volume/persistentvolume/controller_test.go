package persistentvolume_test

import (
	"fmt"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/volume/persistentvolume"
)

// quiet discards the controller's log.
var quiet = slog.New(slog.DiscardHandler)

const provisioner = "nfs.example.com"

// world is an API server on a fake clock with a PV controller on the same
// clock.
type world struct {
	*apitest.World
	ctrl *persistentvolume.Controller
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{World: apitest.NewWorld(t, apitest.Options{})}
	ctrl, err := persistentvolume.New(persistentvolume.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	w.ctrl = ctrl
	return w
}

// sync makes one pass and fails the test on an error.
func (w *world) sync() {
	w.T.Helper()
	w.Must("sync", w.ctrl.Sync(w.Ctx))
}

func (w *world) class(name string, mode storagev1.VolumeBindingMode, isDefault bool) {
	w.T.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode,
		ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete)}
	if isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	_, err := w.Client.StorageV1().StorageClasses().Create(w.Ctx, sc, metav1.CreateOptions{})
	w.Must("creating storageclass", err)
}

// volume creates a hostPath PV of class "manual" offering RWO; opts adjust
// it before creation.
func (w *world) volume(name, size string, opts ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	w.T.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              "manual",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
		},
	}
	for _, o := range opts {
		o(pv)
	}
	pv, err := w.Client.CoreV1().PersistentVolumes().Create(w.Ctx, pv, metav1.CreateOptions{})
	w.Must("creating persistentvolume", err)
	return pv
}

// claim creates default/name asking size RWO of class; nil class leaves
// spec.storageClassName unset.
func (w *world) claim(name, size string, class *string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	w.T.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: class,
		},
	}
	for _, o := range opts {
		o(c)
	}
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Create(w.Ctx, c, metav1.CreateOptions{})
	w.Must("creating persistentvolumeclaim", err)
	return c
}

func (w *world) getPV(name string) *corev1.PersistentVolume {
	w.T.Helper()
	pv, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting persistentvolume", err)
	return pv
}

func (w *world) getPVC(name string) *corev1.PersistentVolumeClaim {
	w.T.Helper()
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting persistentvolumeclaim", err)
	return c
}

// events lists "<kind>/<name> <type> <reason>: <message>" of every event,
// sorted.
func (w *world) events() []string {
	w.T.Helper()
	l, err := w.Client.CoreV1().Events(metav1.NamespaceAll).List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	var out []string
	for _, e := range l.Items {
		if e.Source.Component != persistentvolume.EventSource {
			w.T.Errorf("event %s has source %q", e.Name, e.Source.Component)
		}
		out = append(out, fmt.Sprintf("%s/%s %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message))
	}
	sort.Strings(out)
	return out
}

// boundPair is the parts of a binding the test compares.
type boundPair struct {
	ClaimRef                            *corev1.ObjectReference
	VolumeAnnotations, ClaimAnnotations map[string]string
	VolumePhase                         corev1.PersistentVolumePhase
	Transition                          time.Time
	VolumeName                          string
	ClaimPhase                          corev1.PersistentVolumeClaimPhase
	ClaimModes                          []corev1.PersistentVolumeAccessMode
	ClaimCapacity                       string
}

func (w *world) pair(pvName, claimName string) boundPair {
	w.T.Helper()
	pv, c := w.getPV(pvName), w.getPVC(claimName)
	p := boundPair{
		VolumeAnnotations: pv.Annotations, ClaimAnnotations: c.Annotations,
		VolumePhase: pv.Status.Phase, VolumeName: c.Spec.VolumeName,
		ClaimPhase: c.Status.Phase, ClaimModes: c.Status.AccessModes,
	}
	if pv.Spec.ClaimRef != nil {
		ref := *pv.Spec.ClaimRef
		ref.ResourceVersion = ""
		p.ClaimRef = &ref
	}
	if pv.Status.LastPhaseTransitionTime != nil {
		p.Transition = pv.Status.LastPhaseTransitionTime.UTC()
	}
	if q, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
		p.ClaimCapacity = q.String()
	}
	return p
}

func refTo(c *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID}
}

var rwo = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}

func TestStaticBinding(t *testing.T) {
	w := newWorld(t)
	w.volume("big", "10Gi")
	w.volume("small", "2Gi")
	w.volume("tiny", "500Mi")
	w.sync() // the volumes become Available
	if got := w.getPV("small").Status.Phase; got != corev1.VolumeAvailable {
		t.Fatalf("new volume phase = %q, want Available", got)
	}

	w.Clock.Step(time.Minute)
	claim := w.claim("data", "1Gi", ptr.To("manual"))
	w.sync()
	want := boundPair{
		ClaimRef:          refTo(claim),
		VolumeAnnotations: map[string]string{"pv.kubernetes.io/bound-by-controller": "yes"},
		ClaimAnnotations:  map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"},
		VolumePhase:       corev1.VolumeBound, Transition: apitest.Epoch.Add(time.Minute),
		VolumeName: "small", ClaimPhase: corev1.ClaimBound, ClaimModes: rwo, ClaimCapacity: "2Gi",
	}
	if diff := cmp.Diff(want, w.pair("small", "data")); diff != "" {
		t.Errorf("binding (-want +got):\n%s", diff)
	}
	for _, name := range []string{"big", "tiny"} {
		if pv := w.getPV(name); pv.Spec.ClaimRef != nil || pv.Status.Phase != corev1.VolumeAvailable {
			t.Errorf("%s: claimRef %v, phase %q; want unclaimed and Available", name, pv.Spec.ClaimRef, pv.Status.Phase)
		}
	}

	// A second pass writes nothing.
	before := w.getPV("small").ResourceVersion + "/" + w.getPVC("data").ResourceVersion
	w.Clock.Step(time.Minute)
	w.sync()
	if after := w.getPV("small").ResourceVersion + "/" + w.getPVC("data").ResourceVersion; after != before {
		t.Errorf("idle pass wrote: resourceVersions %s -> %s", before, after)
	}
	if got := w.events(); len(got) != 0 {
		t.Errorf("events: %q", got)
	}
}

func TestTwoClaimsNeverShareAVolume(t *testing.T) {
	w := newWorld(t)
	w.volume("only", "1Gi")
	w.sync()
	w.claim("a", "1Gi", ptr.To("manual"))
	w.claim("b", "1Gi", ptr.To("manual"))
	w.sync()
	if got := w.getPVC("a").Spec.VolumeName; got != "only" {
		t.Errorf("claim a bound to %q, want only", got)
	}
	b := w.getPVC("b")
	if b.Spec.VolumeName != "" || b.Status.Phase != corev1.ClaimPending {
		t.Errorf("claim b: volumeName %q, phase %q; want unbound and Pending", b.Spec.VolumeName, b.Status.Phase)
	}
	want := []string{"PersistentVolumeClaim/b Warning ProvisioningFailed: storageclass.storage.k8s.io \"manual\" not found"}
	if diff := cmp.Diff(want, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestClaimNamesItsVolume(t *testing.T) {
	w := newWorld(t)
	w.volume("small", "1Gi")
	w.volume("chosen", "5Gi")
	w.sync()
	claim := w.claim("data", "1Gi", ptr.To("manual"), func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "chosen" })
	w.sync()
	p := w.pair("chosen", "data")
	if diff := cmp.Diff(refTo(claim), p.ClaimRef); diff != "" {
		t.Errorf("claimRef (-want +got):\n%s", diff)
	}
	// The user chose the volume: only the volume side says the
	// controller bound it.
	if diff := cmp.Diff(map[string]string{"pv.kubernetes.io/bind-completed": "yes"}, p.ClaimAnnotations); diff != "" {
		t.Errorf("claim annotations (-want +got):\n%s", diff)
	}
	if p.ClaimPhase != corev1.ClaimBound || p.VolumePhase != corev1.VolumeBound {
		t.Errorf("phases: claim %q, volume %q", p.ClaimPhase, p.VolumePhase)
	}
}

func TestExternalProvisioning(t *testing.T) {
	w := newWorld(t)
	w.class("nfs", storagev1.VolumeBindingImmediate, false)
	claim := w.claim("data", "1Gi", ptr.To("nfs"))
	w.sync()
	got := w.getPVC("data")
	for _, ann := range []string{"volume.kubernetes.io/storage-provisioner", "volume.beta.kubernetes.io/storage-provisioner"} {
		if got.Annotations[ann] != provisioner {
			t.Errorf("annotation %s = %q, want %q", ann, got.Annotations[ann], provisioner)
		}
	}
	wantEvents := []string{"PersistentVolumeClaim/data Normal ExternalProvisioning: Waiting for a volume to be created either by the external provisioner 'nfs.example.com' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."}
	if diff := cmp.Diff(wantEvents, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// While the provisioner works, passes do not repeat the event.
	w.sync()
	if diff := cmp.Diff(wantEvents, w.events()); diff != "" {
		t.Errorf("events after a second pass (-want +got):\n%s", diff)
	}

	// The provisioner creates the volume, pointing at the claim.
	w.Clock.Step(time.Second)
	w.volume("pvc-"+string(claim.UID), "1Gi", func(pv *corev1.PersistentVolume) {
		pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": provisioner}
		pv.Spec.StorageClassName = "nfs"
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		pv.Spec.ClaimRef = refTo(claim)
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: provisioner, VolumeHandle: "h1"}}
	})
	w.sync()
	want := boundPair{
		ClaimRef:          refTo(claim),
		VolumeAnnotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisioner},
		ClaimAnnotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
			"volume.kubernetes.io/storage-provisioner": provisioner, "volume.beta.kubernetes.io/storage-provisioner": provisioner},
		VolumePhase: corev1.VolumeBound, Transition: apitest.Epoch.Add(time.Second),
		VolumeName: "pvc-" + string(claim.UID), ClaimPhase: corev1.ClaimBound, ClaimModes: rwo, ClaimCapacity: "1Gi",
	}
	if diff := cmp.Diff(want, w.pair("pvc-"+string(claim.UID), "data")); diff != "" {
		t.Errorf("binding (-want +got):\n%s", diff)
	}

	// Deleting the claim releases the volume; its deletion is the
	// provisioner's.
	w.Must("deleting claim", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, "data", metav1.DeleteOptions{}))
	w.Clock.Step(time.Second)
	w.sync()
	pv := w.getPV("pvc-" + string(claim.UID))
	if pv.Status.Phase != corev1.VolumeReleased || pv.Status.LastPhaseTransitionTime.UTC() != apitest.Epoch.Add(2*time.Second) {
		t.Errorf("volume phase %q since %v, want Released since %v", pv.Status.Phase, pv.Status.LastPhaseTransitionTime, apitest.Epoch.Add(2*time.Second))
	}
	if diff := cmp.Diff(wantEvents, w.events()); diff != "" {
		t.Errorf("events after release (-want +got):\n%s", diff)
	}
}

func TestWaitForFirstConsumer(t *testing.T) {
	w := newWorld(t)
	w.class("local", storagev1.VolumeBindingWaitForFirstConsumer, false)
	w.volume("disk", "1Gi", func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "local" })
	claim := w.claim("data", "1Gi", ptr.To("local"))
	w.sync()
	if got := w.getPVC("data"); got.Spec.VolumeName != "" || got.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim before the scheduler: volumeName %q, phase %q", got.Spec.VolumeName, got.Status.Phase)
	}
	if pv := w.getPV("disk"); pv.Spec.ClaimRef != nil || pv.Status.Phase != corev1.VolumeAvailable {
		t.Fatalf("volume before the scheduler: claimRef %v, phase %q", pv.Spec.ClaimRef, pv.Status.Phase)
	}
	wantEvents := []string{"PersistentVolumeClaim/data Normal WaitForFirstConsumer: waiting for first consumer to be created before binding"}
	if diff := cmp.Diff(wantEvents, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The scheduler pre-binds the volume; the controller completes it.
	pv := w.getPV("disk")
	pv.Spec.ClaimRef = refTo(claim)
	pv.Annotations = map[string]string{"pv.kubernetes.io/bound-by-controller": "yes"}
	_, err := w.Client.CoreV1().PersistentVolumes().Update(w.Ctx, pv, metav1.UpdateOptions{})
	w.Must("pre-binding", err)
	w.sync()
	if p := w.pair("disk", "data"); p.VolumeName != "disk" || p.ClaimPhase != corev1.ClaimBound || p.VolumePhase != corev1.VolumeBound {
		t.Errorf("after pre-binding: %+v", p)
	}

	// A claim with nothing to bind waits, then is provisioned once the
	// scheduler selects a node.
	w.claim("scratch", "1Gi", ptr.To("local"))
	w.sync()
	if _, ok := w.getPVC("scratch").Annotations["volume.kubernetes.io/storage-provisioner"]; ok {
		t.Fatal("claim handed to the provisioner before a node was selected")
	}
	c := w.getPVC("scratch")
	c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-1"}
	_, err = w.Client.CoreV1().PersistentVolumeClaims("default").Update(w.Ctx, c, metav1.UpdateOptions{})
	w.Must("selecting a node", err)
	w.sync()
	if got := w.getPVC("scratch").Annotations["volume.kubernetes.io/storage-provisioner"]; got != provisioner {
		t.Errorf("provisioner annotation after node selection = %q, want %q", got, provisioner)
	}
}

func TestWaitForPodScheduled(t *testing.T) {
	w := newWorld(t)
	w.class("local", storagev1.VolumeBindingWaitForFirstConsumer, false)
	w.claim("data", "1Gi", ptr.To("local"))
	_, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating pod", err)
	w.sync()
	want := []string{"PersistentVolumeClaim/data Normal WaitForPodScheduled: waiting for pod web to be scheduled"}
	if diff := cmp.Diff(want, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestDefaultClassIsAssigned(t *testing.T) {
	w := newWorld(t)
	w.claim("early", "1Gi", nil)
	w.claim("none", "1Gi", ptr.To(""))
	w.sync()
	if got := w.getPVC("early").Spec.StorageClassName; got != nil {
		t.Fatalf("class assigned with no default class: %q", *got)
	}
	w.class("standard", storagev1.VolumeBindingImmediate, true)
	w.sync()
	if got := w.getPVC("early").Spec.StorageClassName; got == nil || *got != "standard" {
		t.Errorf("early claim's class = %v, want standard", got)
	}
	if got := w.getPVC("none").Spec.StorageClassName; got == nil || *got != "" {
		t.Errorf("claim that asked for no class got %v", got)
	}
	// The next pass provisions it.
	w.sync()
	if got := w.getPVC("early").Annotations["volume.kubernetes.io/storage-provisioner"]; got != provisioner {
		t.Errorf("provisioner annotation = %q, want %q", got, provisioner)
	}
}

func TestRetainAndReuse(t *testing.T) {
	w := newWorld(t)
	w.volume("keep", "1Gi")
	w.claim("data", "1Gi", ptr.To("manual"))
	w.sync()
	w.Must("deleting claim", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, "data", metav1.DeleteOptions{}))
	w.sync()
	pv := w.getPV("keep")
	if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.ClaimRef == nil {
		t.Fatalf("after the claim's deletion: phase %q, claimRef %v; want Released, kept", pv.Status.Phase, pv.Spec.ClaimRef)
	}

	// A new claim of the same name is a different claim: the volume stays
	// Released and is not bound to it.
	w.claim("data", "1Gi", ptr.To("manual"))
	w.sync()
	if pv := w.getPV("keep"); pv.Status.Phase != corev1.VolumeReleased {
		t.Errorf("after a same-named claim: phase %q, want Released", pv.Status.Phase)
	}
	if got := w.getPVC("data").Spec.VolumeName; got != "" {
		t.Errorf("the new claim was bound to %q", got)
	}

	// The administrator clears the claimRef: the volume is Available, and
	// in the same pass bound to the waiting claim.
	pv = w.getPV("keep")
	pv.Spec.ClaimRef = nil
	_, err := w.Client.CoreV1().PersistentVolumes().Update(w.Ctx, pv, metav1.UpdateOptions{})
	w.Must("clearing claimRef", err)
	w.sync()
	if got := w.getPVC("data").Spec.VolumeName; got != "keep" {
		t.Errorf("waiting claim bound to %q, want keep", got)
	}
	if p := w.pair("keep", "data"); p.VolumePhase != corev1.VolumeBound || p.ClaimPhase != corev1.ClaimBound {
		t.Errorf("phases: volume %q, claim %q; want Bound", p.VolumePhase, p.ClaimPhase)
	}
}

func TestReleasedVolumeAvailableAgain(t *testing.T) {
	w := newWorld(t)
	w.volume("keep", "1Gi")
	w.claim("data", "1Gi", ptr.To("manual"))
	w.sync()
	w.Must("deleting claim", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, "data", metav1.DeleteOptions{}))
	w.sync()
	pv := w.getPV("keep")
	pv.Spec.ClaimRef = nil
	_, err := w.Client.CoreV1().PersistentVolumes().Update(w.Ctx, pv, metav1.UpdateOptions{})
	w.Must("clearing claimRef", err)
	w.Clock.Step(time.Minute)
	w.sync()
	pv = w.getPV("keep")
	if pv.Status.Phase != corev1.VolumeAvailable || !pv.Status.LastPhaseTransitionTime.Time.Equal(apitest.Epoch.Add(time.Minute)) {
		t.Errorf("phase %q since %v, want Available since %v", pv.Status.Phase, pv.Status.LastPhaseTransitionTime, apitest.Epoch.Add(time.Minute))
	}
}

func TestDeleteWithoutDeleterFails(t *testing.T) {
	w := newWorld(t)
	w.volume("host", "1Gi", func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	})
	w.claim("data", "1Gi", ptr.To("manual"))
	w.sync()
	w.Must("deleting claim", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, "data", metav1.DeleteOptions{}))
	w.sync()
	pv := w.getPV("host")
	const msg = `error getting deleter volume plugin for volume "host": no deletable volume plugin matched`
	if pv.Status.Phase != corev1.VolumeFailed || pv.Status.Message != msg {
		t.Errorf("phase %q, message %q; want Failed, %q", pv.Status.Phase, pv.Status.Message, msg)
	}
	w.sync()
	want := []string{"PersistentVolume/host Warning VolumeFailedDelete: " + msg}
	if diff := cmp.Diff(want, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestClaimLost(t *testing.T) {
	w := newWorld(t)
	w.volume("v", "1Gi")
	w.claim("data", "1Gi", ptr.To("manual"))
	w.sync()
	w.Must("deleting volume", w.Client.CoreV1().PersistentVolumes().Delete(w.Ctx, "v", metav1.DeleteOptions{}))
	w.sync()
	if got := w.getPVC("data").Status; got.Phase != corev1.ClaimLost || got.Capacity != nil || got.AccessModes != nil {
		t.Errorf("claim status %+v, want Lost with no capacity or modes", got)
	}
	w.sync()
	want := []string{"PersistentVolumeClaim/data Warning ClaimLost: Bound claim has lost its PersistentVolume. Data on the volume is lost!"}
	if diff := cmp.Diff(want, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
