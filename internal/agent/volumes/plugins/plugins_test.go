package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/agent/volumes/plugins"
	"knode/internal/apitest"
	"knode/internal/csi/hostpath"
	"knode/internal/volume"
)

const (
	nodeName  = "node-1"
	nodeToken = "node1-token"
	zoneKey   = "topology.hostpath.csi.knode.io/zone"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// world is the real API server with the node rules, the node's Node, and
// a Watcher acting as the node over a short root dir (unix socket paths
// are limited to 107 bytes).
type world struct {
	t     *testing.T
	ctx   context.Context
	admin kubernetes.Interface
	clk   *testingclock.FakeClock
	root  string
	w     *plugins.Watcher
	node  *corev1.Node
	// drivers counts startDriver's drivers, to give each a socket.
	drivers int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	api := apitest.Start(t, apitest.Options{
		NodeRules: true,
		Tokens:    []string{nodeToken + `,system:node:` + nodeName + `,uid1,"system:nodes"`},
		Clock:     clk,
	})
	w := &world{t: t, ctx: context.Background(), admin: api.Admin, clk: clk, root: shortDir(t)}
	node, err := w.admin.CoreV1().Nodes().Create(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        nodeName,
		Labels:      map[string]string{"kubernetes.io/hostname": nodeName},
		Annotations: map[string]string{volume.AnnCSINodeID: `{"other.csi.example.com":"other-id"}`},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.node = node
	w.w, err = plugins.New(plugins.Config{Client: api.Client(t, nodeToken), NodeName: nodeName, RootDir: w.root, Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.w.Close)
	return w
}

// shortDir is a new directory with a short path, removed when the test
// ends.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startDriver serves the built-in driver's node service under root and
// its registrar in root's plugins_registry; stop removes the registration
// socket.
func (w *world) startDriver(topology map[string]string, maxVolumes int64) (reg *hostpath.Registrar, stop func()) {
	w.t.Helper()
	d, err := hostpath.New(hostpath.Config{DataDir: filepath.Join(w.root, "data"), NodeID: nodeName + "-id", Topology: topology, MaxVolumesPerNode: maxVolumes, Logger: quiet})
	if err != nil {
		w.t.Fatal(err)
	}
	w.drivers++
	endpoint := filepath.Join(w.root, fmt.Sprintf("csi%d.sock", w.drivers))
	srv, err := d.Start(endpoint, hostpath.Node)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { srv.Stop() })
	reg, err = hostpath.NewRegistrar(hostpath.RegistrarConfig{Endpoint: endpoint, RootDir: w.root, Logger: quiet})
	if err != nil {
		w.t.Fatal(err)
	}
	rs, err := reg.Start()
	if err != nil {
		w.t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := rs.Stop(); err != nil {
				w.t.Errorf("stopping the registrar: %v", err)
			}
		})
	}
	w.t.Cleanup(stop)
	return reg, stop
}

func (w *world) sync() error {
	w.t.Helper()
	return w.w.Sync(w.ctx)
}

