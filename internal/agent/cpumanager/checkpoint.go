package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"knode/internal/atomicfile"
)

// StateFile is the checkpoint's name in the kubelet root directory.
const StateFile = "cpu_manager_state"

// ErrCorruptCheckpoint is returned when a checkpoint's checksum does not
// match its content (upstream's checkpoint errors.ErrCorruptCheckpoint).
var ErrCorruptCheckpoint = errors.New("checkpoint is corrupted")

// checkpoint is upstream's CPUManagerCheckpoint (v2), field for field: the
// JSON and the checksum depend on it.
type checkpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
}

// checksum is upstream's checksum.New(cp) for a *state.CPUManagerCheckpoint
// whose Checksum is 0: FNV-32a of the go-spew dump (k8s.io/utils/dump
// ForHash: "%#v", sorted keys, no methods, no pointer addresses), widened to
// uint64. The dump is written here by hand so no type names leak in:
//
//	(*state.CPUManagerCheckpoint){PolicyName:(string)static DefaultCPUSet:(string)0-3 Entries:(map[string]map[string]string)map[pod:map[c:4-5]] Checksum:(checksum.Checksum)0}
//
// A nil Entries dumps as <nil>, an empty one as map[].
func (cp checkpoint) checksum() uint64 {
	var b strings.Builder
	b.WriteString("(*state.CPUManagerCheckpoint){PolicyName:(string)")
	b.WriteString(cp.PolicyName)
	b.WriteString(" DefaultCPUSet:(string)")
	b.WriteString(cp.DefaultCPUSet)
	b.WriteString(" Entries:(map[string]map[string]string)")
	if cp.Entries == nil {
		b.WriteString("<nil>")
	} else {
		b.WriteString("map[")
		for i, pod := range slices.Sorted(maps.Keys(cp.Entries)) {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(pod)
			b.WriteByte(':')
			cs := cp.Entries[pod]
			if cs == nil {
				b.WriteString("<nil>")
				continue
			}
			b.WriteString("map[")
			for j, c := range slices.Sorted(maps.Keys(cs)) {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(c)
				b.WriteByte(':')
				b.WriteString(cs[c])
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
	}
	b.WriteString(" Checksum:(checksum.Checksum)0}")
	h := fnv.New32a()
	h.Write([]byte(b.String()))
	return uint64(h.Sum32())
}

// Encode returns the checkpoint JSON of s, checksum included, as the
// upstream kubelet writes it.
func Encode(s State) ([]byte, error) {
	cp := checkpoint{
		PolicyName:    s.PolicyName,
		DefaultCPUSet: s.DefaultCPUSet.String(),
		Entries:       map[string]map[string]string{},
	}
	for pod, cs := range s.Assignments {
		cp.Entries[pod] = make(map[string]string, len(cs))
		for c, set := range cs {
			cp.Entries[pod][c] = set.String()
		}
	}
	cp.Checksum = cp.checksum()
	return json.Marshal(cp)
}

// Decode parses checkpoint JSON written by Encode or by the upstream kubelet
// (v2 format). A zero checksum is accepted, as upstream does; any other
// mismatch is ErrCorruptCheckpoint. Bad cpuset strings are errors.
func Decode(data []byte) (State, error) {
	cp := checkpoint{Entries: map[string]map[string]string{}}
	if err := json.Unmarshal(data, &cp); err != nil {
		return State{}, fmt.Errorf("decode %s: %w", StateFile, err)
	}
	if cp.Checksum != 0 {
		want := cp.Checksum
		cp.Checksum = 0
		if got := cp.checksum(); got != want {
			return State{}, fmt.Errorf("%w: checksum %d, content hashes to %s", ErrCorruptCheckpoint, want, strconv.FormatUint(got, 10))
		}
	}
	s := State{PolicyName: cp.PolicyName}
	var err error
	if s.DefaultCPUSet, err = cpuset.Parse(cp.DefaultCPUSet); err != nil {
		return State{}, fmt.Errorf("could not parse default cpu set %q: %w", cp.DefaultCPUSet, err)
	}
	for pod, cs := range cp.Entries {
		for c, str := range cs {
			set, err := cpuset.Parse(str)
			if err != nil {
				return State{}, fmt.Errorf("could not parse cpuset %q for container %q in pod %q: %w", str, c, pod, err)
			}
			if s.Assignments == nil {
				s.Assignments = map[string]map[string]cpuset.CPUSet{}
			}
			if s.Assignments[pod] == nil {
				s.Assignments[pod] = map[string]cpuset.CPUSet{}
			}
			s.Assignments[pod][c] = set
		}
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
