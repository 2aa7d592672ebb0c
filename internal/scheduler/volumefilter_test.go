package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/volume"
)

// mkClaim is a claim in default asking for size of class ("" for no
// class), ReadWriteOnce, changed by the options.
func mkClaim(name, class, size string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "10"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// boundTo makes the claim fully bound to pv.
func boundTo(pv string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.VolumeName = pv
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnBindCompleted, "yes")
		c.Status.Phase = corev1.ClaimBound
	}
}

func selectedNode(node string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnSelectedNode, node)
	}
}

func accessModes(m ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}

// mkPV is an Available CSI volume of class with size, ReadWriteOnce,
// handle "h-<name>" of driver volume.BuiltinDriver, changed by the options.
func mkPV(name, class, size string, opts ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "10"},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName: class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: volume.BuiltinDriver, VolumeHandle: "h-" + name},
			},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

// pinnedTo gives the volume a node affinity on the hostname label.
func pinnedTo(nodes ...string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}},
		}}}}
	}
}

func claimRef(name string, uid types.UID) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: name, UID: uid}
	}
}

func mkClass(name, provisioner string, mode storagev1.VolumeBindingMode, zones ...string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: corev1.LabelTopologyZone, Values: zones}}}}
	}
	return sc
}

var (
	wffc      = storagev1.VolumeBindingWaitForFirstConsumer
	immediate = storagev1.VolumeBindingImmediate
)

// withClaims gives the pod a volume for each claim.
func withClaims(names ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, n := range names {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + n, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: n},
			}})
		}
	}
}

func mkCSINode(name string, limit int32) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: volume.BuiltinDriver, NodeID: name, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(limit)},
		}}},
	}
}

func zone(z string) func(*corev1.Node) { return withLabels(corev1.LabelTopologyZone, z) }

// world is what a volume case starts from.
type world struct {
	nodes   []*corev1.Node
	pods    []*corev1.Pod // bound (spec.nodeName set)
	claims  []*corev1.PersistentVolumeClaim
	volumes []*corev1.PersistentVolume
	classes []*storagev1.StorageClass
	csi     []*storagev1.CSINode
}

func (w world) snapshot() *Snapshot {
	snap := NewSnapshot()
	for _, n := range w.nodes {
		snap.SetNode(n)
	}
	for _, p := range w.pods {
		snap.AddPod(p)
	}
	for _, c := range w.claims {
		snap.SetClaim(c)
	}
	for _, pv := range w.volumes {
		snap.SetVolume(pv)
	}
	for _, sc := range w.classes {
		snap.SetClass(sc)
	}
	for _, cn := range w.csi {
		snap.SetCSINode(cn)
	}
	return snap
}

// preemptionUseless is upstream's preemption part when no node could be
// helped by evicting.
func preemptionUseless(n int) string {
	return fmt.Sprintf("preemption: 0/%d nodes are available: %d Preemption is not helpful for scheduling.", n, n)
}

