package cloudnode_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/apitest"
	"knode/internal/cloudprovider"
	"knode/internal/cloudprovider/exec"
	"knode/internal/cloudprovider/fake"
	"knode/internal/controller/cloudnode"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a real API server over a memory store and a fake cloud, both
// on one fake clock.
type world struct {
	client kubernetes.Interface
	cloud  *fake.Cloud
	clock  *clocktesting.FakeClock
}

func newWorld(t *testing.T) *world {
	t.Helper()
	clk := clocktesting.NewFakeClock(epoch)
	s := apitest.Start(t, apitest.Options{Clock: clk})
	return &world{client: s.Admin, cloud: fake.New(), clock: clk}
}

func (w *world) controller(t *testing.T, cloud cloudprovider.Interface) *cloudnode.Controller {
	t.Helper()
	if cloud == nil {
		cloud = w.cloud
	}
	c, err := cloudnode.New(cloudnode.Config{Client: w.client, Cloud: cloud, Clock: w.clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// addNode registers a node with the given Ready status ("" for none) and
// taints.
func (w *world) addNode(t *testing.T, name string, ready corev1.ConditionStatus, taints ...corev1.Taint) {
	t.Helper()
	ctx := context.Background()
	n, err := w.client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: taints},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ready != "" {
		w.setReady(t, n.Name, ready)
	}
}

func (w *world) setReady(t *testing.T, name string, ready corev1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	n, err := w.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "Test"}}
	if _, err := w.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (w *world) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := w.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeNames lists the nodes that exist.
func (w *world) nodeNames(t *testing.T) []string {
	t.Helper()
	list, err := w.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names
}

// taints returns a node's taints as "key:effect".
func (w *world) taints(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	for _, tn := range w.node(t, name).Spec.Taints {
		s := tn.Key + ":" + string(tn.Effect)
		if tn.Value != "" {
			s = tn.Key + "=" + tn.Value + ":" + string(tn.Effect)
		}
		if tn.TimeAdded != nil {
			s += " (timeAdded)"
		}
		out = append(out, s)
	}
	return out
}

// events returns the events about a node as "type reason: message (source)".
func (w *world) events(t *testing.T, node string) []string {
	t.Helper()
	list, err := w.client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", node).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message+" ("+e.Source.Component+")")
	}
	return out
}

