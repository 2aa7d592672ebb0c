package cm_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/cm"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/devicemanager"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/runtime"
	"knode/internal/agent/topology"
)

const fooResource = "example.com/foo"

// fooPlugin is a device plugin speaking the real protocol: its devices
// never change, and Allocate answers with env, a mount and a device node.
type fooPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devs []*pluginapi.Device
}

func (p *fooPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *fooPlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devs}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *fooPlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	var out []*pluginapi.ContainerAllocateResponse
	for _, c := range r.ContainerRequests {
		out = append(out, &pluginapi.ContainerAllocateResponse{
			Envs:    map[string]string{"FOO_VISIBLE": strings.Join(c.DevicesIds, ","), "A_FOO_DRIVER": "1"},
			Mounts:  []*pluginapi.Mount{{ContainerPath: "/opt/foo", HostPath: "/var/foo", ReadOnly: true}},
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/foo", HostPath: "/dev/" + c.DevicesIds[0], Permissions: "rw"}},
		})
	}
	return &pluginapi.AllocateResponse{ContainerResponses: out}, nil
}

// startDevices runs a device manager with fooPlugin registered, its
// devices on the given NUMA nodes (by device ID), and waits until they are
// allocatable.
func startDevices(t *testing.T, numaNodes []int, devs map[string]int64) *devicemanager.Manager {
	t.Helper()
	dir, err := os.MkdirTemp("", "cm") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dm, err := devicemanager.New(devicemanager.Config{
		SocketDir: dir,
		NUMANodes: numaNodes,
		Clock:     testingclock.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		Logger:    quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dm.Stop)

	p := &fooPlugin{}
	for id, node := range devs {
		p.devs = append(p.devs, &pluginapi.Device{ID: id, Health: pluginapi.Healthy,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: node}}}})
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "foo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+dm.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: "foo.sock", ResourceName: fooResource,
	}); err != nil {
		t.Fatal(err)
	}
	for {
		changed := dm.Changed()
		if _, alloc, _ := dm.Capacity(); alloc[fooResource] == int64(len(devs)) {
			return dm
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("timed out waiting for the plugin's devices")
		}
	}
}

func TestDevices(t *testing.T) {
	topo := fake.TopologyTwoSocketSMT()
	dm := startDevices(t, []int{0, 1}, map[string]int64{"foo1": 1})
	m := newManager(t, cm.Config{
		Topology:              topo,
		CPUManager:            cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"},
		TopologyManagerPolicy: topology.PolicySingleNUMANode,
		Devices:               dm,
	})
	// The only device is on node 1, so the topology manager puts the
	// CPUs there too.
	lim := rl("cpu", "2", "memory", "1Gi", fooResource, "1")
	pod := podOf("p1", lim, lim)
	admit(t, m, pod)
	r, err := m.ContainerResources(pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if node := numaOf(t, topo, r.Linux.CPUSetCPUs); node != 1 {
		t.Errorf("cpus %q on node %d, want node 1 with the device", r.Linux.CPUSetCPUs, node)
	}
	want := runtime.ContainerResources{
		Env:     []corev1.EnvVar{{Name: "A_FOO_DRIVER", Value: "1"}, {Name: "FOO_VISIBLE", Value: "foo1"}},
		Mounts:  []runtime.Mount{{HostPath: "/var/foo", ContainerPath: "/opt/foo", ReadOnly: true}},
		Devices: []runtime.Device{{HostPath: "/dev/foo1", ContainerPath: "/dev/foo", Permissions: "rw"}},
	}
	got := runtime.ContainerResources{Env: r.Env, Mounts: r.Mounts, Devices: r.Devices}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("device options (-want +got):\n%s", d)
	}

	// The device is taken: the device manager's hints for a second pod
	// are empty, and single-numa-node rejects it.
	pod2 := podOf("p2", lim, lim)
	reason, msg, ok := m.Admit(pod2)
	if ok || reason != "TopologyAffinityError" {
		t.Errorf("second pod: %q %q %v, want a TopologyAffinityError", reason, msg, ok)
	}

	if err := m.RemovePod(pod.UID); err != nil {
		t.Fatal(err)
	}
	if got := dm.Allocated("p1", "c0", fooResource); len(got) != 0 {
		t.Errorf("devices still held after RemovePod: %v", got)
	}
	admit(t, m, pod2)
	if got := dm.Allocated("p2", "c0", fooResource); !cmp.Equal(got, []string{"foo1"}) {
		t.Errorf("second pod after the first left: %v, want [foo1]", got)
	}
}
