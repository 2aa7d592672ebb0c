package csiprovisioner_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/volume/csiprovisioner"
	"knode/internal/csi/hostpath"
	"knode/internal/volume"
)

const (
	driver   = volume.BuiltinDriver
	nodeKey  = "topology.hostpath.csi.knode.io/node"
	identity = "1740830400000-42-" + driver
)

var quiet = slog.New(slog.DiscardHandler)

// world is an API server on a fake clock with nodes n1 and n2 (labelled
// and with CSINodes for the driver's topology key), and the built-in
// driver with topology: its controller and node services for n1, its node
// service for n2, over one data dir.
type world struct {
	*apitest.World
	data string
	c    *csiprovisioner.Controller
}

func newWorld(t *testing.T) *world {
	w := &world{World: apitest.NewWorld(t, apitest.Options{})}
	dir, err := os.MkdirTemp("", "csiprovisioner")
	w.Must("making the driver's directory", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	w.data = filepath.Join(dir, "data")
	sock := filepath.Join(dir, "n1.sock")
	for _, n := range []struct {
		node, sock string
		services   hostpath.Services
	}{{"n1", sock, hostpath.All}, {"n2", filepath.Join(dir, "n2.sock"), hostpath.Node}} {
		d, err := hostpath.New(hostpath.Config{DataDir: w.data, NodeID: n.node, Topology: map[string]string{nodeKey: n.node}, Logger: quiet})
		w.Must("building the driver", err)
		srv, err := d.Start(n.sock, n.services)
		w.Must("starting the driver", err)
		t.Cleanup(func() { srv.Stop() })

		_, err = w.Client.CoreV1().Nodes().Create(w.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.node, Labels: map[string]string{nodeKey: n.node}}}, metav1.CreateOptions{})
		w.Must("creating node", err)
		_, err = w.Client.StorageV1().CSINodes().Create(w.Ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: n.node},
			Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: n.node, TopologyKeys: []string{nodeKey}}}},
		}, metav1.CreateOptions{})
		w.Must("creating csinode", err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	w.Must("dialling the driver", err)
	t.Cleanup(func() { conn.Close() })
	w.c, err = csiprovisioner.New(csiprovisioner.Config{Driver: driver, Conn: conn, Client: w.Client, Clock: w.Clock, Identity: identity, Logger: quiet})
	w.Must("building the provisioner", err)
	return w
}

func (w *world) class(name string, mutate ...func(*storagev1.StorageClass)) {
	w.T.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       driver,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		Parameters:        map[string]string{csiprovisioner.ParamFSType: "ext4"},
		MountOptions:      []string{"noatime"},
	}
	for _, m := range mutate {
		m(sc)
	}
	_, err := w.Client.StorageV1().StorageClasses().Create(w.Ctx, sc, metav1.CreateOptions{})
	w.Must("creating storageclass", err)
}

