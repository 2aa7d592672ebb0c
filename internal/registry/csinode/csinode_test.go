package csinode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const (
	msgSubdomain     = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	msgNameEmpty     = "name part must be non-empty"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func driver(name, id string) storagev1.CSINodeDriver {
	return storagev1.CSINodeDriver{Name: name, NodeID: id, TopologyKeys: []string{"topology.hostpath.csi/node"}}
}

func newNode(drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func TestValidate(t *testing.T) {
	withCount := func(d storagev1.CSINodeDriver, n int32) storagev1.CSINodeDriver {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(n)}
		return d
	}
	withKeys := func(d storagev1.CSINodeDriver, keys ...string) storagev1.CSINodeDriver {
		d.TopologyKeys = keys
		return d
	}
	tests := []struct {
		name string
		n    *storagev1.CSINode
		want []string
	}{
		{name: "no drivers", n: newNode()},
		{name: "two drivers", n: newNode(driver("hostpath.csi.knode.io", "node-1"), withCount(driver("ebs.csi.aws.com", "i-123"), 0))},
		{name: "nodeID of 256 characters", n: newNode(driver("a.b", strings.Repeat("x", 256)))},
		{name: "upper-case driver name is checked lowercased", n: newNode(driver("Hostpath.CSI", "n"))},
		{name: "no keys, no allocatable count", n: newNode(storagev1.CSINodeDriver{Name: "a", NodeID: "n", Allocatable: &storagev1.VolumeNodeResources{}})},
		{
			name: "nodeID of 257 characters",
			n:    newNode(driver("a.b", strings.Repeat("x", 257))),
			want: []string{"spec.drivers[0].nodeID|Invalid value|must be 256 characters or less"},
		},
		{
			name: "empty nodeID",
			n:    newNode(driver("a.b", "")),
			want: []string{"spec.drivers[0].nodeID|Required value|"},
		},
		{
			name: "empty driver name",
			n:    newNode(driver("", "n")),
			want: []string{"spec.drivers[0].name|Required value|", "spec.drivers[0].name|Invalid value|" + msgSubdomain},
		},
		{
			name: "driver name of 64 characters",
			n:    newNode(driver(strings.Repeat("a", 64), "n")),
			want: []string{"spec.drivers[0].name|Too long|may not be more than 63 bytes"},
		},
		{
			name: "driver name not a subdomain",
			n:    newNode(driver("csi_driver", "n")),
			want: []string{"spec.drivers[0].name|Invalid value|" + msgSubdomain},
		},
		{
			name: "negative allocatable count",
			n:    newNode(withCount(driver("a", "n"), -1)),
			want: []string{"spec.drivers[0].allocatable.count|Invalid value|must be greater than or equal to 0"},
		},
		{
			name: "driver listed twice",
			n:    newNode(driver("a", "n"), driver("b", "n"), driver("a", "m")),
			want: []string{"spec.drivers[2].name|Duplicate value|"},
		},
		{
			name: "topology keys: empty, repeated, not qualified",
			n:    newNode(withKeys(driver("a", "n"), "", "zone", "zone", "bad key!")),
			want: []string{
				"spec.drivers[0]|Required value|",
				"spec.drivers[0]|Invalid value|" + msgNameEmpty,
				"spec.drivers[0]|Invalid value|" + msgQualifiedName,
				"spec.drivers[0]|Duplicate value|",
				"spec.drivers[0]|Invalid value|" + msgQualifiedName,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Validate(tt.n))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	base := func() *storagev1.CSINode {
		return newNode(driver("a", "n1"), storagev1.CSINodeDriver{Name: "b", NodeID: "n1", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(int32(5))}})
	}
	tests := []struct {
		name   string
		mutate func(*storagev1.CSINode)
		want   []string
	}{
		{name: "add a driver", mutate: func(n *storagev1.CSINode) { n.Spec.Drivers = append(n.Spec.Drivers, driver("c", "n1")) }},
		{name: "remove a driver", mutate: func(n *storagev1.CSINode) { n.Spec.Drivers = n.Spec.Drivers[1:] }},
		{name: "reorder drivers", mutate: func(n *storagev1.CSINode) {
			n.Spec.Drivers[0], n.Spec.Drivers[1] = n.Spec.Drivers[1], n.Spec.Drivers[0]
		}},
		{name: "replace a driver by another name", mutate: func(n *storagev1.CSINode) { n.Spec.Drivers[0] = driver("c", "other") }},
		{
			name:   "change a nodeID",
			mutate: func(n *storagev1.CSINode) { n.Spec.Drivers[0].NodeID = "n2" },
			want:   []string{"spec.drivers|Invalid value|field is immutable"},
		},
		{
			name:   "change topology keys",
			mutate: func(n *storagev1.CSINode) { n.Spec.Drivers[0].TopologyKeys = nil },
			want:   []string{"spec.drivers|Invalid value|field is immutable"},
		},
		{
			name:   "change allocatable count (MutableCSINodeAllocatableCount is off)",
			mutate: func(n *storagev1.CSINode) { n.Spec.Drivers[1].Allocatable.Count = ptr.To(int32(6)) },
			want:   []string{"spec.drivers|Invalid value|field is immutable"},
		},
		{
			name:   "new entry also invalid",
			mutate: func(n *storagev1.CSINode) { n.Spec.Drivers = append(n.Spec.Drivers, driver("c", "")) },
			want:   []string{"spec.drivers[2].nodeID|Required value|"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := base()
			n := old.DeepCopy()
			tt.mutate(n)
			if diff := cmp.Diff(tt.want, flat(Kind().ValidateUpdate(n, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRow(t *testing.T) {
	n := newNode(driver("a", "n"), driver("b", "n"))
	n.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
	want := []interface{}{"node-1", int64(2), "90s"}
	if diff := cmp.Diff(want, row(n, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]interface{}{"node-1", int64(0), "<unknown>"}, row(newNode(), now)); diff != "" {
		t.Errorf("empty row (-want +got):\n%s", diff)
	}
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Drivers", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.Namespaced || k.HasStatus || k.Resource != "csinodes" {
		t.Errorf("kind = %+v", k)
	}
}
