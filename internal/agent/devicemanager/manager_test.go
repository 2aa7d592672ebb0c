package devicemanager_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/devicemanager"
	"knode/internal/agent/devicemanager/checkpoint"
	"knode/internal/agent/topology"
)

const res = "example.com/foo"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// plugin is a small device plugin speaking the real protocol.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts *pluginapi.DevicePluginOptions

	mu        sync.Mutex
	devs      []*pluginapi.Device
	update    chan struct{}
	allocated [][]string
	preferred []string // answer of GetPreferredAllocation
}

func newPlugin(devs ...*pluginapi.Device) *plugin {
	return &plugin{devs: devs, update: make(chan struct{}, 16), opts: &pluginapi.DevicePluginOptions{}}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *plugin) list() []*pluginapi.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devs
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.list()}); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-p.update:
		}
	}
}

func (p *plugin) setHealth(id, health string) {
	p.mu.Lock()
	var devs []*pluginapi.Device
	for _, d := range p.devs {
		d = &pluginapi.Device{ID: d.ID, Health: d.Health, Topology: d.Topology}
		if d.ID == id {
			d.Health = health
		}
		devs = append(devs, d)
	}
	p.devs = devs
	p.mu.Unlock()
	p.update <- struct{}{}
}

func (p *plugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*pluginapi.ContainerAllocateResponse
	for _, c := range r.ContainerRequests {
		p.allocated = append(p.allocated, c.DevicesIds)
		out = append(out, &pluginapi.ContainerAllocateResponse{
			Envs:    map[string]string{"FOO_DEVICES": strings.Join(c.DevicesIds, ",")},
			Mounts:  []*pluginapi.Mount{{ContainerPath: "/opt/foo", HostPath: "/var/foo", ReadOnly: true}},
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/foo0", HostPath: "/dev/foo0", Permissions: "rw"}},
		})
	}
	return &pluginapi.AllocateResponse{ContainerResponses: out}, nil
}

// serve serves p on <dir>/<name> until the test ends; stop ends it early.
func serve(t *testing.T, dir, name string, p *plugin) (stop func()) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func register(t *testing.T, m *devicemanager.Manager, req *pluginapi.RegisterRequest) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+m.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req)
	return err
}

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type env struct {
	dir string
	clk *testingclock.FakeClock
	m   *devicemanager.Manager
}

func start(t *testing.T, dir string, mut func(*devicemanager.Config)) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := devicemanager.Config{SocketDir: dir, Clock: clk, Logger: quiet}
	if mut != nil {
		mut(&cfg)
	}
	m, err := devicemanager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return &env{dir: dir, clk: clk, m: m}
}

// waitFor waits, on the manager's change notifications, until cond holds.
func waitFor(t *testing.T, m *devicemanager.Manager, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ch := m.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func waitAllocatable(t *testing.T, m *devicemanager.Manager, capN, allocN int64) {
	t.Helper()
	waitFor(t, m, "capacity", func() bool {
		c, a, _ := m.Capacity()
		return c[res] == capN && a[res] == allocN
	})
}

func numaDevs(health string, ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: health, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}}})
	}
	return out
}

func devOn(id string, node int64) *pluginapi.Device {
	return &pluginapi.Device{ID: id, Health: pluginapi.Healthy, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: node}}}}
}

func podWith(uid string, n int64) (*corev1.Pod, *corev1.Container) {
	c := corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
		res:                *resource.NewQuantity(n, resource.DecimalSI),
		corev1.ResourceCPU: resource.MustParse("1"),
	}}}
	pod := &corev1.Pod{}
	pod.UID = types.UID(uid)
	pod.Spec.Containers = []corev1.Container{c}
	return pod, &pod.Spec.Containers[0]
}

func registerPlugin(t *testing.T, e *env, p *plugin) {
	t.Helper()
	serve(t, e.dir, "foo.sock", p)
	if err := register(t, e.m, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "foo.sock", ResourceName: res}); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

