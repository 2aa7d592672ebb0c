package csiattacher_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
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
	"knode/internal/controller/volume/csiattacher"
	"knode/internal/csi/hostpath"
	"knode/internal/volume"
)

const driver = volume.BuiltinDriver

var (
	quiet     = slog.New(slog.DiscardHandler)
	finalizer = volume.AttacherFinalizer(driver)
)

// world is an API server on a fake clock and the built-in driver: its
// controller and node services for node n1, its node service for n2, over
// one data dir, and a connection to the controller side.
type world struct {
	*apitest.World
	conn *grpc.ClientConn
	ctrl csi.ControllerClient
}

func newWorld(t *testing.T) *world {
	w := &world{World: apitest.NewWorld(t, apitest.Options{})}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "csiattacher")
	w.Must("making the driver's directory", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	sock := filepath.Join(dir, "n1.sock")
	for _, n := range []struct {
		node, sock string
		services   hostpath.Services
	}{{"n1", sock, hostpath.All}, {"n2", filepath.Join(dir, "n2.sock"), hostpath.Node}} {
		d, err := hostpath.New(hostpath.Config{DataDir: data, NodeID: n.node, Logger: quiet})
		w.Must("building the driver", err)
		srv, err := d.Start(n.sock, n.services)
		w.Must("starting the driver", err)
		t.Cleanup(func() { srv.Stop() })
	}
	w.conn = dial(t, sock)
	w.ctrl = csi.NewControllerClient(w.conn)
	for _, n := range []string{"n1", "n2"} {
		w.csiNode(n)
	}
	return w
}

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (w *world) csiNode(name string) {
	w.T.Helper()
	_, err := w.Client.StorageV1().CSINodes().Create(w.Ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: name}}},
	}, metav1.CreateOptions{})
	w.Must("creating csinode", err)
}

func (w *world) controller(conn grpc.ClientConnInterface) *csiattacher.Controller {
	w.T.Helper()
	c, err := csiattacher.New(csiattacher.Config{Driver: driver, Conn: conn, Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the attacher", err)
	return c
}

// volumePV makes a volume in the driver and a PV for it.
func (w *world) volumePV(name string, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	w.T.Helper()
	resp, err := w.ctrl.CreateVolume(w.Ctx, &csi.CreateVolumeRequest{
		Name: name,
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	})
	w.Must("creating the volume", err)
	pv, err := w.Client.CoreV1().PersistentVolumes().Create(w.Ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: resp.Volume.VolumeId, VolumeAttributes: map[string]string{"from": "test"},
			}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating the pv", err)
	return pv
}

func (w *world) attachment(name, node, pv string) {
	w.T.Helper()
	_, err := w.Client.StorageV1().VolumeAttachments().Create(w.Ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driver, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)},
		},
	}, metav1.CreateOptions{})
	w.Must("creating volumeattachment", err)
}

func (w *world) va(name string) *storagev1.VolumeAttachment {
	w.T.Helper()
	va, err := w.Client.StorageV1().VolumeAttachments().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting volumeattachment "+name, err)
	return va
}

func (w *world) pv(name string) *corev1.PersistentVolume {
	w.T.Helper()
	pv, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting pv "+name, err)
	return pv
}