// claim creates a claim of class for 1Gi RWO, annotated for the driver
// as the PV controller does, with the given selected node ("": none).
func (w *world) claim(name, class, node string) *corev1.PersistentVolumeClaim {
	w.T.Helper()
	ann := map[string]string{volume.AnnStorageProvisioner: driver}
	if node != "" {
		ann[volume.AnnSelectedNode] = node
	}
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Create(w.Ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating claim", err)
	return c
}

func (w *world) getClaim(name string) *corev1.PersistentVolumeClaim {
	w.T.Helper()
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting claim", err)
	return c
}

func (w *world) pvs() []corev1.PersistentVolume {
	w.T.Helper()
	l, err := w.Client.CoreV1().PersistentVolumes().List(w.Ctx, metav1.ListOptions{})
	w.Must("listing pvs", err)
	return l.Items
}

// events are "<type> <reason>: <message>" of the events about object,
// oldest first.
func (w *world) events(namespace, object string) []string {
	w.T.Helper()
	l, err := w.Client.CoreV1().Events(namespace).List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	sort.SliceStable(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	var out []string
	for _, e := range l.Items {
		if e.InvolvedObject.Name == object {
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}

// volumeDirs are the volumes' directories in the driver's data dir.
func (w *world) volumeDirs() []string {
	w.T.Helper()
	entries, err := os.ReadDir(filepath.Join(w.data, "volumes"))
	w.Must("reading the volumes dir", err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A WaitForFirstConsumer claim waits for its node, then gets a volume on
// that node and a PV bound to it; a second pass changes nothing; once the
// PV is Released, its volume and then the PV go.
func TestProvisionAndDelete(t *testing.T) {
	w := newWorld(t)
	w.class("fast")
	claim := w.claim("data", "fast", "")
	w.Must("sync", w.c.Sync(w.Ctx))
	if pvs := w.pvs(); len(pvs) != 0 || len(w.events("default", "data")) != 0 {
		t.Fatalf("a claim without selected node got PVs %v, events %v", pvs, w.events("default", "data"))
	}

	claim.Annotations[volume.AnnSelectedNode] = "n2"
	claim, err := w.Client.CoreV1().PersistentVolumeClaims("default").Update(w.Ctx, claim, metav1.UpdateOptions{})
	w.Must("selecting the node", err)
	w.Must("sync", w.c.Sync(w.Ctx))
	name := "pvc-" + string(claim.UID)
	pvs := w.pvs()
	if len(pvs) != 1 || pvs[0].Name != name {
		t.Fatalf("PVs %v; want one named %s", pvs, name)
	}
	pv := pvs[0]
	handle := hostpath.VolumeID(name)
	want := corev1.PersistentVolumeSpec{
		AccessModes:  []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		MountOptions: []string{"noatime"},
		Capacity:     corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: driver, VolumeHandle: handle, FSType: "ext4",
			VolumeAttributes: pv.Spec.CSI.VolumeAttributes,
		}},
		ClaimRef: &corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "default", Name: "data",
			UID: claim.UID, ResourceVersion: claim.ResourceVersion,
		},
		StorageClassName:              "fast",
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
		VolumeMode:                    pv.Spec.VolumeMode,
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: nodeKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}}},
		}}}},
	}
	if diff := cmp.Diff(want, pv.Spec); diff != "" {
		t.Errorf("PV spec (-want +got):\n%s", diff)
	}
	if got := pv.Spec.CSI.VolumeAttributes[csiprovisioner.AttrProvisionerIdentity]; got != identity {
		t.Errorf("volume attributes %v; want the identity %s", pv.Spec.CSI.VolumeAttributes, identity)
	}
	if got := pv.Annotations[volume.AnnDynamicallyProvisioned]; got != driver {
		t.Errorf("provisioned-by %q, want %s", got, driver)
	}
	if diff := cmp.Diff([]string{volume.ProvisionerDeletionFinalizer}, pv.Finalizers); diff != "" {
		t.Errorf("PV finalizers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{handle}, w.volumeDirs()); diff != "" {
		t.Errorf("volume directories (-want +got):\n%s", diff)
	}
	wantEvents := []string{
		`Normal Provisioning: External provisioner is provisioning volume for claim "default/data"`,
		"Normal ProvisioningSucceeded: Successfully provisioned volume " + name,
	}
	if diff := cmp.Diff(wantEvents, w.events("default", "data")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Idempotent: the PV exists, so nothing more happens.
	w.Clock.Step(time.Minute)
	w.Must("sync", w.c.Sync(w.Ctx))
	if len(w.pvs()) != 1 || len(w.volumeDirs()) != 1 || len(w.events("default", "data")) != 2 {
		t.Errorf("a second pass made PVs %d, volumes %v, events %v", len(w.pvs()), w.volumeDirs(), w.events("default", "data"))
	}

	// The PV controller binds it, the claim goes, the PV is Released.
	pv.Status.Phase = corev1.VolumeBound
	_, err = w.Client.CoreV1().PersistentVolumes().UpdateStatus(w.Ctx, &pv, metav1.UpdateOptions{})
	w.Must("binding", err)
	w.Must("sync while bound", w.c.Sync(w.Ctx))
	if len(w.volumeDirs()) != 1 {
		t.Fatal("a Bound volume was deleted")
	}
	current, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting the pv", err)
	current.Status.Phase = corev1.VolumeReleased
	_, err = w.Client.CoreV1().PersistentVolumes().UpdateStatus(w.Ctx, current, metav1.UpdateOptions{})
	w.Must("releasing", err)
	w.Must("sync while released", w.c.Sync(w.Ctx))
	if dirs := w.volumeDirs(); len(dirs) != 0 {
		t.Errorf("volume directories %v remain after the delete", dirs)
	}
	if _, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the PV remains (err %v)", err)
	}
}