func TestScheduleVolumes(t *testing.T) {
	three := []*corev1.Node{
		mkNode("n1", "4", "8Gi", zone("a")),
		mkNode("n2", "4", "8Gi", zone("b")),
		mkNode("n3", "4", "8Gi", zone("b")),
	}
	fast := mkClass("fast", "csi.example.com", wffc)
	cases := []struct {
		name  string
		world world
		pod   *corev1.Pod
		want  string // the node, or the error's message
	}{
		{
			name:  "missing claim",
			world: world{nodes: three},
			pod:   mkPod("p", "", "", withClaims("data")),
			want:  `0/3 nodes are available: persistentvolumeclaim "data" not found. ` + preemptionUseless(3),
		},
		{
			name:  "the first missing claim is named",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("a", "fast", "1Gi")}, classes: []*storagev1.StorageClass{fast}},
			pod:   mkPod("p", "", "", withClaims("a", "b", "c")),
			want:  `0/3 nodes are available: persistentvolumeclaim "b" not found. ` + preemptionUseless(3),
		},
		{
			name: "claim being deleted",
			world: world{nodes: three, classes: []*storagev1.StorageClass{fast}, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "fast", "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
			})}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: `0/3 nodes are available: persistentvolumeclaim "data" is being deleted. ` + preemptionUseless(3),
		},
		{
			name: "claim lost",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeName = "gone"
				c.Status.Phase = corev1.ClaimLost
			})}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: `0/3 nodes are available: persistentvolumeclaim "data" bound to non-existent persistentvolume "gone". ` + preemptionUseless(3),
		},
		{
			name:  "unbound claim of an Immediate class",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "slow", "1Gi")}, classes: []*storagev1.StorageClass{mkClass("slow", "csi.example.com", immediate)}},
			pod:   mkPod("p", "", "", withClaims("data")),
			want:  "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. " + preemptionUseless(3),
		},
		{
			name:  "unbound claim without a class",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi")}},
			pod:   mkPod("p", "", "", withClaims("data")),
			want:  "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. " + preemptionUseless(3),
		},
		{
			name:  "unbound claim of a class that does not exist",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "nope", "1Gi")}},
			pod:   mkPod("p", "", "", withClaims("data")),
			want:  "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. " + preemptionUseless(3),
		},
		{
			name: "a claim naming a volume but not yet bound by the PV controller",
			world: world{nodes: three, classes: []*storagev1.StorageClass{fast}, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "fast", "1Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeName = "pv1"
			})}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. " + preemptionUseless(3),
		},
		{
			name: "a bound volume's node affinity picks the node",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi", pinnedTo("n3"))}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n3",
		},
		{
			name: "a bound volume's node affinity excludes every node",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi", pinnedTo("n9"))}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "0/3 nodes are available: 3 node(s) had volume node affinity conflict. " + preemptionUseless(3),
		},
		{
			name:  "a bound volume that does not exist",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))}},
			pod:   mkPod("p", "", "", withClaims("data")),
			want:  "0/3 nodes are available: 3 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s). " + preemptionUseless(3),
		},
		{
			name: "wait for first consumer: the class's topology picks the zone",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "zonal", "1Gi")},
				classes: []*storagev1.StorageClass{mkClass("zonal", "csi.example.com", wffc, "b")}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n2",
		},
		{
			name: "wait for first consumer: no zone allowed",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "zonal", "1Gi")},
				classes: []*storagev1.StorageClass{mkClass("zonal", "csi.example.com", wffc, "z")}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. " + preemptionUseless(3),
		},
		{
			name: "wait for first consumer: a class that cannot provision needs a volume",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "local", "1Gi")},
				classes: []*storagev1.StorageClass{mkClass("local", noProvisioner, wffc)},
				volumes: []*corev1.PersistentVolume{mkPV("pv-n3", "local", "5Gi", pinnedTo("n3"))}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n3",
		},
		{
			name: "wait for first consumer: volumes that do not fit the claim",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "local", "2Gi")},
				classes: []*storagev1.StorageClass{mkClass("local", noProvisioner, wffc)},
				volumes: []*corev1.PersistentVolume{
					mkPV("small", "local", "1Gi"),
					mkPV("rox", "local", "5Gi", func(pv *corev1.PersistentVolume) {
						pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
					}),
					mkPV("block", "local", "5Gi", func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }),
					mkPV("released", "local", "5Gi", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased }),
					mkPV("taken", "local", "5Gi", claimRef("other", "uid-other")),
					mkPV("leaving", "local", "5Gi", func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }),
					mkPV("other-class", "fast", "5Gi"),
				}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind. " + preemptionUseless(3),
		},
		{
			name: "wait for first consumer: a claim already given a node",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "fast", "1Gi", selectedNode("n3"))},
				classes: []*storagev1.StorageClass{fast}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n3",
		},
		{
			name: "wait for first consumer: the given node cannot take the pod",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "fast", "1Gi", selectedNode("n3"))},
				classes: []*storagev1.StorageClass{fast}, pods: []*corev1.Pod{mkPod("hog", "4", "", onNode("n3"))}},
			pod:  mkPod("p", "1", "", withClaims("data")),
			want: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't find available persistent volumes to bind. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
		},
		{
			name: "wait for first consumer: a node given that is gone counts as none",
			world: world{nodes: three, claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "fast", "1Gi", selectedNode("gone"))},
				classes: []*storagev1.StorageClass{fast}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n1",
		},
		{
			name: "bound and unbound reasons add up",
			world: world{nodes: three,
				claims: []*corev1.PersistentVolumeClaim{
					mkClaim("bound", "", "1Gi", boundTo("pv1")),
					mkClaim("new", "zonal", "1Gi"),
				},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi", pinnedTo("n1", "n2"))},
				classes: []*storagev1.StorageClass{mkClass("zonal", "csi.example.com", wffc, "b")}},
			pod:  mkPod("p", "", "", withClaims("bound", "new")),
			want: "n2",
		},
		{
			name: "bound and unbound reasons on one node",
			world: world{nodes: three[:1],
				claims: []*corev1.PersistentVolumeClaim{
					mkClaim("bound", "", "1Gi", boundTo("pv1")),
					mkClaim("new", "zonal", "1Gi"),
				},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi", pinnedTo("n9"))},
				classes: []*storagev1.StorageClass{mkClass("zonal", "csi.example.com", wffc, "b")}},
			pod:  mkPod("p", "", "", withClaims("bound", "new")),
			want: "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 1 node(s) had volume node affinity conflict. " + preemptionUseless(1),
		},
		{
			name: "ReadWriteOncePod claim in use elsewhere",
			world: world{nodes: three,
				claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"), accessModes(corev1.ReadWriteOncePod))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi", func(pv *corev1.PersistentVolume) {
					pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
				})},
				pods: []*corev1.Pod{mkPod("holder", "", "", onNode("n2"), withClaims("data"))}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "0/3 nodes are available: 3 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.",
		},
		{
			name: "ReadWriteOncePod claim held by a higher-priority pod: evicting others does not help",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"), accessModes(corev1.ReadWriteOncePod))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods: []*corev1.Pod{
					mkPod("holder", "", "", onNode("n2"), withClaims("data"), func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](20) }),
					mkPod("low", "", "", onNode("n1")),
				}},
			pod:  mkPod("p", "", "", withClaims("data"), func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](10) }),
			want: "0/3 nodes are available: 3 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/3 nodes are available: 1 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode, 2 No preemption victims found for incoming pod.",
		},
		{
			name: "ReadWriteOncePod claim held by a lower-priority pod: evicting it would help",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"), accessModes(corev1.ReadWriteOncePod))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods:    []*corev1.Pod{mkPod("holder", "", "", onNode("n2"), withClaims("data"))}},
			pod:  mkPod("p", "", "", withClaims("data"), func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](10) }),
			want: "0/3 nodes are available: 3 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode.",
		},
		{
			name: "ReadWriteOnce claim in use: the pod joins its node",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods:    []*corev1.Pod{mkPod("holder", "", "", onNode("n3"), withClaims("data"))}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n3",
		},
		{
			name: "ReadWriteOnce claim in use on a node that cannot take the pod",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods:    []*corev1.Pod{mkPod("holder", "4", "", onNode("n3"), withClaims("data"))}},
			pod:  mkPod("p", "1", "", withClaims("data")),
			want: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't run the pods already using a ReadWriteOnce PersistentVolumeClaim of the pod. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
		},
		{
			name: "ReadWriteMany claims go anywhere",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"), accessModes(corev1.ReadWriteMany))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods:    []*corev1.Pod{mkPod("holder", "", "", onNode("n3"), withClaims("data"))}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n1",
		},
		{
			name: "a pod being deleted does not hold its ReadWriteOnce claim",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods: []*corev1.Pod{mkPod("holder", "", "", onNode("n3"), withClaims("data"), func(p *corev1.Pod) {
					p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				})}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n1",
		},
		{
			name: "a pod being deleted still holds its ReadWriteOncePod claim",
			world: world{nodes: three[:1],
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"), accessModes(corev1.ReadWriteOncePod))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods: []*corev1.Pod{mkPod("holder", "", "", onNode("n1"), withClaims("data"), func(p *corev1.Pod) {
					p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
				})}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "0/1 nodes are available: 1 node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		},
		{
			name: "a finished pod does not hold its ReadWriteOnce claim",
			world: world{nodes: three,
				claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
				volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
				pods: []*corev1.Pod{mkPod("holder", "", "", onNode("n3"), withClaims("data"), func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodSucceeded
				})}},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: "n1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Schedule(NewPodInfo(tc.pod), tc.world.snapshot())
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Schedule = %q\nwant       %q", got, tc.want)
			}
		})
	}
}

