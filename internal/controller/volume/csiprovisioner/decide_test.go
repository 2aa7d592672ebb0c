package csiprovisioner

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/volume"
)

const driver = "hostpath.csi.knode.io"

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fullCaps is what the built-in driver offers.
var fullCaps = Caps{ControllerService: true, CreateDelete: true, Topology: true, PublishUnpublish: true}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func testClaim(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "data", Namespace: "ns", UID: "uid-1", ResourceVersion: "7",
			Annotations: map[string]string{volume.AnnStorageProvisioner: driver},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fast"),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func testClass(mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "fast"},
		Provisioner:       driver,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	for _, m := range mutate {
		m(sc)
	}
	return sc
}

func wffc(sc *storagev1.StorageClass) {
	sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
}

func selected(node string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Annotations[volume.AnnSelectedNode] = node }
}

func TestShouldProvision(t *testing.T) {
	tests := []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		class   *storagev1.StorageClass
		want    bool
		wantErr string
	}{
		{"immediate", testClaim(), testClass(), true, ""},
		{"beta annotation", testClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{volume.AnnBetaStorageProvisioner: driver}
		}), testClass(), true, ""},
		{"the new annotation wins over the beta one", testClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{volume.AnnStorageProvisioner: "other", volume.AnnBetaStorageProvisioner: driver}
		}), testClass(), false, ""},
		{"another provisioner", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations[volume.AnnStorageProvisioner] = "other" }), testClass(), false, ""},
		{"not annotated", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations = nil }), testClass(), false, ""},
		{"bound", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv" }), testClass(), false, ""},
		{"being deleted", testClaim(func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &metav1.Time{Time: now} }), testClass(), false, ""},
		{"WaitForFirstConsumer without a node", testClaim(), testClass(wffc), false, ""},
		{"WaitForFirstConsumer with an empty node", testClaim(selected("")), testClass(wffc), false, ""},
		{"WaitForFirstConsumer with a node", testClaim(selected("n1")), testClass(wffc), true, ""},
		{"class missing", testClaim(), nil, false, `storageClass "fast" not found`},
		{"class missing, not ours", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations = nil }), nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ShouldProvision(driver, tt.claim, tt.class)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("ShouldProvision = %v, %q; want %v, %q", got, errString(err), tt.want, tt.wantErr)
			}
		})
	}
}

func TestPopulated(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		want   bool
	}{
		{"no source", func(*corev1.PersistentVolumeClaim) {}, false},
		{"snapshot", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", APIGroup: ptr.To("snapshot.storage.k8s.io"), Name: "s"}
		}, false},
		{"clone", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "p"}
		}, false},
		{"populator by dataSourceRef", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "Fill", APIGroup: ptr.To("example.com"), Name: "f"}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Populated(testClaim(tt.mutate)); got != tt.want {
				t.Errorf("Populated = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFSType(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		def     string
		want    string
		wantErr string
	}{
		{"none", nil, "", "", ""},
		{"default", nil, "ext4", "ext4", ""},
		{"prefixed", map[string]string{ParamFSType: "xfs"}, "ext4", "xfs", ""},
		{"deprecated key, any case", map[string]string{"FsType": "btrfs"}, "", "btrfs", ""},
		{"both", map[string]string{"fstype": "a", ParamFSType: "b"}, "", "", `fstype specified in parameters with both "fstype" and "csi.storage.k8s.io/fstype" keys`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FSType(tt.params, tt.def)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("FSType = %q, %q; want %q, %q", got, errString(err), tt.want, tt.wantErr)
			}
		})
	}
}

func TestParameters(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]string
		want    map[string]string
		wantErr string
	}{
		{"nil gives empty", nil, map[string]string{}, ""},
		{"known reserved keys are stripped, others kept", map[string]string{
			ParamFSType: "xfs", ParameterPrefix + "provisioner-secret-name": "s", ParameterPrefix + "node-stage-secret-namespace": "ns",
			"fstype": "ext4", "csiProvisionerSecretName": "old", "tier": "gold",
		}, map[string]string{"fstype": "ext4", "csiProvisionerSecretName": "old", "tier": "gold"}, ""},
		{"unknown reserved key", map[string]string{ParameterPrefix + "pvc/name": "x", "tier": "gold"}, map[string]string{},
			`found unknown parameter key "csi.storage.k8s.io/pvc/name" with reserved namespace csi.storage.k8s.io/`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parameters(tt.params)
			if errString(err) != tt.wantErr {
				t.Errorf("error %q, want %q", errString(err), tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parameters (-want +got):\n%s", diff)
			}
		})
	}
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode, fs string, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func topoNode(name, zone string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.hostpath.csi.knode.io/node": name, "zone": zone}}}
}

