package sim

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/controller/podgc"
	"knode/internal/controller/volume/attachdetach"
	"knode/internal/sim/script"
	"knode/internal/volume"
)

// gcDeletions is the pod garbage collector's force-delete counter by
// reason.
func gcDeletions(t *testing.T, w *World) map[string]int {
	t.Helper()
	families, err := w.gcMetrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range families {
		if f.GetName() != "pod_gc_collector_force_delete_pods_total" {
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

// setPods is where each pod of the StatefulSet name is, by pod name:
// "<node>" or "<node> terminating".
func setPods(w *World, name string) map[string]string {
	out := map[string]string{}
	for _, p := range w.mirror.pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "StatefulSet" || ref.Name != name {
			continue
		}
		where := p.Spec.NodeName
		if p.DeletionTimestamp != nil {
			where += " terminating"
		}
		out[p.Name] = where
	}
	return out
}

// The statefulset examples rely on where the scheduler puts the pods: one
// per node, in node order, so that zone b, which dies, holds db-2 and
// db-3. The scheduler breaks ties by name, not at random, so the seed
// does not change it; this fails if a change to the scheduler or the
// scripts moves them.
func TestStatefulSetExamplesPlaceReplicasInTheDeadZone(t *testing.T) {
	for _, name := range []string{"statefulset-zone-outage", "statefulset-zone-outage-taint", "statefulset-zone-outage-taint-no-timeout"} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open("../../examples/sim/" + name + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc, err := script.Parse(name, f)
			if err != nil {
				t.Fatal(err)
			}
			w, err := New(context.Background(), Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var stop *script.At
			for _, st := range sc.Statements {
				switch st := st.(type) {
				case script.Run:
				case script.At:
					if st.Action == script.Stop && stop == nil {
						stop = &st
					}
				default:
					if err := w.Exec(st); err != nil {
						t.Fatal(err)
					}
				}
			}
			if stop == nil || stop.Zone != "b" {
				t.Fatalf("the example stops %+v, want zone b", stop)
			}
			if err := w.RunFor(stop.Time); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"db-0": "a-1", "db-1": "a-2", "db-2": "b-1", "db-3": "b-2", "db-4": "c-1", "db-5": "c-2"}
			if diff := cmp.Diff(want, setPods(w, "db")); diff != "" {
				t.Errorf("db's pods by node when zone b dies (-want +got):\n%s", diff)
			}
		})
	}
}

// Without the out-of-service taint the pods evicted from the dead zone
// stay Terminating on its nodes and keep their volumes attached; the pod
// garbage collector, with nothing to do, never passes.
func TestStatefulSetStuckWithoutTheTaint(t *testing.T) {
	if testing.Short() {
		t.Skip("long example")
	}
	w := replayWorld(t, "../../examples/sim/statefulset-zone-outage.txt", Config{Seed: 1})
	want := map[string]string{"db-0": "a-1", "db-1": "a-2", "db-2": "b-1 terminating", "db-3": "b-2 terminating", "db-4": "c-1", "db-5": "c-2"}
	if diff := cmp.Diff(want, setPods(w, "db")); diff != "" {
		t.Errorf("db's pods at the end (-want +got):\n%s", diff)
	}
	for node, pod := range map[string]string{"b-1": "db-2", "b-2": "db-3"} {
		if got := attachedTo(w, node); !cmp.Equal(got, []string{pod}) {
			t.Errorf("attached to %s: %v, want %s's volume", node, got, pod)
		}
	}
	if got := forced(t, w); len(got) != 0 {
		t.Errorf("forced detaches %v, want none", got)
	}
	if w.gcPasses != 0 || len(gcDeletions(t, w)) != 0 {
		t.Errorf("the pod garbage collector passed %d times and deleted %v; want no pass", w.gcPasses, gcDeletions(t, w))
	}
}

