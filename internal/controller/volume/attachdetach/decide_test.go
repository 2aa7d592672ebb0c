package attachdetach

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const driver = "csi.example.com"

var volA = volume.UniqueName(driver, "handle-a")

func nodeView(ready bool, inUse ...corev1.UniqueVolumeName) NodeView {
	return NodeView{Exists: true, Managed: true, Ready: ready, InUse: inUse, InUseKnown: true}
}

func (n NodeView) outOfService() NodeView { n.OutOfService = true; return n }
func (n NodeView) unmanaged() NodeView    { n.Managed = false; return n }
func (n NodeView) attached(v ...corev1.UniqueVolumeName) NodeView {
	for _, name := range v {
		n.Attached = append(n.Attached, corev1.AttachedVolume{Name: name})
	}
	return n
}

// att is an attached attachment of handle on node, named as upstream names
// it.
func att(handle, node string) Attachment {
	return Attachment{
		Name:     volume.AttachmentName(handle, driver, node),
		UID:      types.UID("uid-" + handle + "-" + node),
		Node:     node,
		PV:       "pv-" + handle,
		Volume:   volume.UniqueName(driver, handle),
		Attached: true,
	}
}

func (a Attachment) attaching() Attachment { a.Attached = false; return a }
func (a Attachment) deleting() Attachment  { a.Deleting = true; return a }

func want(handle, node string) Wanted {
	return Wanted{
		Node: node, PV: "pv-" + handle, Driver: driver, Handle: handle,
		Volume: volume.UniqueName(driver, handle),
		Pods:   []corev1.ObjectReference{{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "p-" + node}},
	}
}

func (w Wanted) exclusive() Wanted { w.Exclusive = true; return w }

func status(node string, v ...corev1.UniqueVolumeName) NodeStatus {
	s := NodeStatus{Node: node}
	for _, name := range v {
		s.VolumesAttached = append(s.VolumesAttached, corev1.AttachedVolume{Name: name})
	}
	return s
}

func requested(a Attachment, at time.Time) map[string]time.Time {
	return map[string]time.Time{a.Name: at}
}

