package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/scheduler"
	"knode/internal/volume"
)

// volEnv is a stepEnv with storage: it creates storage objects through
// the API and, with feed set, feeds them to the scheduler's handlers, as
// the simulator would.
type volEnv struct {
	*stepEnv
	feed bool
}

func newVolEnv(t *testing.T) *volEnv {
	t.Helper()
	return &volEnv{stepEnv: newStepEnv(t), feed: true}
}

// zonedNode creates a node (cpu "2") in zone and feeds it.
func (e *volEnv) zonedNode(name, zone string) {
	e.t.Helper()
	e.createNode(name, "2", func(n *corev1.Node) {
		n.Labels = map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone}
	})
	e.s.NodeHandler().OnAdd(e.node(name), false)
}

func (e *volEnv) class(name, provisioner string, zones ...string) {
	e.t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: zones}}}}
	}
	created, err := e.client.StorageV1().StorageClasses().Create(e.ctx, sc, metav1.CreateOptions{})
	e.must("create class "+name, err)
	if e.feed {
		e.s.ClassHandler().OnAdd(created, false)
	}
}

// claim creates a ReadWriteOnce claim of class for 1Gi and feeds it.
func (e *volEnv) claim(name, class string) {
	e.t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	created, err := e.client.CoreV1().PersistentVolumeClaims("default").Create(e.ctx, c, metav1.CreateOptions{})
	e.must("create claim "+name, err)
	if e.feed {
		e.s.ClaimHandler().OnAdd(created, false)
	}
}

func (e *volEnv) getClaim(name string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	c, err := e.client.CoreV1().PersistentVolumeClaims("default").Get(e.ctx, name, metav1.GetOptions{})
	e.must("get claim "+name, err)
	return c
}

func (e *volEnv) getPV(name string) *corev1.PersistentVolume {
	e.t.Helper()
	pv, err := e.client.CoreV1().PersistentVolumes().Get(e.ctx, name, metav1.GetOptions{})
	e.must("get volume "+name, err)
	return pv
}

// feedClaim passes the claim's current version to the handler.
func (e *volEnv) feedClaim(name string) {
	e.t.Helper()
	e.s.ClaimHandler().OnUpdate(nil, e.getClaim(name))
}

// pv creates an Available 1Gi ReadWriteOnce volume of class on the
// built-in driver, pinned to node when node is set, and feeds it.
func (e *volEnv) pv(name, class, node string, change ...func(*corev1.PersistentVolume)) {
	e.t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: volume.BuiltinDriver, VolumeHandle: "h-" + name},
			},
		},
	}
	if node != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}}
	}
	for _, c := range change {
		c(pv)
	}
	created, err := e.client.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{})
	e.must("create volume "+name, err)
	created.Status.Phase = corev1.VolumeAvailable
	created, err = e.client.CoreV1().PersistentVolumes().UpdateStatus(e.ctx, created, metav1.UpdateOptions{})
	e.must("make volume "+name+" available", err)
	if e.feed {
		e.s.VolumeHandler().OnAdd(created, false)
	}
}

// bindClaim does what the PV controller does once the volume exists:
// the claim gets the volume's name and the bind-completed annotation,
// and the volume a claimRef. Both are fed to the handlers.
func (e *volEnv) bindClaim(claim, pvName string) {
	e.t.Helper()
	c := e.getClaim(claim)
	pv := e.getPV(pvName)
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: claim, UID: c.UID}
	pv, err := e.client.CoreV1().PersistentVolumes().Update(e.ctx, pv, metav1.UpdateOptions{})
	e.must("bind volume", err)
	if e.feed {
		e.s.VolumeHandler().OnUpdate(nil, pv)
	}
	c.Spec.VolumeName = pvName
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnBindCompleted, "yes")
	c, err = e.client.CoreV1().PersistentVolumeClaims("default").Update(e.ctx, c, metav1.UpdateOptions{})
	e.must("bind claim", err)
	if e.feed {
		e.s.ClaimHandler().OnUpdate(nil, c)
	}
}

// podWith creates a pod using the claims and feeds it.
func (e *volEnv) podWith(name string, claims ...string) {
	e.t.Helper()
	e.createPod(name, "", func(p *corev1.Pod) {
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c},
			}})
		}
	})
	if e.feed {
		e.s.PodHandler().OnAdd(e.pod(name), false)
	}
}

func (e *volEnv) stats() scheduler.QueueStats { return e.s.Stats() }