func (w *world) gone(name string) bool {
	w.T.Helper()
	_, err := w.Client.StorageV1().VolumeAttachments().Get(w.Ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.T.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

func (w *world) delete(name string) {
	w.T.Helper()
	w.Must("deleting volumeattachment", w.Client.StorageV1().VolumeAttachments().Delete(w.Ctx, name, metav1.DeleteOptions{}))
}

// publishedTo asks the driver where the volume is published.
func (w *world) publishedTo(handle string) []string {
	w.T.Helper()
	resp, err := w.ctrl.ListVolumes(w.Ctx, &csi.ListVolumesRequest{})
	w.Must("listing volumes", err)
	for _, e := range resp.Entries {
		if e.Volume.VolumeId == handle {
			nodes := slices.Clone(e.GetStatus().GetPublishedNodeIds())
			slices.Sort(nodes)
			return nodes
		}
	}
	w.T.Fatalf("volume %s not listed", handle)
	return nil
}

// An RWO volume attaches to one node; the second node's attachment gets
// attachError and is retried with back-off; deleting the first detaches it,
// after which the second attaches; deleting that leaves the PV finalizer
// until the PV itself is deleted.
func TestAttachDetach(t *testing.T) {
	w := newWorld(t)
	c := w.controller(w.conn)
	pv := w.volumePV("pv1", corev1.ReadWriteOnce)
	handle := pv.Spec.CSI.VolumeHandle

	w.attachment("va-n1", "n1", "pv1")
	w.Must("sync", c.Sync(w.Ctx))
	va := w.va("va-n1")
	if !va.Status.Attached || va.Status.AttachError != nil {
		t.Fatalf("va-n1 status %+v; want attached without error", va.Status)
	}
	if diff := cmp.Diff(map[string]string{"node": "n1", "readonly": "false"}, va.Status.AttachmentMetadata); diff != "" {
		t.Errorf("attachmentMetadata is not the publish context (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{finalizer}, va.Finalizers); diff != "" {
		t.Errorf("va finalizers (-want +got):\n%s", diff)
	}
	if got := va.Annotations[volume.AnnAttacherNodeID]; got != "n1" {
		t.Errorf("node-id annotation %q, want n1", got)
	}
	if !slices.Contains(w.pv("pv1").Finalizers, finalizer) {
		t.Errorf("pv finalizers %v lack %s", w.pv("pv1").Finalizers, finalizer)
	}
	if diff := cmp.Diff([]string{"n1"}, w.publishedTo(handle)); diff != "" {
		t.Errorf("published to (-want +got):\n%s", diff)
	}

	// The second node: RWO is published to one node at a time.
	w.attachment("va-n2", "n2", "pv1")
	if err := c.Sync(w.Ctx); err == nil || !strings.Contains(err.Error(), "va-n2") {
		t.Errorf("Sync = %v; want the failure of va-n2", err)
	}
	va2 := w.va("va-n2")
	if va2.Status.Attached || va2.Status.AttachError == nil {
		t.Fatalf("va-n2 status %+v; want an attach error", va2.Status)
	}
	if msg := va2.Status.AttachError.Message; !strings.Contains(msg, "FailedPrecondition") || !strings.Contains(msg, "n1") {
		t.Errorf("attachError message %q; want the driver's FailedPrecondition naming n1", msg)
	}
	if !va2.Status.AttachError.Time.Time.Equal(apitest.Epoch) {
		t.Errorf("attachError time %v, want the clock's %v", va2.Status.AttachError.Time, apitest.Epoch)
	}
	if !slices.Contains(va2.Finalizers, finalizer) {
		t.Errorf("va-n2 finalizers %v: the finalizer comes before the driver call", va2.Finalizers)
	}

	// Back-off: nothing is tried before a second has passed.
	rv := va2.ResourceVersion
	w.Must("sync during back-off", c.Sync(w.Ctx))
	if got := w.va("va-n2").ResourceVersion; got != rv {
		t.Errorf("va-n2 written during its back-off (resourceVersion %s -> %s)", rv, got)
	}
	w.Clock.Step(time.Second)
	if err := c.Sync(w.Ctx); err == nil {
		t.Error("the retry after a second succeeded while n1 still holds the volume")
	}
	if got := w.va("va-n2").Status.AttachError.Time.Time; !got.Equal(apitest.Epoch.Add(time.Second)) {
		t.Errorf("retried attachError time %v, want %v", got, apitest.Epoch.Add(time.Second))
	}

	// Detach n1.
	w.delete("va-n1")
	w.Must("sync detaching va-n1", c.Sync(w.Ctx))
	if !w.gone("va-n1") {
		t.Fatalf("va-n1 still exists after its detach: %+v", w.va("va-n1"))
	}
	if got := w.publishedTo(handle); len(got) != 0 {
		t.Errorf("volume still published to %v after the detach", got)
	}

	// n2's back-off is 2s now; then it attaches.
	w.Clock.Step(2 * time.Second)
	w.Must("sync attaching va-n2", c.Sync(w.Ctx))
	va2 = w.va("va-n2")
	if !va2.Status.Attached || va2.Status.AttachError != nil {
		t.Fatalf("va-n2 status %+v; want attached, error cleared", va2.Status)
	}
	if diff := cmp.Diff([]string{"n2"}, w.publishedTo(handle)); diff != "" {
		t.Errorf("published to (-want +got):\n%s", diff)
	}

	// The last detach leaves the PV's finalizer while the PV lives.
	w.delete("va-n2")
	w.Must("sync detaching va-n2", c.Sync(w.Ctx))
	if !w.gone("va-n2") {
		t.Fatal("va-n2 still exists after its detach")
	}
	w.Must("sync", c.Sync(w.Ctx))
	if !slices.Contains(w.pv("pv1").Finalizers, finalizer) {
		t.Error("the PV lost the attacher finalizer before it was deleted")
	}
	w.Must("deleting the pv", w.Client.CoreV1().PersistentVolumes().Delete(w.Ctx, "pv1", metav1.DeleteOptions{}))
	w.Must("sync", c.Sync(w.Ctx))
	got, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, "pv1", metav1.GetOptions{})
	if err == nil && slices.Contains(got.Finalizers, finalizer) {
		t.Errorf("a deleted PV no attachment names keeps %v", got.Finalizers)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// A PV being deleted keeps its finalizer while an attachment names it, and
// a new attachment of it is refused.
func TestPVBeingDeleted(t *testing.T) {
	w := newWorld(t)
	c := w.controller(w.conn)
	w.volumePV("pv1", corev1.ReadWriteOnce)
	w.attachment("va-n1", "n1", "pv1")
	w.Must("sync", c.Sync(w.Ctx))
	w.Must("deleting the pv", w.Client.CoreV1().PersistentVolumes().Delete(w.Ctx, "pv1", metav1.DeleteOptions{}))
	w.Must("sync", c.Sync(w.Ctx))
	if !slices.Contains(w.pv("pv1").Finalizers, finalizer) {
		t.Fatal("the finalizer left a PV an attachment still names")
	}
	w.attachment("va-n2", "n2", "pv1")
	_ = c.Sync(w.Ctx)
	va := w.va("va-n2")
	if va.Status.AttachError == nil || va.Status.AttachError.Message != `PersistentVolume "pv1" is marked for deletion` {
		t.Errorf("attachError %+v; want the PV marked for deletion", va.Status.AttachError)
	}
	if len(va.Finalizers) != 0 {
		t.Errorf("finalizers %v on an attachment that never reached the driver", va.Finalizers)
	}
}

// Without a CSINode the attach fails with a clear message and leaves the
// attachment free to go; a detach without CSINode or annotation records
// detachError, and succeeds once the CSINode is back.
func TestMissingCSINode(t *testing.T) {
	w := newWorld(t)
	c := w.controller(w.conn)
	w.volumePV("pv1", corev1.ReadWriteOnce)
	w.attachment("va-n3", "n3", "pv1")
	_ = c.Sync(w.Ctx)
	va := w.va("va-n3")
	if va.Status.AttachError == nil || va.Status.AttachError.Message != `csinode.storage.k8s.io "n3" not found` {
		t.Fatalf("attachError %+v; want the missing CSINode", va.Status.AttachError)
	}
	if len(va.Finalizers) != 0 || va.Annotations[volume.AnnAttacherNodeID] != "" {
		t.Errorf("finalizers %v, annotations %v; want neither", va.Finalizers, va.Annotations)
	}
	w.delete("va-n3")
	if !w.gone("va-n3") {
		t.Fatal("an attachment without finalizer was not deleted at once")
	}

	// An attachment someone else finalized for a node without CSINode.
	_, err := w.Client.StorageV1().VolumeAttachments().Create(w.Ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-n4", Finalizers: []string{finalizer}},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: driver, NodeName: "n4", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}},
	}, metav1.CreateOptions{})
	w.Must("creating va-n4", err)
	w.delete("va-n4")
	_ = c.Sync(w.Ctx)
	va = w.va("va-n4")
	if va.Status.DetachError == nil || va.Status.DetachError.Message != `csinode.storage.k8s.io "n4" not found` {
		t.Fatalf("detachError %+v; want the missing CSINode", va.Status.DetachError)
	}
	w.csiNode("n4")
	w.Clock.Step(time.Second)
	w.Must("sync", c.Sync(w.Ctx))
	if !w.gone("va-n4") {
		t.Errorf("va-n4 not detached once its CSINode exists: %+v", w.va("va-n4").Status)
	}
}

// Another driver's attachments are not touched.
func TestOtherAttacher(t *testing.T) {
	w := newWorld(t)
	c := w.controller(w.conn)
	w.volumePV("pv1", corev1.ReadWriteOnce)
	_, err := w.Client.StorageV1().VolumeAttachments().Create(w.Ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "other.csi.example.com", NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")}},
	}, metav1.CreateOptions{})
	w.Must("creating", err)
	w.Must("sync", c.Sync(w.Ctx))
	if va := w.va("other"); va.Status.Attached || va.Status.AttachError != nil || len(va.Finalizers) != 0 {
		t.Errorf("another attacher's attachment was touched: %+v", va)
	}
}

// noAttach is a driver whose controller service cannot publish: any
// ControllerPublishVolume is Unimplemented.
type noAttach struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
}

func (noAttach) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
	}}, nil
}

