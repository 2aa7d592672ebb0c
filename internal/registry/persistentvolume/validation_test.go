package persistentvolume

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Upstream messages produced by apimachinery helpers, spelled out so a
// change in which helper runs shows up here.
const (
	msgSubdomain  = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	msgLabel      = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	msgLabelValue = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// newPV is a defaulted, valid CSI volume changed by each mutate.
func newPV(mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1234"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: "hostpath.csi.knode.io", VolumeHandle: "vol-1"},
			},
			StorageClassName: "standard",
		},
	}
	Default(pv)
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

// withSource replaces the volume source.
func withSource(s corev1.PersistentVolumeSource) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeSource = s }
}

func nodeAffinity(terms ...corev1.NodeSelectorTerm) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

func hostTerm(values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: values},
	}}
}

func TestValidate(t *testing.T) {
	local := corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/a"}}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want []string
	}{
		// Valid volumes.
		{name: "csi", pv: newPV()},
		{name: "csi with secrets", pv: newPV(func(pv *corev1.PersistentVolume) {
			ref := &corev1.SecretReference{Name: "s", Namespace: "kube-system"}
			pv.Spec.CSI.ControllerPublishSecretRef, pv.Spec.CSI.NodeStageSecretRef = ref, ref
			pv.Spec.CSI.NodePublishSecretRef, pv.Spec.CSI.ControllerExpandSecretRef, pv.Spec.CSI.NodeExpandSecretRef = ref, ref, ref
		})},
		{name: "hostPath", pv: newPV(withSource(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/a", Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}))},
		{name: "nfs", pv: newPV(withSource(corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports"}}))},
		{name: "local with node affinity", pv: newPV(withSource(local), func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nodeAffinity(hostTerm("node-1")) })},
		{name: "in-tree source, fields not checked", pv: newPV(withSource(corev1.PersistentVolumeSource{ISCSI: &corev1.ISCSIPersistentVolumeSource{}}))},
		{name: "flexVolume after another source is counted, not refused", pv: newPV(
			withSource(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}),
			func(pv *corev1.PersistentVolume) {
				pv.Spec.FlexVolume = &corev1.FlexPersistentVolumeSource{Driver: "x"}
			},
		)},
		{name: "ReadWriteOncePod alone", pv: newPV(func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		})},
		{name: "all other modes, Block, Delete", pv: newPV(func(pv *corev1.PersistentVolume) {
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany}
			pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		})},
		{name: "bound claimRef", pv: newPV(func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data", UID: "u"}
		})},
		{name: "nfs takes mount options annotation", pv: newPV(
			withSource(corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}),
			func(pv *corev1.PersistentVolume) { pv.Annotations = map[string]string{AnnMountOptions: "hard"} },
		)},
		{name: "node affinity with every operator", pv: newPV(func(pv *corev1.PersistentVolume) {
			pv.Spec.NodeAffinity = nodeAffinity(corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "a", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"x"}},
					{Key: "b", Operator: corev1.NodeSelectorOpExists},
					{Key: "c", Operator: corev1.NodeSelectorOpDoesNotExist},
					{Key: "d", Operator: corev1.NodeSelectorOpGt, Values: []string{"1"}},
					{Key: "e", Operator: corev1.NodeSelectorOpLt, Values: []string{"9"}},
				},
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
			})
		})},

		// Access modes.
		{
			name: "no access modes",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil }),
			want: []string{"spec.accessModes|Required value|"},
		},
		{
			name: "unknown access mode",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteSometimes"}
			}),
			want: []string{`spec.accessModes|Unsupported value|supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`},
		},
		{
			name: "ReadWriteOncePod with another mode",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadOnlyMany}
			}),
			want: []string{"spec.accessModes|Forbidden|may not use ReadWriteOncePod with other access modes"},
		},

		// Capacity.
		{
			name: "no capacity",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil }),
			want: []string{"spec.capacity|Required value|", `spec.capacity|Unsupported value|supported values: "storage"`},
		},
		{
			name: "capacity with another resource",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceCPU] = qty("1") }),
			want: []string{`spec.capacity|Unsupported value|supported values: "storage"`},
		},
		{
			name: "zero capacity",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceStorage] = qty("0") }),
			want: []string{"spec.capacity[storage]|Invalid value|must be greater than zero"},
		},
		{
			name: "negative capacity",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.Capacity[corev1.ResourceStorage] = qty("-1Gi") }),
			want: []string{
				"spec.capacity[storage]|Invalid value|must be a valid resource quantity",
				"spec.capacity[storage]|Invalid value|must be greater than zero",
			},
		},

		// Reclaim policy, class, mode.
		{
			name: "unknown reclaim policy",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Keep" }),
			want: []string{`spec.persistentVolumeReclaimPolicy|Unsupported value|supported values: "Delete", "Recycle", "Retain"`},
		},
		{
			name: "Recycle of a hostPath at /",
			pv: newPV(withSource(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/.."}}), func(pv *corev1.PersistentVolume) {
				pv.Spec.HostPath.Path = "//"
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRecycle
			}),
			want: []string{"spec.persistentVolumeReclaimPolicy|Forbidden|may not be 'recycle' for a hostPath mount of '/'"},
		},
		{
			name: "class name not a subdomain",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = "Fast_SSD" }),
			want: []string{"spec.storageClassName|Invalid value|" + msgSubdomain},
		},
		{
			name: "unknown volume mode",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeMode("Raw")) }),
			want: []string{`spec.volumeMode|Unsupported value|supported values: "Block", "Filesystem"`},
		},
		{
			name: "volumeAttributesClassName is not checked while its feature is off",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = ptr.To("") }),
		},

		// Sources.
		{
			name: "no source",
			pv:   newPV(withSource(corev1.PersistentVolumeSource{})),
			want: []string{"spec|Required value|must specify a volume type"},
		},
		{
			name: "two sources",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/x"}
				pv.Spec.NFS = &corev1.NFSVolumeSource{Server: "s", Path: "relative"}
			}),
			want: []string{
				"spec.nfs|Forbidden|may not specify more than 1 volume type",
				"spec.csi|Forbidden|may not specify more than 1 volume type",
			},
		},
		{
			name: "a source after flexVolume is refused",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Spec.FlexVolume = &corev1.FlexPersistentVolumeSource{Driver: "x"}
			}),
			want: []string{"spec.csi|Forbidden|may not specify more than 1 volume type"},
		},
		{
			name: "csi without driver or handle",
			pv:   newPV(withSource(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{}})),
			want: []string{
				"spec.csi.driver|Required value|",
				"spec.csi.driver|Invalid value|" + msgSubdomain,
				"spec.csi.volumeHandle|Required value|",
			},
		},
		{
			name: "csi driver name too long",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.CSI.Driver = strings.Repeat("d", 64) }),
			want: []string{"spec.csi.driver|Too long|may not be more than 63 bytes"},
		},
		{
			name: "csi secret refs incomplete or malformed",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Spec.CSI.NodePublishSecretRef = &corev1.SecretReference{}
				pv.Spec.CSI.ControllerExpandSecretRef = &corev1.SecretReference{Name: "Bad_Name", Namespace: "Bad.NS"}
			}),
			want: []string{
				"spec.csi.controllerExpandSecretRef.name|Invalid value|" + msgSubdomain,
				"spec.csi.controllerExpandSecretRef.namespace|Invalid value|" + msgLabel,
				"spec.csi.nodePublishSecretRef.name|Required value|",
				"spec.csi.nodePublishSecretRef.namespace|Required value|",
			},
		},
		{
			name: "hostPath without path",
			pv:   newPV(withSource(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{}})),
			want: []string{"spec.hostPath.path|Required value|"},
		},
		{
			name: "hostPath with .. and an unknown type",
			pv:   newPV(withSource(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a/../b", Type: ptr.To(corev1.HostPathType("Pipe"))}})),
			want: []string{
				"spec.hostPath.path|Invalid value|must not contain '..'",
				`spec.hostPath.type|Unsupported value|supported values: "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"`,
			},
		},
		{
			name: "nfs without server and path",
			pv:   newPV(withSource(corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{}})),
			want: []string{
				"spec.nfs.server|Required value|",
				"spec.nfs.path|Required value|",
				"spec.nfs.path|Invalid value|must be an absolute path",
			},
		},
		{
			name: "local without node affinity",
			pv:   newPV(withSource(local)),
			want: []string{"spec.nodeAffinity|Required value|Local volume requires node affinity"},
		},
		{
			name: "local without path",
			pv: newPV(withSource(corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{}}), func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = nodeAffinity(hostTerm("n"))
			}),
			want: []string{"spec.local.path|Required value|"},
		},
		{
			name: "local path with ..",
			pv: newPV(withSource(corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "../x"}}), func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = nodeAffinity(hostTerm("n"))
			}),
			want: []string{"spec.local.path|Invalid value|must not contain '..'"},
		},
		{
			name: "mount options annotation on csi",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Annotations = map[string]string{AnnMountOptions: "ro"} }),
			want: []string{"metadata.annotations.volume.beta.kubernetes.io/mount-options|Forbidden|may not specify mount options for this volume type"},
		},

		// Node affinity.
		{
			name: "affinity without required",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{} }),
			want: []string{"spec.nodeAffinity.required|Required value|must specify required node constraints"},
		},
		{
			name: "affinity without terms",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nodeAffinity() }),
			want: []string{"spec.nodeAffinity.required.nodeSelectorTerms|Required value|must have at least one node selector term"},
		},
		{
			name: "affinity requirements that break each rule",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Spec.NodeAffinity = nodeAffinity(corev1.NodeSelectorTerm{
					MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "a", Operator: corev1.NodeSelectorOpIn},
						{Key: "b", Operator: corev1.NodeSelectorOpExists, Values: []string{"x"}},
						{Key: "c", Operator: corev1.NodeSelectorOpGt, Values: []string{"1", "2"}},
						{Key: "d", Operator: "Near"},
						{Key: "e", Operator: corev1.NodeSelectorOpIn, Values: []string{"bad value!"}},
					},
					MatchFields: []corev1.NodeSelectorRequirement{
						{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}},
						{Key: "spec.nodeName", Operator: corev1.NodeSelectorOpExists},
					},
				})
			}),
			want: []string{
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values|Required value|must be specified when `operator` is 'In' or 'NotIn'",
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[1].values|Forbidden|may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[2].values|Required value|must be specified single value when `operator` is 'Lt' or 'Gt'",
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[3].operator|Invalid value|not a valid selector operator",
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[4].values[0]|Invalid value|" + msgLabelValue,
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].values|Required value|must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[1].operator|Invalid value|not a valid selector operator",
				"spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[1].key|Invalid value|not a valid field selector key",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Kind().Validate(tt.pv))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateInlineSpec covers the rules of a VolumeAttachment's inline
