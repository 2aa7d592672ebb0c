package memorymanager

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// MemoryTable is one resource on one NUMA node, in bytes. Invariant:
// Allocatable = Total - SystemReserved (minus the hugepages for memory),
// and Reserved + Free = Allocatable.
type MemoryTable struct {
	Total          uint64 `json:"total"`
	SystemReserved uint64 `json:"systemReserved"`
	Allocatable    uint64 `json:"allocatable"`
	// Reserved is what containers hold now.
	Reserved uint64 `json:"reserved"`
	Free     uint64 `json:"free"`
}

// NodeState is one NUMA node of the machine state.
type NodeState struct {
	// Assignments counts the blocks placed on the node: a container with
	// memory and hugepages adds two.
	Assignments int `json:"numberOfAssignments"`
	// Memory holds the node's resources by name ("memory",
	// "hugepages-2Mi", ...).
	Memory map[corev1.ResourceName]*MemoryTable `json:"memoryMap"`
	// Cells is the group of nodes this node is used with: [id] when free
	// or used alone, every node of the group when a container spans nodes.
	Cells []int `json:"cells"`
}

// MachineState is the memory state of every NUMA node, by node ID.
type MachineState map[int]*NodeState

// Clone returns a deep copy of m.
func (m MachineState) Clone() MachineState {
	if m == nil {
		return nil
	}
	out := make(MachineState, len(m))
	for id, n := range m {
		if n == nil {
			out[id] = nil
			continue
		}
		c := &NodeState{Assignments: n.Assignments, Cells: slices.Clone(n.Cells)}
		if n.Memory != nil {
			c.Memory = make(map[corev1.ResourceName]*MemoryTable, len(n.Memory))
			for name, t := range n.Memory {
				if t == nil {
					c.Memory[name] = nil
					continue
				}
				cp := *t
				c.Memory[name] = &cp
			}
		}
		out[id] = c
	}
	return out
}

// Block is an amount of one resource a container holds on a group of NUMA
// nodes.
type Block struct {
	// NUMAAffinity are the node IDs, ascending.
	NUMAAffinity []int               `json:"numaAffinity"`
	Type         corev1.ResourceName `json:"type"`
	// Size is in bytes.
	Size uint64 `json:"size"`
}

// State is the Memory Manager's state, the content of the checkpoint.
type State struct {
	// PolicyName is the policy that wrote the state.
	PolicyName string
	// Machine is the per-node accounting; empty for the None policy.
	Machine MachineState
	// Assignments are the blocks by pod UID and container name. Nil means
	// none.
	Assignments map[string]map[string][]Block
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	out := State{PolicyName: s.PolicyName, Machine: s.Machine.Clone()}
	if s.Assignments != nil {
		out.Assignments = make(map[string]map[string][]Block, len(s.Assignments))
		for pod, cs := range s.Assignments {
			out.Assignments[pod] = make(map[string][]Block, len(cs))
			for c, blocks := range cs {
				bs := make([]Block, len(blocks))
				for i, b := range blocks {
					b.NUMAAffinity = slices.Clone(b.NUMAAffinity)
					bs[i] = b
				}
				out.Assignments[pod][c] = bs
			}
		}
	}
	return out
}

// Blocks returns the blocks of a container; nil when it has none.
func (s State) Blocks(podUID, container string) []Block {
	return s.Assignments[podUID][container]
}
