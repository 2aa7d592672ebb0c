package nodestatus

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"knode/internal/agent/host"
)

// TestSettersEndToEnd runs the whole pipeline on a new Node, then again
// with nothing changed, then under memory pressure.
func TestSettersEndToEnd(t *testing.T) {
	cfg := baseConfig()
	setters := Setters(cfg)
	node := newNode()
	facts := Facts{Host: machine()}

	if err := Apply(setters, node, facts, t0); err != nil {
		t.Fatal(err)
	}
	want := corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("110"),
			corev1.ResourceEphemeralStorage: q("100Gi"), "hugepages-2Mi": q("0"), "hugepages-1Gi": q("0"),
		},
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8092Mi"), corev1.ResourcePods: q("110"),
			corev1.ResourceEphemeralStorage: qb(96636764000), "hugepages-2Mi": q("0"), "hugepages-1Gi": q("0"),
		},
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available", LastHeartbeatTime: mt(t0), LastTransitionTime: mt(t0)},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastHeartbeatTime: mt(t0), LastTransitionTime: mt(t0)},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available", LastHeartbeatTime: mt(t0), LastTransitionTime: mt(t0)},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: mt(t0), LastTransitionTime: mt(t0)},
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.0.2.10"},
			{Type: corev1.NodeHostName, Address: "node-1"},
		},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1",
			KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntimeVersion: "knode://0.1.0", KubeletVersion: "v1.34.1",
			OperatingSystem: "linux", Architecture: "arm64", Swap: swapOf(0),
		},
	}
	if diff := cmp.Diff(want, node.Status, cmpOpts...); diff != "" {
		t.Fatalf("first sync (-want +got):\n%s", diff)
	}
	if got := Events("node-1", &corev1.NodeStatus{}, &node.Status); len(got) != 3 {
		t.Errorf("first sync events = %+v, want the three pressure events and no Ready event", got)
	}

	// Ten seconds later, nothing changed: only heartbeats move.
	before := node.Status.DeepCopy()
	if err := Apply(setters, node, facts, t1); err != nil {
		t.Fatal(err)
	}
	if Changed(before, &node.Status) {
		t.Errorf("second sync changed the status: %s", cmp.Diff(before, &node.Status, cmpOpts...))
	}
	for _, c := range node.Status.Conditions {
		if !c.LastHeartbeatTime.Time.Equal(t1) || !c.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("%s: heartbeat %v transition %v; want %v and %v", c.Type, c.LastHeartbeatTime, c.LastTransitionTime, t1, t0)
		}
	}
	if got := Events("node-1", before, &node.Status); len(got) != 0 {
		t.Errorf("events with nothing changed = %+v", got)
	}

	// Memory runs low.
	before = node.Status.DeepCopy()
	facts.Host.Memory.Available = 10 << 20
	if err := Apply(setters, node, facts, t1.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !Changed(before, &node.Status) {
		t.Error("memory pressure did not change the status")
	}
	wantEvents := []Event{{Type: corev1.EventTypeNormal, Reason: "NodeHasInsufficientMemory", Message: "Node node-1 status is now: NodeHasInsufficientMemory"}}
	if diff := cmp.Diff(wantEvents, Events("node-1", before, &node.Status)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestApplyRunsEverySetter checks that a failing setter does not stop the
// rest, and that every failure is reported.
func TestApplyRunsEverySetter(t *testing.T) {
	cfg := baseConfig()
	cfg.NodeIPs = []net.IP{ip("203.0.113.9")}
	f := withErr(machine(), host.FactOS, errString("osrelease gone"))
	node := newNode()
	err := Apply(Setters(cfg), node, Facts{Host: f}, t0)
	if err == nil || !strings.Contains(err.Error(), "failed to validate nodeIP") || !strings.Contains(err.Error(), "error getting version info: osrelease gone") {
		t.Errorf("Apply error = %v, want both failures", err)
	}
	if findCondition(node.Status.Conditions, corev1.NodeReady) == nil {
		t.Error("Ready was not set after earlier setters failed")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestChanged(t *testing.T) {
	base := func() *corev1.NodeStatus {
		return &corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: q("4")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: mt(t0), LastTransitionTime: mt(t0)},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: mt(t0), LastTransitionTime: mt(t0)},
			},
		}
	}
	tests := []struct {
		name   string
		change func(s *corev1.NodeStatus)
		nilA   bool
		nilB   bool
		want   bool
	}{
		{name: "identical", change: func(*corev1.NodeStatus) {}},
		{name: "only heartbeats", change: func(s *corev1.NodeStatus) {
			s.Conditions[0].LastHeartbeatTime = mt(t1)
			s.Conditions[1].LastHeartbeatTime = mt(t1)
		}},
		{name: "condition order", change: func(s *corev1.NodeStatus) {
			s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0]
		}},
		{name: "equal quantity in another form", change: func(s *corev1.NodeStatus) {
			s.Capacity[corev1.ResourceCPU] = q("4000m")
		}},
		{name: "transition time", change: func(s *corev1.NodeStatus) { s.Conditions[1].LastTransitionTime = mt(t1) }, want: true},
		{name: "status", change: func(s *corev1.NodeStatus) { s.Conditions[1].Status = corev1.ConditionFalse }, want: true},
		{name: "message", change: func(s *corev1.NodeStatus) { s.Conditions[1].Message = "x" }, want: true},
		{name: "a condition more", change: func(s *corev1.NodeStatus) {
			s.Conditions = append(s.Conditions, corev1.NodeCondition{Type: corev1.NodePIDPressure})
		}, want: true},
		{name: "capacity", change: func(s *corev1.NodeStatus) { s.Capacity[corev1.ResourceCPU] = q("5") }, want: true},
		{name: "addresses", change: func(s *corev1.NodeStatus) {
			s.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n"}}
		}, want: true},
		{name: "boot ID", change: func(s *corev1.NodeStatus) { s.NodeInfo.BootID = "b-2" }, want: true},
		{name: "nil and nil", nilA: true, nilB: true},
		{name: "nil and a status", nilA: true, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			if tt.change != nil {
				tt.change(b)
			}
			if tt.nilA {
				a = nil
			}
			if tt.nilB {
				b = nil
			}
			aCopy := a.DeepCopy()
			if got := Changed(a, b); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
			if diff := cmp.Diff(aCopy, a, cmpOpts...); diff != "" {
				t.Errorf("Changed modified its argument:\n%s", diff)
			}
		})
	}
}

