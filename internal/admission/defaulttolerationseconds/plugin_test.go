package defaulttolerationseconds

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"knode/internal/apiserver"
	"knode/internal/registry"
)

var (
	podKind  = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "pods", Namespaced: true}
	nodeKind = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "nodes"}
	// otherPods is a "pods" resource in another group, which is not ours.
	otherPods = &registry.Kind{GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1"}, Resource: "pods", Namespaced: true}
)

func notReady(seconds int64) corev1.Toleration {
	return corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(seconds)}
}

func unreachable(seconds int64) corev1.Toleration {
	return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(seconds)}
}

func TestAdmitPodTolerations(t *testing.T) {
	custom := &corev1.Toleration{Key: "example.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name  string
		cfg   Config
		given []corev1.Toleration
		want  []corev1.Toleration
	}{
		{
			name: "no tolerations: both defaults at 300 s",
			want: []corev1.Toleration{notReady(300), unreachable(300)},
		},
		{
			name:  "unrelated toleration kept first",
			given: []corev1.Toleration{*custom},
			want:  []corev1.Toleration{*custom, notReady(300), unreachable(300)},
		},
		{
			name:  "not-ready NoExecute already tolerated forever",
			given: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				unreachable(300),
			},
		},
		{
			name:  "unreachable with its own seconds is not changed",
			given: []corev1.Toleration{unreachable(30)},
			want:  []corev1.Toleration{unreachable(30), notReady(300)},
		},
		{
			name:  "both present: nothing added",
			given: []corev1.Toleration{unreachable(5), notReady(6)},
			want:  []corev1.Toleration{unreachable(5), notReady(6)},
		},
		{
			name:  "empty key and empty effect tolerates everything",
			given: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			want:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
		{
			name:  "empty key with NoExecute covers both",
			given: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want:  []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
		{
			name:  "empty key with NoSchedule covers neither",
			given: []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: []corev1.Toleration{
				{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				notReady(300), unreachable(300),
			},
		},
		{
			name:  "matching key with NoSchedule effect does not count",
			given: []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				notReady(300), unreachable(300),
			},
		},
		{
			name:  "matching key with empty effect counts, whatever the operator and value",
			given: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpEqual, Value: "anything"}},
			want: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpEqual, Value: "anything"},
				notReady(300),
			},
		},
		{
			name: "configured seconds, including zero",
			cfg:  Config{NotReadyTolerationSeconds: ptr.To[int64](0), UnreachableTolerationSeconds: ptr.To[int64](60)},
			want: []corev1.Toleration{notReady(0), unreachable(60)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []string{"CREATE", "UPDATE"} {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Spec: corev1.PodSpec{Tolerations: append([]corev1.Toleration(nil), tc.given...)}}
				err := New(tc.cfg).Admit(context.Background(), apiserver.AdmissionAttributes{Operation: op, Kind: podKind, Namespace: "default", Name: "p", Object: pod})
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if diff := cmp.Diff(tc.want, pod.Spec.Tolerations); diff != "" {
					t.Errorf("%s: tolerations (-want +got):\n%s", op, diff)
				}
			}
		})
	}
}

// Each admitted pod gets its own seconds pointers, so changing one pod
// cannot change another pod or the plugin's setting.
func TestAddedSecondsAreNotShared(t *testing.T) {
	p := New(Config{})
	admit := func() *corev1.Pod {
		pod := &corev1.Pod{}
		if err := p.Admit(context.Background(), apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Object: pod}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	a := admit()
	*a.Spec.Tolerations[0].TolerationSeconds = 1
	*a.Spec.Tolerations[1].TolerationSeconds = 2
	b := admit()
	if diff := cmp.Diff([]corev1.Toleration{notReady(300), unreachable(300)}, b.Spec.Tolerations); diff != "" {
		t.Errorf("second pod's tolerations (-want +got):\n%s", diff)
	}
}

func TestAdmitLeavesOtherWritesAlone(t *testing.T) {
	cases := []struct {
		name  string
		attrs apiserver.AdmissionAttributes
	}{
		{name: "pod status update", attrs: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: podKind, Subresource: "status"}},
		{name: "pod binding", attrs: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Subresource: "binding"}},
		{name: "pod delete", attrs: apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind}},
		{name: "node create", attrs: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind}},
		{name: "pods of another group", attrs: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: otherPods}},
		{name: "no kind", attrs: apiserver.AdmissionAttributes{Operation: "CREATE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			tc.attrs.Object = pod
			if err := New(Config{}).Admit(context.Background(), tc.attrs); err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Tolerations) != 0 {
				t.Errorf("tolerations added: %v", pod.Spec.Tolerations)
			}
		})
	}
}

func TestAdmitRefusesNonPodObject(t *testing.T) {
	err := New(Config{}).Admit(context.Background(), apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Object: &corev1.Node{}})
	if !apierrors.IsBadRequest(err) {
		t.Fatalf("got %v, want 400 Bad Request", err)
	}
	if want := "expected *v1.Pod but got *v1.Node"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}
