package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// markerEnv is the environment variable that tags every process this
// file's pods start, so the test finds them in /proc and kills leftovers.
const markerEnv = "KNODE_E2E_MARKER"

// markedProc is a live process whose environment holds markerEnv.
type markedProc struct {
	pid    int
	marker string   // the value of markerEnv
	argv   []string // its command line
}

// markedProcs lists the live processes whose markerEnv value starts with
// prefix. Zombies have an empty environ and are left out.
func markedProcs(prefix string) []markedProc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []markedProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(environ), "\x00") {
			value, ok := strings.CutPrefix(kv, markerEnv+"=")
			if !ok || !strings.HasPrefix(value, prefix) {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, markedProc{pid: pid, marker: value, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")})
			break
		}
	}
	return out
}

// sleepers are the marked processes with exactly marker that run
// `sleep 3600`.
func sleepers(prefix, marker string) []markedProc {
	var out []markedProc
	for _, p := range markedProcs(prefix) {
		if p.marker == marker && len(p.argv) == 2 && filepath.Base(p.argv[0]) == "sleep" && p.argv[1] == "3600" {
			out = append(out, p)
		}
	}
	return out
}

func pidsOf(ps []markedProc) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.pid)
	}
	slices.Sort(out)
	return out
}

// killMarked SIGKILLs every process tagged with prefix, in passes until
// none is left (a shell loop may fork between a scan and its kill).
func killMarked(t testing.TB, prefix string) {
	for range 50 {
		left := markedProcs(prefix)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			t.Logf("killing leftover process %d %v (%s=%s)", p.pid, p.argv, markerEnv, p.marker)
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	t.Errorf("processes tagged %s survive SIGKILL: %v", prefix, markedProcs(prefix))
}

func processAlive(pid int) bool {
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	return err == nil && len(environ) > 0
}

// containerPID reads the pid the process runtime recorded for a pod's
// container under the agent's root dir (<root>/pods/<uid>/<c>/pid).
func containerPID(root string, uid, container string) (int, error) {
	data, err := os.ReadFile(filepath.Join(root, "pods", uid, container, "pid"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, fmt.Errorf("empty pid file")
	}
	return strconv.Atoi(f[0])
}

// writeObjects writes objects as one kubectl-readable v1 List.
func writeObjects(t *testing.T, name string, objects ...any) string {
	t.Helper()
	data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": objects}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name, string(data))
}

// sleepPod is a pod whose one container c runs command, tagged with marker.
func sleepPod(name, marker string, command []string, extraEnv ...corev1.EnvVar) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"e2e": "pods"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:    "c",
			Image:   "busybox",
			Command: command,
			Env:     append([]corev1.EnvVar{{Name: markerEnv, Value: marker}}, extraEnv...),
		}}},
	}
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		scheduled := ""
		if c := podCondition(&p, corev1.PodScheduled); c != nil && c.Status != corev1.ConditionTrue {
			scheduled = fmt.Sprintf(" PodScheduled=%s/%s %q", c.Status, c.Reason, c.Message)
		}
		fmt.Fprintf(&b, "[%s node=%q phase=%s ready=%v deleting=%v%s] ", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p), p.DeletionTimestamp != nil, scheduled)
	}
	return b.String()
}

// healthWatch is what minHealthy saw.
type healthWatch struct {
	least    int    // the fewest pods Ready and not terminating; -1 if the watch broke
	timeline string // every change, with the time since the watch began
}

// minHealthy watches the pods matching selector and reports, once ctx is
// done, the fewest that were Ready and not terminating at any moment.
func minHealthy(ctx context.Context, t *testing.T, client kubernetes.Interface, selector string) <-chan healthWatch {
	t.Helper()
	list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	healthy := map[string]bool{}
	for _, p := range list.Items {
		healthy[p.Name] = podReady(&p) && p.DeletionTimestamp == nil
	}
	count := func() int {
		n := 0
		for _, h := range healthy {
			if h {
				n++
			}
		}
		return n
	}
	out := make(chan healthWatch, 1)
	start := time.Now()
	go func() {
		defer w.Stop()
		least := count()
		var b strings.Builder
		for {
			select {
			case <-ctx.Done():
				out <- healthWatch{least: least, timeline: b.String()}
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- healthWatch{least: -1, timeline: b.String()}
					return
				}
				p, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue
				}
				fmt.Fprintf(&b, "  %6s %-8s %s\n", time.Since(start).Round(100*time.Millisecond), ev.Type, describePods([]corev1.Pod{*p}))
				if ev.Type == watch.Deleted {
					delete(healthy, p.Name)
				} else {
					healthy[p.Name] = podReady(p) && p.DeletionTimestamp == nil
				}
				least = min(least, count())
			}
		}
	}()
	return out
}

