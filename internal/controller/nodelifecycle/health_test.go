package nodelifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// seenReady is the Health a node gets when first seen at t0+d with a Ready
// condition posted at t0.
func healthyAt(d time.Duration) *Health {
	return &Health{
		ProbeTime: at(d), ReadyTransitionTime: at(d),
		Ready: ReadySeen{Present: true, Status: corev1.ConditionTrue, LastHeartbeatTime: at(0), LastTransitionTime: at(0)},
		UID:   "uid-a",
	}
}

func TestJudgeTiming(t *testing.T) {
	postedAt0 := mkNode("a", ready(corev1.ConditionTrue, 0, 0))
	postedAt30 := mkNode("a", ready(corev1.ConditionTrue, 30*time.Second, 0))
	leaseAt0 := leaseSeen(mkLease("a", 0))
	remembered := func(h *Health, l LeaseSeen) *Health { c := *h; c.Lease = l; return &c }

	tests := []struct {
		name      string
		node      *corev1.Node
		lease     *coordinationv1.Lease
		prev      *Health
		now       time.Duration
		wantProbe time.Duration
		wantOut   bool // timed out
	}{
		{"first sight: probe is now", postedAt0, nil, nil, 5 * time.Second, 5 * time.Second, false},
		{"exactly at grace: not timed out", postedAt0, nil, healthyAt(0), 40 * time.Second, 0, false},
		{"one nanosecond past grace: timed out", postedAt0, nil, healthyAt(0), 40*time.Second + 1, 0, true},
		{"status post (new heartbeat) is a heartbeat", postedAt30, nil, healthyAt(0), 45 * time.Second, 45 * time.Second, false},
		{"lease renewal is a heartbeat", postedAt0, mkLease("a", 35*time.Second), remembered(healthyAt(0), leaseAt0), 45 * time.Second, 45 * time.Second, false},
		{"lease not renewed is not", postedAt0, mkLease("a", 0), remembered(healthyAt(0), leaseAt0), 45 * time.Second, 0, true},
		{"lease renewTime from the kubelet's clock does not matter, only that it moved", postedAt0, mkLease("a", -time.Hour), remembered(healthyAt(0), leaseSeen(mkLease("a", -2*time.Hour))), 45 * time.Second, 45 * time.Second, false},
		{"a lease seen for the first time counts", postedAt0, mkLease("a", 0), healthyAt(0), 45 * time.Second, 45 * time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.node, tc.lease, tc.prev, at(tc.now), params)
			if got := v.Health.ProbeTime.Sub(t0); got != tc.wantProbe {
				t.Errorf("ProbeTime = t0+%v, want t0+%v", got, tc.wantProbe)
			}
			if v.TimedOut != tc.wantOut {
				t.Errorf("TimedOut = %v, want %v", v.TimedOut, tc.wantOut)
			}
			if (v.Conditions != nil) != tc.wantOut {
				t.Errorf("status write = %v, want %v", v.Conditions != nil, tc.wantOut)
			}
		})
	}
}

func TestJudgeStartupGrace(t *testing.T) {
	never := mkNode("a") // created at t0, never posted
	tests := []struct {
		name      string
		lease     *coordinationv1.Lease
		now       time.Duration
		wantOut   bool
		wantProbe time.Duration
	}{
		{"startup grace counts from creation: exactly 60s", nil, 60 * time.Second, false, 0},
		{"61st second: timed out", nil, 60*time.Second + 1, true, 0},
		{"the monitor grace (40s) does not apply", nil, 50 * time.Second, false, 0},
		{"a lease counts: renewals keep a never-posted node alive", mkLease("a", 50*time.Second), 100 * time.Second, false, 100 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(never, tc.lease, nil, at(tc.now), params)
			if v.TimedOut != tc.wantOut {
				t.Errorf("TimedOut = %v, want %v", v.TimedOut, tc.wantOut)
			}
			if got := v.Health.ProbeTime.Sub(t0); got != tc.wantProbe {
				t.Errorf("ProbeTime = t0+%v, want t0+%v", got, tc.wantProbe)
			}
			if v.Grace != 60*time.Second {
				t.Errorf("Grace = %v, want the startup grace", v.Grace)
			}
			if v.Observed != corev1.ConditionUnknown {
				t.Errorf("Observed = %q, want the synthetic Unknown", v.Observed)
			}
			if !tc.wantOut && v.Current != "" {
				t.Errorf("Current = %q, want none while in startup grace", v.Current)
			}
		})
	}
}

