package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/controller/podgc"
	"knode/internal/controller/volume/attachdetach"
	"knode/internal/sim/script"
	"knode/internal/volume"
)

// runText replays a script given as text.
func runText(t *testing.T, text string, cfg Config) *World {
	t.Helper()
	sc, err := script.Parse("test.txt", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	w, err := Run(context.Background(), sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// volumeOf is the unique name of a scenario pod's volume.
func volumeOf(pod string) corev1.UniqueVolumeName {
	return volume.UniqueName(SimDriver, "vol-"+pod)
}

// attachedTo lists the pods whose volumes are attached to node: their
// VolumeAttachment exists and says attached.
func attachedTo(w *World, node string) []string {
	var out []string
	for _, va := range w.mirror.attachments {
		if va.Spec.NodeName == node && va.Status.Attached {
			out = append(out, strings.TrimPrefix(*va.Spec.Source.PersistentVolumeName, "pv-"))
		}
	}
	return out
}

// forced is the attach/detach controller's forced-detach counter by
// reason.
func forced(t *testing.T, w *World) map[string]int {
	t.Helper()
	families, err := w.adMetrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range families {
		if f.GetName() != attachdetach.ForcedDetachesMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return out
}

// A pod with a volume runs once its claim is bound, its volume attached to
// its node and reported in use there; the node lists it in both
// volumesInUse and volumesAttached. Pods without volumes have none.
func TestVolumesAttachedAndReportedInUse(t *testing.T) {
	w := runText(t, "nodes 2 zone=a\nnodes 1 zone=b\npods 3 volume\npods 2\nrun 10s\n", Config{Seed: 1})
	for _, p := range w.mirror.pods {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s, want Running", p.Name, p.Status.Phase)
		}
		claims := volume.PodClaims(p)
		if p.Name > "pod-3" {
			if len(claims) != 0 {
				t.Errorf("pod %s without volume has claims %v", p.Name, claims)
			}
			continue
		}
		if want := []string{"data-" + p.Name}; !cmp.Equal(claims, want) {
			t.Fatalf("pod %s claims %v, want %v", p.Name, claims, want)
		}
		claim := w.mirror.claims[types.NamespacedName{Namespace: p.Namespace, Name: claims[0]}]
		if claim == nil || claim.Status.Phase != corev1.ClaimBound || claim.Annotations[volume.AnnBindCompleted] == "" {
			t.Errorf("claim of pod %s: %+v, want Bound by the binder", p.Name, claim)
		}
		node := w.mirror.nodes[p.Spec.NodeName]
		if want := []corev1.UniqueVolumeName{volumeOf(p.Name)}; !cmp.Equal(node.Status.VolumesInUse, want) {
			t.Errorf("node %s volumesInUse %v, want %v", node.Name, node.Status.VolumesInUse, want)
		}
		if want := []corev1.AttachedVolume{{Name: volumeOf(p.Name)}}; !cmp.Equal(node.Status.VolumesAttached, want) {
			t.Errorf("node %s volumesAttached %v, want %v", node.Name, node.Status.VolumesAttached, want)
		}
		if got := attachedTo(w, node.Name); !cmp.Equal(got, []string{p.Name}) {
			t.Errorf("attached to node %s: %v, want %s's volume", node.Name, got, p.Name)
		}
	}
	attached := 0
	for _, r := range w.Snapshot() {
		attached += r.VolumesAttached
		if r.VolumesForceDetached != 0 {
			t.Errorf("zone %s: %d volumes force-detached", r.Zone, r.VolumesForceDetached)
		}
	}
	if attached != 3 {
		t.Errorf("%d volumes attached, want 3", attached)
	}
}

// simVolumes sets a pod's volumes up in the real manager's order: each is
// in use from the first Setup, and ready once it was reported in use and
// its VolumeAttachment is attached; a claim not bound to a CSI volume
// keeps the pod from being processed.
func TestSimVolumesSetup(t *testing.T) {
	const node = "n-1"
	vol := volumeOf("pod-1")
	attachment := volume.AttachmentName("vol-pod-1", SimDriver, node)
	boundClaim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-pod-1", Namespace: "default"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-pod-1"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	csiVolume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-pod-1"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: SimDriver, VolumeHandle: "vol-pod-1"},
		}},
	}
	pendingClaim := boundClaim.DeepCopy()
	pendingClaim.Status.Phase = corev1.ClaimPending
	hostPathVolume := csiVolume.DeepCopy()
	hostPathVolume.Spec.CSI, hostPathVolume.Spec.HostPath = nil, &corev1.HostPathVolumeSource{Path: "/x"}
	attached := func(yes bool) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: attachment}, Status: storagev1.VolumeAttachmentStatus{Attached: yes}}
	}
	for _, tc := range []struct {
		name       string
		claim      *corev1.PersistentVolumeClaim
		pv         *corev1.PersistentVolume
		attachment *storagev1.VolumeAttachment
		reported   bool
		ready      bool
		inUse      []corev1.UniqueVolumeName
		wantErr    string
	}{
		{name: "no claim", wantErr: `persistentvolumeclaim "data-pod-1" is not bound`},
		{name: "claim not bound", claim: pendingClaim, pv: csiVolume, wantErr: `persistentvolumeclaim "data-pod-1" is not bound`},
		{name: "not a CSI volume", claim: boundClaim, pv: hostPathVolume, wantErr: `persistentvolumeclaim "data-pod-1": volume "pv-pod-1" is not a CSI volume`},
		{name: "neither reported nor attached", claim: boundClaim, pv: csiVolume, inUse: []corev1.UniqueVolumeName{vol}},
		{name: "attached, not reported", claim: boundClaim, pv: csiVolume, attachment: attached(true), inUse: []corev1.UniqueVolumeName{vol}},
		{name: "reported, attachment not attached yet", claim: boundClaim, pv: csiVolume, attachment: attached(false), reported: true, inUse: []corev1.UniqueVolumeName{vol}},
		{name: "reported and attached", claim: boundClaim, pv: csiVolume, attachment: attached(true), reported: true, ready: true, inUse: []corev1.UniqueVolumeName{vol}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &mirror{claims: map[types.NamespacedName]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{}, attachments: map[string]*storagev1.VolumeAttachment{}}
			if tc.claim != nil {
				m.claims[types.NamespacedName{Namespace: "default", Name: tc.claim.Name}] = tc.claim
			}
			if tc.pv != nil {
				m.volumes[tc.pv.Name] = tc.pv
			}
			if tc.attachment != nil {
				m.attachments[tc.attachment.Name] = tc.attachment
			}
			// A stopped agent: the status pass a change asks for is dropped.
			v := newSimVolumes(&simAgent{w: &World{mirror: m}, name: node})
			if tc.reported {
				v.ReportedInUse([]corev1.UniqueVolumeName{vol})
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "pod-1", Namespace: "default", UID: "u1"},
				Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-pod-1"},
				}}}},
			}
			ready, err := v.Setup(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Setup = %v, %v; want error %q", ready, err, tc.wantErr)
				}
			} else if err != nil || ready != tc.ready {
				t.Fatalf("Setup = %v, %v; want %v", ready, err, tc.ready)
			}
			if diff := cmp.Diff(tc.inUse, v.InUse()); diff != "" {
				t.Errorf("InUse after Setup (-want +got):\n%s", diff)
			}
			if done, err := v.Teardown(context.Background(), pod.UID); !done || err != nil {
				t.Fatalf("Teardown = %v, %v", done, err)
			}
			if got := v.InUse(); got != nil {
				t.Errorf("InUse after Teardown = %v, want none", got)
			}
		})
	}
}