// NodeVolumeLimits counts distinct CSI volumes per driver against the
// CSINode's allocatable count.
func TestVolumeLimits(t *testing.T) {
	nodes := []*corev1.Node{mkNode("n1", "4", "8Gi")}
	fast := mkClass("fast", volume.BuiltinDriver, wffc)
	claims := []*corev1.PersistentVolumeClaim{
		mkClaim("a", "", "1Gi", boundTo("pv-a"), accessModes(corev1.ReadWriteMany)),
		mkClaim("b", "", "1Gi", boundTo("pv-b"), accessModes(corev1.ReadWriteMany)),
		mkClaim("new", "fast", "1Gi", accessModes(corev1.ReadWriteMany)),
		mkClaim("nfs", "", "1Gi", boundTo("pv-nfs"), accessModes(corev1.ReadWriteMany)),
	}
	volumes := []*corev1.PersistentVolume{
		mkPV("pv-a", "", "1Gi"), mkPV("pv-b", "", "1Gi"),
		mkPV("pv-nfs", "", "1Gi", func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI = nil
			pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "nfs", Path: "/x"}
		}),
	}
	holder := mkPod("holder", "", "", onNode("n1"), withClaims("a"))
	const full = "0/1 nodes are available: 1 node(s) exceed max volume count. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	cases := []struct {
		name  string
		limit int32 // -1: no CSINode
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  string
	}{
		{name: "no CSINode", limit: -1, pods: []*corev1.Pod{holder}, pod: mkPod("p", "", "", withClaims("b")), want: "n1"},
		{name: "room for one more", limit: 2, pods: []*corev1.Pod{holder}, pod: mkPod("p", "", "", withClaims("b")), want: "n1"},
		{name: "full", limit: 1, pods: []*corev1.Pod{holder}, pod: mkPod("p", "", "", withClaims("b")), want: full},
		{name: "the same volume counts once", limit: 1, pods: []*corev1.Pod{holder}, pod: mkPod("p", "", "", withClaims("a")), want: "n1"},
		{name: "an unbound claim counts for its class's driver", limit: 1, pods: []*corev1.Pod{holder}, pod: mkPod("p", "", "", withClaims("new")), want: full},
		{name: "a volume that is not CSI is not counted", limit: 1, pods: []*corev1.Pod{holder}, pod: mkPod("p", "", "", withClaims("nfs")), want: "n1"},
		{name: "two new volumes past the limit", limit: 1, pod: mkPod("p", "", "", withClaims("a", "b")), want: full},
		{name: "a limit of zero", limit: 0, pod: mkPod("p", "", "", withClaims("a")), want: full},
		{
			name: "evicting a lower-priority pod would make room", limit: 1, pods: []*corev1.Pod{holder},
			pod:  mkPod("p", "", "", withClaims("b"), func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](10) }),
			want: "0/1 nodes are available: 1 node(s) exceed max volume count.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := world{nodes: nodes, pods: tc.pods, claims: claims, volumes: volumes, classes: []*storagev1.StorageClass{fast}}
			if tc.limit >= 0 {
				w.csi = []*storagev1.CSINode{mkCSINode("n1", tc.limit)}
			}
			got, err := Schedule(NewPodInfo(tc.pod), w.snapshot())
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Schedule = %q\nwant       %q", got, tc.want)
			}
		})
	}
}

