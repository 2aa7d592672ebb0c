package persistentvolume

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestFindVolume(t *testing.T) {
	const (
		rwo  = corev1.ReadWriteOnce
		rox  = corev1.ReadOnlyMany
		rwx  = corev1.ReadWriteMany
		rwop = corev1.ReadWriteOncePod
	)
	tests := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		delay   bool
		want    string // "" for none
	}{
		{name: "no volumes", claim: pvc("c", "1Gi")},
		{name: "smallest that fits wins",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("big", "10Gi"), pv("small", "2Gi"), pv("tiny", "500Mi")},
			want:    "small"},
		{name: "exactly the request fits",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("exact", "1Gi"), pv("more", "2Gi")},
			want:    "exact"},
		{name: "one byte short does not fit",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("short", "1073741823")}},
		{name: "equal sizes: first by name",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("b", "1Gi"), pv("a", "1Gi")},
			want:    "a"},
		{name: "other class does not match",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("silver", "1Gi", class("silver"))}},
		{name: "claim without class matches only volumes without class",
			claim:   pvc("c", "1Gi", claimClass(ptr.To(""))),
			volumes: []*corev1.PersistentVolume{pv("gold", "1Gi"), pv("none", "5Gi", class(""))},
			want:    "none"},
		{name: "selector filters by label",
			claim:   pvc("c", "1Gi", selecting("tier", "fast")),
			volumes: []*corev1.PersistentVolume{pv("a", "1Gi", label("tier", "slow")), pv("b", "5Gi", label("tier", "fast"))},
			want:    "b"},
		{name: "volume mode must agree",
			claim:   pvc("c", "1Gi", blockClaim),
			volumes: []*corev1.PersistentVolume{pv("fs", "1Gi"), pv("blk", "5Gi", block)},
			want:    "blk"},
		{name: "filesystem claim skips block volume",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("blk", "1Gi", block)}},
		{name: "access modes must all be offered",
			claim:   pvc("c", "1Gi", wants(rwx)),
			volumes: []*corev1.PersistentVolume{pv("rwo", "1Gi"), pv("rwx", "5Gi", modes(rwo, rwx))},
			want:    "rwx"},
		{name: "fewest modes first, even when larger",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("many", "1Gi", modes(rwo, rox, rwx)), pv("one", "8Gi", modes(rwo))},
			want:    "one"},
		{name: "ReadWriteOncePod is a mode of its own",
			claim:   pvc("c", "1Gi", wants(rwop)),
			volumes: []*corev1.PersistentVolume{pv("rwo", "1Gi"), pv("rwop", "5Gi", modes(rwop))},
			want:    "rwop"},
		{name: "pre-bound by name wins over a smaller volume",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("small", "1Gi"), pv("mine", "5Gi", claimRef("c", ""))},
			want:    "mine"},
		{name: "pre-bound ignores class, selector and phase",
			claim:   pvc("c", "1Gi", selecting("x", "y")),
			volumes: []*corev1.PersistentVolume{pv("mine", "5Gi", claimRef("c", "uid-c"), class("silver"), volPhase(corev1.VolumeBound))},
			want:    "mine"},
		{name: "pre-bound but too small falls back",
			claim:   pvc("c", "2Gi"),
			volumes: []*corev1.PersistentVolume{pv("mine", "1Gi", claimRef("c", "")), pv("other", "3Gi")},
			want:    "other"},
		{name: "pre-bound in a larger mode set loses to a smaller set's match",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("mine", "1Gi", modes(rwo, rwx), claimRef("c", "")), pv("plain", "1Gi")},
			want:    "plain"},
		{name: "claimed by another claim is skipped",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("taken", "1Gi", claimRef("d", "uid-d"))}},
		{name: "claimRef with another UID is skipped",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("old", "1Gi", claimRef("c", "uid-old"), volPhase(corev1.VolumeReleased))}},
		{name: "volume being deleted is skipped, even pre-bound",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("gone", "1Gi", volDeleting), pv("mine", "1Gi", volDeleting, claimRef("c", ""))}},
		{name: "only Available volumes are matched",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("pending", "1Gi", volPhase(corev1.VolumePending)), pv("released", "1Gi", volPhase(corev1.VolumeReleased))}},
		{name: "attributes class must agree",
			claim: pvc("c", "1Gi", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = ptr.To("fast") }),
			volumes: []*corev1.PersistentVolume{pv("plain", "1Gi"),
				pv("fast", "5Gi", func(v *corev1.PersistentVolume) { v.Spec.VolumeAttributesClassName = ptr.To("fast") })},
			want: "fast"},
		{name: "delayed binding skips free volumes",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi")},
			delay:   true},
		{name: "delayed binding still takes the pre-bound volume",
			claim:   pvc("c", "1Gi"),
			volumes: []*corev1.PersistentVolume{pv("free", "1Gi"), pv("mine", "1Gi", claimRef("c", "uid-c"))},
			delay:   true,
			want:    "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindVolume(tt.claim, tt.volumes, tt.delay)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tt.want {
				t.Errorf("FindVolume = %q, want %q", name, tt.want)
			}
		})
	}
}

