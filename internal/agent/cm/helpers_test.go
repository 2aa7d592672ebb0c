package cm_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cgroups/cgroupstest"
	"knode/internal/agent/cm"
	"knode/internal/agent/host"
	"knode/internal/agent/runtime"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// podOf is a pod with one container per requests/limits pair, named c0,
// c1, ...
func podOf(uid string, pairs ...corev1.ResourceList) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID = types.UID(uid)
	p.Namespace, p.Name = "default", uid
	for i := 0; i+1 < len(pairs); i += 2 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name:      "c" + string(rune('0'+i/2)),
			Resources: corev1.ResourceRequirements{Requests: pairs[i], Limits: pairs[i+1]},
		})
	}
	return p
}

// guaranteed is a Guaranteed pod with one container per cpu amount, each
// with 1Gi of memory.
func guaranteed(uid string, cpus ...string) *corev1.Pod {
	var pairs []corev1.ResourceList
	for _, c := range cpus {
		pairs = append(pairs, rl("cpu", c, "memory", "1Gi"), rl("cpu", c, "memory", "1Gi"))
	}
	return podOf(uid, pairs...)
}

func bestEffort(uid string) *corev1.Pod {
	return podOf(uid, nil, nil)
}

func newManager(t *testing.T, cfg cm.Config) *cm.Manager {
	t.Helper()
	if cfg.RootDir == "" {
		cfg.RootDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	m, err := cm.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func admit(t *testing.T, m *cm.Manager, pod *corev1.Pod) {
	t.Helper()
	if reason, msg, ok := m.Admit(pod); !ok {
		t.Fatalf("Admit(%s) rejected: %s: %s", pod.UID, reason, msg)
	}
}

// resources is ContainerResources of the pod's container i.
func resources(t *testing.T, m *cm.Manager, pod *corev1.Pod, i int) cgroups.Resources {
	t.Helper()
	var decide runtime.ResourceDecider = m.ContainerResources
	r, err := decide(pod, &pod.Spec.Containers[i])
	if err != nil {
		t.Fatalf("ContainerResources: %v", err)
	}
	return r.Linux
}

func cpusOf(t *testing.T, m *cm.Manager, pod *corev1.Pod, i int) string {
	t.Helper()
	return resources(t, m, pod, i).CPUSetCPUs
}

// numaOf is the NUMA node of every CPU of set, or -1 when they span nodes.
func numaOf(t *testing.T, topo host.Topology, set string) int {
	t.Helper()
	s, err := cpuset.Parse(set)
	if err != nil || s.IsEmpty() {
		t.Fatalf("cpuset %q: %v", set, err)
	}
	node := -2
	for _, c := range topo.CPUs {
		if !s.Contains(c.ID) {
			continue
		}
		if node != -2 && node != c.NUMANode {
			return -1
		}
		node = c.NUMANode
	}
	return node
}

// plainCgroups is a cgroups.Manager over a fixture tree of mode (V1 or
// V2) with every limit controller, and the tree's root.
func plainCgroups(t *testing.T, mode cgroups.Mode) (*cgroups.Manager, string) {
	t.Helper()
	var root string
	if mode == cgroups.V2 {
		root = cgroupstest.Tree(t, map[string]string{
			"cgroup.controllers":     "cpuset cpu io memory pids\n",
			"cgroup.subtree_control": "",
		})
	} else {
		root = cgroupstest.Tree(t, map[string]string{
			"cpu/": "", "cpuacct/": "", "memory/": "", "pids/": "",
			"cpuset/cpuset.cpus": "0-1\n", "cpuset/cpuset.mems": "0\n",
		})
	}
	mgr, err := cgroups.New(cgroups.Config{Mode: mode, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return mgr, root
}

// cgroupFile reads a control file of a cgroup in a fixture tree; ctl is the
// v1 hierarchy (ignored on V2). "" when the file does not exist.
func cgroupFile(t *testing.T, mode cgroups.Mode, root, ctl, path, file string) string {
	t.Helper()
	dir := filepath.Join(root, path)
	if mode != cgroups.V2 {
		dir = filepath.Join(root, ctl, path)
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
