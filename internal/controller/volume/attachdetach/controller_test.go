package attachdetach_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/volume/attachdetach"
	"knode/internal/volume"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	driver = "csi.example.com"
	handle = "vol-1"
)

// volName is the volume's name in node status.
var volName = volume.UniqueName(driver, handle)

// env is the real API server over the memory store on a fake clock shared
// with the controller, whose metrics go to reg. The test plays the agent
// (node status) and the attacher (VolumeAttachment status).
type env struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
	c      *attachdetach.Controller

	mu sync.Mutex
	// requests logs "VERB path" of the writes the server received.
	requests []string
	// failNodeStatus makes the server refuse writes to nodes/<n>/status.
	failNodeStatus bool
}

func newEnv(t *testing.T, edit func(*attachdetach.Config)) *env {
	t.Helper()
	e := &env{t: t, clock: clocktesting.NewFakeClock(t0), reg: prometheus.NewRegistry()}
	s := apitest.Start(t, apitest.Options{Clock: e.clock, Wrap: e.wrap})
	e.client = s.Admin
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.ctx = ctx
	cfg := attachdetach.Config{Client: e.client, Clock: e.clock, Metrics: e.reg, Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&cfg)
	}
	c, err := attachdetach.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	return e
}

func (e *env) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			e.mu.Lock()
			e.requests = append(e.requests, r.Method+" "+r.URL.Path)
			fail := e.failNodeStatus && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/") && strings.HasSuffix(r.URL.Path, "/status") && r.Method == http.MethodPatch
			e.mu.Unlock()
			if fail {
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"InternalError","code":500}`, http.StatusInternalServerError)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (e *env) must(what string, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

// step runs one pass and fails the test on error.
func (e *env) step() {
	e.t.Helper()
	e.must("step", e.c.Step(e.ctx))
}

// writes returns and forgets the logged writes that contain any of parts.
func (e *env) writes(parts ...string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, r := range e.requests {
		for _, p := range parts {
			if strings.Contains(r, p) {
				out = append(out, r)
				break
			}
		}
	}
	e.requests = nil
	return out
}

// createNode creates a managed node with the given readiness.
func (e *env) createNode(name string, ready bool) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{volume.AnnControllerManagedAttachDetach: "true"}}}
	_, err := e.client.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	e.must("creating node", err)
	e.setReady(name, ready)
}

func (e *env) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	e.must("getting node", err)
	return n
}

// editNodeStatus changes the node's status as its agent would.
func (e *env) editNodeStatus(name string, edit func(*corev1.NodeStatus)) {
	e.t.Helper()
	n := e.node(name)
	edit(&n.Status)
	_, err := e.client.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{})
	e.must("updating node status", err)
}

func (e *env) setReady(name string, ready bool) {
	e.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	now := metav1.NewTime(e.clock.Now())
	e.editNodeStatus(name, func(s *corev1.NodeStatus) {
		s.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "Test"}}
	})
}

func (e *env) setInUse(name string, inUse ...corev1.UniqueVolumeName) {
	e.t.Helper()
	e.editNodeStatus(name, func(s *corev1.NodeStatus) { s.VolumesInUse = inUse })
}

func (e *env) taintOutOfService(name string) {
	e.t.Helper()
	n := e.node(name)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	_, err := e.client.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{})
	e.must("tainting node", err)
}

// createVolume creates claim "data" statically bound to the CSI PV "pv-1"
// (ReadWriteOnce, driver, handle), as the PV controller would leave them.
func (e *env) createVolume() {
	e.t.Helper()
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
			StorageClassName: ptr.To(""),
			VolumeName:       "pv-1",
		},
	}
	pvc, err := e.client.CoreV1().PersistentVolumeClaims("default").Create(e.ctx, pvc, metav1.CreateOptions{})
	e.must("creating pvc", err)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data", UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle},
			},
		},
	}
	_, err = e.client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{})
	e.must("creating pv", err)
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pvc.Spec.AccessModes, Capacity: size}
	_, err = e.client.CoreV1().PersistentVolumeClaims("default").UpdateStatus(e.ctx, pvc, metav1.UpdateOptions{})
	e.must("binding pvc", err)
}

// createPod creates a running pod on node that mounts claim "data".
func (e *env) createPod(name, node string) {
	e.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
			}}},
		},
	}
	pod, err := e.client.CoreV1().Pods("default").Create(e.ctx, pod, metav1.CreateOptions{})
	e.must("creating pod", err)
	started := metav1.NewTime(e.clock.Now())
	pod.Status = corev1.PodStatus{
		Phase:             corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "busybox", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}},
	}
	_, err = e.client.CoreV1().Pods("default").UpdateStatus(e.ctx, pod, metav1.UpdateOptions{})
	e.must("starting pod", err)
}

// removePod deletes the pod at once, as pod GC or its agent would end it.
func (e *env) removePod(name string) {
	e.t.Helper()
	err := e.client.CoreV1().Pods("default").Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	e.must("deleting pod", err)
	if _, err := e.client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		e.t.Fatalf("pod %s still there after a delete with grace 0: %v", name, err)
	}
}

// vaName is the attachment's name for the volume on node.
func vaName(node string) string { return volume.AttachmentName(handle, driver, node) }

// va returns the attachment on node, nil when there is none.
func (e *env) va(node string) *storagev1.VolumeAttachment {
	e.t.Helper()
	va, err := e.client.StorageV1().VolumeAttachments().Get(e.ctx, vaName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	e.must("getting volumeattachment", err)
	return va
}

// markAttached plays the attacher: status.attached=true through /status.
func (e *env) markAttached(node string) {
	e.t.Helper()
	va := e.va(node)
	if va == nil {
		e.t.Fatalf("no volumeattachment for %s", node)
	}
	va.Status.Attached = true
	_, err := e.client.StorageV1().VolumeAttachments().UpdateStatus(e.ctx, va, metav1.UpdateOptions{})
	e.must("marking attached", err)
}

func (e *env) attached(node string) []corev1.AttachedVolume {
	e.t.Helper()
	return e.node(node).Status.VolumesAttached
}

// forced reads the forced-detach counter for reason.
func (e *env) forced(reason string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	e.must("gathering metrics", err)
	for _, f := range families {
		if f.GetName() != attachdetach.ForcedDetachesMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func (e *env) wantForced(timeout, outOfService float64) {
	e.t.Helper()
	if got := e.forced("timeout"); got != timeout {
		e.t.Errorf("forced detaches{reason=timeout} = %v, want %v", got, timeout)
	}
	if got := e.forced("out-of-service"); got != outOfService {
		e.t.Errorf("forced detaches{reason=out-of-service} = %v, want %v", got, outOfService)
	}
}

// attachedWorld leaves node n1 (ready) running pod p1 with the volume
// attached, reported attached and in use.
func (e *env) attachedWorld() {
	e.t.Helper()
	e.createNode("n1", true)
	e.createVolume()
	e.createPod("p1", "n1")
	e.step()
	e.markAttached("n1")
	e.setInUse("n1", volName)
	e.step()
	if diff := cmp.Diff([]corev1.AttachedVolume{{Name: volName}}, e.attached("n1")); diff != "" {
		e.t.Fatalf("volumesAttached before the test (-want +got):\n%s", diff)
	}
	e.writes("")
}

// wantDetached checks that the attachment on node is gone (deleted) and
// that the status write came before the delete.
func (e *env) wantDetached(node string) {
	e.t.Helper()
	if va := e.va(node); va != nil {
		e.t.Fatalf("volumeattachment %s still there: %+v", va.Name, va.ObjectMeta)
	}
	if got := e.attached(node); len(got) != 0 {
		e.t.Errorf("volumesAttached after the detach = %v, want none", got)
	}
	want := []string{"PATCH /api/v1/nodes/" + node + "/status", "DELETE /apis/storage.k8s.io/v1/volumeattachments/" + vaName(node)}
	if diff := cmp.Diff(want, e.writes("/nodes/", "/volumeattachments")); diff != "" {
		e.t.Errorf("writes of the detach (-want +got):\n%s", diff)
	}
}

func (e *env) wantStillAttached(node, when string) {
	e.t.Helper()
	va := e.va(node)
	if va == nil || va.DeletionTimestamp != nil {
		e.t.Fatalf("%s: volumeattachment detached, want it kept", when)
	}
	if diff := cmp.Diff([]corev1.AttachedVolume{{Name: volName}}, e.attached(node)); diff != "" {
		e.t.Fatalf("%s: volumesAttached (-want +got):\n%s", when, diff)
	}
}

// (e) Attaching creates upstream's VolumeAttachment, and volumesAttached
// follows status.attached.
func TestAttachCreatesTheVolumeAttachmentAndReportsIt(t *testing.T) {
	e := newEnv(t, nil)
	e.createNode("n1", true)
	e.createVolume()
	e.createPod("p1", "n1")
	e.step()

	va := e.va("n1")
	if va == nil {
		t.Fatal("no volumeattachment created")
	}
	if want := "csi-" + strings.Repeat("x", 64); len(va.Name) != len(want) || va.Name != vaName("n1") {
		t.Fatalf("volumeattachment named %q, want %q", va.Name, vaName("n1"))
	}
	wantSpec := storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")}}
	if diff := cmp.Diff(wantSpec, va.Spec); diff != "" {
		t.Fatalf("volumeattachment spec (-want +got):\n%s", diff)
	}
	if got := e.attached("n1"); len(got) != 0 {
		t.Fatalf("volumesAttached before the attacher acted = %v, want none", got)
	}
	e.step()
	if got := e.attached("n1"); len(got) != 0 {
		t.Fatalf("volumesAttached while attaching = %v, want none", got)
	}

	e.markAttached("n1")
	e.step()
	if diff := cmp.Diff([]corev1.AttachedVolume{{Name: volName, DevicePath: ""}}, e.attached("n1")); diff != "" {
		t.Fatalf("volumesAttached once attached (-want +got):\n%s", diff)
	}
	evs, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	e.must("listing events", err)
	var got []string
	for _, ev := range evs.Items {
		got = append(got, ev.InvolvedObject.Name+" "+ev.Type+" "+ev.Reason+" "+ev.Message)
	}
	if diff := cmp.Diff([]string{`p1 Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "pv-1" `}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The attacher loses it: the volume leaves node status.
	va = e.va("n1")
	va.Status.Attached = false
	_, err = e.client.StorageV1().VolumeAttachments().UpdateStatus(e.ctx, va, metav1.UpdateOptions{})
	e.must("marking detached", err)
	e.step()
	if got := e.attached("n1"); len(got) != 0 {
		t.Fatalf("volumesAttached after status.attached went false = %v, want none", got)
	}
	// A further pass neither recreates nor rewrites anything.
	e.markAttached("n1")
	e.step()
	e.writes("")
	e.step()
	if got := e.writes("/nodes/", "/volumeattachments"); len(got) != 0 {
		t.Errorf("writes of an idle pass: %v", got)
	}
}

// (a) A not-Ready node that still reports the volume in use keeps it for
// MaxWaitForUnmountDuration after its pod is gone: not at 5:59 nor at
// 6:00, but just after; the detach is forced and counted as a timeout.
func TestForcedDetachAfterSixMinutesOnNotReadyNode(t *testing.T) {
	e := newEnv(t, nil)
	e.attachedWorld()
	e.setReady("n1", false)
	e.removePod("p1")

	e.step() // the detach is wanted from now on
	e.wantStillAttached("n1", "at 0:00")
	if got, want := e.c.NextDue(), t0.Add(6*time.Minute); !got.Equal(want) {
		t.Errorf("NextDue = %v, want %v", got, want)
	}
	e.clock.Step(5*time.Minute + 59*time.Second)
	e.step()
	e.wantStillAttached("n1", "at 5:59")
	e.clock.Step(time.Second)
	e.step()
	e.wantStillAttached("n1", "at 6:00")
	e.wantForced(0, 0)
	e.writes("")

	e.clock.Step(time.Millisecond)
	e.step()
	e.wantDetached("n1")
	e.wantForced(1, 0)
	e.step()
	e.wantForced(1, 0)
}

// (b) With DisableForceDetachOnTimeout the same node keeps the volume
// after an hour; it is detached (verified, not counted) once the node stops
// reporting it in use.
func TestNoForcedDetachWhenDisabled(t *testing.T) {
	e := newEnv(t, func(c *attachdetach.Config) { c.DisableForceDetachOnTimeout = true })
	e.attachedWorld()
	e.setReady("n1", false)
	e.removePod("p1")
	e.step()
	for _, d := range []time.Duration{6*time.Minute + time.Second, time.Hour} {
		e.clock.SetTime(t0.Add(d))
		e.step()
		e.wantStillAttached("n1", "after "+d.String())
	}
	if got := e.c.NextDue(); !got.IsZero() {
		t.Errorf("NextDue = %v, want none", got)
	}
	e.wantForced(0, 0)
	e.writes("")

	e.setInUse("n1")
	e.writes("")
	e.step()
	e.wantDetached("n1")
	e.wantForced(0, 0)
}

// (c) On a not-Ready node with the out-of-service taint, once the
// Terminating pod is force-deleted (PodGC's part), the volume is detached
// at once though the node still reports it in use; counted as
// out-of-service.
func TestOutOfServiceTaintDetachesAtOnce(t *testing.T) {
	e := newEnv(t, func(c *attachdetach.Config) { c.DisableForceDetachOnTimeout = true })
	e.attachedWorld()
	e.setReady("n1", false)
	// The pod is being deleted, but no agent confirms it.
	err := e.client.CoreV1().Pods("default").Delete(e.ctx, "p1", metav1.DeleteOptions{})
	e.must("deleting pod", err)
	pod, err := e.client.CoreV1().Pods("default").Get(e.ctx, "p1", metav1.GetOptions{})
	e.must("pod still terminating", err)
	if pod.DeletionTimestamp == nil {
		t.Fatal("pod deleted without grace; the test needs it terminating")
	}
	e.step()
	e.wantStillAttached("n1", "terminating pod without the taint")

	// The taint alone keeps it: the Terminating pod still holds it.
	e.taintOutOfService("n1")
	e.step()
	e.wantStillAttached("n1", "terminating pod on the tainted node")

	// PodGC force-deletes the pod; the volume, still in the silent node's
	// volumesInUse, is detached at once.
	e.must("force-deleting pod", e.client.CoreV1().Pods("default").Delete(e.ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	e.writes("")
	e.step()
	e.wantDetached("n1")
	e.wantForced(0, 1)
}

// (d) A Ready node that reports the volume in use keeps it, past the
// timeout too; once it stops reporting it (within the timeout) the detach
// is verified and not counted.
func TestNoDetachWhileReadyNodeUsesIt(t *testing.T) {
	e := newEnv(t, nil)
	e.attachedWorld()
	e.removePod("p1")
	for _, d := range []time.Duration{0, 3 * time.Minute, 5*time.Minute + 59*time.Second} {
		e.clock.SetTime(t0.Add(d))
		e.step()
		e.wantStillAttached("n1", "after "+d.String())
	}
	if got := e.c.NextDue(); !got.IsZero() {
		t.Errorf("NextDue = %v, want none for a Ready node", got)
	}
	e.writes("")
	e.setInUse("n1")
	e.writes("")
	e.step()
	e.wantDetached("n1")
	e.wantForced(0, 0)
}

// As upstream counts it: a Ready node that held the volume in use past
// MaxWaitForUnmountDuration is never forced, but the detach that follows
// its unmount skips the verification and counts as a timeout.
func TestReadyNodeHoldingItPastTheTimeout(t *testing.T) {
	e := newEnv(t, nil)
	e.attachedWorld()
	e.removePod("p1")
	for _, d := range []time.Duration{0, 6*time.Minute + time.Second, time.Hour} {
		e.clock.SetTime(t0.Add(d))
		e.step()
		e.wantStillAttached("n1", "after "+d.String())
	}
	e.wantForced(0, 0)
	e.setInUse("n1")
	e.writes("")
	e.step()
	e.wantDetached("n1")
	e.wantForced(1, 0)
}

// A volume detaches only after the node status no longer lists it: when
// that write fails, nothing is deleted this round.
func TestNoDetachWhenTheStatusWriteFails(t *testing.T) {
	e := newEnv(t, nil)
	e.attachedWorld()
	e.setInUse("n1")
	e.removePod("p1")
	e.writes("")

	e.mu.Lock()
	e.failNodeStatus = true
	e.mu.Unlock()
	if err := e.c.Step(e.ctx); err == nil {
		t.Fatal("step succeeded though the node status write failed")
	}
	if e.va("n1") == nil {
		t.Fatal("detached though the node status write failed")
	}
	if got := e.writes("/volumeattachments"); len(got) != 0 {
		t.Fatalf("attachment writes after the failed status write: %v", got)
	}
	e.mu.Lock()
	e.failNodeStatus = false
	e.mu.Unlock()
	e.step()
	e.wantDetached("n1")
}

// An attacher's finalizer keeps the volume detaching: it stays out of node
// status, is not detached twice, and an exclusive volume is not attached
// elsewhere until the attachment is gone.
func TestDetachingVolumeMovesOnlyWhenGone(t *testing.T) {
	e := newEnv(t, nil)
	e.attachedWorld()
	va := e.va("n1")
	va.Finalizers = []string{volume.AttacherFinalizer(driver)}
	_, err := e.client.StorageV1().VolumeAttachments().Update(e.ctx, va, metav1.UpdateOptions{})
	e.must("adding the attacher's finalizer", err)
	e.setInUse("n1")
	e.removePod("p1")
	e.createNode("n2", true)
	e.createPod("p2", "n2")
	e.writes("")

	e.step()
	va = e.va("n1")
	if va == nil || va.DeletionTimestamp == nil {
		t.Fatal("attachment on n1 not being deleted")
	}
	if e.va("n2") != nil {
		t.Fatal("exclusive volume attached to n2 while still attached to n1")
	}
	if got := e.attached("n1"); len(got) != 0 {
		t.Errorf("volumesAttached of n1 while detaching = %v, want none", got)
	}
	evs, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	e.must("listing events", err)
	var multi []string
	for _, ev := range evs.Items {
		if ev.Reason == attachdetach.EventFailedAttach {
			multi = append(multi, ev.InvolvedObject.Name+": "+ev.Message)
		}
	}
	if diff := cmp.Diff([]string{`p2: Multi-Attach error for volume "pv-1" Volume is already exclusively attached to one node and can't be attached to another`}, multi); diff != "" {
		t.Errorf("multi-attach events (-want +got):\n%s", diff)
	}
	e.writes("")
	e.step()
	if got := e.writes("/volumeattachments", "/events"); len(got) != 0 {
		t.Errorf("writes while detaching: %v", got)
	}

	// The attacher finishes: the finalizer goes, then n2 gets the volume.
	va.Finalizers = nil
	_, err = e.client.StorageV1().VolumeAttachments().Update(e.ctx, va, metav1.UpdateOptions{})
	e.must("dropping the finalizer", err)
	if e.va("n1") != nil {
		t.Fatal("attachment on n1 outlived its finalizer")
	}
	e.step()
	if e.va("n2") == nil {
		t.Fatal("volume not attached to n2 once free")
	}
}

