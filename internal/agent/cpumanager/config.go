package cpumanager

import (
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/host"
)

// Policy names (the kubelet's cpuManagerPolicy values).
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// OptionFullPCPUsOnly is the static policy option that allocates only whole
// physical cores: a request that is not a multiple of the SMT level is
// rejected with an SMTAlignmentError.
const OptionFullPCPUsOnly = "full-pcpus-only"

// Config is the CPU manager's part of the kubelet configuration.
type Config struct {
	// Policy is cpuManagerPolicy: PolicyNone or PolicyStatic. Empty means
	// PolicyNone.
	Policy string
	// Options is cpuManagerPolicyOptions; only OptionFullPCPUsOnly is
	// supported, with a strconv.ParseBool value.
	Options map[string]string
	// ReservedSystemCPUs is reservedSystemCPUs in cpuset list syntax
	// ("0-1,6"). When set it is the reserved set, as given.
	ReservedSystemCPUs string
	// ReservedCPU is kube-reserved cpu + system-reserved cpu. When
	// ReservedSystemCPUs is empty, its ceiling in whole CPUs is reserved.
	// The static policy needs it non-zero unless ReservedSystemCPUs is set.
	ReservedCPU resource.Quantity
}

// options are the parsed policy options.
type options struct {
	fullPCPUsOnly bool
}

func (c Config) policy() string {
	if c.Policy == "" {
		return PolicyNone
	}
	return c.Policy
}

func (c Config) parseOptions() (options, error) {
	var o options
	for name, value := range c.Options {
		switch name {
		case OptionFullPCPUsOnly:
			v, err := strconv.ParseBool(value)
			if err != nil {
				return o, fmt.Errorf("bad value for option %q: %w", name, err)
			}
			o.fullPCPUsOnly = v
		default:
			return o, fmt.Errorf("unknown CPU Manager Policy option: %q", name)
		}
	}
	return o, nil
}

// Validate checks the policy name, the options and the reservedSystemCPUs
// syntax, and that the static policy has a non-zero CPU reservation. It does
// not need the machine; NewStatic checks the reservation against it.
func (c Config) Validate() error {
	switch c.policy() {
	case PolicyNone:
	case PolicyStatic:
		if _, err := c.parseOptions(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown policy: \"%s\"", c.Policy)
	}
	specific, err := cpuset.Parse(c.ReservedSystemCPUs)
	if err != nil {
		return fmt.Errorf("reservedSystemCPUs: unable to parse %q: %w", c.ReservedSystemCPUs, err)
	}
	if c.policy() == PolicyStatic && specific.IsEmpty() && c.ReservedCPU.IsZero() {
		return fmt.Errorf("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero")
	}
	return nil
}

// NumReservedCPUs is the number of reserved CPUs: the size of
// ReservedSystemCPUs when set (the kubelet then overrides the reserved
// quantity with it), else the ceiling of ReservedCPU in whole CPUs.
func (c Config) NumReservedCPUs() int {
	if specific, err := cpuset.Parse(c.ReservedSystemCPUs); err == nil && specific.Size() > 0 {
		return specific.Size()
	}
	return int(math.Ceil(float64(c.ReservedCPU.MilliValue()) / 1000))
}

// ReservedCPUs returns the CPUs the static policy keeps out of exclusive
// allocation on machine t: ReservedSystemCPUs as given, else
// NumReservedCPUs CPUs taken with TakeByTopology from all of t's CPUs (so
// whole NUMA nodes, sockets and cores, low-numbered first when equal).
func ReservedCPUs(t host.Topology, c Config) (cpuset.CPUSet, error) {
	return reservedCPUs(newMachine(t), c)
}

func reservedCPUs(m *machine, c Config) (cpuset.CPUSet, error) {
	specific, err := cpuset.Parse(c.ReservedSystemCPUs)
	if err != nil {
		return cpuset.New(), fmt.Errorf("reservedSystemCPUs: unable to parse %q: %w", c.ReservedSystemCPUs, err)
	}
	if specific.Size() > 0 {
		if !specific.IsSubsetOf(m.all) {
			return cpuset.New(), fmt.Errorf("reservedSystemCPUs %q: CPUs %q are not on this machine", specific, specific.Difference(m.all))
		}
		return specific, nil
	}
	n := c.NumReservedCPUs()
	reserved, _ := takeByTopology(m, m.all, n)
	if reserved.Size() != n {
		return cpuset.New(), fmt.Errorf("[cpumanager] unable to reserve the required amount of CPUs (size of %s did not equal %d)", reserved, n)
	}
	return reserved, nil
}