// planOf decides pod on snap and returns its node and plan, summarised.
func planOf(t *testing.T, snap *Snapshot, pod *corev1.Pod) (string, []string) {
	t.Helper()
	node, vols, err := schedule(NewPodInfo(pod), snap)
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	if vols == nil {
		return node, nil
	}
	p := vols.plan(snap.Node(node).Node)
	if p == nil {
		return node, nil
	}
	var out []string
	for _, b := range p.bindings {
		out = append(out, fmt.Sprintf("bind %s to %s write=%v", b.pv.Name, b.claim.Name, b.write))
	}
	for _, pr := range p.provisions {
		out = append(out, fmt.Sprintf("provision %s on %s write=%v", pr.claim.Name, pr.claim.Annotations[volume.AnnSelectedNode], pr.write))
	}
	return node, out
}

// The plan pre-binds the smallest matching volume, a volume pre-bound to
// the claim first, a distinct one per claim; claims without one are
// provisioned.
func TestVolumePlan(t *testing.T) {
	nodes := []*corev1.Node{mkNode("n1", "4", "8Gi", zone("a"))}
	local := mkClass("local", noProvisioner, wffc)
	fast := mkClass("fast", "csi.example.com", wffc)
	cases := []struct {
		name    string
		claims  []*corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		pod     *corev1.Pod
		want    []string
	}{
		{
			name:    "the smallest volume that fits",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "local", "2Gi")},
			volumes: []*corev1.PersistentVolume{mkPV("big", "local", "10Gi"), mkPV("mid", "local", "3Gi"), mkPV("tiny", "local", "1Gi")},
			pod:     mkPod("p", "", "", withClaims("data")),
			want:    []string{"bind mid to data write=true"},
		},
		{
			name:   "a volume pre-bound to the claim wins",
			claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "local", "2Gi")},
			volumes: []*corev1.PersistentVolume{mkPV("mid", "local", "3Gi"), mkPV("mine", "local", "10Gi", claimRef("data", ""), func(pv *corev1.PersistentVolume) {
				pv.Status.Phase = corev1.VolumePending
			})},
			pod:  mkPod("p", "", "", withClaims("data")),
			want: []string{"bind mine to data write=true"},
		},
		{
			name:    "a volume already bound to the claim's uid is not written again",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "local", "2Gi")},
			volumes: []*corev1.PersistentVolume{mkPV("mine", "local", "3Gi", claimRef("data", "uid-data"))},
			pod:     mkPod("p", "", "", withClaims("data")),
			want:    []string{"bind mine to data write=false"},
		},
		{
			name:    "two claims, two volumes, smaller claim first",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("big", "local", "5Gi"), mkClaim("small", "local", "1Gi")},
			volumes: []*corev1.PersistentVolume{mkPV("v1", "local", "1Gi"), mkPV("v5", "local", "5Gi")},
			pod:     mkPod("p", "", "", withClaims("big", "small")),
			want:    []string{"bind v1 to small write=true", "bind v5 to big write=true"},
		},
		{
			name:    "no volume left for the second claim: provision it",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("a", "fast", "1Gi"), mkClaim("b", "fast", "1Gi")},
			volumes: []*corev1.PersistentVolume{mkPV("v1", "fast", "1Gi")},
			pod:     mkPod("p", "", "", withClaims("a", "b")),
			want:    []string{"bind v1 to a write=true", "provision b on n1 write=true"},
		},
		{
			name:   "a claim given this node already is not written again",
			claims: []*corev1.PersistentVolumeClaim{mkClaim("data", "fast", "1Gi", selectedNode("n1"))},
			pod:    mkPod("p", "", "", withClaims("data")),
			want:   []string{"provision data on n1 write=false"},
		},
		{
			name:    "bound claims need nothing",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("data", "", "1Gi", boundTo("pv1"))},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "", "1Gi")},
			pod:     mkPod("p", "", "", withClaims("data")),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := world{nodes: nodes, claims: tc.claims, volumes: tc.volumes, classes: []*storagev1.StorageClass{local, fast}}
			node, got := planOf(t, w.snapshot(), tc.pod)
			if node != "n1" {
				t.Fatalf("node %q, want n1", node)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// An assumed plan is what the next decision sees: the volume is taken,
// the claim has its node.
func TestVolumePlanAssumed(t *testing.T) {
	w := world{
		nodes:   []*corev1.Node{mkNode("n1", "4", "8Gi"), mkNode("n2", "4", "8Gi")},
		claims:  []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi"), mkClaim("b", "local", "1Gi"), mkClaim("c", "fast", "1Gi")},
		volumes: []*corev1.PersistentVolume{mkPV("only", "local", "1Gi")},
		classes: []*storagev1.StorageClass{mkClass("local", noProvisioner, wffc), mkClass("fast", "csi.example.com", wffc)},
	}
	snap := w.snapshot()
	first := NewPodInfo(mkPod("first", "", "", withClaims("a", "c")))
	node, vols, err := schedule(first, snap)
	if err != nil {
		t.Fatal(err)
	}
	p := vols.plan(snap.Node(node).Node)
	snap.assumeVolume(p.bindings[0].pv)
	snap.assumeClaim(p.provisions[0].claim)
	snap.Assume(first, node)
	if ref := snap.Volume("only").Spec.ClaimRef; ref == nil || ref.Name != "a" || ref.UID != "uid-a" {
		t.Fatalf("assumed claimRef %+v, want default/a", ref)
	}

	// b finds no volume: "only" is taken.
	_, err = Schedule(NewPodInfo(mkPod("second", "", "", withClaims("b"))), snap)
	want := "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. " + preemptionUseless(2)
	if err == nil || err.Error() != want {
		t.Errorf("second: %v, want %q", err, want)
	}
	// c was given the first pod's node.
	if got, err := Schedule(NewPodInfo(mkPod("third", "", "", withClaims("c"))), snap); err != nil || got != node {
		t.Errorf("third on %q (%v), want %q", got, err, node)
	}
	// Restoring gives the volume back.
	snap.restore(p)
	snap.RemovePod(first.Key)
	if got, err := Schedule(NewPodInfo(mkPod("second", "", "", withClaims("b"))), snap); err != nil || got == "" {
		t.Errorf("second after restore: %q, %v", got, err)
	}
	// A newer version from the informer replaces an assumption.
	snap.assumeClaim(p.provisions[0].claim)
	snap.SetClaim(mkClaim("c", "fast", "1Gi"))
	if c := snap.Claim(types.NamespacedName{Namespace: "default", Name: "c"}); c.Annotations[volume.AnnSelectedNode] != "" {
		t.Errorf("the informer's version did not replace the assumption: %v", c.Annotations)
	}
}

// bound follows a written plan through the informer's versions.
func TestPlanBound(t *testing.T) {
	node := mkNode("n1", "4", "8Gi", zone("a"))
	const written = "20"
	plan := func() *volumePlan {
		return &volumePlan{
			node:       "n1",
			bindings:   []planBinding{{pv: mkPV("pv1", "local", "1Gi", claimRef("a", "uid-a")), claim: types.NamespacedName{Namespace: "default", Name: "a"}, write: true, rv: written}},
			provisions: []planProvision{{claim: mkClaim("b", "fast", "1Gi", selectedNode("n1")), write: true, rv: written}},
			written:    true,
		}
	}
	at := func(rv string) func(*corev1.PersistentVolume) {
		return func(pv *corev1.PersistentVolume) { pv.ResourceVersion = rv }
	}
	claimAt := func(rv string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.ResourceVersion = rv }
	}
	cases := []struct {
		name    string
		claims  []*corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		done    bool
		err     string
	}{
		{
			name:    "the informer has not caught up",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi"), mkClaim("b", "fast", "1Gi", claimAt("5"))},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at("5"))},
		},
		{
			name:    "written, not yet bound",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi"), mkClaim("b", "fast", "1Gi", claimAt(written), selectedNode("n1"))},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at(written), claimRef("a", "uid-a"))},
		},
		{
			name: "all bound",
			claims: []*corev1.PersistentVolumeClaim{
				mkClaim("a", "local", "1Gi", boundTo("pv1"), claimAt("30")),
				mkClaim("b", "fast", "1Gi", claimAt("31"), selectedNode("n1"), boundTo("pv2")),
			},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at("30"), claimRef("a", "uid-a")), mkPV("pv2", "fast", "1Gi", at("31"))},
			done:    true,
		},
		{
			name: "the provisioned volume is not seen yet",
			claims: []*corev1.PersistentVolumeClaim{
				mkClaim("a", "local", "1Gi", boundTo("pv1"), claimAt("30")),
				mkClaim("b", "fast", "1Gi", claimAt("31"), selectedNode("n1"), boundTo("pv2")),
			},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at("30"), claimRef("a", "uid-a"))},
		},
		{
			name:    "the claimRef was reset",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi"), mkClaim("b", "fast", "1Gi", claimAt(written), selectedNode("n1"))},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at("30"))},
			err:     `running PreBind plugin "VolumeBinding": binding volumes: ClaimRef got reset for pv "pv1"`,
		},
		{
			name: "the provisioner gave the claim up",
			claims: []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi", boundTo("pv1")), mkClaim("b", "fast", "1Gi", claimAt("30"), func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{"other": "x"}
			})},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at(written), claimRef("a", "uid-a"))},
			err:     `running PreBind plugin "VolumeBinding": binding volumes: provisioning failed for PVC "b"`,
		},
		{
			name:    "the provisioned volume does not fit the node",
			claims:  []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi", boundTo("pv1")), mkClaim("b", "fast", "1Gi", claimAt("31"), selectedNode("n1"), boundTo("pv2"))},
			volumes: []*corev1.PersistentVolume{mkPV("pv1", "local", "1Gi", at(written), claimRef("a", "uid-a")), mkPV("pv2", "fast", "1Gi", pinnedTo("n2"))},
			err:     `running PreBind plugin "VolumeBinding": binding volumes: pv "pv2" node affinity doesn't match node "n1": no matching NodeSelectorTerms`,
		},
		{
			name:   "the claim is gone",
			claims: []*corev1.PersistentVolumeClaim{mkClaim("a", "local", "1Gi", boundTo("pv1"))},
			volumes: []*corev1.PersistentVolume{
				mkPV("pv1", "local", "1Gi", at(written), claimRef("a", "uid-a")),
			},
			err: `running PreBind plugin "VolumeBinding": binding volumes: failed to check provisioning pvc: persistentvolumeclaim "b" not found`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := world{nodes: []*corev1.Node{node}, claims: tc.claims, volumes: tc.volumes}.snapshot()
			done, err := snap.bound(plan())
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if done != tc.done || gotErr != tc.err {
				t.Errorf("bound = %v, %q; want %v, %q", done, gotErr, tc.done, tc.err)
			}
		})
	}
}