func (w *world) csiNode() *storagev1.CSINode {
	w.t.Helper()
	cn, err := w.admin.StorageV1().CSINodes().Get(w.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return cn
}

func (w *world) getNode() *corev1.Node {
	w.t.Helper()
	n, err := w.admin.CoreV1().Nodes().Get(w.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func nodeIDs(t *testing.T, n *corev1.Node) map[string]string {
	t.Helper()
	v, ok := n.Annotations[volume.AnnCSINodeID]
	if !ok {
		return nil
	}
	out := map[string]string{}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		t.Fatalf("annotation %q: %v", v, err)
	}
	return out
}

func TestSyncCreatesTheCSINode(t *testing.T) {
	w := newWorld(t)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	cn := w.csiNode()
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: w.node.UID}}
	if diff := cmp.Diff(wantOwner, cn.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	if len(cn.Spec.Drivers) != 0 {
		t.Errorf("drivers = %v, want none", cn.Spec.Drivers)
	}
	if _, err := os.Stat(filepath.Join(w.root, plugins.RegistryDir)); err != nil {
		t.Errorf("the registry directory was not made: %v", err)
	}
}

func TestRegisterAndDeregisterTheBuiltinDriver(t *testing.T) {
	w := newWorld(t)
	reg, stop := w.startDriver(map[string]string{zoneKey: "a"}, 8)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}

	if st := reg.Status(); !st.Notified || !st.Registered || st.Error != "" {
		t.Errorf("registrar was told %+v, want registered", st)
	}
	want := []storagev1.CSINodeDriver{{
		Name: volume.BuiltinDriver, NodeID: nodeName + "-id", TopologyKeys: []string{zoneKey},
		Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](8)},
	}}
	if diff := cmp.Diff(want, w.csiNode().Spec.Drivers); diff != "" {
		t.Errorf("CSINode drivers (-want +got):\n%s", diff)
	}
	node := w.getNode()
	wantIDs := map[string]string{"other.csi.example.com": "other-id", volume.BuiltinDriver: nodeName + "-id"}
	if diff := cmp.Diff(wantIDs, nodeIDs(t, node)); diff != "" {
		t.Errorf("node ID annotation (-want +got):\n%s", diff)
	}
	if node.Labels[zoneKey] != "a" || node.Labels["kubernetes.io/hostname"] != nodeName {
		t.Errorf("labels = %v, want the topology label beside the others", node.Labels)
	}
	client, err := w.w.Node(volume.BuiltinDriver)
	if err != nil {
		t.Fatal(err)
	}
	info, err := client.NodeGetInfo(w.ctx, &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != nodeName+"-id" {
		t.Errorf("NodeGetInfo through the registered client = %v, %v", info, err)
	}

	// A second pass changes nothing.
	rv := w.csiNode().ResourceVersion
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if got := w.csiNode().ResourceVersion; got != rv {
		t.Errorf("an idle pass wrote the CSINode (resourceVersion %s -> %s)", rv, got)
	}

	stop()
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if got := w.csiNode().Spec.Drivers; len(got) != 0 {
		t.Errorf("after the socket went away, CSINode drivers = %v, want none", got)
	}
	node = w.getNode()
	if diff := cmp.Diff(map[string]string{"other.csi.example.com": "other-id"}, nodeIDs(t, node)); diff != "" {
		t.Errorf("after deregistration, node ID annotation (-want +got):\n%s", diff)
	}
	if node.Labels[zoneKey] != "a" {
		t.Errorf("the topology label went away with the driver: %v", node.Labels)
	}
	if _, err := w.w.Node(volume.BuiltinDriver); !errors.Is(err, plugins.ErrNotRegistered) {
		t.Errorf("Node after deregistration: err = %v, want ErrNotRegistered", err)
	} else if want := "driver name hostpath.csi.knode.io not found in the list of registered CSI drivers"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestLastDriverTakesTheAnnotation(t *testing.T) {
	w := newWorld(t)
	n := w.getNode()
	delete(n.Annotations, volume.AnnCSINodeID)
	if _, err := w.admin.CoreV1().Nodes().Update(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stop := w.startDriver(nil, 0)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{volume.BuiltinDriver: nodeName + "-id"}, nodeIDs(t, w.getNode())); diff != "" {
		t.Errorf("annotation (-want +got):\n%s", diff)
	}
	want := []storagev1.CSINodeDriver{{Name: volume.BuiltinDriver, NodeID: nodeName + "-id"}}
	if diff := cmp.Diff(want, w.csiNode().Spec.Drivers, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("CSINode drivers, no topology and no limit (-want +got):\n%s", diff)
	}
	stop()
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.getNode().Annotations[volume.AnnCSINodeID]; ok {
		t.Errorf("the annotation stayed after its last driver left")
	}
}

func TestTopologyCollisionFailsTheRegistration(t *testing.T) {
	w := newWorld(t)
	n := w.getNode()
	n.Labels[zoneKey] = "b"
	if _, err := w.admin.CoreV1().Nodes().Update(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg, _ := w.startDriver(map[string]string{zoneKey: "a"}, 0)
	if err := w.sync(); err == nil {
		t.Fatal("Sync succeeded despite the collision")
	}
	st := reg.Status()
	wantMsg := `RegisterPlugin error -- plugin registration failed with err: error updating Node object with CSI driver node info: detected topology value collision: driver reported "` + zoneKey + `":"a" but existing label is "` + zoneKey + `":"b"`
	if !st.Notified || st.Registered || st.Error != wantMsg {
		t.Errorf("registrar was told %+v, want not registered with %q", st, wantMsg)
	}
	if got := w.csiNode().Spec.Drivers; len(got) != 0 {
		t.Errorf("CSINode drivers = %v, want none", got)
	}
	if _, err := w.w.Node(volume.BuiltinDriver); err == nil {
		t.Error("the driver is reachable though its registration failed")
	}
}

// fakePlugin is a registration server that answers GetInfo with info and
// counts the calls; it stands in for plugins the agent must refuse.
type fakePlugin struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo

	mu       sync.Mutex
	getInfos int
	status   *registerapi.RegistrationStatus
}

func (f *fakePlugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.getInfos++
	return f.info, nil
}

func (f *fakePlugin) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = st
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (f *fakePlugin) calls() (int, *registerapi.RegistrationStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.getInfos, f.status
}

func serveFake(t *testing.T, path string, f *fakePlugin) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, f)
	go s.Serve(l)
	t.Cleanup(s.Stop)
}