func TestJudgeConditions(t *testing.T) {
	now := 41 * time.Second
	tests := []struct {
		name string
		node *corev1.Node
		want []corev1.NodeCondition // nil: no write
	}{
		{
			name: "never posted: all four added as NeverUpdated, heartbeat = creation",
			node: mkNode("a", cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, 0, 0), func(n *corev1.Node) { n.CreationTimestamp = mt(-20 * time.Second) }),
			want: []corev1.NodeCondition{
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "KubeletNetworkUnavailable", Message: "posted", LastHeartbeatTime: mt(0), LastTransitionTime: mt(0)},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusNeverUpdated, Message: MessageNodeNeverUpdated, LastHeartbeatTime: mt(-20 * time.Second), LastTransitionTime: mt(now)},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusNeverUpdated, Message: MessageNodeNeverUpdated, LastHeartbeatTime: mt(-20 * time.Second), LastTransitionTime: mt(now)},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusNeverUpdated, Message: MessageNodeNeverUpdated, LastHeartbeatTime: mt(-20 * time.Second), LastTransitionTime: mt(now)},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusNeverUpdated, Message: MessageNodeNeverUpdated, LastHeartbeatTime: mt(-20 * time.Second), LastTransitionTime: mt(now)},
			},
		},
		{
			name: "stopped posting: Unknown, heartbeat kept, NetworkUnavailable untouched, missing PID added",
			node: mkNode("a",
				ready(corev1.ConditionTrue, 0, -time.Hour),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, 0, -time.Hour),
				cond(corev1.NodeDiskPressure, corev1.ConditionTrue, 0, -time.Minute),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, 0, -time.Hour)),
			want: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "KubeletNetworkUnavailable", Message: "posted", LastHeartbeatTime: mt(0), LastTransitionTime: mt(-time.Hour)},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusNeverUpdated, Message: MessageNodeNeverUpdated, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
			},
		},
		{
			name: "Ready False also becomes Unknown",
			node: mkNode("a", ready(corev1.ConditionFalse, 0, 0), cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, 0, 0), cond(corev1.NodeDiskPressure, corev1.ConditionFalse, 0, 0), cond(corev1.NodePIDPressure, corev1.ConditionFalse, 0, 0)),
			want: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: MessageNodeStatusUnknown, LastHeartbeatTime: mt(0), LastTransitionTime: mt(now)},
			},
		},
		{
			name: "Ready already Unknown: nothing written, even if a pressure condition is not",
			node: mkNode("a", ready(corev1.ConditionUnknown, 0, 0), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, 0, 0)),
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Remembered from a pass at t0; a never-posted node is timed
			// from its creation (t0-20s) and is past its 60s at t0+41s.
			prev := Health{ProbeTime: tc.node.CreationTimestamp.Time, ReadyTransitionTime: at(0), Ready: ReadySeen{}}
			if i := conditionIndex(tc.node.Status.Conditions, corev1.NodeReady); i >= 0 {
				prev.Ready = readySeen(&tc.node.Status.Conditions[i])
				prev.ProbeTime = at(0)
			}
			before := tc.node.DeepCopy()
			v := Judge(tc.node, nil, &prev, at(now), params)
			if diff := cmp.Diff(tc.want, v.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.node); diff != "" {
				t.Errorf("Judge modified its node:\n%s", diff)
			}
			if tc.want != nil {
				if v.Current != corev1.ConditionUnknown || !v.Health.Ready.Present || v.Health.Ready.Status != corev1.ConditionUnknown {
					t.Errorf("Current = %q, remembered Ready = %+v; want Unknown", v.Current, v.Health.Ready)
				}
				if !v.Health.ReadyTransitionTime.Equal(at(now)) {
					t.Errorf("ReadyTransitionTime = %v, want now", v.Health.ReadyTransitionTime)
				}
			}
		})
	}
}

func TestJudgeReadyTransition(t *testing.T) {
	prev := *healthyAt(0)
	prev.ReadyTransitionTime = at(-time.Hour)
	tests := []struct {
		name string
		node *corev1.Node
		want time.Duration
	}{
		{"heartbeat only: transition kept", mkNode("a", ready(corev1.ConditionTrue, 10*time.Second, 0)), -time.Hour},
		{"transition time changed: now", mkNode("a", ready(corev1.ConditionFalse, 10*time.Second, 10*time.Second)), 20 * time.Second},
		{"nothing posted: kept", mkNode("a", ready(corev1.ConditionTrue, 0, 0)), -time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.node, nil, &prev, at(20*time.Second), params)
			if got := v.Health.ReadyTransitionTime.Sub(t0); got != tc.want {
				t.Errorf("ReadyTransitionTime = t0+%v, want t0+%v", got, tc.want)
			}
		})
	}
}