// A Released PV that an attachment still names keeps its volume and gets
// VolumeFailedDelete; once the attachment goes, the volume is deleted.
func TestDeleteWaitsForDetach(t *testing.T) {
	w := newWorld(t)
	w.class("fast")
	claim := w.claim("data", "fast", "n1")
	w.Must("sync", w.c.Sync(w.Ctx))
	name := "pvc-" + string(claim.UID)
	pv, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting the pv", err)
	pv.Status.Phase = corev1.VolumeReleased
	_, err = w.Client.CoreV1().PersistentVolumes().UpdateStatus(w.Ctx, pv, metav1.UpdateOptions{})
	w.Must("releasing", err)
	_, err = w.Client.StorageV1().VolumeAttachments().Create(w.Ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va"},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(name)}},
	}, metav1.CreateOptions{})
	w.Must("creating the attachment", err)

	if err := w.c.Sync(w.Ctx); err == nil {
		t.Error("Sync reported no failure while the volume is attached")
	}
	if len(w.volumeDirs()) != 1 {
		t.Fatal("an attached volume was deleted")
	}
	want := []string{"Warning VolumeFailedDelete: persistentvolume " + name + " is still attached to node n1"}
	if diff := cmp.Diff(want, w.events("default", name)); diff != "" {
		t.Errorf("PV events (-want +got):\n%s", diff)
	}

	w.Must("deleting the attachment", w.Client.StorageV1().VolumeAttachments().Delete(w.Ctx, "va", metav1.DeleteOptions{}))
	w.Must("sync in back-off", w.c.Sync(w.Ctx))
	if len(w.volumeDirs()) != 1 {
		t.Fatal("the volume was deleted during its back-off")
	}
	w.Clock.Step(time.Second)
	w.Must("sync", w.c.Sync(w.Ctx))
	if len(w.volumeDirs()) != 0 {
		t.Error("the volume remains once detached")
	}
}

// A selected node without CSINode sends the claim back to the scheduler.
func TestReschedule(t *testing.T) {
	w := newWorld(t)
	w.class("fast")
	w.claim("data", "fast", "n9")
	w.Must("sync", w.c.Sync(w.Ctx))
	if got := w.getClaim("data").Annotations; got[volume.AnnSelectedNode] != "" {
		t.Errorf("claim annotations %v; want the selected node removed", got)
	}
	want := []string{
		`Normal Provisioning: External provisioner is provisioning volume for claim "default/data"`,
		`Warning ProvisioningFailed: failed to get selected CSINode n9: csinode.storage.k8s.io "n9" not found`,
	}
	if diff := cmp.Diff(want, w.events("default", "data")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(w.pvs()) != 0 || len(w.volumeDirs()) != 0 {
		t.Error("a rescheduled claim got a volume")
	}
}

// A failure is recorded and retried after 1s, 2s, ...; immediate classes
// need no selected node; another provisioner's class is left alone.
func TestFailureBacksOff(t *testing.T) {
	w := newWorld(t)
	w.class("bad", func(sc *storagev1.StorageClass) {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
		sc.Parameters[csiprovisioner.ParameterPrefix+"bogus"] = "x"
	})
	w.class("theirs", func(sc *storagev1.StorageClass) {
		sc.Provisioner = "other.example.com"
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	})
	w.claim("data", "bad", "")
	w.claim("other", "theirs", "")
	if err := w.c.Sync(w.Ctx); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("Sync = %v; want the bad parameter", err)
	}
	failed := `Warning ProvisioningFailed: failed to strip CSI Parameters of prefixed keys: found unknown parameter key "csi.storage.k8s.io/bogus" with reserved namespace csi.storage.k8s.io/`
	provisioning := `Normal Provisioning: External provisioner is provisioning volume for claim "default/data"`
	count := func() int {
		n := 0
		for _, e := range w.events("default", "data") {
			if e == failed {
				n++
			}
		}
		return n
	}
	if diff := cmp.Diff([]string{provisioning, failed}, w.events("default", "data")); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	for _, step := range []struct {
		by   time.Duration
		want int
	}{{0, 1}, {time.Second - time.Nanosecond, 1}, {time.Nanosecond, 2}, {time.Second, 2}, {time.Second, 3}} {
		w.Clock.Step(step.by)
		_ = w.c.Sync(w.Ctx)
		if got := count(); got != step.want {
			t.Fatalf("at %v: %d failures, want %d", w.Clock.Now().Sub(apitest.Epoch), got, step.want)
		}
	}
	if ev := w.events("default", "other"); len(ev) != 0 {
		t.Errorf("another provisioner's claim got events %v", ev)
	}
}

// A Retain class's PV is created with the finalizer, which the next pass
// takes off; the volume stays when the PV is Released.
func TestRetain(t *testing.T) {
	w := newWorld(t)
	w.class("keep", func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain) })
	w.claim("data", "keep", "n1")
	w.Must("sync", w.c.Sync(w.Ctx))
	w.Must("sync", w.c.Sync(w.Ctx))
	pvs := w.pvs()
	if len(pvs) != 1 || slices.Contains(pvs[0].Finalizers, volume.ProvisionerDeletionFinalizer) {
		t.Fatalf("PVs %v; want one without the deletion finalizer", pvs)
	}
	pvs[0].Status.Phase = corev1.VolumeReleased
	_, err := w.Client.CoreV1().PersistentVolumes().UpdateStatus(w.Ctx, &pvs[0], metav1.UpdateOptions{})
	w.Must("releasing", err)
	w.Must("sync", w.c.Sync(w.Ctx))
	if len(w.pvs()) != 1 || len(w.volumeDirs()) != 1 {
		t.Error("a Retain volume was deleted")
	}
}