func TestRegisterHealthAllocateRestart(t *testing.T) {
	dir := shortDir(t)
	e := start(t, dir, nil)
	p := newPlugin(numaDevs(pluginapi.Healthy, "d0", "d1", "d2", "d3")...)
	registerPlugin(t, e, p)
	waitAllocatable(t, e.m, 4, 4)

	p.setHealth("d3", pluginapi.Unhealthy)
	waitAllocatable(t, e.m, 4, 3)

	pod, c := podWith("pod-1", 2)
	if err := e.m.Allocate(pod, c); err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	p.mu.Lock()
	got := p.allocated
	p.mu.Unlock()
	if diff := cmp.Diff([][]string{{"d0", "d1"}}, got); diff != "" {
		t.Errorf("plugin's Allocate requests (-want +got):\n%s", diff)
	}
	want := &devicemanager.RunOptions{
		Envs:        map[string]string{"FOO_DEVICES": "d0,d1"},
		Annotations: map[string]string{},
		Mounts:      []devicemanager.Mount{{ContainerPath: "/opt/foo", HostPath: "/var/foo", ReadOnly: true}},
		Devices:     []devicemanager.DeviceSpec{{ContainerPath: "/dev/foo0", HostPath: "/dev/foo0", Permissions: "rw"}},
	}
	if diff := cmp.Diff(want, e.m.RunOptions("pod-1", "c")); diff != "" {
		t.Errorf("RunOptions (-want +got):\n%s", diff)
	}
	// Allocating again keeps the devices; the plugin is not asked again.
	if err := e.m.Allocate(pod, c); err != nil {
		t.Fatalf("second Allocate: %v", err)
	}
	if n := len(p.allocated); n != 1 {
		t.Errorf("plugin asked %d times, want 1", n)
	}

	// Restart: a new manager on the same directory.
	e.m.Stop()
	e2 := start(t, dir, nil)
	if diff := cmp.Diff(want, e2.m.RunOptions("pod-1", "c")); diff != "" {
		t.Errorf("RunOptions after restart (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d0", "d1"}, e2.m.Allocated("pod-1", "c", res)); diff != "" {
		t.Errorf("Allocated after restart (-want +got):\n%s", diff)
	}
	// Until the plugin registers again the resource counts 0.
	capacity, allocatable, removed := e2.m.Capacity()
	if capacity[res] != 0 || allocatable[res] != 0 || len(removed) != 0 {
		t.Errorf("Capacity after restart = %v %v %v, want 0 0 none", capacity, allocatable, removed)
	}
	// Re-registering: the held devices stay taken, so 1 healthy device is
	// free for another pod.
	p2 := newPlugin(numaDevs(pluginapi.Healthy, "d0", "d1", "d2")...)
	serve(t, dir, "foo2.sock", p2)
	if err := register(t, e2.m, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "foo2.sock", ResourceName: res}); err != nil {
		t.Fatal(err)
	}
	waitAllocatable(t, e2.m, 3, 3)
	pod2, c2 := podWith("pod-2", 2)
	err := e2.m.Allocate(pod2, c2)
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/foo. Requested: 2, Available: 1" {
		t.Errorf("Allocate over capacity: %v", err)
	}
	// Freeing pod-1 makes its devices available again.
	e2.m.UpdateAllocated([]*corev1.Pod{pod2})
	if err := e2.m.Allocate(pod2, c2); err != nil {
		t.Errorf("Allocate after freeing: %v", err)
	}
}

func TestPluginGoneGracePeriod(t *testing.T) {
	e := start(t, shortDir(t), func(c *devicemanager.Config) { c.GracePeriod = time.Minute })
	p := newPlugin(numaDevs(pluginapi.Healthy, "d0", "d1")...)
	stop := serve(t, e.dir, "foo.sock", p)
	if err := register(t, e.m, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "foo.sock", ResourceName: res}); err != nil {
		t.Fatal(err)
	}
	waitAllocatable(t, e.m, 2, 2)
	stop()
	waitAllocatable(t, e.m, 2, 0)
	e.clk.Step(time.Minute)
	if c, a, removed := e.m.Capacity(); c[res] != 2 || a[res] != 0 || removed != nil {
		t.Errorf("at the grace period: %v %v %v", c, a, removed)
	}
	e.clk.Step(time.Second)
	c, _, removed := e.m.Capacity()
	if _, ok := c[res]; ok || !cmp.Equal(removed, []string{res}) {
		t.Errorf("after the grace period: capacity %v removed %v", c, removed)
	}
	if _, _, removed := e.m.Capacity(); removed != nil {
		t.Errorf("removed reported twice: %v", removed)
	}
}

