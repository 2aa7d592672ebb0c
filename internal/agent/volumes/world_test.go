package volumes_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/volumes"
	"knode/internal/agent/volumes/plugins"
	"knode/internal/apitest"
	"knode/internal/csi/hostpath"
	"knode/internal/volume"
)

const (
	nodeName  = "node-1"
	nodeToken = "node1-token"
	ns        = "default"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// event is one event the manager recorded.
type event struct {
	Pod, Type, Reason, Message string
}

// world is the real API server with the node rules and the node's Node,
// a root dir for the agent, and a volume manager acting as the node on a
// fake clock. With a driver (startDriver), the built-in CSI driver serves
// all its services on a data dir under the root, and its registrar is
// registered through a plugins.Watcher.
type world struct {
	t          *testing.T
	ctx        context.Context
	admin      kubernetes.Interface
	nodeClient kubernetes.Interface
	clk        *testingclock.FakeClock
	root       string
	m          *volumes.Manager

	// With a driver:
	plugins *plugins.Watcher
	ctrl    csi.ControllerClient
	data    string

	mu     sync.Mutex
	events []event
	// kicks counts the calls of InUseChanged.
	kicks int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	clk := testingclock.NewFakeClock(t0)
	api := apitest.Start(t, apitest.Options{
		NodeRules: true,
		Tokens:    []string{nodeToken + `,system:node:` + nodeName + `,uid1,"system:nodes"`},
		Clock:     clk,
	})
	w := &world{t: t, ctx: context.Background(), admin: api.Admin, nodeClient: api.Client(t, nodeToken), clk: clk, root: testRoot(t)}
	if _, err := w.admin.CoreV1().Nodes().Create(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	w.plugins, err = plugins.New(plugins.Config{Client: w.nodeClient, NodeName: nodeName, RootDir: w.root, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.plugins.Close)
	w.m = w.newManager()
	return w
}

// newManager builds a manager over w's root, as an agent (re)start does.
func (w *world) newManager() *volumes.Manager {
	w.t.Helper()
	m, err := volumes.New(volumes.Config{
		Client:   w.nodeClient,
		NodeName: nodeName,
		RootDir:  w.root,
		Drivers:  w.plugins,
		Clock:    w.clk,
		Recorder: w.record,
		InUseChanged: func() {
			w.mu.Lock()
			w.kicks++
			w.mu.Unlock()
		},
		Logger: quiet,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

func (w *world) record(pod *corev1.Pod, eventType, reason, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, event{Pod: pod.Name, Type: eventType, Reason: reason, Message: message})
}

// takeEvents returns the events recorded since the last call.
func (w *world) takeEvents() []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.events
	w.events = nil
	return out
}

// testRoot is a new directory with a short canonical path (unix socket
// paths are limited to 107 bytes, and the mount table names canonical
// paths). When the test ends, pass or fail, whatever is mounted under it
// is unmounted before it is removed, so the removal never reaches into a
// mounted filesystem.
func testRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kv")
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 64 {
			under := mountsUnder(t, dir)
			if len(under) == 0 {
				if err := os.RemoveAll(dir); err != nil {
					t.Errorf("cleanup: %v", err)
				}
				return
			}
			for _, p := range under {
				if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
					t.Errorf("cleanup: unmount %s: %v", p, err)
				}
			}
		}
		t.Errorf("cleanup: mounts remain under %s, not removing it: %v", dir, mountsUnder(t, dir))
	})
	return dir
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := fields[4]
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

func (w *world) mounted(path string) bool {
	w.t.Helper()
	return slices.Contains(mountsUnder(w.t, path), path)
}

// startDriver serves the built-in driver (all services, node ID the node's
// name) and registers it.
func (w *world) startDriver() {
	w.t.Helper()
	w.data = filepath.Join(w.root, "data")
	d, err := hostpath.New(hostpath.Config{DataDir: w.data, NodeID: nodeName, Clock: w.clk, Logger: quiet})
	if err != nil {
		w.t.Fatal(err)
	}
	endpoint := filepath.Join(w.root, "csi.sock")
	srv, err := d.Start(endpoint, hostpath.All)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { srv.Stop() })
	reg, err := hostpath.NewRegistrar(hostpath.RegistrarConfig{Endpoint: endpoint, RootDir: w.root, Logger: quiet})
	if err != nil {
		w.t.Fatal(err)
	}
	rs, err := reg.Start()
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { rs.Stop() })
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { conn.Close() })
	w.ctrl = csi.NewControllerClient(conn)
	if err := w.plugins.Sync(w.ctx); err != nil {
		w.t.Fatal(err)
	}
	if st := reg.Status(); !st.Registered {
		w.t.Fatalf("the driver did not register: %+v", st)
	}
}