func TestRefusedPlugins(t *testing.T) {
	tests := []struct {
		name       string
		info       *registerapi.PluginInfo
		wantNotify string
		wantErr    string
	}{
		{
			name:    "another plugin type is left alone",
			info:    &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "example.com/gpu", SupportedVersions: []string{"v1beta1"}},
			wantErr: "RegisterPlugin error -- no handler registered for plugin type: DevicePlugin at socket ",
		},
		{
			name:       "CSI 0.x",
			info:       &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "old.csi.example.com", Endpoint: "/nonexistent.sock", SupportedVersions: []string{"0.3.0"}},
			wantNotify: `RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver old.csi.example.com at endpoint /nonexistent.sock: kubernetes.io/csi: ValidatePlugin for CSI driver "old.csi.example.com" failed. None of the versions specified ["0.3.0"] are supported. err=highest supported version reported by driver is 0.3.0, must be v1.x`,
		},
		{
			name:       "no versions",
			info:       &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "none.csi.example.com", Endpoint: "/nonexistent.sock"},
			wantNotify: `RegisterPlugin error -- plugin validation failed with err: validation failed for CSI Driver none.csi.example.com at endpoint /nonexistent.sock: kubernetes.io/csi: ValidatePlugin for CSI driver "none.csi.example.com" failed. Plugin returned an empty list for supported versions`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			f := &fakePlugin{info: tt.info}
			sock := filepath.Join(w.root, plugins.RegistryDir, "sub", "fake.sock")
			serveFake(t, sock, f)
			// A hidden socket is never asked.
			hidden := &fakePlugin{info: tt.info}
			serveFake(t, filepath.Join(w.root, plugins.RegistryDir, ".hidden.sock"), hidden)

			err := w.sync()
			if err == nil {
				t.Fatal("Sync succeeded")
			}
			calls, st := f.calls()
			if calls != 1 {
				t.Errorf("GetInfo calls = %d, want 1", calls)
			}
			if tt.wantNotify == "" {
				if st != nil {
					t.Errorf("the plugin was notified: %+v", st)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
			} else if st == nil || st.PluginRegistered || st.Error != tt.wantNotify {
				t.Errorf("notified %+v, want not registered with\n%q", st, tt.wantNotify)
			}
			if w.w.Err(sock) == nil {
				t.Error("Err(socket) = nil after a failed registration")
			}
			if n, _ := hidden.calls(); n != 0 {
				t.Errorf("the hidden socket was asked %d times", n)
			}

			// No retry before the back-off's first 500 ms have passed.
			w.clk.Step(499 * time.Millisecond)
			_ = w.sync()
			if calls, _ := f.calls(); calls != 1 {
				t.Errorf("after 499ms: GetInfo calls = %d, want 1", calls)
			}
			w.clk.Step(time.Millisecond)
			_ = w.sync()
			if calls, _ := f.calls(); calls != 2 {
				t.Errorf("after 500ms: GetInfo calls = %d, want 2", calls)
			}
			// Then 1 s.
			w.clk.Step(999 * time.Millisecond)
			_ = w.sync()
			w.clk.Step(time.Millisecond)
			_ = w.sync()
			if calls, _ := f.calls(); calls != 3 {
				t.Errorf("after 1.5s: GetInfo calls = %d, want 3", calls)
			}
		})
	}
}

func TestRecreatedSocketRegistersAgain(t *testing.T) {
	w := newWorld(t)
	reg, stop := w.startDriver(nil, 0)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if !reg.Status().Registered {
		t.Fatal("first registration failed")
	}
	stop()
	reg2, _ := w.startDriver(nil, 4)
	if err := w.sync(); err != nil {
		t.Fatal(err)
	}
	if st := reg2.Status(); !st.Registered {
		t.Errorf("the new registrar was told %+v", st)
	}
	want := []storagev1.CSINodeDriver{{Name: volume.BuiltinDriver, NodeID: nodeName + "-id", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](4)}}}
	if diff := cmp.Diff(want, w.csiNode().Spec.Drivers, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("CSINode drivers after re-registration (-want +got):\n%s", diff)
	}
	if _, err := w.w.Node(volume.BuiltinDriver); err != nil {
		t.Errorf("the re-registered driver is not reachable: %v", err)
	}
}

func TestRunSyncsOnTheClock(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- w.w.Run(ctx) }()
	// The first pass runs at once and makes the CSINode.
	waitFor(t, func() bool {
		_, err := w.admin.StorageV1().CSINodes().Get(w.ctx, nodeName, metav1.GetOptions{})
		return err == nil
	})
	reg, _ := w.startDriver(nil, 0)
	waitFor(t, func() bool { return w.clk.HasWaiters() })
	w.clk.Step(plugins.DefaultPollPeriod)
	waitFor(t, func() bool { return reg.Status().Registered })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := w.w.Node(volume.BuiltinDriver); err == nil {
		t.Error("Run left the driver's connection open after it returned")
	}
}

// waitFor yields until cond holds: Run works in a goroutine of its own,
// and its progress is all the test waits for (nothing waits on time).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		runtime.Gosched()
	}
}
