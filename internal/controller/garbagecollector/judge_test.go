package garbagecollector

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ref(kind, name string, uid types.UID) metav1.OwnerReference {
	api := "apps/v1"
	switch kind {
	case "Job":
		api = "batch/v1"
	case "Pod":
		api = "v1"
	}
	return metav1.OwnerReference{APIVersion: api, Kind: kind, Name: name, UID: uid}
}

func key(kind, name string) OwnerKey {
	group := "apps"
	if kind == "Pod" {
		group = ""
	}
	return OwnerKey{Group: group, Kind: kind, Namespace: "ns", Name: name}
}

func refs(r ...metav1.OwnerReference) []metav1.OwnerReference { return r }

func TestJudge(t *testing.T) {
	owners := map[OwnerKey]Owner{
		key("ReplicaSet", "web"):    {UID: "web-uid"},
		key("DaemonSet", "agent"):   {UID: "agent-uid"},
		key("StatefulSet", "db"):    {UID: "db-uid"},
		key("Pod", "db-0"):          {UID: "db-0-uid"},
		key("Pod", "db-1"):          {UID: "db-1-uid", Deleting: true},
		key("ReplicaSet", "orphan"): {UID: "orphan-uid", Deleting: true, Finalizers: []string{metav1.FinalizerOrphanDependents}},
		key("ReplicaSet", "fg"):     {UID: "fg-uid", Deleting: true, Finalizers: []string{metav1.FinalizerDeleteDependents}},
		key("StatefulSet", "fg"):    {UID: "sts-fg-uid", Deleting: true, Finalizers: []string{metav1.FinalizerDeleteDependents}},
		key("ReplicaSet", "dying"):  {UID: "dying-uid", Deleting: true, Finalizers: []string{"example.com/hold"}},
	}
	tests := []struct {
		name string
		// dep is "pod" (the default), "claim" or "revision".
		dep  string
		refs []metav1.OwnerReference
		// owners, when set, replaces the shared owners.
		owners map[OwnerKey]Owner
		action Action
		remove []string
	}{
		{name: "no owners", action: Keep},
		{name: "owner present", refs: refs(ref("ReplicaSet", "web", "web-uid")), action: Keep},
		{name: "owner gone", refs: refs(ref("ReplicaSet", "gone", "gone-uid")), action: Delete},
		{name: "owner recreated under another uid", refs: refs(ref("ReplicaSet", "web", "old-uid")), action: Delete},
		{name: "daemonset gone", refs: refs(ref("DaemonSet", "other", "x")), action: Delete},
		{name: "unknown kind counts as present", refs: refs(ref("Job", "batch", "j")), action: Keep},
		{
			name:   "one gone, one present: trim",
			refs:   refs(ref("ReplicaSet", "gone", "gone-uid"), ref("DaemonSet", "agent", "agent-uid")),
			action: Trim, remove: []string{"gone"},
		},
		{
			name:   "one gone, one of an unknown kind: trim",
			refs:   refs(ref("ReplicaSet", "gone", "gone-uid"), ref("Job", "batch", "j")),
			action: Trim, remove: []string{"gone"},
		},
		{name: "orphaning owner: trim, keep the pod", refs: refs(ref("ReplicaSet", "orphan", "orphan-uid")), action: Trim, remove: []string{"orphan"}},
		{name: "foreground owner: delete", refs: refs(ref("ReplicaSet", "fg", "fg-uid")), action: Delete},
		{name: "foreground owner and a present one: keep", refs: refs(ref("ReplicaSet", "fg", "fg-uid"), ref("ReplicaSet", "web", "web-uid")), action: Keep},
		{name: "owner deleting with other finalizers is still present", refs: refs(ref("ReplicaSet", "dying", "dying-uid")), action: Keep},

		{name: "statefulset present: pod stays", refs: refs(ref("StatefulSet", "db", "db-uid")), action: Keep},
		{name: "statefulset gone: pod deleted", refs: refs(ref("StatefulSet", "gone", "x")), action: Delete},
		{name: "statefulset recreated: revision deleted", dep: "revision", refs: refs(ref("StatefulSet", "db", "old-uid")), action: Delete},
		{name: "statefulset present: revision stays", dep: "revision", refs: refs(ref("StatefulSet", "db", "db-uid")), action: Keep},
		{name: "statefulset gone: claim deleted", dep: "claim", refs: refs(ref("StatefulSet", "gone", "x")), action: Delete},
		{name: "foreground statefulset: claim deleted", dep: "claim", refs: refs(ref("StatefulSet", "fg", "sts-fg-uid")), action: Delete},
		{
			name: "owner of that name and uid in another namespace does not count", dep: "claim",
			refs:   refs(ref("StatefulSet", "db", "db-uid")),
			owners: map[OwnerKey]Owner{{Group: "apps", Kind: "StatefulSet", Namespace: "other", Name: "db"}: {UID: "db-uid"}},
			action: Delete,
		},
		{name: "pod owner present: claim stays", dep: "claim", refs: refs(ref("Pod", "db-0", "db-0-uid")), action: Keep},
		{name: "pod owner gone: claim deleted", dep: "claim", refs: refs(ref("Pod", "db-2", "db-2-uid")), action: Delete},
		{name: "pod owner recreated under another uid: claim deleted", dep: "claim", refs: refs(ref("Pod", "db-0", "old-uid")), action: Delete},
		{name: "pod owner terminating still exists: claim stays", dep: "claim", refs: refs(ref("Pod", "db-1", "db-1-uid")), action: Keep},
		{
			name: "pod owner gone, statefulset present: trim the pod", dep: "claim",
			refs:   refs(ref("Pod", "db-2", "db-2-uid"), ref("StatefulSet", "db", "db-uid")),
			action: Trim, remove: []string{"db-2"},
		},
		{
			name: "a Pod of another group is unknown", dep: "claim",
			refs:   refs(metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Pod", Name: "db-2", UID: "x"}),
			action: Keep,
		},
		{
			name: "no apiVersion is unknown", dep: "claim",
			refs:   refs(metav1.OwnerReference{Kind: "Pod", Name: "db-2", UID: "x"}),
			action: Keep,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := metav1.ObjectMeta{Name: "d", Namespace: "ns", OwnerReferences: tt.refs}
			var dep metav1.Object
			switch tt.dep {
			case "claim":
				dep = &corev1.PersistentVolumeClaim{ObjectMeta: m}
			case "revision":
				dep = &appsv1.ControllerRevision{ObjectMeta: m}
			default:
				dep = &corev1.Pod{ObjectMeta: m}
			}
			known := owners
			if tt.owners != nil {
				known = tt.owners
			}
			action, remove := Judge(dep, known, knownKind)
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