func (noAttach) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}}},
	}}, nil
}

// A driver without PUBLISH_UNPUBLISH_VOLUME is never called: its
// attachments are marked attached with no finalizer.
func TestDriverThatDoesNotAttach(t *testing.T) {
	w := newWorld(t)
	dir, err := os.MkdirTemp("", "noattach")
	w.Must("temp dir", err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	lis, err := net.Listen("unix", sock)
	w.Must("listening", err)
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, noAttach{})
	csi.RegisterControllerServer(srv, noAttach{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	c := w.controller(dial(t, sock))

	w.volumePV("pv1", corev1.ReadWriteOnce)
	w.attachment("va", "n1", "pv1")
	w.Must("sync", c.Sync(w.Ctx))
	va := w.va("va")
	if !va.Status.Attached || va.Status.AttachmentMetadata != nil || va.Status.AttachError != nil || len(va.Finalizers) != 0 {
		t.Errorf("attachment %+v / finalizers %v; want attached, no metadata, no finalizer", va.Status, va.Finalizers)
	}
	if slices.Contains(w.pv("pv1").Finalizers, finalizer) {
		t.Error("the PV got the attacher finalizer from a driver that does not attach")
	}
}

func TestNewChecksConfig(t *testing.T) {
	w := newWorld(t)
	for name, cfg := range map[string]csiattacher.Config{
		"no driver":         {Conn: w.conn, Client: w.Client},
		"no conn":           {Driver: driver, Client: w.Client},
		"no client":         {Driver: driver, Conn: w.conn},
		"negative timeout":  {Driver: driver, Conn: w.conn, Client: w.Client, Timeout: -1},
		"max below start":   {Driver: driver, Conn: w.conn, Client: w.Client, RetryStart: time.Minute, RetryMax: time.Second},
		"negative resync":   {Driver: driver, Conn: w.conn, Client: w.Client, ResyncPeriod: -time.Second},
		"negative retryMax": {Driver: driver, Conn: w.conn, Client: w.Client, RetryMax: -time.Second},
	} {
		if _, err := csiattacher.New(cfg); err == nil {
			t.Errorf("%s: New accepted the config", name)
		}
	}
}