func TestDecideDetach(t *testing.T) {
	a := att("handle-a", "n1")
	def := Params{MaxWaitForUnmount: 6 * time.Minute}
	disabled := Params{MaxWaitForUnmount: 6 * time.Minute, DisableForceDetachOnTimeout: true}
	six := 6 * time.Minute
	cases := []struct {
		name   string
		node   NodeView
		noNode bool // the node is not in World.Nodes at all
		since  time.Duration
		params Params
		want   Plan
	}{
		{
			name: "ready node no longer using it: verified detach at once, after the status write",
			node: nodeView(true).attached(volA), params: def,
			want: Plan{Detach: []Detach{{Attachment: a}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a, t0)},
		},
		{
			name: "ready node still using it: waits, and the timeout cannot force it",
			node: nodeView(true, volA).attached(volA), params: def,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0)},
		},
		{
			name: "ready node still using it after an hour: still waits",
			node: nodeView(true, volA).attached(volA), since: time.Hour, params: def,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0.Add(-time.Hour))},
		},
		{
			name: "not-ready node using it at 5:59: waits, due at 6:00",
			node: nodeView(false, volA).attached(volA), since: six - time.Second, params: def,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0.Add(-six+time.Second)), NextForce: t0.Add(time.Second)},
		},
		{
			name: "not-ready node using it at exactly 6:00: still waits (elapsed must exceed it)",
			node: nodeView(false, volA).attached(volA), since: six, params: def,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0.Add(-six)), NextForce: t0},
		},
		{
			name: "not-ready node using it just after 6:00: forced, reason timeout",
			node: nodeView(false, volA).attached(volA), since: six + time.Nanosecond, params: def,
			want: Plan{
				Detach:          []Detach{{Attachment: a, Forced: ReasonTimeout}},
				Status:          []NodeStatus{status("n1")},
				DetachRequested: requested(a, t0.Add(-six-time.Nanosecond)),
			},
		},
		{
			name: "not-ready node using it, force on timeout disabled, an hour on: waits, nothing due",
			node: nodeView(false, volA).attached(volA), since: time.Hour, params: disabled,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0.Add(-time.Hour))},
		},
		{
			name: "first sight on a not-ready node: the wait starts now",
			node: nodeView(false, volA).attached(volA), since: -1, params: def,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0), NextForce: t0.Add(six)},
		},
		{
			name: "out-of-service taint on a ready node using it: forced at once, reason out-of-service",
			node: nodeView(true, volA).outOfService().attached(volA), since: -1, params: def,
			want: Plan{Detach: []Detach{{Attachment: a, Forced: ReasonOutOfService}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a, t0)},
		},
		{
			name: "out-of-service taint with force on timeout disabled: still forced",
			node: nodeView(false, volA).outOfService().attached(volA), since: time.Hour, params: disabled,
			want: Plan{Detach: []Detach{{Attachment: a, Forced: ReasonOutOfService}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a, t0.Add(-time.Hour))},
		},
		{
			name: "out-of-service and timed out: the timeout is the reason",
			node: nodeView(false, volA).outOfService().attached(volA), since: 7 * time.Minute, params: def,
			want: Plan{Detach: []Detach{{Attachment: a, Forced: ReasonTimeout}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a, t0.Add(-7*time.Minute))},
		},
		{
			name: "ready node that stops using it after 7 minutes: unverified, counted as timeout (as upstream)",
			node: nodeView(true).attached(volA), since: 7 * time.Minute, params: def,
			want: Plan{Detach: []Detach{{Attachment: a, Forced: ReasonTimeout}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a, t0.Add(-7*time.Minute))},
		},
		{
			name: "the same with force on timeout disabled: verified",
			node: nodeView(true).attached(volA), since: 7 * time.Minute, params: disabled,
			want: Plan{Detach: []Detach{{Attachment: a}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a, t0.Add(-7*time.Minute))},
		},
		{
			name: "deleted node that last reported it in use: waits for the timeout",
			node: NodeView{Managed: true, InUse: []corev1.UniqueVolumeName{volA}, InUseKnown: true}, since: 5 * time.Minute, params: def,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0.Add(-5*time.Minute)), NextForce: t0.Add(time.Minute)},
		},
		{
			name: "deleted node that last reported it in use, timed out: forced, no status to write",
			node: NodeView{Managed: true, InUse: []corev1.UniqueVolumeName{volA}, InUseKnown: true}, since: 7 * time.Minute, params: def,
			want: Plan{Detach: []Detach{{Attachment: a, Forced: ReasonTimeout}}, DetachRequested: requested(a, t0.Add(-7*time.Minute))},
		},
		{
			name: "deleted node that did not use it: verified detach at once",
			node: NodeView{InUseKnown: true}, params: def, since: -1,
			want: Plan{Detach: []Detach{{Attachment: a}}, DetachRequested: requested(a, t0)},
		},
		{
			name:   "node never seen: the volume counts as in use",
			noNode: true, params: def, since: -1,
			want: Plan{Waiting: []Attachment{a}, DetachRequested: requested(a, t0), NextForce: t0.Add(six)},
		},
		{
			name: "existing node not managed: left alone",
			node: nodeView(true).unmanaged().attached(volA), params: def, since: -1,
			want: Plan{DetachRequested: map[string]time.Time{}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := World{Nodes: map[string]NodeView{}, Attachments: []Attachment{a}, DetachRequested: map[string]time.Time{}}
			if !tc.noNode {
				w.Nodes["n1"] = tc.node
			}
			if tc.since >= 0 {
				w.DetachRequested[a.Name] = t0.Add(-tc.since)
			}
			got := Decide(w, tc.params, t0)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideAttachAndStatus(t *testing.T) {
	a1 := att("handle-a", "n1")
	a2 := att("handle-a", "n2")
	b1 := att("handle-b", "n1")
	volB := volume.UniqueName(driver, "handle-b")
	def := Params{MaxWaitForUnmount: 6 * time.Minute}
	cases := []struct {
		name string
		w    World
		want Plan
	}{
		{
			name: "wanted without attachment: attach",
			w:    World{Nodes: map[string]NodeView{"n1": nodeView(true)}, Wanted: []Wanted{want("handle-a", "n1")}},
			want: Plan{Attach: []Wanted{want("handle-a", "n1")}},
		},
		{
			name: "wanted on a deleted node: nothing to attach",
			w:    World{Nodes: map[string]NodeView{"n1": {Managed: true, InUseKnown: true}}, Wanted: []Wanted{want("handle-a", "n1")}},
			want: Plan{},
		},
		{
			name: "wanted and attaching: wait, nothing reported, the detach time kept",
			w: World{
				Nodes:           map[string]NodeView{"n1": nodeView(true)},
				Wanted:          []Wanted{want("handle-a", "n1")},
				Attachments:     []Attachment{a1.attaching()},
				DetachRequested: requested(a1, t0.Add(-time.Minute)),
			},
			want: Plan{DetachRequested: requested(a1, t0.Add(-time.Minute))},
		},
		{
			name: "wanted and attached: reported, the detach time cleared",
			w: World{
				Nodes:           map[string]NodeView{"n1": nodeView(true)},
				Wanted:          []Wanted{want("handle-a", "n1")},
				Attachments:     []Attachment{a1},
				DetachRequested: requested(a1, t0.Add(-time.Minute)),
			},
			want: Plan{Status: []NodeStatus{status("n1", volA)}},
		},
		{
			name: "already reported: no write",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true).attached(volA)},
				Wanted:      []Wanted{want("handle-a", "n1")},
				Attachments: []Attachment{a1},
			},
			want: Plan{},
		},
		{
			name: "reported but its attachment is being deleted: dropped, not detached again",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true).attached(volA)},
				Attachments: []Attachment{a1.deleting()},
			},
			want: Plan{Status: []NodeStatus{status("n1")}},
		},
		{
			name: "wanted while its attachment is still being deleted: wait for it to go",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true)},
				Wanted:      []Wanted{want("handle-a", "n1")},
				Attachments: []Attachment{a1.deleting()},
			},
			want: Plan{},
		},
		{
			name: "reported without any attachment: dropped",
			w:    World{Nodes: map[string]NodeView{"n1": nodeView(true).attached(volA)}},
			want: Plan{Status: []NodeStatus{status("n1")}},
		},
		{
			name: "status lists volumes sorted, with an empty device path",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true)},
				Wanted:      []Wanted{want("handle-b", "n1"), want("handle-a", "n1")},
				Attachments: []Attachment{b1, a1},
			},
			want: Plan{Status: []NodeStatus{status("n1", volA, volB)}},
		},
		{
			name: "unmanaged node's status is not touched",
			w:    World{Nodes: map[string]NodeView{"n1": nodeView(true).unmanaged().attached(volA)}},
			want: Plan{},
		},
		{
			name: "exclusive volume attached to another node: blocked",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true).attached(volA), "n2": nodeView(true)},
				Wanted:      []Wanted{want("handle-a", "n1").exclusive(), want("handle-a", "n2").exclusive()},
				Attachments: []Attachment{a1},
			},
			want: Plan{Blocked: []Wanted{want("handle-a", "n2").exclusive()}},
		},
		{
			name: "exclusive volume still being detached from another node: blocked until it is gone",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true), "n2": nodeView(true)},
				Wanted:      []Wanted{want("handle-a", "n2").exclusive()},
				Attachments: []Attachment{a1.deleting()},
			},
			want: Plan{Blocked: []Wanted{want("handle-a", "n2").exclusive()}},
		},
		{
			name: "exclusive volume detached from another node this pass: still blocked this pass",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true).attached(volA), "n2": nodeView(true)},
				Wanted:      []Wanted{want("handle-a", "n2").exclusive()},
				Attachments: []Attachment{a1},
			},
			want: Plan{
				Detach:          []Detach{{Attachment: a1}},
				Blocked:         []Wanted{want("handle-a", "n2").exclusive()},
				Status:          []NodeStatus{status("n1")},
				DetachRequested: requested(a1, t0),
			},
		},
		{
			name: "exclusive volume only attaching elsewhere: attach (as upstream, only confirmed attachments block)",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true), "n2": nodeView(true)},
				Wanted:      []Wanted{want("handle-a", "n1").exclusive(), want("handle-a", "n2").exclusive()},
				Attachments: []Attachment{a1.attaching()},
			},
			want: Plan{Attach: []Wanted{want("handle-a", "n2").exclusive()}},
		},
		{
			name: "shared volume attached elsewhere: attach",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true).attached(volA), "n2": nodeView(true)},
				Wanted:      []Wanted{want("handle-a", "n1"), want("handle-a", "n2")},
				Attachments: []Attachment{a1},
			},
			want: Plan{Attach: []Wanted{want("handle-a", "n2")}},
		},
		{
			name: "unwanted attachment still attaching: detached like any other",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true)},
				Attachments: []Attachment{a1.attaching()},
			},
			want: Plan{Detach: []Detach{{Attachment: a1.attaching()}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a1, t0)},
		},
		{
			name: "detach on a node whose status already looks right: written anyway, the view may be stale",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true), "n2": nodeView(true).attached(volB)},
				Wanted:      []Wanted{want("handle-b", "n2")},
				Attachments: []Attachment{a1, att("handle-b", "n2")},
			},
			want: Plan{Detach: []Detach{{Attachment: a1}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a1, t0)},
		},
		{
			name: "attachment whose volume is unknown counts as in use",
			w: World{
				Nodes:       map[string]NodeView{"n2": nodeView(true)},
				Attachments: []Attachment{func() Attachment { a := a2; a.Volume = ""; return a }()},
			},
			want: Plan{Waiting: []Attachment{func() Attachment { a := a2; a.Volume = ""; return a }()}, DetachRequested: requested(a2, t0)},
		},
		{
			name: "one node detaches while another keeps the same volume",
			w: World{
				Nodes:       map[string]NodeView{"n1": nodeView(true).attached(volA), "n2": nodeView(true).attached(volA)},
				Wanted:      []Wanted{want("handle-a", "n2")},
				Attachments: []Attachment{a2, a1},
			},
			want: Plan{Detach: []Detach{{Attachment: a1}}, Status: []NodeStatus{status("n1")}, DetachRequested: requested(a1, t0)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.w, def, t0)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// The wait is measured from the first pass that found the attachment
// unwanted, carried from plan to plan, and started again when the volume
// is wanted and attached in between.
func TestDecideCarriesTheDetachRequestTime(t *testing.T) {
	a := att("handle-a", "n1")
	p := Params{MaxWaitForUnmount: 6 * time.Minute}
	down := map[string]NodeView{"n1": nodeView(false, volA).attached(volA)}
	w := World{Nodes: down, Attachments: []Attachment{a}}

	plan := Decide(w, p, t0)
	for _, step := range []time.Duration{time.Minute, 3 * time.Minute, 6 * time.Minute} {
		w.DetachRequested = plan.DetachRequested
		plan = Decide(w, p, t0.Add(step))
		if len(plan.Detach) != 0 {
			t.Fatalf("detached at +%v", step)
		}
	}
	// Wanted and attached again at +6m: the wait is over.
	w.DetachRequested = plan.DetachRequested
	w.Wanted = []Wanted{want("handle-a", "n1")}
	plan = Decide(w, p, t0.Add(6*time.Minute))
	if len(plan.DetachRequested) != 0 {
		t.Fatalf("detach time kept while wanted: %v", plan.DetachRequested)
	}
	// Unwanted again: a fresh wait starts.
	w.DetachRequested = plan.DetachRequested
	w.Wanted = nil
	plan = Decide(w, p, t0.Add(7*time.Minute))
	if len(plan.Detach) != 0 || !plan.DetachRequested[a.Name].Equal(t0.Add(7*time.Minute)) {
		t.Fatalf("wanted a fresh wait from +7m, got %+v", plan)
	}
	w.DetachRequested = plan.DetachRequested
	plan = Decide(w, p, t0.Add(13*time.Minute+time.Nanosecond))
	if diff := cmp.Diff([]Detach{{Attachment: a, Forced: ReasonTimeout}}, plan.Detach); diff != "" {
		t.Fatalf("detach (-want +got):\n%s", diff)
	}
}

func TestSameAttached(t *testing.T) {
	x := corev1.AttachedVolume{Name: "x"}
	y := corev1.AttachedVolume{Name: "y"}
	xd := corev1.AttachedVolume{Name: "x", DevicePath: "/dev/x"}
	cases := []struct {
		a, b []corev1.AttachedVolume
		want bool
	}{
		{nil, nil, true},
		{nil, []corev1.AttachedVolume{}, true},
		{[]corev1.AttachedVolume{x, y}, []corev1.AttachedVolume{y, x}, true},
		{[]corev1.AttachedVolume{x}, []corev1.AttachedVolume{xd}, false},
		{[]corev1.AttachedVolume{x, x}, []corev1.AttachedVolume{x, y}, false},
		{[]corev1.AttachedVolume{x}, nil, false},
	}
	for i, tc := range cases {
		if got := sameAttached(tc.a, tc.b); got != tc.want {
			t.Errorf("case %d: sameAttached(%v, %v) = %v, want %v", i, tc.a, tc.b, got, tc.want)
		}
	}
}