// With the taint the pod garbage collector force-deletes the two pods
// (reason out-of-service), their volumes are force-detached for the taint,
// and the StatefulSet controller makes db-2 and db-3 again in zone a, with
// the same claims bound to the same volumes.
func TestStatefulSetRecoversWithTheTaint(t *testing.T) {
	if testing.Short() {
		t.Skip("long example")
	}
	w := replayWorld(t, "../../examples/sim/statefulset-zone-outage-taint.txt", Config{Seed: 1})
	want := map[string]string{"db-0": "a-1", "db-1": "a-2", "db-2": "a-1", "db-3": "a-2", "db-4": "c-1", "db-5": "c-2"}
	if diff := cmp.Diff(want, setPods(w, "db")); diff != "" {
		t.Errorf("db's pods at the end (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{string(podgc.ReasonOutOfService): 2}, gcDeletions(t, w)); diff != "" {
		t.Errorf("pods the garbage collector force-deleted, by reason (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{string(attachdetach.ReasonOutOfService): 2}, forced(t, w)); diff != "" {
		t.Errorf("forced detaches by reason (-want +got):\n%s", diff)
	}
	// At 3m the collector's tick came before taint eviction deleted the
	// pods, so it had nothing to do; it force-deleted them at its next
	// tick, and passed only then.
	if w.gcPasses != 1 || w.marks["b"].firstForceDetached != 3*time.Minute+20*time.Second {
		t.Errorf("the collector passed %d times, the first volume was force-detached at %v; want once, at 3m20s", w.gcPasses, w.marks["b"].firstForceDetached)
	}
	for i := range 6 {
		pod := "db-" + strconv.Itoa(i)
		claim := w.mirror.claims[types.NamespacedName{Namespace: "default", Name: "data-" + pod}]
		if claim == nil || claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName != "pv-"+pod {
			t.Errorf("claim data-%s: %+v, want Bound to pv-%s", pod, claim, pod)
		}
	}
	set := w.mirror.sets[types.NamespacedName{Namespace: "default", Name: "db"}]
	if set == nil || set.Status.ReadyReplicas != 6 {
		t.Errorf("StatefulSet db: %+v, want 6 replicas ready", set)
	}
}

// A StatefulSet's pods are the pods statement's: the same container,
// requests and admission's default tolerations; with volume, a claim
// template data mounted at /data, and the World's pre-bound volumes.
func TestStatefulSetPods(t *testing.T) {
	w := runText(t, "nodes 3 zone=a\nstatefulset web replicas=2\nstatefulset db replicas=2 volume\nrun 30s\n", Config{Seed: 1})
	if got := setPods(w, "web"); len(got) != 2 {
		t.Fatalf("web's pods: %v, want 2", got)
	}
	for _, name := range []string{"web-0", "db-1"} {
		p := w.mirror.pods[types.NamespacedName{Namespace: "default", Name: name}]
		if p.Status.Phase != corev1.PodRunning || p.Spec.Containers[0].Image != podImage || !cmp.Equal(p.Spec.Containers[0].Resources.Requests, PodRequests) {
			t.Errorf("pod %s: %s, image %s, requests %v", name, p.Status.Phase, p.Spec.Containers[0].Image, p.Spec.Containers[0].Resources.Requests)
		}
		var tolerated []string
		for _, tol := range p.Spec.Tolerations {
			tolerated = append(tolerated, tol.Key)
		}
		sort.Strings(tolerated)
		if want := []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}; !cmp.Equal(tolerated, want) {
			t.Errorf("pod %s tolerates %v, want admission's defaults %v", name, tolerated, want)
		}
	}
	db1 := w.mirror.pods[types.NamespacedName{Namespace: "default", Name: "db-1"}]
	if got := volume.PodClaims(db1); !cmp.Equal(got, []string{"data-db-1"}) {
		t.Errorf("db-1 claims %v, want data-db-1", got)
	}
	if m := db1.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].Name != volumeName || m[0].MountPath != mountPath {
		t.Errorf("db-1 mounts %v, want data at /data", m)
	}
	if got := attachedTo(w, db1.Spec.NodeName); !strings.Contains(strings.Join(got, ","), "db-1") {
		t.Errorf("attached to db-1's node: %v, want its volume", got)
	}
	if pv := w.mirror.volumes["pv-web-0"]; pv != nil {
		t.Errorf("web, without volume, has the volume %s", pv.Name)
	}
	set := w.mirror.sets[types.NamespacedName{Namespace: "default", Name: "db"}]
	if set.Spec.PodManagementPolicy != appsv1.OrderedReadyPodManagement || set.Status.ReadyReplicas != 2 {
		t.Errorf("StatefulSet db: policy %s, %d ready; want OrderedReady, 2", set.Spec.PodManagementPolicy, set.Status.ReadyReplicas)
	}
	if got := w.Snapshot()[0].StatefulSetReady; got != 4 {
		t.Errorf("statefulset_ready = %d, want 4", got)
	}
}

// A scenario without StatefulSets never builds or runs the StatefulSet
// controller, and one whose pods the garbage collector could not act on
// never has it pass, though pods are evicted and stay Terminating.
func TestControllersIdleWithoutWork(t *testing.T) {
	w := runText(t, "nodes 3 zone=a\npods 6\nat 1m stop zone=a count=1\nrun 10m\n", Config{Seed: 1})
	if w.sets != nil || w.setPasses != 0 {
		t.Errorf("without StatefulSets the controller exists (%v) and passed %d times", w.sets != nil, w.setPasses)
	}
	if got := w.Snapshot()[0].PodsTerminating; got != 2 {
		t.Fatalf("pods_terminating = %d, want the silent node's 2", got)
	}
	if w.gcPasses != 0 {
		t.Errorf("the pod garbage collector passed %d times, want never", w.gcPasses)
	}
}

