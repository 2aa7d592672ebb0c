package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"knode/internal/volume"
)

// statefulSet is a StatefulSet of replicas pods that each mount their own
// claim from the default StorageClass at /data and run script.
func statefulSet(name string, replicas int, script string) map[string]any {
	labels := map[string]string{"app": name}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"serviceName": name,
			"replicas":    replicas,
			"selector":    map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"terminationGracePeriodSeconds": 2,
					"containers": []any{map[string]any{
						"name": "main", "image": "busybox",
						"command":      []string{"sh", "-c", script},
						"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/data"}},
					}},
				},
			},
			"volumeClaimTemplates": []any{map[string]any{
				"metadata": map[string]any{"name": "data"},
				"spec": map[string]any{
					"accessModes": []string{"ReadWriteOnce"},
					"resources":   map[string]any{"requests": map[string]string{"storage": "1Gi"}},
				},
			}},
		},
	}
}

// serverMetrics scrapes the server's /metrics as the admin and returns
// every sample by its full name, labels included.
func serverMetrics(t *testing.T, client kubernetes.Interface) map[string]float64 {
	t.Helper()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// nodeEvents lists the events about node with reason.
func nodeEvents(t *testing.T, client kubernetes.Interface, node, reason string) []corev1.Event {
	t.Helper()
	l, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason})
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	return l.Items
}

// holds checks, every 100 ms for d, that check keeps reporting true.
func holds(t *testing.T, what string, d time.Duration, check func() (bool, string)) {
	t.Helper()
	end := time.After(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, msg := check(); !ok {
			t.Fatalf("%s: no longer true: %s", what, msg)
		}
		select {
		case <-end:
			return
		case <-tick.C:
		}
	}
}