// A WaitForFirstConsumer claim to provision: the scheduler gives it the
// node the pod fits (the class's zone), and binds the pod only once the
// claim is bound.
func TestStepProvisionsThenBinds(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.zonedNode("n2", "b")
	e.class("zonal", "csi.example.com", "b")
	e.claim("data", "zonal")
	e.podWith("p", "data")

	next, ok := e.step()
	if !ok || !next.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("Step = %v %v, want the wait's deadline t0+10m", next, ok)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Fatalf("bound before the claim: %v", b)
	}
	if got := e.getClaim("data").Annotations[volume.AnnSelectedNode]; got != "n2" {
		t.Fatalf("selected node %q, want n2", got)
	}
	if got, want := e.stats(), (scheduler.QueueStats{Assumed: 1, WaitingForVolumes: 1}); got != want {
		t.Errorf("stats while waiting %+v, want %+v", got, want)
	}
	// The informer brings the scheduler's own write: still waiting.
	e.feedClaim("data")
	if got := e.stats(); got.Active != 0 || got.WaitingForVolumes != 1 {
		t.Errorf("stats after its own write %+v, want still waiting", got)
	}
	// The provisioner makes the volume and the PV controller binds it.
	e.pv("pvc-data", "zonal", "n2")
	e.bindClaim("data", "pvc-data")
	if got, want := e.stats(), (scheduler.QueueStats{Active: 1, Assumed: 1}); got != want {
		t.Errorf("stats once bound %+v, want %+v", got, want)
	}
	e.step()
	if diff := cmp.Diff([]string{"p -> n2"}, e.takeBinds()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	if n := e.pod("p").Spec.NodeName; n != "n2" {
		t.Errorf("p on %q, want n2", n)
	}
}