func topoCSINode(name string, keys ...string) storagev1.CSINode {
	return storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: driver, NodeID: name, TopologyKeys: keys}}}}
}

const nodeKey = "topology.hostpath.csi.knode.io/node"

func TestPrepare(t *testing.T) {
	base := func() Input {
		return Input{
			Driver: driver, Claim: testClaim(), Caps: Caps{ControllerService: true, CreateDelete: true},
			Class: testClass(func(sc *storagev1.StorageClass) {
				sc.Parameters = map[string]string{ParamFSType: "xfs", "tier": "gold"}
				sc.MountOptions = []string{"noatime"}
			}),
		}
	}
	tests := []struct {
		name       string
		mutate     func(*Input)
		want       Prepared
		reschedule bool
		wantErr    string
	}{
		{
			name:   "immediate without topology",
			mutate: func(*Input) {},
			want: Prepared{FSType: "xfs", Request: &csi.CreateVolumeRequest{
				Name:               "pvc-uid-1",
				CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30},
				Parameters:         map[string]string{"tier": "gold"},
				VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "xfs", "noatime")},
			}},
		},
		{
			name: "one capability per access mode, block, extra metadata, default fsType",
			mutate: func(in *Input) {
				in.Claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany}
				in.Claim.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
				in.Class.Parameters = nil
				in.DefaultFSType = "ext4"
				in.ExtraCreateMetadata = true
				in.Caps.SingleNodeMultiWriter = true
			},
			want: Prepared{FSType: "ext4", Request: &csi.CreateVolumeRequest{
				Name:          "pvc-uid-1",
				CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
				Parameters:    map[string]string{ParamPVCName: "data", ParamPVCNamespace: "ns", ParamPVName: "pvc-uid-1"},
				VolumeCapabilities: []*csi.VolumeCapability{
					{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}},
					{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}},
				},
			}},
		},
		{
			name: "topology of the selected node",
			mutate: func(in *Input) {
				in.Caps.Topology = true
				in.Claim = testClaim(selected("n2"))
				in.Class.Parameters = nil
				in.CSINodes = []storagev1.CSINode{topoCSINode("n1", nodeKey), topoCSINode("n2", nodeKey)}
				in.Nodes = []corev1.Node{topoNode("n1", "a"), topoNode("n2", "a")}
			},
			want: Prepared{Request: &csi.CreateVolumeRequest{
				Name:               "pvc-uid-1",
				CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30},
				Parameters:         map[string]string{},
				VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "", "noatime")},
				AccessibilityRequirements: &csi.TopologyRequirement{
					Requisite: []*csi.Topology{{Segments: map[string]string{nodeKey: "n1"}}, {Segments: map[string]string{nodeKey: "n2"}}},
					Preferred: []*csi.Topology{{Segments: map[string]string{nodeKey: "n2"}}, {Segments: map[string]string{nodeKey: "n1"}}},
				},
			}},
		},
		{
			name: "selected node without CSINode: reschedule",
			mutate: func(in *Input) {
				in.Caps.Topology = true
				in.Claim = testClaim(selected("gone"))
			},
			reschedule: true,
			wantErr:    `failed to get selected CSINode gone: csinode.storage.k8s.io "gone" not found`,
		},
		{
			name: "selected node without topology keys",
			mutate: func(in *Input) {
				in.Caps.Topology = true
				in.Claim = testClaim(selected("n1"))
				in.CSINodes = []storagev1.CSINode{topoCSINode("n1")}
			},
			wantErr: "error generating accessibility requirements: no topology key found for node n1",
		},
		{
			name:    "no controller service",
			mutate:  func(in *Input) { in.Caps.ControllerService = false },
			wantErr: "CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported",
		},
		{
			name:    "no CREATE_DELETE_VOLUME",
			mutate:  func(in *Input) { in.Caps.CreateDelete = false },
			wantErr: "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported",
		},
		{
			name: "clone without CLONE_VOLUME",
			mutate: func(in *Input) {
				in.Claim.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
			},
			wantErr: "CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported",
		},
		{
			name: "snapshot of the wrong group",
			mutate: func(in *Input) {
				in.Claim.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", APIGroup: ptr.To("example.com"), Name: "s"}
			},
			wantErr: "the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got example.com",
		},
		{
			name:    "attributes class without MODIFY_VOLUME",
			mutate:  func(in *Input) { in.Claim.Spec.VolumeAttributesClassName = ptr.To("gold") },
			wantErr: "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported",
		},
		{
			name:    "selector",
			mutate:  func(in *Input) { in.Claim.Spec.Selector = &metav1.LabelSelector{} },
			wantErr: "claim Selector is not supported",
		},
		{
			name:    "unknown reserved parameter",
			mutate:  func(in *Input) { in.Class.Parameters[ParameterPrefix+"bogus"] = "1" },
			wantErr: `failed to strip CSI Parameters of prefixed keys: found unknown parameter key "csi.storage.k8s.io/bogus" with reserved namespace csi.storage.k8s.io/`,
		},
		{
			name:    "bad access modes",
			mutate:  func(in *Input) { in.Claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"Sometimes"} },
			wantErr: "unsupported AccessMode combination: [Sometimes]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.mutate(&in)
			got, reschedule, err := Prepare(in)
			if errString(err) != tt.wantErr || reschedule != tt.reschedule {
				t.Fatalf("error %q, reschedule %v; want %q, %v", errString(err), reschedule, tt.wantErr, tt.reschedule)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("prepared (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	tests := []struct {
		name                string
		requested, returned int64
		want                int64
		wantErr             string
	}{
		{"unknown means requested", 100, 0, 100, ""},
		{"exactly", 100, 100, 100, ""},
		{"more", 100, 150, 150, ""},
		{"less", 100, 99, 0, "created volume capacity 99 less than requested capacity 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Capacity(tt.requested, tt.returned)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("Capacity = %d, %q; want %d, %q", got, errString(err), tt.want, tt.wantErr)
			}
		})
	}
}