// TestNonGracefulShutdown follows the non-graceful node shutdown story of
// the Node Shutdowns page with two agents, the built-in CSI driver, real
// kubectl and short controller settings: a StatefulSet's pod on node-a
// writes a file to its volume; node-a loses power (its agent and
// containers are killed); the pod is evicted but stays Terminating and
// keeps its volume, so the StatefulSet cannot start web-0 again; once the
// operator taints node-a out-of-service, PodGC force-deletes the pod, the
// volume is detached at once, and web-0 starts on node-b and reads the
// file. When node-a comes back, the clearing event says the taint can go;
// tainting a live node draws the warning.
func TestNonGracefulShutdown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime mounts volumes as root")
	}
	version := newestKubectl(t)
	s := startServer(t, serverOptions{Args: []string{
		"--node-monitor-grace-period=4s", "--node-monitor-period=1s",
		"--default-unreachable-toleration-seconds=2", "--default-not-ready-toleration-seconds=2",
	}})
	client := s.Clientset(t)
	ctx := context.Background()
	mustKubectl := func(args ...string) kubectlResult {
		t.Helper()
		return s.mustKubectl(t, version, args...)
	}
	getPod := func(name string) (*corev1.Pod, error) {
		return client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	}
	getNode := func(name string) *corev1.Node {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// node-b joins only once web-0 runs on node-a.
	rootA, rootB := t.TempDir(), t.TempDir()
	agentA := startAgent(t, s, "node-a", rootA)
	waitDriverRegistered(t, client, "node-a")
	script := `if [ -f /data/greeting ]; then cp /data/greeting /data/read-by-successor; else echo written-on-first-start > /data/greeting; fi; exec sleep 3600`
	created := time.Now()
	mustKubectl("apply", "-f", writeObjects(t, "web.json", statefulSet("web", 1, script)))
	var first *corev1.Pod
	eventually(t, "web-0 Running on node-a", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := getPod("web-0")
		if err != nil {
			return false, err.Error()
		}
		first = p
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == "node-a", describePods([]corev1.Pod{*p})
	})
	t.Logf("baseline: StatefulSet created -> web-0 Running on node-a (claim provisioned, volume attached) in %v", time.Since(created).Round(time.Millisecond))
	pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data-web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the claim of web-0: %v", err)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil {
		t.Fatalf("the volume of data-web-0: %v %+v", err, pv)
	}
	handle := pv.Spec.CSI.VolumeHandle
	greeting := filepath.Join(s.StorageDir, "volumes", handle, "greeting")
	eventually(t, "web-0 wrote its file", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		data, err := os.ReadFile(greeting)
		return err == nil && string(data) == "written-on-first-start\n", string(data)
	})
	attachmentA := volume.AttachmentName(handle, volume.BuiltinDriver, "node-a")
	if _, err := client.StorageV1().VolumeAttachments().Get(ctx, attachmentA, metav1.GetOptions{}); err != nil {
		t.Fatalf("VolumeAttachment to node-a: %v", err)
	}
	startAgent(t, s, "node-b", rootB)
	waitDriverRegistered(t, client, "node-b")

	// 1. Power loss: node-a's agent and containers die at once.
	agentA.kill()
	killContainers(rootA)

	// 2. node-a goes Unknown and is tainted unreachable; web-0 is evicted
	// but stays Terminating, since no agent confirms it stopped.
	eventually(t, "node-a Unknown and tainted unreachable:NoExecute", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		n := getNode("node-a")
		status, _ := nodeReady(n)
		return status == corev1.ConditionUnknown && hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) != nil,
			string(status) + " " + strings.Join(taintStrings(n), ",")
	})
	eventually(t, "web-0 Terminating", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := getPod("web-0")
		if err != nil {
			return false, err.Error()
		}
		return p.UID == first.UID && p.DeletionTimestamp != nil, describePods([]corev1.Pod{*p})
	})

	// 3. The volume stays attached to node-a and no replacement starts.
	stuck := func() (bool, string) {
		p, err := getPod("web-0")
		if err != nil {
			return false, err.Error()
		}
		if p.UID != first.UID {
			return false, "a new web-0 exists on " + p.Spec.NodeName
		}
		if _, err := client.StorageV1().VolumeAttachments().Get(ctx, attachmentA, metav1.GetOptions{}); err != nil {
			return false, "VolumeAttachment to node-a: " + err.Error()
		}
		return true, ""
	}
	holds(t, "web-0 stuck Terminating with its volume on node-a", 5*time.Second, stuck)

	// 4. The operator, sure that node-a is off, taints it out-of-service.
	tainted := time.Now()
	mustKubectl("taint", "nodes", "node-a", "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")

	// 5. Within one PodGC period (20 s) the pod is force-deleted and the
	// volume detached from node-a.
	eventually(t, "the Terminating web-0 force-deleted and its volume detached from node-a", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := getPod("web-0")
		if err == nil && p.UID == first.UID {
			return false, "web-0 still Terminating"
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		_, err = client.StorageV1().VolumeAttachments().Get(ctx, attachmentA, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "VolumeAttachment to node-a still there"
	})
	gone := time.Since(tainted)
	goneAt := time.Now()

	// 6. web-0 starts again on node-b and reads the file node-a's pod wrote.
	var second *corev1.Pod
	eventually(t, "web-0 Running on node-b", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := getPod("web-0")
		if err != nil {
			return false, err.Error()
		}
		second = p
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == "node-b", describePods([]corev1.Pod{*p})
	})
	running := time.Since(tainted)
	eventually(t, "web-0 on node-b read the file", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(s.StorageDir, "volumes", handle, "read-by-successor"))
		return err == nil && string(data) == "written-on-first-start\n", string(data)
	})
	if second.UID == first.UID {
		t.Fatalf("web-0 on node-b has the first pod's UID %s", first.UID)
	}
	t.Logf("out-of-service taint -> old pod gone and volume detached in %v (the wait for PodGC's next 20 s pass), -> web-0 Running on node-b in %v (%v after the old pod was gone)",
		gone.Round(time.Millisecond), running.Round(time.Millisecond), time.Since(goneAt).Round(time.Millisecond))

	// 7. One force-delete by PodGC and one forced detach, both for the
	// out-of-service taint.
	m := serverMetrics(t, client)
	for _, name := range []string{
		`pod_gc_collector_force_delete_pods_total{namespace="default",reason="out-of-service"}`,
		`attach_detach_controller_attachdetach_controller_forced_detaches{reason="out-of-service"}`,
	} {
		if got := m[name]; got != 1 {
			t.Errorf("%s = %v, want 1", name, got)
		}
	}

	// 8. node-a comes back; with no pods bound to it, the clearing event
	// says the taint can be removed. knode leaves the taint in place.
	startAgent(t, s, "node-a", rootA)
	eventually(t, "node-a Ready", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		status, reason := nodeReady(getNode("node-a"))
		return status == corev1.ConditionTrue, string(status) + " " + reason
	})
	eventually(t, "the clearing event on node-a", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		evs := nodeEvents(t, client, "node-a", "OutOfServiceTaintRemovable")
		return len(evs) == 1 && evs[0].Type == corev1.EventTypeNormal, describeEvents(evs)
	})
	eventually(t, "node-a's agent unmounted the dead pod's volume", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		m := mountsUnder(t, rootA)
		return len(m) == 0, strings.Join(m, " ")
	})
	if hasTaint(getNode("node-a"), volume.TaintOutOfService, corev1.TaintEffectNoExecute) == nil {
		t.Errorf("the out-of-service taint was removed from node-a; only the operator may remove it")
	}
	if evs := nodeEvents(t, client, "node-a", "OutOfServiceNodeAlive"); len(evs) != 0 {
		t.Errorf("node-a was tainted while dead, yet got the warning: %s", describeEvents(evs))
	}

	// The warning: the taint added to a node that renews its Lease.
	mustKubectl("taint", "nodes", "node-b", "node.kubernetes.io/out-of-service=nodeshutdown:NoSchedule")
	eventually(t, "the warning on node-b", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		evs := nodeEvents(t, client, "node-b", "OutOfServiceNodeAlive")
		return len(evs) == 1 && evs[0].Type == corev1.EventTypeWarning, describeEvents(evs)
	})
	// NoSchedule on a Ready node moves nothing: web-0 keeps running there.
	if p, err := getPod("web-0"); err != nil || p.UID != second.UID || p.DeletionTimestamp != nil {
		t.Errorf("web-0 on node-b was disturbed by the NoSchedule taint: %v %v", err, p)
	}
	mustKubectl("delete", "statefulset", "web", "--wait=false")
	waitPodGone(t, client, "web-0", second.UID)
}

