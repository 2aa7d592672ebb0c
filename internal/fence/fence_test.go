package fence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"knode/internal/apitest"
	"knode/internal/cloudprovider"
	"knode/internal/cloudprovider/fake"
	"knode/internal/fence"
	"knode/internal/volume"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var errBoom = errors.New("boom")

func TestCheck(t *testing.T) {
	const refusal = "refusing to fence n1: "
	const advice = "; confirm the machine is off, or use --force"
	cases := []struct {
		name      string
		noCloud   bool
		force     bool
		instance  *fake.Instance // nil: none
		errs      map[string]error
		want      fence.Reason
		wantErr   string
		wantWraps error // besides fence.ErrRefused
		wantCalls []string
	}{
		{name: "forced: nothing asked", force: true, instance: &fake.Instance{}, want: fence.ReasonForced},
		{name: "forced without a provider", force: true, noCloud: true, want: fence.ReasonForced},
		{
			name: "no provider", noCloud: true,
			wantErr: refusal + "no cloud provider is configured to confirm that its machine is off; use --cloud-provider and --cloud-config, or --force once you have confirmed it yourself",
		},
		{name: "shut down", instance: &fake.Instance{Shutdown: true}, want: fence.ReasonShutdown, wantCalls: []string{"shutdown n1"}},
		{name: "gone", want: fence.ReasonGone, wantCalls: []string{"shutdown n1", "exists n1"}},
		{
			name: "running", instance: &fake.Instance{},
			wantErr:   refusal + "the cloud provider reports its instance exists and is not shut down" + advice,
			wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "running, shutdown not implemented", instance: &fake.Instance{},
			errs:      map[string]error{fake.Shutdown: cloudprovider.ErrNotImplemented},
			wantErr:   refusal + "the cloud provider reports its instance exists and cannot tell whether it is shut down" + advice,
			wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "gone, shutdown not implemented", errs: map[string]error{fake.Shutdown: cloudprovider.ErrNotImplemented},
			want: fence.ReasonGone, wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "gone, shutdown failed", errs: map[string]error{fake.Shutdown: errBoom},
			want: fence.ReasonGone, wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "exists answers instance not found", instance: &fake.Instance{},
			errs: map[string]error{fake.Exists: fmt.Errorf("n1: %w", cloudprovider.ErrInstanceNotFound)},
			want: fence.ReasonGone, wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "exists, shutdown failed", instance: &fake.Instance{Shutdown: true},
			errs:      map[string]error{fake.Shutdown: errBoom},
			wantErr:   refusal + "the cloud provider reports its instance exists and could not tell whether it is shut down: boom" + advice,
			wantWraps: errBoom, wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "not shut down, exists failed", instance: &fake.Instance{},
			errs:      map[string]error{fake.Exists: errBoom},
			wantErr:   refusal + "the cloud provider reports its instance is not shut down and could not tell whether it exists: boom" + advice,
			wantWraps: errBoom, wantCalls: []string{"shutdown n1", "exists n1"},
		},
		{
			name: "both failed", instance: &fake.Instance{},
			errs:      map[string]error{fake.Shutdown: errors.New("bmc unreachable"), fake.Exists: errBoom},
			wantErr:   refusal + "the cloud provider could not tell whether its instance is off: bmc unreachable; boom" + advice,
			wantWraps: errBoom, wantCalls: []string{"shutdown n1", "exists n1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			if tc.instance != nil {
				cloud.Set("n1", *tc.instance)
			}
			for q, err := range tc.errs {
				cloud.SetError(q, err)
			}
			var provider cloudprovider.Interface = cloud
			if tc.noCloud {
				provider = nil
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			got, err := fence.Check(context.Background(), provider, node, tc.force)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Check = %q, %v\nwant error %s", got, err, tc.wantErr)
				}
				if !errors.Is(err, fence.ErrRefused) {
					t.Errorf("error does not match ErrRefused")
				}
				if tc.wantWraps != nil && !errors.Is(err, tc.wantWraps) {
					t.Errorf("error does not wrap %v", tc.wantWraps)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("Check = %q, %v; want %q", got, err, tc.want)
			}
			if diff := cmp.Diff(tc.wantCalls, cloud.Calls()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

var other = corev1.Taint{Key: "example.com/maintenance", Value: "yes", Effect: corev1.TaintEffectNoSchedule}

func taints(t *testing.T, nodes corev1client.NodeInterface, name string) []corev1.Taint {
	t.Helper()
	n, err := nodes.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.Taints
}

// Apply adds the taint beside the node's others, and a second Apply
// writes nothing.
func TestApply(t *testing.T) {
	ctx := context.Background()
	s := apitest.Start(t, apitest.Options{})
	nodes := s.Admin.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{other}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, already, err := fence.Apply(ctx, nodes, "n1", now)
	if err != nil || already {
		t.Fatalf("Apply = %v, %v; want added", already, err)
	}
	want := []corev1.Taint{other, fence.Taint(now)}
	if diff := cmp.Diff(want, n.Spec.Taints); diff != "" {
		t.Errorf("taints returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, taints(t, nodes, "n1")); diff != "" {
		t.Errorf("taints stored (-want +got):\n%s", diff)
	}
	if tt := fence.Taint(now); tt.ToString() != volume.TaintOutOfService+"=nodeshutdown:NoExecute" || !tt.TimeAdded.Time.Equal(now) {
		t.Errorf("Taint = %s added %v, want %s=nodeshutdown:NoExecute added %v", tt.ToString(), tt.TimeAdded, volume.TaintOutOfService, now)
	}

	before := n.ResourceVersion
	n, already, err = fence.Apply(ctx, nodes, "n1", now.Add(time.Hour))
	if err != nil || !already || n.ResourceVersion != before {
		t.Fatalf("second Apply = %v, %v, resourceVersion %s (was %s); want already, nothing written", already, err, n.ResourceVersion, before)
	}

	if _, _, err := fence.Apply(ctx, nodes, "missing", now); err == nil {
		t.Error("Apply on a missing node succeeded")
	}
}

// racingNodes changes the node between Apply's read and its patch, once.
type racingNodes struct {
	corev1client.NodeInterface
	raced bool
}

func (r *racingNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*corev1.Node, error) {
	if !r.raced {
		r.raced = true
		n, err := r.NodeInterface.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		n.Spec.Taints = append(n.Spec.Taints, other)
		if _, err := r.NodeInterface.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	return r.NodeInterface.Patch(ctx, name, pt, data, opts, sub...)
}

// A taint added by someone else meanwhile is kept: the stale patch
// conflicts and Apply reads the node again.
func TestApplyKeepsAConcurrentTaint(t *testing.T) {
	ctx := context.Background()
	s := apitest.Start(t, apitest.Options{})
	if _, err := s.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := &racingNodes{NodeInterface: s.Admin.CoreV1().Nodes()}
	if _, already, err := fence.Apply(ctx, nodes, "n1", now); err != nil || already {
		t.Fatalf("Apply = %v, %v; want added", already, err)
	}
	if diff := cmp.Diff([]corev1.Taint{other, fence.Taint(now)}, taints(t, nodes, "n1")); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
}
