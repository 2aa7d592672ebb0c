// Package statusreport decides when the node agent posts its Node's status,
// and posts it the way the kubelet does.
//
// The agent computes status every nodeStatusUpdateFrequency (10 s) but
// writes the Node only when the status changed in a way that matters
// (Changed ignores condition heartbeat times), or when
// nodeStatusReportFrequency (5 min) has passed since the last post.
//
// Like recent kubelets (delayAfterNodeStatusChange), the first post and
// every post caused by a change move the next unchanged post by a one-time
// random offset in [-½, +½) × the report frequency, so that a fleet's
// posts spread out; a post made because the period ran out clears the
// offset.
//
// Changed, ShouldPost, Offset and StatusPatch are pure. A Schedule holds
// the two facts the decision needs between passes (the last post and its
// offset) and takes time as an argument; it never reads a clock. PatchStatus
// is the only I/O: one strategic-merge PATCH of nodes/<name>/status. The
// agent's status pass retries a failed one from a fresh read of the Node,
// as upstream's nodeStatusUpdateRetry loop does.
//
// What callers must do: compute the new status on a copy of the Node they
// read, call Changed and Schedule.Due, post with PatchStatus, and report a
// successful post with Schedule.Posted. The caller owns the 10 s loop and
// its clock.
//
// What it does not do: it computes no status (see nodestatus), reads no
// Node, and never changes the Node's spec: the patch is built with the
// original spec, so a status post cannot undo a cordon.
package statusreport

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
)

// Kubelet defaults.
const (
	// DefaultUpdateFrequency is nodeStatusUpdateFrequency: how often the
	// agent computes status.
	DefaultUpdateFrequency = 10 * time.Second
	// DefaultReportFrequency is nodeStatusReportFrequency: the longest an
	// unchanged status goes unposted (before the offset).
	DefaultReportFrequency = 5 * time.Minute
)

// Changed reports whether current differs from last in anything but the
// conditions' lastHeartbeatTime and the conditions' order. Quantities,
// times and nil-versus-empty lists compare semantically.
func Changed(last, current *corev1.NodeStatus) bool {
	if last == nil || current == nil {
		return last != current
	}
	if conditionsChanged(last.Conditions, current.Conditions) ||
		!resourcesEqual(last.Capacity, current.Capacity) ||
		!resourcesEqual(last.Allocatable, current.Allocatable) ||
		!slices.Equal(last.Addresses, current.Addresses) ||
		!slices.EqualFunc(last.Images, current.Images, imagesEqual) {
		return true
	}
	// The rest is small: compare it field by field through reflection,
	// with the parts compared above left out.
	a, b := *last, *current
	a.Conditions, b.Conditions = nil, nil
	a.Capacity, b.Capacity = nil, nil
	a.Allocatable, b.Allocatable = nil, nil
	a.Addresses, b.Addresses = nil, nil
	a.Images, b.Images = nil, nil
	return !apiequality.Semantic.DeepEqual(a, b)
}