// describeEvents is one line per event: type, reason and message.
func describeEvents(evs []corev1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Type + " " + e.Reason + ": " + e.Message + "; ")
	}
	return b.String()
}

// waitPodGone waits until no pod name with uid (any uid when "") exists.
func waitPodGone(t *testing.T, client kubernetes.Interface, name string, uid types.UID) {
	t.Helper()
	eventually(t, name+" gone", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && uid != "" && p.UID != uid) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describePods([]corev1.Pod{*p})
	})
}

// TestStatefulSetRollout runs a StatefulSet with real kubectl on one
// agent: `kubectl rollout status` through creation, a scale-up with
// `kubectl scale`, a rolling update of its template, the
// ControllerRevisions kubectl's rollout history lists, and rollout undo.
func TestStatefulSetRollout(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime mounts volumes as root")
	}
	version := newestKubectl(t)
	s := startServer(t, serverOptions{})
	client := s.Clientset(t)
	ctx := context.Background()
	kubectl := func(args ...string) kubectlResult {
		t.Helper()
		return s.mustKubectl(t, version, args...)
	}
	root := t.TempDir()
	startAgent(t, s, "node-1", root)
	waitDriverRegistered(t, client, "node-1")

	kubectl("apply", "-f", writeObjects(t, "db.json", statefulSet("db", 2, "exec sleep 3600")))
	out := kubectl("rollout", "status", "statefulset/db", "--timeout=90s")
	// The defaults give every StatefulSet rollingUpdate.partition 0, so
	// kubectl reports a partitioned rollout, as against any cluster.
	if !strings.Contains(out.Stdout, "partitioned roll out complete: 2 new pods have been updated...") {
		t.Errorf("rollout status after creation:\n%s", out)
	}
	kubectl("scale", "statefulset", "db", "--replicas=3")
	out = kubectl("rollout", "status", "statefulset/db", "--timeout=90s")
	if !strings.Contains(out.Stdout, "partitioned roll out complete: 3 new pods have been updated...") {
		t.Errorf("rollout status after scaling to 3:\n%s", out)
	}
	get := kubectl("get", "statefulsets", "-o", "wide")
	if r, ok := row(get.Stdout, "db"); !ok || len(r) < 5 || r[1] != "3/3" || r[3] != "main" || r[4] != "busybox" {
		t.Errorf("kubectl get statefulsets -o wide: want db 3/3 with container main and image busybox:\n%s", get.Stdout)
	}
	before, err := client.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl("set", "env", "statefulset/db", "GENERATION=2")
	out = kubectl("rollout", "status", "statefulset/db", "--timeout=120s")
	after, err := client.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.UpdateRevision == before.Status.UpdateRevision || after.Status.CurrentRevision != after.Status.UpdateRevision {
		t.Errorf("revisions before %q/%q, after %q/%q: want a new update revision that became current",
			before.Status.CurrentRevision, before.Status.UpdateRevision, after.Status.CurrentRevision, after.Status.UpdateRevision)
	}
	if !strings.Contains(out.Stdout, "Waiting for partitioned roll out to finish: 2 out of 3 new pods have been updated...") ||
		!strings.Contains(out.Stdout, "partitioned roll out complete: 3 new pods have been updated...") {
		t.Errorf("rollout status after the update:\n%s", out)
	}
	for i := range 3 {
		p, err := client.CoreV1().Pods("default").Get(ctx, "db-"+strconv.Itoa(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != after.Status.UpdateRevision {
			t.Errorf("db-%d is at revision %q, want %q", i, got, after.Status.UpdateRevision)
		}
	}
	hist := kubectl("rollout", "history", "statefulset/db")
	if !strings.Contains(hist.Stdout, "REVISION") || len(lines(hist.Stdout)) < 3 {
		t.Errorf("rollout history lists fewer than two revisions:\n%s", hist)
	}
	// kubectl rollout undo patches the template back from the previous
	// ControllerRevision; the controller renumbers that revision.
	kubectl("rollout", "undo", "statefulset/db")
	kubectl("rollout", "status", "statefulset/db", "--timeout=120s")
	undone, err := client.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if undone.Status.UpdateRevision != before.Status.UpdateRevision || undone.Status.CurrentRevision != before.Status.UpdateRevision {
		t.Errorf("after undo: revisions %q/%q, want both %q", undone.Status.CurrentRevision, undone.Status.UpdateRevision, before.Status.UpdateRevision)
	}
	if env := undone.Spec.Template.Spec.Containers[0].Env; len(env) != 0 {
		t.Errorf("after undo the template still sets %v", env)
	}
	kubectl("delete", "statefulset", "db", "--wait=false")
	for i := range 3 {
		waitPodGone(t, client, "db-"+strconv.Itoa(i), "")
	}
	eventually(t, "the agent unmounted every volume", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		m := mountsUnder(t, root)
		return len(m) == 0, strings.Join(m, " ")
	})
}