// stopAndForceDelete builds two nodes with a pod and its volume each,
// silences a-1 at 1m and force-deletes its pod at 2m, once it is Unknown.
func stopAndForceDelete(t *testing.T, settings *Settings) *World {
	t.Helper()
	w := runText(t, "nodes 2 zone=a\npods 2 volume\nat 1m stop zone=a count=1\nrun 2m\n", Config{Seed: 1, Settings: settings})
	if got := readyStatus(w.mirror.nodes["a-1"]); got != corev1.ConditionUnknown {
		t.Fatalf("a-1 Ready is %s at 2m, want Unknown", got)
	}
	if got := len(attachedTo(w, "a-1")); got != 1 {
		t.Fatalf("%d volumes attached to a-1, want its pod's", got)
	}
	if err := w.Act(script.At{Action: script.ForceDelete, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if pods := w.mirror.podsOnNode("a-1"); len(pods) != 0 {
		t.Fatalf("pods still on a-1 after the force-delete: %d", len(pods))
	}
	return w
}

// A volume no pod needs any more, on a node not Ready that still lists it
// in volumesInUse, is force-detached once maxWaitForUnmountDuration (6
// minutes) has passed since its detach was wanted: not at 6 minutes, but
// just after, and counted with reason timeout and in the timeline.
func TestForcedDetachAfterMaxWaitForUnmount(t *testing.T) {
	w := stopAndForceDelete(t, nil)
	if err := w.RunFor(attachdetach.DefaultMaxWaitForUnmountDuration); err != nil {
		t.Fatal(err)
	}
	if got := len(attachedTo(w, "a-1")); got != 1 || len(forced(t, w)) != 0 {
		t.Fatalf("at 6m after the force-delete: %d attached, forced %v; want still attached, none forced", got, forced(t, w))
	}
	if err := w.RunFor(attachDetachDueMargin); err != nil {
		t.Fatal(err)
	}
	if got := attachedTo(w, "a-1"); len(got) != 0 {
		t.Errorf("attached to a-1 just after 6m: %v, want none", got)
	}
	if diff := cmp.Diff(map[string]int{string(attachdetach.ReasonTimeout): 1}, forced(t, w)); diff != "" {
		t.Errorf("forced detaches by reason (-want +got):\n%s", diff)
	}
	if len(attachedTo(w, "a-2")) != 1 {
		t.Errorf("the running node's volume was detached")
	}
	rows := w.Snapshot()
	if len(rows) != 1 || rows[0].VolumesAttached != 1 || rows[0].VolumesForceDetached != 1 {
		t.Errorf("timeline row %+v, want 1 volume attached and 1 force-detached", rows)
	}
	if zs := w.Summary(); len(zs) != 1 || zs[0].FirstForceDetached != 8*time.Minute+attachDetachDueMargin {
		t.Errorf("summary %+v, want the forced detach at 8m0.001s", zs)
	}
}

// With --disable-force-detach-on-timeout the volume stays attached for as
// long as the node lists it, and the out-of-service taint detaches it at
// once.
func TestNoForcedDetachOnTimeoutWhenDisabled(t *testing.T) {
	s := DefaultSettings()
	if err := s.Set("disable-force-detach-on-timeout", "true"); err != nil {
		t.Fatal(err)
	}
	w := stopAndForceDelete(t, &s)
	if err := w.RunFor(30 * time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := len(attachedTo(w, "a-1")); got != 1 || len(forced(t, w)) != 0 {
		t.Fatalf("30m after the force-delete: %d attached, forced %v; want still attached, none forced", got, forced(t, w))
	}
	at := w.Now()
	if err := w.Act(script.At{Action: script.Taint, Taint: script.OutOfService, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.RunFor(0); err != nil {
		t.Fatal(err)
	}
	if got := attachedTo(w, "a-1"); len(got) != 0 {
		t.Errorf("attached to a-1 after the out-of-service taint: %v, want none", got)
	}
	if diff := cmp.Diff(map[string]int{string(attachdetach.ReasonOutOfService): 1}, forced(t, w)); diff != "" {
		t.Errorf("forced detaches by reason (-want +got):\n%s", diff)
	}
	if zs := w.Summary(); len(zs) != 1 || zs[0].FirstForceDetached != at {
		t.Errorf("summary %+v, want the forced detach at %v", zs, at)
	}
}

// A node that comes back finishes its evicted pods, unmounts their
// volumes and stops listing them: the volumes are detached, verified, with
// nothing forced. Until then the evicted pods, Terminating, keep them.
func TestReturningNodeDetachesWithoutForce(t *testing.T) {
	w := runText(t, "nodes 2 zone=a\npods 2 volume\nat 1m stop zone=a count=1\nrun 20m\n", Config{Seed: 1})
	pods := w.mirror.podsOnNode("a-1")
	if len(pods) != 1 || pods[0].DeletionTimestamp == nil {
		t.Fatalf("pods on a-1 at 20m: %v, want its pod evicted and Terminating", pods)
	}
	if got := len(attachedTo(w, "a-1")); got != 1 {
		t.Fatalf("%d volumes attached to a-1 at 20m, want the evicted pod's", got)
	}
	if err := w.Act(script.At{Action: script.Start, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.RunFor(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := w.mirror.podsOnNode("a-1"); len(got) != 0 {
		t.Errorf("pods on a-1 after it came back: %d, want none", len(got))
	}
	if got := attachedTo(w, "a-1"); len(got) != 0 {
		t.Errorf("attached to a-1 after it came back: %v, want none", got)
	}
	if n := w.mirror.nodes["a-1"]; len(n.Status.VolumesInUse) != 0 || len(n.Status.VolumesAttached) != 0 {
		t.Errorf("a-1 lists %v in use and %v attached, want nothing", n.Status.VolumesInUse, n.Status.VolumesAttached)
	}
	if got := forced(t, w); len(got) != 0 {
		t.Errorf("forced detaches %v, want none", got)
	}
}

// The timeline's volumes_force_detached, summed over the zones, is the
// controller's own forced-detach counter; the pod garbage collector
// force-deleted the pods on the nodes tainted out-of-service.
func TestForceDetachedMatchesTheMetric(t *testing.T) {
	if testing.Short() {
		t.Skip("long example")
	}
	for _, path := range []string{"../../examples/sim/zone-outage-volumes.txt", "../../examples/sim/zone-outage-volumes-no-timeout.txt"} {
		t.Run(path, func(t *testing.T) {
			w := replayWorld(t, path, Config{Seed: 1})
			sum := 0
			for _, r := range w.Snapshot() {
				sum += r.VolumesForceDetached
			}
			total := 0
			for _, n := range forced(t, w) {
				total += n
			}
			if sum != total || sum == 0 {
				t.Errorf("timeline counts %d forced detaches, the controller %d; want equal and some", sum, total)
			}
			// The out-of-service half's Terminating pods are the pod
			// garbage collector's; the others were force-deleted by the
			// operator.
			if diff := cmp.Diff(map[string]int{string(podgc.ReasonOutOfService): 10}, gcDeletions(t, w)); diff != "" {
				t.Errorf("pods the garbage collector force-deleted, by reason (-want +got):\n%s", diff)
			}
		})
	}
}

// The volume controllers pass only when something they read changes, or
// when a forced detach falls due: never without a volume in the scenario,
// and not every 100 ms with one.
func TestVolumeControllersPassOnChanges(t *testing.T) {
	const outage = "nodes 3 zone=a\npods 6%s\nat 1m stop zone=a count=1\nrun 10m\n"
	if w := runText(t, fmt.Sprintf(outage, ""), Config{Seed: 1}); w.volumePasses != 0 {
		t.Errorf("without volumes the volume controllers passed %d times, want never", w.volumePasses)
	}
	// A 100 ms loop would pass 6,000 times in 10 minutes.
	if w := runText(t, fmt.Sprintf(outage, " volume"), Config{Seed: 1}); w.volumePasses == 0 || w.volumePasses > 100 {
		t.Errorf("with volumes the volume controllers passed %d times, want some, on changes only", w.volumePasses)
	}
}