func TestTopologyAllows(t *testing.T) {
	term := func(kv ...string) corev1.TopologySelectorTerm {
		var t corev1.TopologySelectorTerm
		for i := 0; i < len(kv); i += 2 {
			t.MatchLabelExpressions = append(t.MatchLabelExpressions, corev1.TopologySelectorLabelRequirement{Key: kv[i], Values: []string{kv[i+1]}})
		}
		return t
	}
	labels := map[string]string{"zone": "a", "rack": "1"}
	cases := []struct {
		name  string
		terms []corev1.TopologySelectorTerm
		want  bool
	}{
		{name: "no terms", want: true},
		{name: "a matching term", terms: []corev1.TopologySelectorTerm{term("zone", "a")}, want: true},
		{name: "every expression of a term", terms: []corev1.TopologySelectorTerm{term("zone", "a", "rack", "2")}},
		{name: "terms are ORed", terms: []corev1.TopologySelectorTerm{term("zone", "b"), term("rack", "1")}, want: true},
		{name: "an empty term matches nothing", terms: []corev1.TopologySelectorTerm{{}}},
		{name: "a missing label", terms: []corev1.TopologySelectorTerm{term("region", "x")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := topologyAllows(tc.terms, labels); got != tc.want {
				t.Errorf("topologyAllows = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVolumeAffinity(t *testing.T) {
	pv := func(terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
		return mkPV("pv", "", "1Gi", func(pv *corev1.PersistentVolume) {
			pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
		})
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	labels := map[string]string{"zone": "a"}
	cases := []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{name: "no affinity", pv: mkPV("pv", "", "1Gi"), want: true},
		{name: "no required part", pv: mkPV("pv", "", "1Gi", func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{} }), want: true},
		{name: "In", pv: pv(expr("zone", corev1.NodeSelectorOpIn, "a", "b")), want: true},
		{name: "NotIn", pv: pv(expr("zone", corev1.NodeSelectorOpNotIn, "a"))},
		{name: "an invalid term does not spoil a valid one", pv: pv(expr("zone", "Bogus"), expr("zone", corev1.NodeSelectorOpExists)), want: true},
		{name: "no terms", pv: pv()},
		{name: "fields are matched without the node's name", pv: pv(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newVolumeAffinity(tc.pv)
			if got := a.matches(labels); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

// A pod without claims costs the volume filters nothing: no state is
// built, even with volumes and limits around.
func TestNoClaimsSkipsVolumeFilters(t *testing.T) {
	w := world{nodes: []*corev1.Node{mkNode("n1", "4", "8Gi")}, csi: []*storagev1.CSINode{mkCSINode("n1", 0)}}
	pi := NewPodInfo(mkPod("p", "", "", func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}))
	if pi.claims != nil {
		t.Fatalf("claims %v, want nil", pi.claims)
	}
	node, vols, err := schedule(pi, w.snapshot())
	if err != nil || node != "n1" || vols != nil {
		t.Errorf("schedule = %q, %v, %v; want n1 without volume state", node, vols, err)
	}
	if n := testing.AllocsPerRun(100, func() { podClaims(pi.Pod) }); n != 0 {
		t.Errorf("podClaims allocates %v times for a pod without claims", n)
	}
}

// BenchmarkScheduleVolumes places 1,000 pods over 1,000 nodes in three
// zones, each pod with a claim of its own to provision (WaitForFirstConsumer,
// the class allowing two zones) and a bound claim of a volume pinned to one
// zone, with a CSINode limit on every node: the volume filters' cost per
// decision. It reports pods/s; compare with BenchmarkSchedule1000x1000/core.
func BenchmarkScheduleVolumes(b *testing.B) {
	const n = 1000
	zones := []string{"a", "b", "c"}
	w := world{classes: []*storagev1.StorageClass{mkClass("zonal", volume.BuiltinDriver, wffc, "a", "b")}}
	for i := range n {
		name := fmt.Sprintf("node-%04d", i)
		w.nodes = append(w.nodes, mkNode(name, "4", "16Gi", zone(zones[i%3])))
		w.csi = append(w.csi, mkCSINode(name, 64))
	}
	w.volumes = append(w.volumes, mkPV("shared", "", "1Gi", func(pv *corev1.PersistentVolume) {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}},
		}}}}
	}))
	w.claims = append(w.claims, mkClaim("shared", "", "1Gi", boundTo("shared"), accessModes(corev1.ReadOnlyMany)))
	pods := make([]*PodInfo, n)
	for i := range pods {
		claim := fmt.Sprintf("data-%04d", i)
		w.claims = append(w.claims, mkClaim(claim, "zonal", "1Gi"))
		pods[i] = NewPodInfo(mkPod(fmt.Sprintf("p-%04d", i), "100m", "128Mi", withClaims(claim, "shared")))
	}
	for range b.N {
		b.StopTimer()
		snap := w.snapshot()
		b.StartTimer()
		for _, pi := range pods {
			node, vols, err := schedule(pi, snap)
			if err != nil {
				b.Fatal(err)
			}
			p := vols.plan(snap.Node(node).Node)
			for _, pr := range p.provisions {
				snap.assumeClaim(pr.claim)
			}
			snap.Assume(pi, node)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "pods/s")
}