// resourcesEqual compares quantities by value ("1Gi" equals "1024Mi").
func resourcesEqual(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

func imagesEqual(a, b corev1.ContainerImage) bool {
	return a.SizeBytes == b.SizeBytes && slices.Equal(a.Names, b.Names)
}

// conditionsChanged compares the conditions by type, ignoring their order
// and lastHeartbeatTime; each of last's conditions matches at most one of
// current's.
func conditionsChanged(last, current []corev1.NodeCondition) bool {
	if len(last) != len(current) {
		return true
	}
	var small [16]bool
	used := small[:0]
	if len(last) <= len(small) {
		used = small[:len(last)]
	} else {
		used = make([]bool, len(last))
	}
	for i := range current {
		c := &current[i]
		match := -1
		if !used[i] && last[i].Type == c.Type {
			match = i
		} else {
			for j := range last {
				if !used[j] && last[j].Type == c.Type {
					match = j
					break
				}
			}
		}
		if match < 0 {
			return true
		}
		used[match] = true
		l := &last[match]
		if l.Status != c.Status || l.Reason != c.Reason || l.Message != c.Message ||
			!l.LastTransitionTime.Equal(&c.LastTransitionTime) {
			return true
		}
	}
	return false
}

// ShouldPost decides whether a freshly computed status is posted at now:
// always when nothing was posted yet (lastPost is zero) or when it Changed
// from last; otherwise once reportFrequency+offset has passed since
// lastPost, the boundary included.
func ShouldPost(last, current *corev1.NodeStatus, lastPost, now time.Time, reportFrequency, offset time.Duration) bool {
	if lastPost.IsZero() || Changed(last, current) {
		return true
	}
	return periodOver(lastPost, now, reportFrequency, offset)
}

func periodOver(lastPost, now time.Time, reportFrequency, offset time.Duration) bool {
	return now.Sub(lastPost) >= reportFrequency+offset
}

// Offset is the one-time shift of the next unchanged post for a draw r in
// [0, 1): (r − ½) × reportFrequency.
func Offset(reportFrequency time.Duration, r float64) time.Duration {
	return time.Duration((r - 0.5) * float64(reportFrequency))
}

// Schedule remembers when status was last posted and the offset in force.
// The zero value is not ready; use NewSchedule. Not safe for concurrent
// use: the status loop owns it.
type Schedule struct {
	frequency time.Duration
	rand      func() float64
	lastPost  time.Time
	offset    time.Duration
}

// NewSchedule returns a Schedule that has posted nothing yet.
// reportFrequency 0 means DefaultReportFrequency; rand returns uniform
// draws in [0, 1) for the offset, nil meaning math/rand/v2.
func NewSchedule(reportFrequency time.Duration, rand func() float64) *Schedule {
	if reportFrequency == 0 {
		reportFrequency = DefaultReportFrequency
	}
	if rand == nil {
		rand = defaultRand
	}
	return &Schedule{frequency: reportFrequency, rand: rand}
}

var defaultRand = rand.Float64

// Due reports whether status must be posted at now; changed is Changed
// applied to the status last read from the server and the new one.
func (s *Schedule) Due(changed bool, now time.Time) bool {
	return s.lastPost.IsZero() || changed || periodOver(s.lastPost, now, s.frequency, s.offset)
}

// Posted records a successful post at now. The first post and a post of a
// changed status draw a new offset; a post made because the period ran out
// clears it.
func (s *Schedule) Posted(now time.Time, changed bool) {
	if changed || s.lastPost.IsZero() {
		s.offset = Offset(s.frequency, s.rand())
	} else {
		s.offset = 0
	}
	s.lastPost = now
}

// LastPost is the time of the last successful post; zero before the first.
func (s *Schedule) LastPost() time.Time { return s.lastPost }

// ReportDue is when an unchanged status is next posted; zero before the
// first post, when the next pass posts anyway.
func (s *Schedule) ReportDue() time.Time {
	if s.lastPost.IsZero() {
		return time.Time{}
	}
	return s.lastPost.Add(s.frequency + s.offset)
}

// StatusPatch returns the strategic-merge patch that takes original to
// updated's status and metadata, ignoring updated's spec. Addresses that
// changed are sent as a full replacement list: the API schema marks them
// as merged by type, which would keep stale entries.
func StatusPatch(original, updated *corev1.Node) ([]byte, error) {
	// Only the two documents' differences reach the patch, so what is
	// equal on both sides may be left out of both: the spec (the target
	// keeps original's) and, when they match, the managed fields (the
	// bulk of a Node's JSON), the rest of the metadata and each status
	// field but the conditions and addresses. A heartbeat then diffs the
	// conditions alone.
	base := *original
	base.Spec = corev1.NodeSpec{}
	// Only target's spec and addresses differ from updated's, and both are
	// replaced, not changed in place: a shallow copy will do.
	target := *updated
	target.Spec = corev1.NodeSpec{}
	if apiequality.Semantic.DeepEqual(base.ManagedFields, target.ManagedFields) {
		base.ManagedFields, target.ManagedFields = nil, nil
	}
	if reflect.DeepEqual(base.ObjectMeta, target.ObjectMeta) {
		base.ObjectMeta, target.ObjectMeta = metav1.ObjectMeta{}, metav1.ObjectMeta{}
	}
	dropEqualStatus(&base.Status, &target.Status)
	oldJSON, err := json.Marshal(&base)
	if err != nil {
		return nil, fmt.Errorf("encoding node %q: %w", original.Name, err)
	}
	replaceAddresses := len(original.Status.Addresses) > 0 &&
		!apiequality.Semantic.DeepEqual(original.Status.Addresses, updated.Status.Addresses)
	if replaceAddresses {
		target.Status.Addresses = original.Status.Addresses
	}
	newJSON, err := json.Marshal(&target)
	if err != nil {
		return nil, fmt.Errorf("encoding node %q: %w", updated.Name, err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("diffing node %q: %w", updated.Name, err)
	}
	if !replaceAddresses {
		return patch, nil
	}
	return withReplacedAddresses(patch, updated.Status.Addresses)
}

// dropEqualStatus leaves out of a and b the status fields they share, all
// but the conditions and addresses (which usually differ, and whose list
// handling the caller owns). Equal means identical, so that equal fields
// are equal JSON (semantic equality would take 1k and 1e3 for one
// quantity). a and b are shallow copies: fields are replaced, never
// changed in place.
func dropEqualStatus(a, b *corev1.NodeStatus) {
	if reflect.DeepEqual(a.Capacity, b.Capacity) {
		a.Capacity, b.Capacity = nil, nil
	}
	if reflect.DeepEqual(a.Allocatable, b.Allocatable) {
		a.Allocatable, b.Allocatable = nil, nil
	}
	if a.DaemonEndpoints == b.DaemonEndpoints {
		a.DaemonEndpoints, b.DaemonEndpoints = corev1.NodeDaemonEndpoints{}, corev1.NodeDaemonEndpoints{}
	}
	if a.NodeInfo == b.NodeInfo {
		a.NodeInfo, b.NodeInfo = corev1.NodeSystemInfo{}, corev1.NodeSystemInfo{}
	}
	if reflect.DeepEqual(a.Images, b.Images) {
		a.Images, b.Images = nil, nil
	}
	if reflect.DeepEqual(a.VolumesInUse, b.VolumesInUse) {
		a.VolumesInUse, b.VolumesInUse = nil, nil
	}
	if reflect.DeepEqual(a.VolumesAttached, b.VolumesAttached) {
		a.VolumesAttached, b.VolumesAttached = nil, nil
	}
	if reflect.DeepEqual(a.RuntimeHandlers, b.RuntimeHandlers) {
		a.RuntimeHandlers, b.RuntimeHandlers = nil, nil
	}
}

// withReplacedAddresses sets status.addresses in patch to addresses
// followed by the {"$patch": "replace"} directive.
func withReplacedAddresses(patch []byte, addresses []corev1.NodeAddress) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(patch, &doc); err != nil {
		return nil, err
	}
	list := make([]any, 0, len(addresses)+1)
	for _, a := range addresses {
		list = append(list, a)
	}
	list = append(list, map[string]string{"$patch": "replace"})
	status, _ := doc["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		doc["status"] = status
	}
	status["addresses"] = list
	return json.Marshal(doc)
}

// PatchStatus posts updated's status (and metadata) over original with one
// strategic-merge PATCH of nodes/<name>/status, and returns the Node the
// server stored. original must be the Node as last read (from the server
// or a cache of it) and updated a modified copy of it.
func PatchStatus(ctx context.Context, client kubernetes.Interface, original, updated *corev1.Node) (*corev1.Node, error) {
	patch, err := StatusPatch(original, updated)
	if err != nil {
		return nil, err
	}
	n, err := client.CoreV1().Nodes().Patch(ctx, original.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("failed to patch status %q for node %q: %w", patch, original.Name, err)
	}
	return n, nil
}