// pdbStatuses watches PDB name and reports, once ctx is done, each status it
// saw with the time since the watch began.
func pdbStatuses(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) <-chan string {
	t.Helper()
	w, err := client.PolicyV1().PodDisruptionBudgets("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := make(chan string, 1)
	go func() {
		defer w.Stop()
		var b strings.Builder
		for {
			select {
			case <-ctx.Done():
				out <- b.String()
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- b.String() + "(watch ended)"
					return
				}
				if p, isPDB := ev.Object.(*policyv1.PodDisruptionBudget); isPDB {
					st := p.Status
					fmt.Fprintf(&b, "  %6s healthy %d/%d desired, allowed %d, expected %d, disrupted %v\n", time.Since(start).Round(100*time.Millisecond),
						st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed, st.ExpectedPods, mapKeys(st.DisruptedPods))
				}
			}
		}
	}()
	return out
}

// TestPodsOnNodes runs two agents on the process runtime and checks with
// real kubectl what the scheduler, the agents, the workload controllers,
// the eviction API and kubectl drain do together: spreading, DaemonSets,
// resource fit, nodeSelector, graceful and forced termination, cordon and
// drain under a PodDisruptionBudget.
func TestPodsOnNodes(t *testing.T) {
	version := newestKubectl(t)
	// Every process the pods start carries this tag; whatever survives the
	// test is killed last, after the agents and the server have stopped
	// (an agent that exits leaves its containers running).
	tag := fmt.Sprintf("knode-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { killMarked(t, tag) })

	s := startServer(t, serverOptions{})
	client := s.Clientset(t)
	ctx := context.Background()
	kubectl := func(args ...string) kubectlResult { return kubectlWith(t, version, s.Home, s.Kubeconfig, args...) }
	mustKubectl := func(args ...string) kubectlResult {
		t.Helper()
		res := kubectl(args...)
		if res.ExitCode != 0 {
			t.Fatalf("want exit code 0:\n%s", res)
		}
		return res
	}

	roots := map[string]string{"node-1": t.TempDir(), "node-2": t.TempDir()}
	agents := map[string]*process{}
	for _, name := range []string{"node-1", "node-2"} {
		agents[name] = startAgent(t, s, name, roots[name])
	}
	for _, name := range []string{"node-1", "node-2"} {
		eventually(t, name+" Ready and untainted", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
			if agents[name].hasExited() {
				t.Fatalf("agent %s exited: %v\n%s", name, agents[name].err, tail(agents[name].stderr.String(), 40))
			}
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			status, _ := nodeReady(n)
			return status == corev1.ConditionTrue && len(n.Spec.Taints) == 0, fmt.Sprintf("Ready=%s taints=%v", status, taintStrings(n))
		})
	}

	getPod := func(name string) (*corev1.Pod, error) {
		return client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	}
	listPods := func(selector string) []corev1.Pod {
		t.Helper()
		l, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	// waitRunning waits until pod name is Running and returns it.
	waitRunning := func(name string) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		eventually(t, "pod "+name+" Running", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
			p, err := getPod(name)
			if err != nil {
				return false, err.Error()
			}
			pod = p
			return p.Status.Phase == corev1.PodRunning, describePods([]corev1.Pod{*p})
		})
		return pod
	}
	waitGone := func(name string, timeout time.Duration) {
		t.Helper()
		eventually(t, "pod "+name+" gone", timeout, 50*time.Millisecond, func() (bool, string) {
			p, err := getPod(name)
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err != nil {
				return false, err.Error()
			}
			return false, describePods([]corev1.Pod{*p})
		})
	}

	// 1. A ReplicaSet of 4 `sleep 3600` pods spreads over both nodes and its
	// processes run on this machine; a PDB with maxUnavailable 1 covers it.
	rsMarker, dsMarker := tag+"-rs", tag+"-ds"
	rsLabels := map[string]string{"app": "sleepers"}
	smallRequests := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
	}}
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "sleepers", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(4)),
			Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: rsLabels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(5)),
					Containers: []corev1.Container{{
						Name: "sleep", Image: "busybox", Command: []string{"sleep", "3600"},
						Env:       []corev1.EnvVar{{Name: markerEnv, Value: rsMarker}},
						Resources: smallRequests,
					}},
				},
			},
		},
	}
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "sleepers", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: rsLabels},
		},
	}
	mustKubectl("create", "-f", writeObjects(t, "replicaset.json", rs, pdb))
	var rsPods []corev1.Pod
	eventually(t, "4 ReplicaSet pods Running", 40*time.Second, 100*time.Millisecond, func() (bool, string) {
		rsPods = listPods("app=sleepers")
		running := 0
		for _, p := range rsPods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return len(rsPods) == 4 && running == 4, describePods(rsPods)
	})
	perNode := map[string]int{}
	for _, p := range rsPods {
		perNode[p.Spec.NodeName]++
	}
	t.Logf("ReplicaSet pods per node: %v", perNode)
	if perNode["node-1"] < 1 || perNode["node-2"] < 1 {
		t.Errorf("the ReplicaSet's 4 pods did not spread over both nodes: %v\n%s", perNode, mustKubectl("get", "pods", "-o", "wide"))
	}
	var procs []markedProc
	eventually(t, "4 `sleep 3600` processes of the ReplicaSet", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		procs = sleepers(tag, rsMarker)
		return len(procs) == 4, fmt.Sprintf("%d processes: %v", len(procs), markedProcs(tag))
	})
	for _, p := range rsPods {
		pid, err := containerPID(roots[p.Spec.NodeName], string(p.UID), "sleep")
		if err != nil {
			t.Errorf("pod %s on %s: no pid file under that agent's root dir: %v", p.Name, p.Spec.NodeName, err)
			continue
		}
		if !slices.Contains(pidsOf(procs), pid) {
			t.Errorf("pod %s on %s: recorded pid %d is not one of the `sleep 3600` processes %v", p.Name, p.Spec.NodeName, pid, pidsOf(procs))
		}
	}
	res := mustKubectl("get", "rs", "sleepers", "--no-headers")
	if f := strings.Fields(res.Stdout); len(f) < 4 || f[1] != "4" || f[2] != "4" || f[3] != "4" {
		t.Errorf("kubectl get rs sleepers: %q, want DESIRED, CURRENT and READY 4", res.Stdout)
	}

	// 2. A DaemonSet runs one pod on each node.
	dsLabels := map[string]string{"app": "daemon"}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "daemon", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: dsLabels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(5)),
					Containers: []corev1.Container{{
						Name: "sleep", Image: "busybox", Command: []string{"sleep", "3600"},
						Env:       []corev1.EnvVar{{Name: markerEnv, Value: dsMarker}},
						Resources: smallRequests,
					}},
				},
			},
		},
	}
	mustKubectl("create", "-f", writeObjects(t, "daemonset.json", ds))
	var dsPods []corev1.Pod
	eventually(t, "a Running DaemonSet pod on each node", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		dsPods = listPods("app=daemon")
		nodes := map[string]int{}
		for _, p := range dsPods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				nodes[p.Spec.NodeName]++
			}
		}
		return len(dsPods) == 2 && nodes["node-1"] == 1 && nodes["node-2"] == 1, describePods(dsPods)
	})
	var dsPodOnNode2 corev1.Pod
	for _, p := range dsPods {
		if p.Spec.NodeName == "node-2" {
			dsPodOnNode2 = p
		}
	}
	eventually(t, "2 `sleep 3600` processes of the DaemonSet", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		n := len(sleepers(tag, dsMarker))
		return n == 2, fmt.Sprintf("%d processes", n)
	})

	// 3. A pod asking for more cpu than any node has stays Pending.
	tooBig := sleepPod("too-big", tag+"-too-big", []string{"sleep", "3600"})
	tooBig.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}
	mustKubectl("create", "-f", writeObjects(t, "too-big.json", tooBig))
	var message string
	eventually(t, "too-big unschedulable for cpu", 20*time.Second, 200*time.Millisecond, func() (bool, string) {
		res := mustKubectl("get", "pod", "too-big", "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].message}`)
		message = res.Stdout
		return strings.Contains(message, "Insufficient cpu"), fmt.Sprintf("PodScheduled message %q", message)
	})
	t.Logf("too-big: PodScheduled message %q", message)
	if p, err := getPod("too-big"); err != nil {
		t.Error(err)
	} else {
		c := podCondition(p, corev1.PodScheduled)
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" || c == nil || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			t.Errorf("too-big: phase %s, nodeName %q, PodScheduled %+v; want Pending, unbound, False/Unschedulable", p.Status.Phase, p.Spec.NodeName, c)
		}
	}
	if want := "0/2 nodes are available: 2 Insufficient cpu."; !strings.HasPrefix(message, want) {
		t.Errorf("too-big: PodScheduled message %q, want it to start %q", message, want)
	}

	// 4. nodeSelector kubernetes.io/hostname=node-2 lands on node-2.
	pinned := sleepPod("pinned", tag+"-pinned", []string{"sleep", "3600"})
	pinned.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "node-2"}
	mustKubectl("create", "-f", writeObjects(t, "pinned.json", pinned))
	if p := waitRunning("pinned"); p.Spec.NodeName != "node-2" {
		t.Errorf("pod pinned with nodeSelector kubernetes.io/hostname=node-2 runs on %q", p.Spec.NodeName)
	}
	mustKubectl("delete", "pod", "pinned", "--wait=false")

	// 5. Deleting a pod that traps SIGTERM delivers SIGTERM.
	files := t.TempDir()
	termFile, termReady := filepath.Join(files, "got-term"), filepath.Join(files, "term-ready")
	trapper := sleepPod("trapper", tag+"-trapper",
		[]string{"sh", "-c", `trap "echo got-term > $MARKER_FILE; exit 0" TERM; echo ready; echo ready > $READY_FILE; while true; do sleep 0.1; done`},
		corev1.EnvVar{Name: "MARKER_FILE", Value: termFile}, corev1.EnvVar{Name: "READY_FILE", Value: termReady})
	mustKubectl("create", "-f", writeObjects(t, "trapper.json", trapper))
	trapperPod := waitRunning("trapper")
	eventually(t, "trapper's trap installed", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		_, err := os.Stat(termReady)
		return err == nil, fmt.Sprint(err)
	})
	logFile := filepath.Join(roots[trapperPod.Spec.NodeName], "pods", string(trapperPod.UID), "c", "0.log")
	if data, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(data), "ready") {
		t.Errorf("trapper's log %s: %q, %v; want it to hold the container's stdout \"ready\"", logFile, data, err)
	}
	start := time.Now()
	mustKubectl("delete", "pod", "trapper", "--wait=false")
	eventually(t, "SIGTERM reaching trapper", 15*time.Second, 50*time.Millisecond, func() (bool, string) {
		data, err := os.ReadFile(termFile)
		return err == nil && strings.TrimSpace(string(data)) == "got-term", fmt.Sprintf("%q %v", data, err)
	})
	waitGone("trapper", 15*time.Second)
	t.Logf("trapper: SIGTERM handled and pod gone %s after kubectl delete started", time.Since(start).Round(time.Millisecond))

	// 6. A pod that ignores SIGTERM is killed once its 2 s grace period has
	// passed.
	stubbornReady := filepath.Join(files, "stubborn-ready")
	stubborn := sleepPod("stubborn", tag+"-stubborn",
		[]string{"sh", "-c", `trap "" TERM; echo ready > $READY_FILE; while true; do sleep 0.1; done`},
		corev1.EnvVar{Name: "READY_FILE", Value: stubbornReady})
	stubborn.Spec.TerminationGracePeriodSeconds = ptr.To(int64(2))
	mustKubectl("create", "-f", writeObjects(t, "stubborn.json", stubborn))
	waitRunning("stubborn")
	eventually(t, "stubborn's trap installed", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		_, err := os.Stat(stubbornReady)
		return err == nil, fmt.Sprint(err)
	})
	var shellPID int
	for _, p := range markedProcs(tag + "-stubborn") {
		if filepath.Base(p.argv[0]) == "sh" {
			shellPID = p.pid
		}
	}
	if shellPID == 0 {
		t.Fatalf("no sh process tagged %s-stubborn: %v", tag, markedProcs(tag))
	}
	start = time.Now()
	mustKubectl("delete", "pod", "stubborn", "--wait=false")
	var killedAfter, goneAfter time.Duration
	eventually(t, "stubborn killed and gone", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		if killedAfter == 0 && !processAlive(shellPID) {
			killedAfter = time.Since(start)
		}
		if goneAfter == 0 {
			if _, err := getPod("stubborn"); apierrors.IsNotFound(err) {
				goneAfter = time.Since(start)
			}
		}
		return killedAfter > 0 && goneAfter > 0, fmt.Sprintf("process %d alive %v, pod gone after %s", shellPID, killedAfter == 0, goneAfter)
	})
	t.Logf("stubborn (grace 2 s, ignores SIGTERM): process gone after %s, pod gone after %s", killedAfter.Round(time.Millisecond), goneAfter.Round(time.Millisecond))
	if killedAfter < 2*time.Second || goneAfter < 2*time.Second {
		t.Errorf("stubborn ignores SIGTERM but its process went after %s and its pod after %s, before the 2 s grace period", killedAfter, goneAfter)
	}
	if killedAfter > 10*time.Second || goneAfter > 12*time.Second {
		t.Errorf("stubborn's process went after %s and its pod after %s; want SIGKILL soon after the 2 s grace period", killedAfter, goneAfter)
	}
	eventually(t, "stubborn's processes gone", 3*time.Second, 50*time.Millisecond, func() (bool, string) {
		left := markedProcs(tag + "-stubborn")
		return len(left) == 0, fmt.Sprint(left)
	})

	// 7. A cordoned node receives no new pods.
	if res := mustKubectl("cordon", "node-2"); !strings.Contains(res.Stdout, "node/node-2 cordoned") {
		t.Errorf("kubectl cordon node-2 printed %q", res.Stdout)
	}
	mustKubectl("create", "-f", writeObjects(t, "cordon.json",
		sleepPod("while-cordoned-1", tag+"-cordon", []string{"sleep", "3600"}),
		sleepPod("while-cordoned-2", tag+"-cordon", []string{"sleep", "3600"})))
	for _, name := range []string{"while-cordoned-1", "while-cordoned-2"} {
		if p := waitRunning(name); p.Spec.NodeName != "node-1" {
			t.Errorf("pod %s created while node-2 was cordoned runs on %q, want node-1", name, p.Spec.NodeName)
		}
	}
	if res := mustKubectl("uncordon", "node-2"); !strings.Contains(res.Stdout, "node/node-2 uncordoned") {
		t.Errorf("kubectl uncordon node-2 printed %q", res.Stdout)
	}
	// Bare pods would stop the drain (they declare no controller); the
	// pending one is bound nowhere and does not matter.
	mustKubectl("delete", "pod", "while-cordoned-1", "while-cordoned-2", "--wait=false")
	waitGone("pinned", 15*time.Second)

	// 8. kubectl drain node-2 moves every ReplicaSet pod to node-1 within
	// the PDB and leaves the DaemonSet pod where it is.
	eventually(t, "PDB sleepers allowing 1 disruption", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := client.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "sleepers", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := p.Status
		return st.ObservedGeneration == p.Generation && st.ExpectedPods == 4 && st.CurrentHealthy == 4 && st.DesiredHealthy == 3 && st.DisruptionsAllowed == 1,
			fmt.Sprintf("status %+v, generation %d", st, p.Generation)
	})
	onNode2 := 0
	for _, p := range listPods("app=sleepers") {
		if p.Spec.NodeName == "node-2" {
			onNode2++
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	least := minHealthy(watchCtx, t, client, "app=sleepers")
	pdbTimeline := pdbStatuses(watchCtx, t, client, "sleepers")
	drainCtx, cancelDrain := context.WithTimeout(ctx, 150*time.Second)
	defer cancelDrain()
	drainArgs := []string{"drain", "node-2", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"}
	cmd := s.kubectlCommand(drainCtx, version, drainArgs...)
	var drainOut, drainErr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &drainOut, &drainErr
	start = time.Now()
	err := cmd.Run()
	drain := kubectlResult{Args: drainArgs, Stdout: drainOut.String(), Stderr: drainErr.String()}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		drain.ExitCode = exitErr.ExitCode()
	}
	if err != nil || !strings.Contains(drain.Stdout, "node/node-2 drained") {
		stopWatch()
		t.Fatalf("kubectl drain (%v after %s): want exit code 0 and \"node/node-2 drained\":\n%s\npods:\n%s", err, time.Since(start).Round(time.Millisecond), drain, kubectl("get", "pods", "-o", "wide"))
	}
	t.Logf("kubectl drain node-2 took %s (%d ReplicaSet pods were on node-2):\n%s", time.Since(start).Round(time.Millisecond), onNode2, drain)
	if onNode2 >= 2 && !strings.Contains(drain.Stderr, "Cannot evict pod as it would violate the pod's disruption budget") {
		t.Errorf("drain evicted %d pods covered by a PDB with maxUnavailable 1 without being told to wait (429):\n%s", onNode2, drain)
	}
	eventually(t, "4 ReplicaSet pods Running and Ready on node-1", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		pods := listPods("app=sleepers")
		ok := 0
		for _, p := range pods {
			if p.Spec.NodeName == "node-1" && p.Status.Phase == corev1.PodRunning && podReady(&p) && p.DeletionTimestamp == nil {
				ok++
			}
		}
		return len(pods) == 4 && ok == 4, describePods(pods)
	})
	stopWatch()
	t.Logf("PDB sleepers status during the drain:\n%s", <-pdbTimeline)
	health := <-least
	t.Logf("ReplicaSet pods during the drain:\n%s", health.timeline)
	if n := health.least; n == -1 {
		t.Errorf("the watch over the ReplicaSet pods ended during the drain; the PDB could not be checked")
	} else if n < 3 {
		t.Errorf("during the drain only %d ReplicaSet pods were Ready and not terminating; the PDB (maxUnavailable 1) wants at least 3", n)
	}
	for _, p := range listPods("app=sleepers") {
		if p.Spec.NodeName != "node-1" {
			t.Errorf("after the drain ReplicaSet pod %s is on %q", p.Name, p.Spec.NodeName)
		}
	}
	if p, err := getPod(dsPodOnNode2.Name); err != nil {
		t.Errorf("the DaemonSet pod on node-2 after the drain: %v", err)
	} else if p.UID != dsPodOnNode2.UID || p.Spec.NodeName != "node-2" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the DaemonSet pod on node-2 did not stay: %s", describePods([]corev1.Pod{*p}))
	}
	if n, _ := client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{}); n == nil || !n.Spec.Unschedulable {
		t.Errorf("node-2 is not cordoned after the drain")
	}
	eventually(t, "4 `sleep 3600` processes of the ReplicaSet after the drain", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		n := len(sleepers(tag, rsMarker))
		return n == 4, fmt.Sprintf("%d processes", n)
	})
	if res := mustKubectl("uncordon", "node-2"); !strings.Contains(res.Stdout, "node/node-2 uncordoned") {
		t.Errorf("kubectl uncordon node-2 printed %q", res.Stdout)
	}
	if n, err := client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("node-2 still cordoned after kubectl uncordon (%v)", err)
	}

	// Deleting the owners deletes their pods, and the agents stop every
	// process.
	mustKubectl("delete", "rs/sleepers", "ds/daemon", "pdb/sleepers", "pod/too-big", "--wait=false")
	eventually(t, "every pod gone", 40*time.Second, 200*time.Millisecond, func() (bool, string) {
		pods := listPods("")
		return len(pods) == 0, describePods(pods)
	})
	eventually(t, "every process stopped", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		left := markedProcs(tag)
		return len(left) == 0, fmt.Sprint(left)
	})
}
