package nodestatus

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/host"
)

// Signal is an eviction signal, the left side of an evictionHard entry.
type Signal string

// The eviction signals the kubelet accepts.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFsAvailable            Signal = "nodefs.available"
	SignalNodeFsInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFsAvailable           Signal = "imagefs.available"
	SignalImageFsInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFsAvailable       Signal = "containerfs.available"
	SignalContainerFsInodesFree      Signal = "containerfs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

// signalCondition maps every valid signal to the node condition it drives.
var signalCondition = map[Signal]corev1.NodeConditionType{
	SignalMemoryAvailable:            corev1.NodeMemoryPressure,
	SignalAllocatableMemoryAvailable: corev1.NodeMemoryPressure,
	SignalNodeFsAvailable:            corev1.NodeDiskPressure,
	SignalNodeFsInodesFree:           corev1.NodeDiskPressure,
	SignalImageFsAvailable:           corev1.NodeDiskPressure,
	SignalImageFsInodesFree:          corev1.NodeDiskPressure,
	SignalContainerFsAvailable:       corev1.NodeDiskPressure,
	SignalContainerFsInodesFree:      corev1.NodeDiskPressure,
	SignalPIDAvailable:               corev1.NodePIDPressure,
}

// Threshold is one hard eviction threshold: the node is under pressure
// while the signal's available amount is below the value.
type Threshold struct {
	Signal Signal
	// Quantity is the absolute value; nil when the threshold is a
	// percentage.
	Quantity *resource.Quantity
	// Percentage is the fraction of the signal's capacity (0.1 for "10%"),
	// used when Quantity is nil. It is a float32, as upstream stores it, so
	// percentages of large capacities round exactly as the kubelet's do.
	Percentage float32
}

// String formats t as the flag does: "memory.available<100Mi",
// "nodefs.available<10%".
func (t Threshold) String() string {
	if t.Quantity != nil {
		return string(t.Signal) + "<" + t.Quantity.String()
	}
	return string(t.Signal) + "<" + strconv.FormatFloat(float64(t.Percentage)*100, 'g', 6, 64) + "%"
}

// Value returns the threshold as a quantity for a signal whose capacity is
// capacity (bytes, inodes or PIDs).
func (t Threshold) Value(capacity int64) resource.Quantity {
	if t.Quantity != nil {
		return t.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(t.Percentage)*float64(capacity)), resource.BinarySI)
}

// DefaultEvictionHard returns the kubelet's default hard thresholds:
// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%, in that order.
func DefaultEvictionHard() []Threshold {
	q := resource.MustParse("100Mi")
	return []Threshold{
		{Signal: SignalMemoryAvailable, Quantity: &q},
		{Signal: SignalNodeFsAvailable, Percentage: 0.1},
		{Signal: SignalNodeFsInodesFree, Percentage: 0.05},
		{Signal: SignalImageFsAvailable, Percentage: 0.15},
	}
}

// ParseThresholds parses the --eviction-hard flag form: comma-separated
// <signal><<value> statements such as "memory.available<100Mi,nodefs.available<10%".
// Empty statements are skipped, and a repeated signal keeps its last value
// (as the kubelet's flag map does). The result is sorted by signal.
func ParseThresholds(s string) ([]Threshold, error) {
	m := map[string]string{}
	for _, stmt := range strings.Split(s, ",") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		signal, value, ok := strings.Cut(stmt, "<")
		if !ok {
			return nil, fmt.Errorf("invalid eviction threshold %q: expected <signal><<value>, for example memory.available<100Mi or nodefs.available<10%%", stmt)
		}
		m[strings.TrimSpace(signal)] = strings.TrimSpace(value)
	}
	return ThresholdsFromMap(m)
}

