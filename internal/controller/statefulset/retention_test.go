package statefulset

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every policy, for a pod in range and a condemned one: which references
// the claim ends with, and that a claim with exactly those is up to date
// while one with none (or with the other ones) is not, unless the policy
// wants none.
func TestClaimOwnerRefsPerPolicy(t *testing.T) {
	tests := []struct {
		whenDeleted, whenScaled appsv1.PersistentVolumeClaimRetentionPolicyType
		inRange, condemned      []string
	}{
		{retain, retain, []string{}, []string{}},
		{remove, retain, []string{"StatefulSet/web controller=true"}, []string{"StatefulSet/web controller=true"}},
		{retain, remove, []string{}, []string{"Pod/web-1 controller=true"}},
		{remove, remove, []string{"StatefulSet/web controller=true"}, []string{"Pod/web-1 controller=true"}},
	}
	for _, tt := range tests {
		set := testSet(1, withClaims, retention(tt.whenDeleted, tt.whenScaled))
		for _, c := range []struct {
			ordinal int
			want    []string
		}{{0, tt.inRange}, {1, tt.condemned}} {
			name := string(tt.whenDeleted) + "/" + string(tt.whenScaled) + " " + PodName(set, c.ordinal)
			pod := stsPod(set, c.ordinal, "r")
			claim := claimOf(set, c.ordinal)
			if got := claimOwnerUpToDate(claim, set, pod); got != (len(c.want) == 0) {
				t.Errorf("%s: a claim without references up to date = %v, want %v", name, got, len(c.want) == 0)
			}
			setClaimOwnerRefs(claim, set, pod)
			if diff := cmp.Diff(c.want, refsOf(claim)); diff != "" {
				t.Errorf("%s: references (-want +got):\n%s", name, diff)
			}
			if !claimOwnerUpToDate(claim, set, pod) {
				t.Errorf("%s: claim not up to date after setClaimOwnerRefs", name)
			}
			// Both ours: up to date only when the policy wants both.
			both := claimOf(set, c.ordinal, ownedByRef("StatefulSet", "web", "set-uid"), ownedByRef("Pod", pod.Name, pod.UID))
			if got := claimOwnerUpToDate(both, set, pod); got {
				t.Errorf("%s: a claim owned by both set and pod is up to date", name)
			}
		}
	}
}

func TestClaimOwnerUpToDateLeavesStrangersAlone(t *testing.T) {
	set := testSet(1, withClaims, retention(remove, remove))
	pod := stsPod(set, 0, "r")
	nonController := func(c *corev1.PersistentVolumeClaim) {
		c.OwnerReferences = append(c.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "set-uid"})
	}
	tests := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{"a stale set reference: left alone", claimOf(set, 0, ownedByRef("StatefulSet", "web", "old-set")), true},
		{"a stale pod reference: left alone", claimOf(set, 0, ownedByRef("Pod", "web-0", "old-pod")), true},
		{"another controller only: left alone", claimOf(set, 0, ownedByRef("Thing", "t", "thing-uid")), true},
		{"another controller and ours: ours must go", claimOf(set, 0, ownedByRef("Thing", "t", "thing-uid"), ownedByRef("StatefulSet", "web", "set-uid")), false},
		{"ours without controller: fixed", claimOf(set, 0, nonController), false},
	}
	for _, tt := range tests {
		if got := claimOwnerUpToDate(tt.claim, set, pod); got != tt.want {
			t.Errorf("%s: up to date = %v, want %v", tt.name, got, tt.want)
		}
	}
	// With another controller, ours are scrubbed and none added.
	c := claimOf(set, 0, ownedByRef("Thing", "t", "thing-uid"), ownedByRef("StatefulSet", "web", "set-uid"))
	setClaimOwnerRefs(c, set, pod)
	if diff := cmp.Diff([]string{"Thing/t controller=true"}, refsOf(c)); diff != "" {
		t.Errorf("references (-want +got):\n%s", diff)
	}
	fixed, conflicting := claimFixes(set, pod, claimMap(claimOf(set, 0, ownedByRef("Thing", "t", "thing-uid"))))
	if len(fixed) != 0 || !cmp.Equal(conflicting, []string{"data-web-0"}) {
		t.Errorf("claimFixes = %d fixed, conflicting %v; want none fixed and data-web-0 conflicting", len(fixed), conflicting)
	}
}
