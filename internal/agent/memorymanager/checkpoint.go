package memorymanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"knode/internal/atomicfile"
)

// StateFile is the checkpoint's name in the kubelet root directory.
const StateFile = "memory_manager_state"

// ErrCorruptCheckpoint is returned when a checkpoint's checksum does not
// match its content (upstream's checkpoint errors.ErrCorruptCheckpoint).
var ErrCorruptCheckpoint = errors.New("checkpoint is corrupted")

// checkpoint is upstream 1.33's state.MemoryManagerCheckpoint, field for
// field: the JSON and the checksum depend on it.
type checkpoint struct {
	PolicyName   string                        `json:"policyName"`
	MachineState MachineState                  `json:"machineState"`
	Entries      map[string]map[string][]Block `json:"entries,omitempty"`
	Checksum     uint64                        `json:"checksum"`
}

// checksum is upstream's checksum.New(cp) for a *state.MemoryManagerCheckpoint
// whose Checksum is 0: FNV-32a of k8s.io/utils/dump.ForHash (go-spew "%#v"
// with sorted keys, no methods, no pointer addresses), widened to uint64.
// The dump is written by hand so that upstream's type names appear:
//
//	(*state.MemoryManagerCheckpoint){PolicyName:(string)Static MachineState:(state.NUMANodeMap)map[0:<*>{NumberOfAssignments:(int)0 MemoryMap:(map[v1.ResourceName]*state.MemoryTable)map[memory:<*>{TotalMemSize:(uint64)2048 ...}] Cells:([]int)[0]}] Entries:(state.ContainerMemoryAssignments)map[pod:map[c:[{NUMAAffinity:([]int)[0] Type:(v1.ResourceName)memory Size:(uint64)512}]]] Checksum:(checksum.Checksum)0}
//
// spew's quirk is kept: a nil pointer printed where its type is suppressed
// leaves the next value's type suppressed too.
func (cp checkpoint) checksum() uint64 {
	d := &dumper{}
	d.ptr("*state.MemoryManagerCheckpoint", false)
	d.ignore = false
	d.b.WriteString("{PolicyName:")
	d.typ("string")
	d.b.WriteString(cp.PolicyName)
	d.b.WriteString(" MachineState:")
	d.machine(cp.MachineState)
	d.b.WriteString(" Entries:")
	d.entries(cp.Entries)
	d.b.WriteString(" Checksum:")
	d.typ("checksum.Checksum")
	d.b.WriteString("0}")
	h := fnv.New32a()
	h.Write([]byte(d.b.String()))
	return uint64(h.Sum32())
}

// dumper writes go-spew's "%#v" output for the checkpoint's types. ignore is
// spew's ignoreNextType.
type dumper struct {
	b      strings.Builder
	ignore bool
}

// typ writes the type of a non-pointer value unless suppressed.
func (d *dumper) typ(name string) {
	if !d.ignore {
		d.b.WriteString("(" + name + ")")
	}
	d.ignore = false
}

// ptr writes a pointer's prefix; for nil it writes the whole value. It
// reports whether the pointee should be written.
func (d *dumper) ptr(name string, isNil bool) bool {
	if isNil && d.ignore {
		d.b.WriteString("<nil>")
		return false
	}
	if d.ignore {
		d.b.WriteString("<*>")
	} else {
		d.b.WriteString("(" + name + ")")
	}
	if isNil {
		d.b.WriteString("<nil>")
		return false
	}
	d.ignore = true
	return true
}

func (d *dumper) ints(name string, s []int) {
	d.typ(name)
	if s == nil {
		d.b.WriteString("<nil>")
		return
	}
	d.b.WriteByte('[')
	for i, v := range s {
		if i > 0 {
			d.b.WriteByte(' ')
		}
		d.ignore = true
		d.typ("int")
		d.b.WriteString(strconv.Itoa(v))
	}
	d.b.WriteByte(']')
}

func (d *dumper) uint(name string, v uint64) {
	d.b.WriteString(name + ":")
	d.typ("uint64")
	d.b.WriteString(strconv.FormatUint(v, 10))
}

// key writes a map key and its colon, with the value's type suppressed.
func (d *dumper) key(i int, typ, k string) {
	if i > 0 {
		d.b.WriteByte(' ')
	}
	d.ignore = true
	d.typ(typ)
	d.b.WriteString(k + ":")
	d.ignore = true
}