func TestBadRegistrations(t *testing.T) {
	e := start(t, shortDir(t), nil)
	for _, tc := range []struct {
		name string
		req  *pluginapi.RegisterRequest
		want string
	}{
		{"bad version", &pluginapi.RegisterRequest{Version: "v1alpha1", Endpoint: "x.sock", ResourceName: res},
			`requested API version "v1alpha1" is not supported by kubelet. Supported version is ["v1beta1"]`},
		{"no domain", &pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "x.sock", ResourceName: "foo"},
			`the ResourceName "foo" is invalid`},
		{"kubernetes.io domain", &pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "x.sock", ResourceName: "kubernetes.io/foo"},
			`the ResourceName "kubernetes.io/foo" is invalid`},
		{"no plugin behind the endpoint", &pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "none.sock", ResourceName: res},
			"failed to get device plugin options"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := register(t, e.m, tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register = %v, want %q", err, tc.want)
			}
		})
	}
	if c, _, _ := e.m.Capacity(); len(c) != 0 {
		t.Errorf("capacity after refused registrations: %v", c)
	}
}

func TestIsExtendedResourceName(t *testing.T) {
	for name, want := range map[string]bool{
		"example.com/foo":      true,
		"foo":                  false,
		"kubernetes.io/foo":    false,
		"x.kubernetes.io/foo":  false,
		"requests.example/foo": false,
		"example.com/":         false,
		"example.com/foo bar":  false,
		"hugepages-2Mi":        false,
		"nvidia.com/gpu":       true,
	} {
		if got := devicemanager.IsExtendedResourceName(corev1.ResourceName(name)); got != want {
			t.Errorf("IsExtendedResourceName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPreferredAllocationAndAffinity(t *testing.T) {
	hint := topology.NewHint(mustMask(t, 1), true)
	affinity := func(string, string) topology.Hint { return hint }
	for _, how := range []string{"Config.Affinity", "SetAffinity"} {
		t.Run(how, func(t *testing.T) {
			e := start(t, shortDir(t), func(c *devicemanager.Config) {
				if how == "Config.Affinity" {
					c.Affinity = affinity
				}
			})
			if how == "SetAffinity" {
				e.m.SetAffinity(affinity)
			}
			p := newPlugin(devOn("a0", 0), devOn("a1", 0), devOn("b0", 1), devOn("b1", 1))
			registerPlugin(t, e, p)
			waitAllocatable(t, e.m, 4, 4)

			// No preferred allocation: the hint's node 1 is used.
			pod, c := podWith("p1", 1)
			if err := e.m.Allocate(pod, c); err != nil {
				t.Fatal(err)
			}
			if got := e.m.Allocated("p1", "c", res); !cmp.Equal(got, []string{"b0"}) {
				t.Errorf("with affinity node 1: %v, want [b0]", got)
			}
			// Node 1 has one left; a request of 2 spills to node 0 in ID order.
			pod2, c2 := podWith("p2", 2)
			if err := e.m.Allocate(pod2, c2); err != nil {
				t.Fatal(err)
			}
			if got := e.m.Allocated("p2", "c", res); !cmp.Equal(got, []string{"a0", "b1"}) {
				t.Errorf("spilled: %v, want [a0 b1]", got)
			}
		})
	}
}

func TestGetPreferredAllocation(t *testing.T) {
	e := start(t, shortDir(t), nil)
	p := newPlugin(devOn("a0", 0), devOn("a1", 0), devOn("b0", 1))
	p.opts = &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
	p.preferred = []string{"b0", "a1"}
	registerPlugin(t, e, p)
	waitAllocatable(t, e.m, 3, 3)
	pod, c := podWith("p1", 2)
	if err := e.m.Allocate(pod, c); err != nil {
		t.Fatal(err)
	}
	if got := e.m.Allocated("p1", "c", res); !cmp.Equal(got, []string{"a1", "b0"}) {
		t.Errorf("preferred: %v, want [a1 b0]", got)
	}
}

func mustMask(t *testing.T, ids ...int) topology.Mask {
	t.Helper()
	m, err := topology.NewMask(ids...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTopologyHints(t *testing.T) {
	e := start(t, shortDir(t), nil)
	p := newPlugin(devOn("a0", 0), devOn("a1", 0), devOn("b0", 1), devOn("b1", 1))
	registerPlugin(t, e, p)
	waitAllocatable(t, e.m, 4, 4)
	h := func(preferred bool, ids ...int) topology.Hint {
		return topology.NewHint(mustMask(t, ids...), preferred)
	}

	for _, tc := range []struct {
		name string
		n    int64
		want []topology.Hint
	}{
		{"one device", 1, []topology.Hint{h(true, 0), h(true, 1), h(false, 0, 1)}},
		{"two devices", 2, []topology.Hint{h(true, 0), h(true, 1), h(false, 0, 1)}},
		{"three devices", 3, []topology.Hint{h(true, 0, 1)}},
		{"too many", 5, []topology.Hint{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, c := podWith("p", tc.n)
			got := e.m.TopologyHints(pod, c)
			if diff := cmp.Diff(map[string][]topology.Hint{res: tc.want}, got); diff != "" {
				t.Errorf("hints (-want +got):\n%s", diff)
			}
		})
	}

	// After allocating 1 on node 0, a request of 2 on node 0 alone is not
	// possible but still preferred-sized on node 1.
	pod, c := podWith("held", 1)
	if err := e.m.Allocate(pod, c); err != nil {
		t.Fatal(err)
	}
	pod2, c2 := podWith("p2", 2)
	want := []topology.Hint{h(true, 1), h(false, 0, 1)}
	if diff := cmp.Diff(map[string][]topology.Hint{res: want}, e.m.TopologyHints(pod2, c2)); diff != "" {
		t.Errorf("hints with a0 held (-want +got):\n%s", diff)
	}
	// The holder gets the hints of its own devices back.
	want = []topology.Hint{h(true, 0), h(false, 0, 1)}
	if diff := cmp.Diff(map[string][]topology.Hint{res: want}, e.m.TopologyHints(pod, c)); diff != "" {
		t.Errorf("hints for the holder (-want +got):\n%s", diff)
	}
}

func TestTopologyHintsWithoutTopology(t *testing.T) {
	e := start(t, shortDir(t), nil)
	p := newPlugin(&pluginapi.Device{ID: "x", Health: pluginapi.Healthy})
	registerPlugin(t, e, p)
	waitAllocatable(t, e.m, 1, 1)
	pod, c := podWith("p", 1)
	got := e.m.TopologyHints(pod, c)
	if hints, ok := got[res]; !ok || hints != nil {
		t.Errorf("hints = %#v, want a nil entry", got)
	}
}

func TestCheckpointRoundTripAndChecksum(t *testing.T) {
	entries := []checkpoint.PodDevicesEntry{{PodUID: "u", ContainerName: "c", ResourceName: res,
		DeviceIDs: checkpoint.DevicesPerNUMA{0: {"d0"}, -1: {"d9"}}, AllocResp: []byte{1, 2}}}
	reg := map[string][]string{res: {"d0", "d9"}}
	b, err := checkpoint.Encode(entries, reg)
	if err != nil {
		t.Fatal(err)
	}
	gotE, gotR, err := checkpoint.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries, gotE); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(reg, gotR); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}
	bad := strings.Replace(string(b), `"d9"]`, `"d8"]`, 1)
	if _, _, err := checkpoint.Decode([]byte(bad)); err != checkpoint.ErrCorrupt {
		t.Errorf("Decode of a changed checkpoint = %v, want ErrCorrupt", err)
	}
}