// ThresholdsFromMap parses the KubeletConfiguration evictionHard form, a map
// from signal to value ("100Mi", "10%"). The values "0%" and "100%" disable
// a signal and are dropped, as upstream does. The result is sorted by signal
// and the first error (in signal order) is returned.
func ThresholdsFromMap(m map[string]string) ([]Threshold, error) {
	signals := make([]string, 0, len(m))
	for s := range m {
		signals = append(signals, s)
	}
	sort.Strings(signals)
	out := []Threshold{}
	for _, s := range signals {
		t, ok, err := parseThreshold(Signal(s), m[s])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// parseThreshold parses one signal and value. ok is false for a value that
// disables the signal. Error texts are upstream's where it has one.
func parseThreshold(signal Signal, value string) (t Threshold, ok bool, err error) {
	if _, valid := signalCondition[signal]; !valid {
		return Threshold{}, false, fmt.Errorf("unsupported eviction signal %v", signal)
	}
	if strings.HasSuffix(value, "%") {
		if value == "0%" || value == "100%" {
			return Threshold{}, false, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(value, "%"), 32)
		if err != nil {
			return Threshold{}, false, fmt.Errorf("eviction threshold %v: invalid percentage %q", signal, value)
		}
		p := float32(f) / 100
		switch {
		case math.IsNaN(float64(p)):
			return Threshold{}, false, fmt.Errorf("eviction threshold %v: invalid percentage %q", signal, value)
		case p < 0:
			return Threshold{}, false, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, value)
		case p > 1:
			return Threshold{}, false, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, value)
		}
		return Threshold{Signal: signal, Percentage: p}, true, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return Threshold{}, false, fmt.Errorf("eviction threshold %v: invalid quantity %q: %w", signal, value, err)
	}
	if q.Sign() <= 0 {
		return Threshold{}, false, fmt.Errorf("eviction threshold %v must be positive: %s", signal, &q)
	}
	return Threshold{Signal: signal, Quantity: &q}, true, nil
}

// Observation is one measured eviction signal.
type Observation struct {
	Available int64
	Capacity  int64
}

// Observations returns the signals the facts measure. imagefs and
// containerfs are the same filesystem as nodefs here (the agent has no
// separate image store). allocatableMemory.available is never observed, so
// thresholds on it never fire.
func Observations(f host.Facts) map[Signal]Observation {
	obs := map[Signal]Observation{}
	if f.Err(host.FactMemory) == nil {
		obs[SignalMemoryAvailable] = Observation{Available: clampInt64(f.Memory.Available), Capacity: clampInt64(f.Memory.Capacity)}
	}
	if f.Err(host.FactRootFS) == nil {
		bytes := Observation{Available: clampInt64(f.RootFS.Available), Capacity: clampInt64(f.RootFS.Capacity)}
		inodes := Observation{Available: clampInt64(f.RootFS.InodesFree), Capacity: clampInt64(f.RootFS.Inodes)}
		for _, s := range []Signal{SignalNodeFsAvailable, SignalImageFsAvailable, SignalContainerFsAvailable} {
			obs[s] = bytes
		}
		for _, s := range []Signal{SignalNodeFsInodesFree, SignalImageFsInodesFree, SignalContainerFsInodesFree} {
			obs[s] = inodes
		}
	}
	if f.Err(host.FactPIDs) == nil {
		obs[SignalPIDAvailable] = Observation{Available: clampInt64(f.PIDs.Available()), Capacity: clampInt64(f.PIDs.Max)}
	}
	return obs
}

// ThresholdsMet returns the thresholds whose signal was observed strictly
// below the threshold value. Exactly at the value is not met. Thresholds
// whose signal was not observed are not met.
func ThresholdsMet(thresholds []Threshold, obs map[Signal]Observation) []Threshold {
	var met []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		v := t.Value(o.Capacity)
		if v.Cmp(*resource.NewQuantity(o.Available, resource.DecimalSI)) > 0 {
			met = append(met, t)
		}
	}
	return met
}

// pressure reports whether any threshold for condition is met. known is
// false when no reading behind the condition was taken, in which case the
// caller keeps the condition's previous verdict, as the kubelet's eviction
// manager does when it cannot collect stats.
func pressure(condition corev1.NodeConditionType, thresholds []Threshold, f host.Facts) (under, known bool) {
	var fact host.Fact
	switch condition {
	case corev1.NodeMemoryPressure:
		fact = host.FactMemory
	case corev1.NodeDiskPressure:
		fact = host.FactRootFS
	case corev1.NodePIDPressure:
		fact = host.FactPIDs
	}
	if f.Err(fact) != nil {
		return false, false
	}
	for _, t := range ThresholdsMet(thresholds, Observations(f)) {
		if signalCondition[t.Signal] == condition {
			return true, true
		}
	}
	return false, true
}

// evictionReservation is the part of capacity the hard thresholds hold back
// from allocatable: memory.available reserves memory and nodefs.available
// reserves ephemeral-storage, percentages taken of the capacity given.
func evictionReservation(thresholds []Threshold, capacity corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, t := range thresholds {
		var name corev1.ResourceName
		switch t.Signal {
		case SignalMemoryAvailable:
			name = corev1.ResourceMemory
		case SignalNodeFsAvailable:
			name = corev1.ResourceEphemeralStorage
		default:
			continue
		}
		c := capacity[name]
		out[name] = t.Value(c.Value())
	}
	return out
}

// clampInt64 converts a reading to int64, saturating.
func clampInt64(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