func TestEvents(t *testing.T) {
	c := func(t corev1.NodeConditionType, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s}
	}
	normal := func(reason string) Event {
		return Event{Type: corev1.EventTypeNormal, Reason: reason, Message: "Node node-1 status is now: " + reason}
	}
	tests := []struct {
		name   string
		before *corev1.NodeStatus
		after  *corev1.NodeStatus
		want   []Event
	}{
		{
			name:   "new node: pressure events, no Ready event",
			before: nil,
			after: &corev1.NodeStatus{Conditions: []corev1.NodeCondition{
				c(corev1.NodeMemoryPressure, corev1.ConditionFalse), c(corev1.NodeDiskPressure, corev1.ConditionFalse),
				c(corev1.NodePIDPressure, corev1.ConditionFalse), c(corev1.NodeReady, corev1.ConditionTrue),
			}},
			want: []Event{normal("NodeHasSufficientMemory"), normal("NodeHasNoDiskPressure"), normal("NodeHasSufficientPID")},
		},
		{
			name:   "Ready flips to False",
			before: &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodeReady, corev1.ConditionTrue)}},
			after:  &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodeReady, corev1.ConditionFalse)}},
			want:   []Event{normal("NodeNotReady")},
		},
		{
			name:   "Unknown to True after an outage",
			before: &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodeReady, corev1.ConditionUnknown), c(corev1.NodeDiskPressure, corev1.ConditionUnknown)}},
			after:  &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodeReady, corev1.ConditionTrue), c(corev1.NodeDiskPressure, corev1.ConditionTrue)}},
			want:   []Event{normal("NodeHasDiskPressure"), normal("NodeReady")},
		},
		{
			name:   "PID pressure",
			before: &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodePIDPressure, corev1.ConditionFalse)}},
			after:  &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodePIDPressure, corev1.ConditionTrue)}},
			want:   []Event{normal("NodeHasInsufficientPID")},
		},
		{
			name:   "reboot",
			before: &corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "b-1"}},
			after:  &corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "b-2"}},
			want:   []Event{{Type: corev1.EventTypeWarning, Reason: "Rebooted", Message: "Node node-1 has been rebooted, boot id: b-2"}},
		},
		{
			name:  "first boot ID is not a reboot",
			after: &corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: "b-1"}},
		},
		{
			name:   "nothing changed",
			before: &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodeReady, corev1.ConditionTrue)}},
			after:  &corev1.NodeStatus{Conditions: []corev1.NodeCondition{c(corev1.NodeReady, corev1.ConditionTrue)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Events("node-1", tt.before, tt.after), cmpOpts...); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(c *Config)
		wantErr string
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "external cloud", change: func(c *Config) { c.CloudProvider = CloudProviderExternal }},
		{name: "no node name", change: func(c *Config) { c.NodeName = "" }, wantErr: "nodeName: Required value"},
		{name: "no hostname", change: func(c *Config) { c.Hostname = "" }, wantErr: "hostname: Required value"},
		{name: "in-tree cloud", change: func(c *Config) { c.CloudProvider = "aws" }, wantErr: `cloudProvider: Unsupported value: "aws": supported values: "", "external"`},
		{name: "two IPv4 node IPs", change: func(c *Config) { c.NodeIPs = []net.IP{ip("10.0.0.1"), ip("10.0.0.2")} }, wantErr: "nodeIPs: Invalid value: \"[10.0.0.1 10.0.0.2]\": must contain either a single IP or a dual-stack pair of IPs"},
		{name: "negative maxPods", change: func(c *Config) { c.MaxPods = -1 }, wantErr: "maxPods: Invalid value: -1: must be greater than or equal to 0"},
		{name: "port out of range", change: func(c *Config) { c.KubeletPort = 70000 }, wantErr: "kubeletPort: Invalid value: 70000: must be between 0 and 65535, inclusive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			tt.change(&cfg)
			err := cfg.Validate()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("Validate() = %q, want %q", gotErr, tt.wantErr)
			}
		})
	}
}

// TestSettersDoNotTouchMetadata checks that only the provided-node-ip
// annotation is ever written outside status.
func TestSettersDoNotTouchMetadata(t *testing.T) {
	node := newNode()
	node.Labels = map[string]string{"kubernetes.io/hostname": "node-1"}
	node.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	want := node.ObjectMeta.DeepCopy()
	wantSpec := node.Spec.DeepCopy()
	if err := Apply(Setters(baseConfig()), node, Facts{Host: machine()}, t0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &node.ObjectMeta, cmpOpts...); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSpec, &node.Spec, cmpOpts...); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}