// A static volume: the scheduler pre-binds the one the node can use
// (claimRef with the claim's uid), and the pod follows the volume.
func TestStepPreBindsStaticVolume(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.zonedNode("n2", "a")
	e.class("local", "kubernetes.io/no-provisioner")
	e.pv("local-n2", "local", "n2")
	e.claim("data", "local")
	e.podWith("p", "data")

	e.step()
	pv := e.getPV("local-n2")
	claim := e.getClaim("data")
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != "data" || ref.Namespace != "default" || ref.UID != claim.UID || ref.Kind != "PersistentVolumeClaim" {
		t.Fatalf("claimRef %+v, want default/data with uid %s", ref, claim.UID)
	}
	if got := pv.Annotations[volume.AnnBoundByController]; got != "yes" {
		t.Errorf("%s = %q, want yes", volume.AnnBoundByController, got)
	}
	if _, ok := claim.Annotations[volume.AnnSelectedNode]; ok {
		t.Errorf("a claim with a static volume got a selected node: %v", claim.Annotations)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Fatalf("bound before the claim: %v", b)
	}
	e.bindClaim("data", "local-n2")
	e.step()
	if diff := cmp.Diff([]string{"p -> n2"}, e.takeBinds()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}

// A provisioner that gives up removes the selected node: the pod is not
// bound, reports the PreBind failure, and is tried again after its
// backoff.
func TestStepProvisioningFails(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.podWith("p", "data")
	e.step()

	c := e.getClaim("data")
	delete(c.Annotations, volume.AnnSelectedNode)
	c.Annotations[volume.AnnStorageProvisioner] = "csi.example.com"
	c, err := e.client.CoreV1().PersistentVolumeClaims("default").Update(e.ctx, c, metav1.UpdateOptions{})
	e.must("give the claim up", err)
	e.s.ClaimHandler().OnUpdate(nil, c)
	if got, want := e.stats(), (scheduler.QueueStats{Active: 1, BackingOff: 1}); got != want {
		t.Errorf("stats after the failure %+v, want the report ready and the pod backing off %+v", got, want)
	}
	next, ok := e.step()
	if !ok || !next.Equal(t0.Add(time.Second)) {
		t.Errorf("Step = %v %v, want the backoff's end t0+1s", next, ok)
	}
	const msg = `running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "data"`
	cond := e.scheduled("p")
	if cond == nil || cond.Reason != scheduler.ConditionSchedulerError || cond.Message != msg {
		t.Fatalf("PodScheduled %+v, want SchedulerError %q", cond, msg)
	}
	if diff := cmp.Diff([]eventLine{{Type: "Warning", Reason: "FailedScheduling", Message: msg, Source: "default-scheduler", Count: 1}}, e.events("p")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Errorf("bound: %v", b)
	}
	// After the backoff the claim is given the node again.
	e.s.PodHandler().OnUpdate(nil, e.pod("p"))
	e.clock.SetTime(next)
	e.step()
	if got := e.getClaim("data").Annotations[volume.AnnSelectedNode]; got != "n1" {
		t.Errorf("selected node after the retry %q, want n1", got)
	}
}

// A claim not bound within ten minutes ends the wait: the pod goes back,
// and the selected node the scheduler wrote comes off the claim.
func TestStepVolumeWaitTimesOut(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.podWith("p", "data")
	next, _ := e.step()
	e.feedClaim("data")

	e.clock.SetTime(next.Add(-time.Nanosecond))
	e.step()
	if got := e.stats(); got.WaitingForVolumes != 1 {
		t.Fatalf("stats just before the deadline %+v, want still waiting", got)
	}
	e.clock.SetTime(next)
	e.step()
	const msg = `running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded`
	if cond := e.scheduled("p"); cond == nil || cond.Reason != scheduler.ConditionSchedulerError || cond.Message != msg {
		t.Fatalf("PodScheduled %+v, want SchedulerError %q", cond, msg)
	}
	if _, ok := e.getClaim("data").Annotations[volume.AnnSelectedNode]; ok {
		t.Errorf("the selected node stayed on the claim: %v", e.getClaim("data").Annotations)
	}
	if got, want := e.stats(), (scheduler.QueueStats{BackingOff: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// A volume write that conflicts fails the pass and the pod (SchedulerError);
// the pod backs off and nothing stays assumed.
func TestStepVolumeWriteConflict(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.podWith("p", "data")
	// Someone changes the claim; the scheduler has not seen it.
	c := e.getClaim("data")
	c.Labels = map[string]string{"changed": "yes"}
	_, err := e.client.CoreV1().PersistentVolumeClaims("default").Update(e.ctx, c, metav1.UpdateOptions{})
	e.must("change the claim", err)

	_, _, err = e.s.Step(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "the object has been modified") {
		t.Fatalf("Step error %v, want the conflict", err)
	}
	cond := e.scheduled("p")
	if cond == nil || cond.Reason != scheduler.ConditionSchedulerError || !strings.HasPrefix(cond.Message, `running PreBind plugin "VolumeBinding": `) {
		t.Fatalf("PodScheduled %+v, want the PreBind failure", cond)
	}
	if got, want := e.stats(), (scheduler.QueueStats{BackingOff: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	// With the new version seen, the next attempt goes through.
	e.feedClaim("data")
	e.s.PodHandler().OnUpdate(nil, e.pod("p"))
	e.clock.Step(time.Second)
	e.step()
	if got := e.getClaim("data").Annotations[volume.AnnSelectedNode]; got != "n1" {
		t.Errorf("selected node %q, want n1", got)
	}
}

// Pods sharing a new ReadWriteOnce claim in one pass land on the same
// node and the claim is written once. Deleting the pod whose plan wrote
// it, before the informer shows the write, leaves the others waiting.
func TestStepSharedClaim(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.zonedNode("n2", "a")
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.podWith("a", "data")
	e.podWith("b", "data")
	e.podWith("c", "data")
	e.step()
	if got := e.stats(); got.WaitingForVolumes != 3 {
		t.Fatalf("stats %+v, want three pods waiting", got)
	}
	e.must("delete a", e.client.CoreV1().Pods("default").Delete(e.ctx, "a", metav1.DeleteOptions{}))
	e.s.PodHandler().OnDelete(e.podGone("a"))
	e.pv("pvc-data", "fast", "n1") // a volume event: the waits are looked at
	if got, want := e.stats(), (scheduler.QueueStats{Assumed: 2, WaitingForVolumes: 2}); got != want {
		t.Errorf("stats after deleting a %+v, want %+v", got, want)
	}
	e.bindClaim("data", "pvc-data")
	e.step()
	if diff := cmp.Diff([]string{"b -> n1", "c -> n1"}, e.takeBinds()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}

// podGone is a deleted pod as a delete notification carries it.
func (e *volEnv) podGone(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
}

// A pod whose claim does not exist waits, unschedulable, until the claim
// is created.
func TestStepClaimCreatedLater(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.class("fast", "csi.example.com")
	e.podWith("p", "data")
	e.step()
	const msg = `0/1 nodes are available: persistentvolumeclaim "data" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`
	if cond := e.scheduled("p"); cond == nil || cond.Reason != scheduler.ConditionUnschedulable || cond.Message != msg {
		t.Fatalf("PodScheduled %+v, want %q", cond, msg)
	}
	e.s.PodHandler().OnUpdate(nil, e.pod("p"))
	if got, want := e.stats(), (scheduler.QueueStats{Unschedulable: 1}); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	// A class change does not concern a pod without claims, but a new
	// claim sends this one back.
	e.claim("data", "fast")
	if got, want := e.stats(), (scheduler.QueueStats{BackingOff: 1}); got != want {
		t.Errorf("stats after the claim came %+v, want %+v", got, want)
	}
	e.clock.Step(time.Second)
	e.step()
	if got := e.getClaim("data").Annotations[volume.AnnSelectedNode]; got != "n1" {
		t.Errorf("selected node %q, want n1", got)
	}
}

// A storage change leaves pods without claims where they wait.
func TestStorageChangeLeavesOtherPods(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.createPod("big", "8")
	e.s.PodHandler().OnAdd(e.pod("big"), false)
	e.step()
	e.s.PodHandler().OnUpdate(nil, e.pod("big"))
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	if got, want := e.stats(), (scheduler.QueueStats{Unschedulable: 1}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// Sync does the same in passes: the first gives the claim its node, a
// later one, after the claim is bound, binds the pod.
func TestSyncProvisionsThenBinds(t *testing.T) {
	rec := newRecorder()
	e := &volEnv{stepEnv: &stepEnv{env: newEnv(t, rec)}}
	e.createNode("n1", "2", func(n *corev1.Node) { n.Labels = map[string]string{corev1.LabelHostname: "n1"} })
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.podWith("p", "data")
	e.sync()
	if got := e.getClaim("data").Annotations[volume.AnnSelectedNode]; got != "n1" {
		t.Fatalf("selected node %q, want n1", got)
	}
	e.sync()
	if b := rec.sorted(); len(b) != 0 {
		t.Fatalf("bound before the claim: %v", b)
	}
	e.pv("pvc-data", "fast", "n1")
	e.bindClaim("data", "pvc-data")
	e.sync()
	if diff := cmp.Diff([]string{"default/p -> n1"}, rec.sorted()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}

// Run follows claims and volumes through its informers: the claim gets
// the node, and the pod is bound once the claim is.
func TestRunProvisionsThenBinds(t *testing.T) {
	rec := newRecorder()
	e := &volEnv{stepEnv: &stepEnv{env: newEnv(t, rec)}}
	e.createNode("n1", "2", func(n *corev1.Node) { n.Labels = map[string]string{corev1.LabelHostname: "n1"} })
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.startRun()
	e.podWith("p", "data")
	e.waitFor("the claim to get its node", func() bool {
		return e.getClaim("data").Annotations[volume.AnnSelectedNode] == "n1"
	})
	e.waitFor("the pod to wait for its volume", func() bool { return e.s.Stats().WaitingForVolumes == 1 })
	if b := rec.sorted(); len(b) != 0 {
		t.Fatalf("bound before the claim: %v", b)
	}
	e.pv("pvc-data", "fast", "n1")
	e.bindClaim("data", "pvc-data")
	e.waitBound(rec, "default/p -> n1", 0)
}

// A pod whose ReadWriteOnce claim is in use on a node it cannot go to
// waits; once the other pod is being deleted, it is placed elsewhere.
func TestStepReadWriteOnceHandover(t *testing.T) {
	e := newVolEnv(t)
	e.zonedNode("n1", "a")
	e.zonedNode("n2", "a")
	e.class("fast", "csi.example.com")
	e.claim("data", "fast")
	e.pv("pvc-data", "fast", "")
	e.bindClaim("data", "pvc-data")
	e.createPod("old", "", func(p *corev1.Pod) {
		p.Spec.NodeName = "n2"
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
		}}}
	})
	e.s.PodHandler().OnAdd(e.pod("old"), false)
	e.changeNode("n2", false, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	e.podWith("new", "data")
	e.step()
	const msg = "0/2 nodes are available: 1 node(s) didn't run the pods already using a ReadWriteOnce PersistentVolumeClaim of the pod, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
	if c := e.scheduled("new"); c == nil || c.Message != msg {
		t.Fatalf("PodScheduled %+v, want %q", c, msg)
	}
	e.s.PodHandler().OnUpdate(nil, e.pod("new"))

	e.must("delete old", e.client.CoreV1().Pods("default").Delete(e.ctx, "old", metav1.DeleteOptions{}))
	old := e.pod("old")
	if old.DeletionTimestamp == nil {
		t.Fatalf("old deleted at once; want it terminating")
	}
	e.s.PodHandler().OnUpdate(nil, old)
	if got, want := e.stats(), (scheduler.QueueStats{BackingOff: 1}); got != want {
		t.Errorf("stats once old is leaving %+v, want %+v", got, want)
	}
	e.clock.Step(time.Second)
	e.step()
	if diff := cmp.Diff([]string{"new -> n1"}, e.takeBinds()); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
}