func TestFindVolumeBadSelector(t *testing.T) {
	claim := pvc("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	})
	if _, err := FindVolume(claim, []*corev1.PersistentVolume{pv("a", "1Gi")}, false); err == nil {
		t.Fatal("FindVolume accepted a selector with an unknown operator")
	}
}

func TestCheckVolume(t *testing.T) {
	tests := []struct {
		name  string
		pv    *corev1.PersistentVolume
		claim *corev1.PersistentVolumeClaim
		want  error
	}{
		{name: "fits", pv: pv("v", "1Gi"), claim: pvc("c", "1Gi")},
		{name: "being deleted", pv: pv("v", "1Gi", volDeleting), claim: pvc("c", "1Gi"), want: errVolumeDeleting},
		{name: "too small", pv: pv("v", "1Gi"), claim: pvc("c", "2Gi"), want: errVolumeTooSmall},
		{name: "class", pv: pv("v", "1Gi", class("silver")), claim: pvc("c", "1Gi"), want: errClassMismatch},
		{name: "volume mode", pv: pv("v", "1Gi", block), claim: pvc("c", "1Gi"), want: errVolumeModeMismatch},
		{name: "access modes", pv: pv("v", "1Gi"), claim: pvc("c", "1Gi", wants(corev1.ReadWriteMany)), want: errAccessModesMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckVolume(tt.pv, tt.claim)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("CheckVolume = %v, want %v", err, tt.want)
			}
		})
	}
	if got, want := CheckVolume(pv("v", "1Gi", volDeleting), pvc("c", "1Gi")).Error(), `the volume is marked for deletion "v"`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}

func TestDefaultClass(t *testing.T) {
	older, newer := now.Add(-time.Hour), now
	tests := []struct {
		name    string
		classes []*storagev1.StorageClass
		want    string
	}{
		{name: "none"},
		{name: "none marked", classes: []*storagev1.StorageClass{sc("a", "p", storagev1.VolumeBindingImmediate)}},
		{name: "the marked one", classes: []*storagev1.StorageClass{
			sc("a", "p", storagev1.VolumeBindingImmediate), sc("b", "p", storagev1.VolumeBindingImmediate, isDefault)}, want: "b"},
		{name: "beta annotation counts", classes: []*storagev1.StorageClass{
			sc("b", "p", storagev1.VolumeBindingImmediate, func(s *storagev1.StorageClass) {
				s.Annotations = map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}
			})}, want: "b"},
		{name: "annotation other than true does not count", classes: []*storagev1.StorageClass{
			sc("b", "p", storagev1.VolumeBindingImmediate, func(s *storagev1.StorageClass) {
				s.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "yes"}
			})}},
		{name: "newest of several", classes: []*storagev1.StorageClass{
			sc("new", "p", storagev1.VolumeBindingImmediate, isDefault, createdAt(newer)),
			sc("old", "p", storagev1.VolumeBindingImmediate, isDefault, createdAt(older))}, want: "new"},
		{name: "same instant: first by name", classes: []*storagev1.StorageClass{
			sc("z", "p", storagev1.VolumeBindingImmediate, isDefault, createdAt(newer)),
			sc("m", "p", storagev1.VolumeBindingImmediate, isDefault, createdAt(newer))}, want: "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if d := DefaultClass(tt.classes); d != nil {
				got = d.Name
			}
			if got != tt.want {
				t.Errorf("DefaultClass = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHasClass(t *testing.T) {
	tests := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{name: "field set", claim: pvc("c", "1Gi"), want: true},
		{name: "field set empty", claim: pvc("c", "1Gi", claimClass(ptr.To(""))), want: true},
		{name: "unset", claim: pvc("c", "1Gi", claimClass(nil))},
		{name: "beta annotation", claim: pvc("c", "1Gi", claimClass(nil), claimAnn("volume.beta.kubernetes.io/storage-class", "")), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HasClass(tt.claim); got != tt.want {
				t.Errorf("HasClass = %v, want %v", got, tt.want)
			}
		})
	}
}