// csiVolume creates a volume in the driver, publishes it to the node as
// the attacher would, writes content into it, and makes a PV for it bound
// to a claim of the same name (in the default namespace). It returns the
// volume handle and the publish context.
func (w *world) csiVolume(name, content string, modes ...corev1.PersistentVolumeAccessMode) (string, map[string]string) {
	w.t.Helper()
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
	}
	vol, err := w.ctrl.CreateVolume(w.ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{capability}})
	if err != nil {
		w.t.Fatal(err)
	}
	handle := vol.GetVolume().GetVolumeId()
	pub, err := w.ctrl.ControllerPublishVolume(w.ctx, &csi.ControllerPublishVolumeRequest{VolumeId: handle, NodeId: nodeName, VolumeCapability: capability})
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.data, "volumes", handle, "hello"), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	pvc := w.claim(name, name, modes)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: volume.BuiltinDriver, VolumeHandle: handle,
			}},
		},
	}
	if _, err := w.admin.CoreV1().PersistentVolumes().Create(w.ctx, pv, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = modes
	pvc.Status.Capacity = pv.Spec.Capacity
	if _, err := w.admin.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(w.ctx, pvc, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
	return handle, pub.GetPublishContext()
}

// claim creates a PVC named name that asks for the PV volumeName ("" for
// none).
func (w *world) claim(name, volumeName string, modes []corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	w.t.Helper()
	pvc, err := w.admin.CoreV1().PersistentVolumeClaims(ns).Create(w.ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			VolumeName:  volumeName,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return pvc
}

// pod creates a pod bound to the node with volumes.
func (w *world) pod(name string, vols ...corev1.Volume) *corev1.Pod {
	w.t.Helper()
	p, err := w.admin.CoreV1().Pods(ns).Create(w.ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes:    vols,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return p
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

// attach creates the VolumeAttachment of handle on the node, as the
// attach/detach controller does.
func (w *world) attach(pv, handle string) *storagev1.VolumeAttachment {
	w.t.Helper()
	va, err := w.admin.StorageV1().VolumeAttachments().Create(w.ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: volume.AttachmentName(handle, volume.BuiltinDriver, nodeName)},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: volume.BuiltinDriver,
			NodeName: nodeName,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return va
}

// setAttachStatus writes the VolumeAttachment's status, as the attacher
// does.
func (w *world) setAttachStatus(va *storagev1.VolumeAttachment, st storagev1.VolumeAttachmentStatus) *storagev1.VolumeAttachment {
	w.t.Helper()
	cur, err := w.admin.StorageV1().VolumeAttachments().Get(w.ctx, va.Name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	cur.Status = st
	out, err := w.admin.StorageV1().VolumeAttachments().UpdateStatus(w.ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// setup calls Setup and checks its answer.
func (w *world) setup(m *volumes.Manager, pod *corev1.Pod, wantReady bool, wantErr string) {
	w.t.Helper()
	ready, err := m.Setup(w.ctx, pod)
	got := ""
	if err != nil {
		got = err.Error()
	}
	if ready != wantReady || got != wantErr {
		w.t.Fatalf("Setup(%s) = %v, %q; want %v, %q", pod.Name, ready, got, wantReady, wantErr)
	}
}

// teardown calls Teardown and checks its answer.
func (w *world) teardown(m *volumes.Manager, pod *corev1.Pod, wantDone bool) error {
	w.t.Helper()
	done, err := m.Teardown(w.ctx, pod.UID)
	if done != wantDone {
		w.t.Fatalf("Teardown(%s) = %v, %v; want done %v", pod.Name, done, err, wantDone)
	}
	return err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// takeKicks returns the number of InUseChanged calls since the last call.
func (w *world) takeKicks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.kicks
	w.kicks = 0
	return n
}

func wantInUse(t *testing.T, m *volumes.Manager, want ...corev1.UniqueVolumeName) {
	t.Helper()
	if diff := cmp.Diff(want, m.InUse()); diff != "" {
		t.Errorf("InUse (-want +got):\n%s", diff)
	}
}
