package memorymanager

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/host"
)

// Policy names (the kubelet's memoryManagerPolicy values; upstream spells
// them capitalised).
const (
	PolicyNone   = "None"
	PolicyStatic = "Static"
)

// Reservation is one reservedMemory entry: memory kept for the system on one
// NUMA node.
type Reservation struct {
	// NUMANode is the node's ID.
	NUMANode int32
	// Limits are the reserved quantities by resource: "memory" or
	// "hugepages-<size>".
	Limits corev1.ResourceList
}

// Config is the Memory Manager's part of the kubelet configuration.
type Config struct {
	// Policy is memoryManagerPolicy: PolicyNone or PolicyStatic. Empty
	// means PolicyNone.
	Policy string
	// ReservedMemory is reservedMemory.
	ReservedMemory []Reservation
	// NodeAllocatableReservation is kube-reserved + system-reserved + the
	// hard eviction threshold, by resource (upstream's
	// GetNodeAllocatableReservation). Only memory and hugepages entries are
	// read.
	NodeAllocatableReservation corev1.ResourceList
}

func (c Config) policy() string {
	if c.Policy == "" {
		return PolicyNone
	}
	return c.Policy
}

func isMemoryResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// Validate checks the policy name and the reservedMemory entries on their
// own (upstream's kubelet configuration validation: supported resources,
// non-zero values, no duplicate node and resource), with upstream's messages
// joined by ", ". It does not need the machine; ReservedByNode checks the
// entries against it.
func (c Config) Validate() error {
	switch c.policy() {
	case PolicyNone, PolicyStatic:
	default:
		return fmt.Errorf("unknown policy: \"%s\"", c.Policy)
	}
	var msgs []string
	seen := map[int32]map[corev1.ResourceName]bool{}
	for _, r := range c.ReservedMemory {
		if seen[r.NUMANode] == nil {
			seen[r.NUMANode] = map[corev1.ResourceName]bool{}
		}
		for _, name := range sortedResourceNames(r.Limits) {
			q := r.Limits[name]
			if !isMemoryResource(name) {
				msgs = append(msgs, fmt.Sprintf("invalid configuration: the limit type %q for NUMA node %d is not supported, only %v is accepted", name, r.NUMANode, []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceHugePagesPrefix + "<HugePageSize>"}))
			}
			if q.IsZero() {
				msgs = append(msgs, fmt.Sprintf("invalid configuration: reserved memory may not be zero for NUMA node %d and resource %q", r.NUMANode, name))
			}
			if seen[r.NUMANode][name] {
				msgs = append(msgs, fmt.Sprintf("invalid configuration: the reserved memory has a duplicate value for NUMA node %d and resource %q", r.NUMANode, name))
			}
			seen[r.NUMANode][name] = true
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%s", strings.Join(msgs, ", "))
	}
	return nil
}

func sortedResourceNames[V any](m map[corev1.ResourceName]V) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// ReservedByNode checks the reservedMemory entries against machine t and the
// node allocatable reservation (upstream's getSystemReservedMemory): every
// entry names an existing NUMA node, and for memory and every hugepages
// size the sum over the entries equals NodeAllocatableReservation. It
// returns the reservation in bytes by node and resource, with an empty map
// for every node of t. Upstream runs it for the Static policy only.
func ReservedByNode(t host.Topology, c Config) (map[int]map[corev1.ResourceName]uint64, error) {
	nodes := map[int]bool{}
	for _, n := range t.NUMANodes {
		nodes[n.ID] = true
	}
	total := map[corev1.ResourceName]resource.Quantity{}
	for _, r := range c.ReservedMemory {
		if !nodes[int(r.NUMANode)] {
			return nil, fmt.Errorf("the reserved memory configuration references a NUMA node %d that does not exist on this machine", r.NUMANode)
		}
		for name, q := range r.Limits {
			q = q.DeepCopy()
			if v, ok := total[name]; ok {
				q.Add(v)
			}
			total[name] = q
		}
	}
	names := map[corev1.ResourceName]bool{}
	for name := range total {
		names[name] = true
	}
	for name := range c.NodeAllocatableReservation {
		if isMemoryResource(name) {
			names[name] = true
		}
	}
	for _, name := range sortedResourceNames(names) {
		allocatable := resource.NewQuantity(0, resource.DecimalSI)
		if v, ok := c.NodeAllocatableReservation[name]; ok {
			allocatable.Add(v)
		}
		reserved := resource.NewQuantity(0, resource.DecimalSI)
		if v, ok := total[name]; ok {
			reserved.Add(v)
		}
		if !allocatable.Equal(*reserved) {
			return nil, fmt.Errorf("the total amount %q of type %q is not equal to the value %q determined by Node Allocatable feature", reserved.String(), name, allocatable.String())
		}
	}
	out := map[int]map[corev1.ResourceName]uint64{}
	for _, n := range t.NUMANodes {
		out[n.ID] = map[corev1.ResourceName]uint64{}
	}
	for _, r := range c.ReservedMemory {
		for name, q := range r.Limits {
			v, ok := q.AsInt64()
			if !ok || v < 0 {
				return nil, fmt.Errorf("could not covert a variable of type Quantity to int64")
			}
			out[int(r.NUMANode)][name] = uint64(v)
		}
	}
	return out, nil
}

// HugepagesResource is the resource name of a hugepage size in bytes:
// "hugepages-2Mi" for 2097152, "hugepages-1Gi" for 1073741824.
func HugepagesResource(pageSize uint64) corev1.ResourceName {
	return corev1.ResourceName(corev1.ResourceHugePagesPrefix + resource.NewQuantity(int64(pageSize), resource.BinarySI).String())
}