func (d *dumper) machine(m MachineState) {
	d.typ("state.NUMANodeMap")
	if m == nil {
		d.b.WriteString("<nil>")
		return
	}
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	d.b.WriteString("map[")
	for i, id := range ids {
		d.key(i, "int", strconv.Itoa(id))
		n := m[id]
		if !d.ptr("*state.NUMANodeState", n == nil) {
			continue
		}
		d.ignore = false // a struct's own type was written by ptr
		d.b.WriteString("{NumberOfAssignments:")
		d.typ("int")
		d.b.WriteString(strconv.Itoa(n.Assignments))
		d.b.WriteString(" MemoryMap:")
		d.typ("map[v1.ResourceName]*state.MemoryTable")
		if n.Memory == nil {
			d.b.WriteString("<nil>")
		} else {
			d.b.WriteString("map[")
			for j, name := range sortedResourceNames(n.Memory) {
				d.key(j, "v1.ResourceName", string(name))
				t := n.Memory[name]
				if !d.ptr("*state.MemoryTable", t == nil) {
					continue
				}
				d.ignore = false
				d.b.WriteByte('{')
				d.uint("TotalMemSize", t.Total)
				d.uint(" SystemReserved", t.SystemReserved)
				d.uint(" Allocatable", t.Allocatable)
				d.uint(" Reserved", t.Reserved)
				d.uint(" Free", t.Free)
				d.b.WriteByte('}')
			}
			d.b.WriteByte(']')
		}
		d.b.WriteString(" Cells:")
		d.ints("[]int", n.Cells)
		d.b.WriteByte('}')
	}
	d.b.WriteByte(']')
}

func (d *dumper) entries(e map[string]map[string][]Block) {
	d.typ("state.ContainerMemoryAssignments")
	if e == nil {
		d.b.WriteString("<nil>")
		return
	}
	d.b.WriteString("map[")
	for i, pod := range slices.Sorted(maps.Keys(e)) {
		d.key(i, "string", pod)
		d.typ("map[string][]state.Block")
		cs := e[pod]
		if cs == nil {
			d.b.WriteString("<nil>")
			continue
		}
		d.b.WriteString("map[")
		for j, c := range slices.Sorted(maps.Keys(cs)) {
			d.key(j, "string", c)
			d.typ("[]state.Block")
			blocks := cs[c]
			if blocks == nil {
				d.b.WriteString("<nil>")
				continue
			}
			d.b.WriteByte('[')
			for k, b := range blocks {
				if k > 0 {
					d.b.WriteByte(' ')
				}
				d.ignore = true
				d.typ("state.Block")
				d.b.WriteString("{NUMAAffinity:")
				d.ints("[]int", b.NUMAAffinity)
				d.b.WriteString(" Type:")
				d.typ("v1.ResourceName")
				d.b.WriteString(string(b.Type))
				d.uint(" Size", b.Size)
				d.b.WriteByte('}')
			}
			d.b.WriteByte(']')
		}
		d.b.WriteByte(']')
	}
	d.b.WriteByte(']')
}

// Encode returns the checkpoint JSON of s, checksum included, as the
// upstream kubelet writes it.
func Encode(s State) ([]byte, error) {
	cp := checkpoint{PolicyName: s.PolicyName, MachineState: s.Machine, Entries: s.Assignments}
	if cp.MachineState == nil {
		cp.MachineState = MachineState{}
	}
	if cp.Entries == nil {
		cp.Entries = map[string]map[string][]Block{}
	}
	cp.Checksum = cp.checksum()
	return json.Marshal(cp)
}

// Decode parses checkpoint JSON written by Encode or by the upstream kubelet
// (v1/v2 format). A zero checksum is accepted, as upstream does; any other
// mismatch is ErrCorruptCheckpoint. A null node or memory table is an error
// (upstream would dereference it).
func Decode(data []byte) (State, error) {
	cp := checkpoint{MachineState: MachineState{}, Entries: map[string]map[string][]Block{}}
	if err := json.Unmarshal(data, &cp); err != nil {
		return State{}, fmt.Errorf("decode %s: %w", StateFile, err)
	}
	if cp.Checksum != 0 {
		want := cp.Checksum
		cp.Checksum = 0
		if got := cp.checksum(); got != want {
			return State{}, fmt.Errorf("%w: checksum %d, content hashes to %d", ErrCorruptCheckpoint, want, got)
		}
	}
	for id, n := range cp.MachineState {
		if n == nil {
			return State{}, fmt.Errorf("decode %s: NUMA node %d has no state", StateFile, id)
		}
		for name, t := range n.Memory {
			if t == nil {
				return State{}, fmt.Errorf("decode %s: NUMA node %d has no table for %q", StateFile, id, name)
			}
		}
	}
	s := State{PolicyName: cp.PolicyName, Machine: cp.MachineState}
	if len(cp.Entries) > 0 {
		s.Assignments = cp.Entries
	}
	return s, nil
}

// Read decodes the checkpoint at path. A missing file is reported with an
// error satisfying errors.Is(err, fs.ErrNotExist).
func Read(path string) (State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return State{}, err
	}
	return Decode(data)
}

// Write encodes s and replaces the file at path atomically (mode 0600).
func Write(path string, s State) error {
	data, err := Encode(s)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