// The garbage collector passes on its 20 s grid from the start: the
// out-of-service taint at 2m5s has taint eviction delete the pods at once,
// and the collector force-deletes them at 2m20s, its next pass.
func TestPodGCOnItsPeriod(t *testing.T) {
	w := runText(t, "nodes 2 zone=a\npods 2\nat 1m stop zone=a count=1\nat 2m5s taint out-of-service zone=a count=1\nrun 2m19s\n", Config{Seed: 1})
	pods := w.mirror.podsOnNode("a-1")
	if len(pods) != 1 || pods[0].DeletionTimestamp == nil {
		t.Fatalf("pods on a-1 at 2m19s: %v, want one Terminating", pods)
	}
	if err := w.RunFor(time.Second); err != nil {
		t.Fatal(err)
	}
	if pods := w.mirror.podsOnNode("a-1"); len(pods) != 0 {
		t.Errorf("pods on a-1 at 2m20s: %d, want none", len(pods))
	}
	if diff := cmp.Diff(map[string]int{string(podgc.ReasonOutOfService): 1}, gcDeletions(t, w)); diff != "" {
		t.Errorf("force-deleted by reason (-want +got):\n%s", diff)
	}
}

// untaint out-of-service takes the taint off, as kubectl taint ... - does:
// every taint with the key, whatever its effect.
func TestUntaintOutOfService(t *testing.T) {
	w := runText(t, "nodes 2 zone=a\nat 10s taint out-of-service zone=a\nrun 20s\n", Config{Seed: 1})
	for _, name := range []string{"a-1", "a-2"} {
		if !volume.OutOfService(w.mirror.nodes[name]) {
			t.Fatalf("%s lacks the out-of-service taint", name)
		}
	}
	n := w.mirror.nodes["a-2"].DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: volume.TaintOutOfService, Effect: corev1.TaintEffectNoSchedule})
	if _, err := w.admin.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle()
	if err := w.Act(script.At{Action: script.Untaint, Taint: script.OutOfService, Zone: "a", From: 2}); err != nil {
		t.Fatal(err)
	}
	if !volume.OutOfService(w.mirror.nodes["a-1"]) {
		t.Error("a-1 lost its taint")
	}
	if taints := w.mirror.nodes["a-2"].Spec.Taints; len(taints) != 0 {
		t.Errorf("a-2's taints after untaint: %v, want none", taints)
	}
}

// The summary follows each StatefulSet's readiness as it changes.
func TestStatefulSetSummary(t *testing.T) {
	set := func(replicas, ready int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
			Spec:       appsv1.StatefulSetSpec{Replicas: &replicas},
			Status:     appsv1.StatefulSetStatus{ReadyReplicas: ready},
		}
	}
	type step struct {
		at    time.Duration
		ready int32
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  string
	}{
		{name: "never ready", steps: []step{{0, 0}, {time.Second, 2}}, want: "statefulset db: never ready (2/3 ready at the end)"},
		{name: "ready, never lost", steps: []step{{0, 0}, {2 * time.Second, 3}}, want: "statefulset db: ready 3/3 at 2s, never lost readiness"},
		{name: "lost and back", steps: []step{{0, 3}, {time.Minute, 2}, {2 * time.Minute, 1}, {3 * time.Minute, 3}},
			want: "statefulset db: ready 3/3 at 0s, lost readiness at 1m0s, ready 3/3 again at 3m0s"},
		{name: "back, then lost again", steps: []step{{0, 3}, {time.Minute, 2}, {2 * time.Minute, 3}, {3 * time.Minute, 2}},
			want: "statefulset db: ready 3/3 at 0s, lost readiness at 3m0s, never ready again (2/3 ready at the end)"},
		{name: "lost twice, back twice", steps: []step{{0, 3}, {time.Minute, 2}, {2 * time.Minute, 3}, {3 * time.Minute, 2}, {4 * time.Minute, 3}},
			want: "statefulset db: ready 3/3 at 0s, lost readiness at 3m0s, ready 3/3 again at 4m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(context.Background(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for _, s := range tc.steps {
				w.clk.AdvanceTo(Epoch.Add(s.at))
				w.markSet(set(3, s.ready))
			}
			sets := w.StatefulSets()
			if len(sets) != 1 {
				t.Fatalf("StatefulSets() = %v, want db alone", sets)
			}
			if got := sets[0].String(); got != tc.want {
				t.Errorf("summary %q, want %q", got, tc.want)
			}
		})
	}
}