func sync(t *testing.T, c *cloudnode.Controller) {
	t.Helper()
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown:NoSchedule"

func TestInstanceGoneDeletesNotReadyNode(t *testing.T) {
	w := newWorld(t)
	for _, name := range []string{"gone-unknown", "gone-false", "gone-but-ready", "present"} {
		ready := corev1.ConditionUnknown
		switch name {
		case "gone-false":
			ready = corev1.ConditionFalse
		case "gone-but-ready":
			ready = corev1.ConditionTrue
		}
		w.addNode(t, name, ready)
	}
	w.addNode(t, "gone-no-condition", "")
	w.cloud.Set("present", fake.Instance{})
	c := w.controller(t, nil)
	sync(t, c)

	// Only nodes that are not Ready are checked; a Ready node is trusted.
	if diff := cmp.Diff([]string{"gone-but-ready", "present"}, w.nodeNames(t)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	want := []string{"Normal DeletingNode: Deleting node gone-false because it does not exist in the cloud provider (cloud-node-lifecycle-controller)"}
	if diff := cmp.Diff(want, w.events(t, "gone-false")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantCalls := []string{
		"exists gone-false", "exists gone-no-condition", "exists gone-unknown",
		"exists present", "shutdown present",
	}
	if diff := cmp.Diff(wantCalls, w.cloud.Calls()); diff != "" {
		t.Errorf("cloud calls (-want +got):\n%s", diff)
	}
}

func TestShutdownTaintAddedAndRemoved(t *testing.T) {
	w := newWorld(t)
	w.addNode(t, "n1", corev1.ConditionUnknown)
	w.cloud.Set("n1", fake.Instance{Shutdown: true})
	c := w.controller(t, nil)

	sync(t, c)
	if diff := cmp.Diff([]string{shutdownTaint}, w.taints(t, "n1")); diff != "" {
		t.Errorf("after shutdown (-want +got):\n%s", diff)
	}
	// Still off: nothing changes (no duplicate taint).
	sync(t, c)
	if diff := cmp.Diff([]string{shutdownTaint}, w.taints(t, "n1")); diff != "" {
		t.Errorf("second pass (-want +got):\n%s", diff)
	}
	// Powered on, but the node is not Ready yet: upstream keeps the taint.
	w.cloud.SetShutdown("n1", false)
	sync(t, c)
	if diff := cmp.Diff([]string{shutdownTaint}, w.taints(t, "n1")); diff != "" {
		t.Errorf("running but not ready (-want +got):\n%s", diff)
	}
	// Ready again: the taint goes, and the cloud is not asked.
	w.setReady(t, "n1", corev1.ConditionTrue)
	before := len(w.cloud.Calls())
	sync(t, c)
	if got := w.taints(t, "n1"); got != nil {
		t.Errorf("taints after Ready = %v, want none", got)
	}
	if calls := w.cloud.Calls()[before:]; len(calls) != 0 {
		t.Errorf("cloud asked about a Ready node: %v", calls)
	}
}

func TestShutdownTaintKeepsOtherTaints(t *testing.T) {
	w := newWorld(t)
	other := corev1.Taint{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	w.addNode(t, "n1", corev1.ConditionFalse, other)
	w.cloud.Set("n1", fake.Instance{Shutdown: true})
	c := w.controller(t, nil)
	sync(t, c)
	if diff := cmp.Diff([]string{"example.com/dedicated=db:NoSchedule", shutdownTaint}, w.taints(t, "n1")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	w.setReady(t, "n1", corev1.ConditionTrue)
	sync(t, c)
	if diff := cmp.Diff([]string{"example.com/dedicated=db:NoSchedule"}, w.taints(t, "n1")); diff != "" {
		t.Errorf("after Ready (-want +got):\n%s", diff)
	}
}

func TestCloudErrorsLeaveNodesAlone(t *testing.T) {
	w := newWorld(t)
	w.addNode(t, "n1", corev1.ConditionUnknown)
	c := w.controller(t, nil)

	// Existence unknown: no deletion, and the pass reports it.
	w.cloud.SetError(fake.Exists, errors.New("api down"))
	err := c.Sync(context.Background())
	if err == nil || err.Error() != "error checking if node n1 exists: api down" {
		t.Fatalf("Sync = %v", err)
	}
	if w.node(t, "n1") == nil {
		t.Fatal("node deleted although the cloud could not answer")
	}

	// Shutdown not implemented counts as running: no taint, no error.
	w.cloud.SetError(fake.Exists, nil)
	w.cloud.Set("n1", fake.Instance{Shutdown: true})
	w.cloud.SetError(fake.Shutdown, cloudprovider.ErrNotImplemented)
	sync(t, c)
	if got := w.taints(t, "n1"); got != nil {
		t.Errorf("taints = %v, want none", got)
	}

	// Any other shutdown error: no taint, reported.
	w.cloud.SetError(fake.Shutdown, errors.New("bmc timeout"))
	if err := c.Sync(context.Background()); err == nil || err.Error() != "error checking if node n1 is shutdown: bmc timeout" {
		t.Fatalf("Sync = %v", err)
	}
	if got := w.taints(t, "n1"); got != nil {
		t.Errorf("taints = %v, want none", got)
	}
}

func TestInitializeUninitializedNode(t *testing.T) {
	w := newWorld(t)
	uninit := corev1.Taint{Key: cloudprovider.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	w.addNode(t, "n1", "", uninit)
	// The kubelet reported a hostname and was given --node-ip.
	ctx := context.Background()
	n := w.node(t, "n1")
	n.Annotations = map[string]string{cloudprovider.AnnotationProvidedNodeIP: "10.0.0.8"}
	if _, err := w.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n = w.node(t, "n1")
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1.local"}}
	if _, err := w.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.cloud.Set("n1", fake.Instance{Metadata: cloudprovider.InstanceMetadata{
		ProviderID:   "ipmi://rack1/n1",
		InstanceType: "r640",
		Zone:         "rack1",
		Region:       "dc-west",
		NodeAddresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.7"},
			{Type: corev1.NodeInternalIP, Address: "10.0.0.8"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.8"},
		},
		AdditionalLabels: map[string]string{"example.com/bmc": "10.1.0.8"},
	}})
	c := w.controller(t, nil)
	sync(t, c)

	got := w.node(t, "n1")
	if got.Spec.ProviderID != "ipmi://rack1/n1" {
		t.Errorf("providerID = %q", got.Spec.ProviderID)
	}
	wantLabels := map[string]string{
		"beta.kubernetes.io/instance-type":         "r640",
		"node.kubernetes.io/instance-type":         "r640",
		"failure-domain.beta.kubernetes.io/zone":   "rack1",
		"topology.kubernetes.io/zone":              "rack1",
		"failure-domain.beta.kubernetes.io/region": "dc-west",
		"topology.kubernetes.io/region":            "dc-west",
		"example.com/bmc":                          "10.1.0.8",
	}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	wantAddrs := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.8"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.8"},
		{Type: corev1.NodeHostName, Address: "n1.local"},
	}
	if diff := cmp.Diff(wantAddrs, got.Status.Addresses); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if len(got.Spec.Taints) != 0 {
		t.Errorf("taints = %v, want none", got.Spec.Taints)
	}
	wantEvents := []string{"Normal Synced: Node synced successfully (cloud-node-controller)"}
	if diff := cmp.Diff(wantEvents, w.events(t, "n1")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Initialized nodes are not asked about again.
	before := len(w.cloud.Calls())
	w.setReady(t, "n1", corev1.ConditionTrue)
	sync(t, c)
	if calls := w.cloud.Calls()[before:]; len(calls) != 0 {
		t.Errorf("calls after initialization: %v", calls)
	}
}

func TestInitializationFailuresKeepTheTaint(t *testing.T) {
	uninit := corev1.Taint{Key: cloudprovider.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name    string
		md      cloudprovider.InstanceMetadata
		wantErr string
	}{
		{
			name:    "no provider ID anywhere",
			md:      cloudprovider.InstanceMetadata{Zone: "z"},
			wantErr: "cloud provider does not set node provider ID for node n1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.addNode(t, "n1", corev1.ConditionTrue, uninit)
			w.cloud.Set("n1", fake.Instance{Metadata: tc.md})
			err := w.controller(t, nil).Sync(context.Background())
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Sync = %v, want %s", err, tc.wantErr)
			}
			if diff := cmp.Diff([]string{cloudprovider.TaintUninitialized + "=true:NoSchedule"}, w.taints(t, "n1")); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUninitializedNodeGetsAMinuteBeforeDeletion(t *testing.T) {
	w := newWorld(t)
	uninit := corev1.Taint{Key: cloudprovider.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	w.addNode(t, "n1", corev1.ConditionUnknown, uninit)
	c := w.controller(t, nil)

	// The cloud does not know n1 (yet): initialization fails, and for a
	// minute after registration the node is not deleted either.
	w.clock.Step(cloudnode.UninitializedGrace - time.Second)
	if err := c.Sync(context.Background()); err == nil {
		t.Fatal("Sync: no error although initialization failed")
	}
	if w.node(t, "n1") == nil {
		t.Fatal("node deleted within its first minute")
	}
	w.clock.Step(time.Second)
	_ = c.Sync(context.Background()) // initialization still fails
	if w.node(t, "n1") != nil {
		t.Fatal("node kept after a minute although its instance does not exist")
	}
}

func TestRunPassesOnTheClock(t *testing.T) {
	w := newWorld(t)
	w.addNode(t, "n1", corev1.ConditionUnknown)
	w.cloud.Set("n1", fake.Instance{Shutdown: true})
	c := w.controller(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		c.Run(runCtx)
		close(done)
	}()

	// The first pass runs at once and taints n1.
	waitForNode(t, ctx, w.client, "n1", func(n *corev1.Node) bool { return n != nil && len(n.Spec.Taints) == 1 })
	// The instance goes away; the next pass (one monitor period later)
	// deletes the node.
	w.cloud.Remove("n1")
	w.clock.Step(cloudnode.DefaultMonitorPeriod)
	waitForNode(t, ctx, w.client, "n1", func(n *corev1.Node) bool { return n == nil })
	stop()
	<-done
}

// waitForNode blocks until cond holds for the named node (nil once it is
// deleted), following a watch; ctx bounds a broken test.
func waitForNode(t *testing.T, ctx context.Context, client kubernetes.Interface, name string, cond func(*corev1.Node) bool) {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var current *corev1.Node
	if len(list.Items) == 1 {
		current = &list.Items[0]
	}
	if cond(current) {
		return
	}
	wt, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: list.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer wt.Stop()
	for ev := range wt.ResultChan() {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			continue
		}
		if ev.Type == "DELETED" {
			n = nil
		}
		if cond(n) {
			return
		}
	}
	t.Fatalf("node %s: watch ended before the condition held: %v", name, ctx.Err())
}

// TestWithExecProvider runs the controller against the exec provider and
// a real script that reads each machine's state from a file.
func TestWithExecProvider(t *testing.T) {
	w := newWorld(t)
	dir := t.TempDir()
	cmd := filepath.Join(dir, "machines")
	body := `#!/bin/bash
state=$(cat "$STATE_DIR/$2" 2>/dev/null || echo gone)
case "$1" in
instance-exists) [ "$state" = gone ] && echo '{"exists": false}' || echo '{"exists": true}' ;;
instance-shutdown) [ "$state" = off ] && echo '{"shutdown": true}' || echo '{"shutdown": false}' ;;
*) exit 3 ;;
esac
`
	if err := os.WriteFile(cmd, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	setState := func(node, state string) {
		if err := os.WriteFile(filepath.Join(dir, node), []byte(state+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(config, []byte("command: ./machines\nenv:\n  STATE_DIR: "+dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := exec.LoadConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := exec.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"on", "off", "gone"} {
		w.addNode(t, name, corev1.ConditionUnknown)
	}
	setState("on", "on")
	setState("off", "off")
	c := w.controller(t, provider)
	sync(t, c)
	if diff := cmp.Diff([]string{"off", "on"}, w.nodeNames(t)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{shutdownTaint}, w.taints(t, "off")); diff != "" {
		t.Errorf("taints of off (-want +got):\n%s", diff)
	}
	if got := w.taints(t, "on"); got != nil {
		t.Errorf("taints of on = %v", got)
	}
}