// A deleted node's volumes are detached once their pods are gone: those
// it last reported in use after the timeout (it cannot be Ready), with no
// status to write.
func TestDeletedNodeVolumesDetach(t *testing.T) {
	e := newEnv(t, nil)
	e.attachedWorld()
	e.must("deleting node", e.client.CoreV1().Nodes().Delete(e.ctx, "n1", metav1.DeleteOptions{}))
	// Its pod still wants the volume, however long.
	e.step()
	e.clock.Step(time.Hour)
	e.step()
	e.wantForced(0, 0)
	if e.va("n1") == nil {
		t.Fatal("detached while the pod still uses it")
	}
	e.removePod("p1")
	e.step()
	e.clock.Step(6 * time.Minute)
	e.step()
	if e.va("n1") == nil {
		t.Fatal("detached before the timeout though the node last reported it in use")
	}
	e.writes("")
	e.clock.Step(time.Millisecond)
	e.step()
	if e.va("n1") != nil {
		t.Fatal("not detached after the timeout")
	}
	if diff := cmp.Diff([]string{"DELETE /apis/storage.k8s.io/v1/volumeattachments/" + vaName("n1")}, e.writes("/nodes/", "/volumeattachments")); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	e.wantForced(1, 0)
}

// A driver whose CSIDriver says attachRequired: false gets no attachment.
func TestNoAttachmentWhenNotRequired(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.client.StorageV1().CSIDrivers().Create(e.ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)},
	}, metav1.CreateOptions{})
	e.must("creating csidriver", err)
	e.createNode("n1", true)
	e.createVolume()
	e.createPod("p1", "n1")
	e.step()
	if e.va("n1") != nil {
		t.Fatal("attachment created for a driver that needs none")
	}
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := attachdetach.New(attachdetach.Config{}); err == nil {
		t.Error("New without a client succeeded")
	}
	e := newEnv(t, nil)
	if _, err := attachdetach.New(attachdetach.Config{Client: e.client, MaxWaitForUnmountDuration: -time.Second}); err == nil {
		t.Error("New with a negative wait succeeded")
	}
	_, err := attachdetach.New(attachdetach.Config{Client: e.client, Metrics: e.reg})
	if !errors.Is(err, attachdetach.ErrMetricsRegistered) {
		t.Errorf("second controller on one registry: %v, want ErrMetricsRegistered", err)
	}
}
