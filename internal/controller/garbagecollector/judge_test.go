package garbagecollector

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ref(kind, name string, uid types.UID) metav1.OwnerReference {
	api := "apps/v1"
	if kind == "Job" {
		api = "batch/v1"
	}
	return metav1.OwnerReference{APIVersion: api, Kind: kind, Name: name, UID: uid}
}

func key(kind, name string) OwnerKey {
	return OwnerKey{Group: "apps", Kind: kind, Namespace: "ns", Name: name}
}

func TestJudge(t *testing.T) {
	owners := map[OwnerKey]Owner{
		key("ReplicaSet", "web"):    {UID: "web-uid"},
		key("DaemonSet", "agent"):   {UID: "agent-uid"},
		key("ReplicaSet", "orphan"): {UID: "orphan-uid", Deleting: true, Finalizers: []string{metav1.FinalizerOrphanDependents}},
		key("ReplicaSet", "fg"):     {UID: "fg-uid", Deleting: true, Finalizers: []string{metav1.FinalizerDeleteDependents}},
		key("ReplicaSet", "dying"):  {UID: "dying-uid", Deleting: true, Finalizers: []string{"example.com/hold"}},
	}
	tests := []struct {
		name   string
		refs   []metav1.OwnerReference
		action Action
		remove []string
	}{
		{name: "no owners", action: Keep},
		{name: "owner present", refs: []metav1.OwnerReference{ref("ReplicaSet", "web", "web-uid")}, action: Keep},
		{name: "owner gone", refs: []metav1.OwnerReference{ref("ReplicaSet", "gone", "gone-uid")}, action: Delete},
		{name: "owner recreated under another uid", refs: []metav1.OwnerReference{ref("ReplicaSet", "web", "old-uid")}, action: Delete},
		{name: "daemonset gone", refs: []metav1.OwnerReference{ref("DaemonSet", "other", "x")}, action: Delete},
		{name: "unknown kind counts as present", refs: []metav1.OwnerReference{ref("Job", "batch", "j")}, action: Keep},
		{
			name:   "one gone, one present: trim",
			refs:   []metav1.OwnerReference{ref("ReplicaSet", "gone", "gone-uid"), ref("DaemonSet", "agent", "agent-uid")},
			action: Trim, remove: []string{"gone"},
		},
		{
			name:   "one gone, one of an unknown kind: trim",
			refs:   []metav1.OwnerReference{ref("ReplicaSet", "gone", "gone-uid"), ref("Job", "batch", "j")},
			action: Trim, remove: []string{"gone"},
		},
		{name: "orphaning owner: trim, keep the pod", refs: []metav1.OwnerReference{ref("ReplicaSet", "orphan", "orphan-uid")}, action: Trim, remove: []string{"orphan"}},
		{name: "foreground owner: delete", refs: []metav1.OwnerReference{ref("ReplicaSet", "fg", "fg-uid")}, action: Delete},
		{name: "foreground owner and a present one: keep", refs: []metav1.OwnerReference{ref("ReplicaSet", "fg", "fg-uid"), ref("ReplicaSet", "web", "web-uid")}, action: Keep},
		{name: "owner deleting with other finalizers is still present", refs: []metav1.OwnerReference{ref("ReplicaSet", "dying", "dying-uid")}, action: Keep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", OwnerReferences: tt.refs}}
			action, remove := Judge(pod, owners, knownKind)
			var removed []string
			for _, r := range remove {
				removed = append(removed, r.Name)
			}
			if action != tt.action {
				t.Errorf("action = %v, want %v", action, tt.action)
			}
			if diff := cmp.Diff(tt.remove, removed); diff != "" {
				t.Errorf("removed references (-want +got):\n%s", diff)
			}
		})
	}
}