func TestNewPV(t *testing.T) {
	in := Input{
		Driver: driver, Caps: fullCaps,
		Claim: testClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}),
		Class: testClass(func(sc *storagev1.StorageClass) { sc.MountOptions = []string{"noatime"} }),
	}
	vol := &csi.Volume{
		VolumeId: "vol-1", CapacityBytes: 2 << 30,
		VolumeContext:      map[string]string{"path": "/data/vol-1"},
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{nodeKey: "n1", "zone": "a"}}},
	}
	got := NewPV(in, Prepared{FSType: "xfs"}, vol, 2<<30, "123-45-"+driver)
	want := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pvc-uid-1",
			Annotations: map[string]string{
				volume.AnnDynamicallyProvisioned: driver, AnnDeletionSecretName: "", AnnDeletionSecretNamespace: "",
			},
			Finalizers: []string{volume.ProvisionerDeletionFinalizer},
		},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:  []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			MountOptions: []string{"noatime"},
			Capacity:     corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: "vol-1", FSType: "xfs",
				VolumeAttributes: map[string]string{AttrProvisionerIdentity: "123-45-" + driver, "path": "/data/vol-1"},
			}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "data", UID: "uid-1", ResourceVersion: "7"},
			StorageClassName:              "fast",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: nodeKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}},
					{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
				},
			}}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PV (-want +got):\n%s", diff)
	}
	if got.Spec.Capacity.Storage().String() != "2Gi" {
		t.Errorf("capacity %s, want 2Gi in binary SI", got.Spec.Capacity.Storage())
	}

	// Block volumes get no fsType; drivers without topology no affinity;
	// a class without reclaim policy leaves the PV's to the API default.
	in.Claim.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	in.Caps.Topology = false
	in.Class.ReclaimPolicy = nil
	got = NewPV(in, Prepared{FSType: "xfs"}, vol, 2<<30, "id")
	if got.Spec.CSI.FSType != "" || got.Spec.NodeAffinity != nil || got.Spec.PersistentVolumeReclaimPolicy != "" {
		t.Errorf("block PV without topology: fsType %q, affinity %v, reclaim %q; want none", got.Spec.CSI.FSType, got.Spec.NodeAffinity, got.Spec.PersistentVolumeReclaimPolicy)
	}
}

func testPV(mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-1", Annotations: map[string]string{volume.AnnDynamicallyProvisioned: driver},
			Finalizers: []string{volume.PVProtectionFinalizer, volume.ProvisionerDeletionFinalizer}},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1"}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

func phase(p corev1.PersistentVolumePhase) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Status.Phase = p }
}

func reclaim(p corev1.PersistentVolumeReclaimPolicy) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = p }
}

func noFinalizer(pv *corev1.PersistentVolume) { pv.Finalizers = []string{volume.PVProtectionFinalizer} }

func deleting(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{Time: now} }