// volume.
func TestValidateInlineSpec(t *testing.T) {
	csi := func() *corev1.PersistentVolumeSpec {
		return &corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d.example.com", VolumeHandle: "h"}},
		}
	}
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeSpec)
		want   []string
	}{
		{name: "csi", mutate: func(*corev1.PersistentVolumeSpec) {}},
		{name: "Retain and Filesystem", mutate: func(s *corev1.PersistentVolumeSpec) {
			s.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			s.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}},
		{
			name: "everything an inline spec may not have",
			mutate: func(s *corev1.PersistentVolumeSpec) {
				s.ClaimRef = &corev1.ObjectReference{Name: "c"}
				s.Capacity = corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")}
				s.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				s.NodeAffinity = nodeAffinity(hostTerm("n"))
				s.StorageClassName = "standard"
				s.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
			},
			want: []string{
				"spec.claimRef|Forbidden|may not be specified in the context of inline volumes",
				"spec.capacity|Forbidden|may not be specified in the context of inline volumes",
				"spec.persistentVolumeReclaimPolicy|Forbidden|may only be Retain in the context of inline volumes",
				"spec.nodeAffinity|Forbidden|may not be specified in the context of inline volumes",
				"spec.storageClassName|Forbidden|may not be specified in the context of inline volumes",
				"spec.volumeMode|Forbidden|may not specify volumeMode other than Filesystem in the context of inline volumes",
			},
		},
		{
			name: "not csi",
			mutate: func(s *corev1.PersistentVolumeSpec) {
				s.PersistentVolumeSource = corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}
			},
			want: []string{"spec.csi|Required value|has to be specified in the context of inline volumes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := csi()
			tt.mutate(s)
			got := flat(ValidateSpec(s, SpecOptions{Inline: true}, field.NewPath("spec")))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(*corev1.PersistentVolume)
		mutate func(*corev1.PersistentVolume)
		want   []string
	}{
		{name: "bind: claimRef, class, reclaim policy, capacity, modes, labels may change", mutate: func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
			pv.Spec.StorageClassName = "other"
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			pv.Spec.Capacity[corev1.ResourceStorage] = qty("2Gi")
			pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			pv.Spec.MountOptions = []string{"ro"}
			pv.Labels = map[string]string{"a": "b"}
		}},
		{name: "node affinity may be set once", mutate: func(pv *corev1.PersistentVolume) {
			pv.Spec.NodeAffinity = nodeAffinity(hostTerm("n"))
		}},
		{name: "csi may gain a controllerExpandSecretRef", mutate: func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI.ControllerExpandSecretRef = &corev1.SecretReference{Name: "s", Namespace: "ns"}
		}},
		{
			name:   "source changes",
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.CSI.VolumeHandle = "vol-2" },
			want:   []string{"spec.persistentvolumesource|Forbidden|spec.persistentvolumesource is immutable after creation\n"},
		},
		{
			name: "csi controllerExpandSecretRef may not change once set",
			old: func(pv *corev1.PersistentVolume) {
				pv.Spec.CSI.ControllerExpandSecretRef = &corev1.SecretReference{Name: "s", Namespace: "ns"}
			},
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.CSI.ControllerExpandSecretRef.Name = "t" },
			want:   []string{"spec.persistentvolumesource|Forbidden|spec.persistentvolumesource is immutable after creation\n"},
		},
		{
			name:   "volume mode",
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) },
			want:   []string{"volumeMode|Invalid value|field is immutable"},
		},
		{
			name:   "node affinity once set",
			old:    func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nodeAffinity(hostTerm("a")) },
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nodeAffinity(hostTerm("b")) },
			want:   []string{"nodeAffinity|Invalid value|field is immutable"},
		},
		{
			name:   "node affinity removed",
			old:    func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nodeAffinity(hostTerm("a")) },
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nil },
			want:   []string{"nodeAffinity|Invalid value|field is immutable"},
		},
		{
			name:   "stored invalid affinity value may stay",
			old:    func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nodeAffinity(hostTerm("bad value!")) },
			mutate: func(pv *corev1.PersistentVolume) { pv.Labels = map[string]string{"a": "b"} },
		},
		{
			name:   "volumeAttributesClassName set (feature off)",
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = ptr.To("gold") },
			want:   []string{"spec.volumeAttributesClassName|Forbidden|update is forbidden when the VolumeAttributesClass feature gate is disabled"},
		},
		{
			name:   "stored volumeAttributesClassName removed",
			old:    func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = ptr.To("gold") },
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = nil },
			want: []string{
				"spec.volumeAttributesClassName|Forbidden|update is forbidden when the VolumeAttributesClass feature gate is disabled",
				"spec.volumeAttributesClassName|Forbidden|update from non-nil value to nil is forbidden",
			},
		},
		{
			name:   "stored volumeAttributesClassName is checked",
			old:    func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = ptr.To("") },
			mutate: func(pv *corev1.PersistentVolume) {},
			want:   []string{"spec.volumeAttributesClassName|Required value|an empty string is disallowed"},
		},
		{
			name:   "create rules apply",
			mutate: func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = nil },
			want:   []string{"spec.accessModes|Required value|"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPV()
			if tt.old != nil {
				tt.old(old)
			}
			pv := old.DeepCopy()
			tt.mutate(pv)
			got := flat(Kind().ValidateUpdate(pv, old))
			// The immutable-source message ends with a diff whose exact
			// spacing go-cmp varies on purpose; compare up to it.
			for i, g := range got {
				if j := strings.Index(g, "\n"); j >= 0 {
					if len(g) == j+1 {
						t.Errorf("%q: no diff after the message", g)
					}
					got[i] = g[:j+1]
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