func TestResponsible(t *testing.T) {
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"provisioned by the driver", testPV(), true},
		{"provisioned by another", testPV(func(pv *corev1.PersistentVolume) { pv.Annotations[volume.AnnDynamicallyProvisioned] = "other" }), false},
		{"static CSI volume of the driver", testPV(func(pv *corev1.PersistentVolume) { pv.Annotations = nil }), true},
		{"static CSI volume of another driver", testPV(func(pv *corev1.PersistentVolume) { pv.Annotations = nil; pv.Spec.CSI.Driver = "other" }), false},
		{"static, not CSI", testPV(func(pv *corev1.PersistentVolume) { pv.Annotations = nil; pv.Spec.CSI = nil }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Responsible(driver, tt.pv); got != tt.want {
				t.Errorf("Responsible = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFinalizers(t *testing.T) {
	with := []string{volume.PVProtectionFinalizer, volume.ProvisionerDeletionFinalizer}
	without := []string{volume.PVProtectionFinalizer}
	tests := []struct {
		name    string
		pv      *corev1.PersistentVolume
		want    []string
		changed bool
	}{
		{"bound, Delete, has it", testPV(), with, false},
		{"bound, Delete, lacks it", testPV(noFinalizer), with, true},
		{"pending, Delete, lacks it", testPV(noFinalizer, phase(corev1.VolumePending)), without, false},
		{"released, Delete, lacks it", testPV(noFinalizer, phase(corev1.VolumeReleased)), without, false},
		{"bound, Delete, being deleted, lacks it", testPV(noFinalizer, deleting), without, false},
		{"Retain drops it", testPV(reclaim(corev1.PersistentVolumeReclaimRetain)), without, true},
		{"Recycle drops it", testPV(reclaim(corev1.PersistentVolumeReclaimRecycle), phase(corev1.VolumeReleased)), without, true},
		{"Retain drops it to nil", testPV(reclaim(corev1.PersistentVolumeReclaimRetain), func(pv *corev1.PersistentVolume) {
			pv.Finalizers = []string{volume.ProvisionerDeletionFinalizer}
		}), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]string(nil), tt.pv.Finalizers...)
			got, changed := Finalizers(tt.pv)
			if diff := cmp.Diff(tt.want, got); changed != tt.changed || diff != "" {
				t.Errorf("changed %v (want %v), finalizers (-want +got):\n%s", changed, tt.changed, diff)
			}
			if diff := cmp.Diff(before, tt.pv.Finalizers); diff != "" {
				t.Errorf("Finalizers changed its argument (-before +after):\n%s", diff)
			}
		})
	}
}

func TestShouldDelete(t *testing.T) {
	released := phase(corev1.VolumeReleased)
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"released, Delete", testPV(released), true},
		{"released, Delete, being deleted with the finalizer", testPV(released, deleting), true},
		{"released, Delete, being deleted without the finalizer", testPV(released, deleting, noFinalizer), false},
		{"released, Delete, not deleted, without the finalizer", testPV(released, noFinalizer), true},
		{"released, Retain", testPV(released, reclaim(corev1.PersistentVolumeReclaimRetain)), false},
		{"bound", testPV(), false},
		{"failed", testPV(phase(corev1.VolumeFailed)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShouldDelete(tt.pv); got != tt.want {
				t.Errorf("ShouldDelete = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeleteRequest(t *testing.T) {
	va := storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pvc-uid-1")}}}
	other := storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("else")}}}
	tests := []struct {
		name    string
		pv      *corev1.PersistentVolume
		caps    Caps
		vas     []storagev1.VolumeAttachment
		want    *csi.DeleteVolumeRequest
		wantErr string
	}{
		{"delete", testPV(), fullCaps, []storagev1.VolumeAttachment{other}, &csi.DeleteVolumeRequest{VolumeId: "vol-1"}, ""},
		{"still attached", testPV(), fullCaps, []storagev1.VolumeAttachment{other, va}, nil, "persistentvolume pvc-uid-1 is still attached to node n1"},
		{"attachments do not matter to a driver that does not attach", testPV(), Caps{ControllerService: true, CreateDelete: true}, []storagev1.VolumeAttachment{va}, &csi.DeleteVolumeRequest{VolumeId: "vol-1"}, ""},
		{"not CSI", testPV(func(pv *corev1.PersistentVolume) { pv.Spec.CSI = nil }), fullCaps, nil, nil, "invalid CSI PV"},
		{"cannot delete", testPV(), Caps{ControllerService: true}, nil, nil, "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DeleteRequest(tt.pv, tt.caps, tt.vas)
			if errString(err) != tt.wantErr {
				t.Errorf("error %q, want %q", errString(err), tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapsOf(t *testing.T) {
	plugin := &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}},
		{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}}},
	}}
	rpc := func(ty csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: ty}}}
	}
	ctrl := &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		rpc(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME), rpc(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
	}}
	if got := CapsOf(plugin, ctrl); got != fullCaps {
		t.Errorf("CapsOf = %+v, want %+v", got, fullCaps)
	}
	if got := CapsOf(nil, nil); got != (Caps{}) {
		t.Errorf("CapsOf(nil, nil) = %+v", got)
	}
}
