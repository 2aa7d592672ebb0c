package topology

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Policy names (topologyManagerPolicy).
const (
	PolicyNone           = "none"
	PolicyBestEffort     = "best-effort"
	PolicyRestricted     = "restricted"
	PolicySingleNUMANode = "single-numa-node"
)

// Scope names (topologyManagerScope).
const (
	ScopeContainer = "container"
	ScopePod       = "pod"
	// scopeNone is the scope the none policy runs with, whatever the
	// configured scope.
	scopeNone = "none"
)

// Option names (topologyManagerPolicyOptions keys).
const (
	OptionPreferClosestNUMANodes = "prefer-closest-numa-nodes"
	OptionMaxAllowableNUMANodes  = "max-allowable-numa-nodes"
)

// DefaultMaxAllowableNUMANodes is the largest machine, in NUMA nodes, a
// policy other than none runs on unless max-allowable-numa-nodes raises it.
const DefaultMaxAllowableNUMANodes = 8

// Options are the parsed topologyManagerPolicyOptions.
type Options struct {
	// PreferClosestNUMA breaks ties between preferred affinities of equal
	// width by the smaller average NUMA distance (not used by
	// single-numa-node, whose affinities have one node).
	PreferClosestNUMA bool
	// MaxAllowableNUMANodes is the most NUMA nodes the machine may have;
	// at least DefaultMaxAllowableNUMANodes.
	MaxAllowableNUMANodes int
}

// ParseOptions parses topologyManagerPolicyOptions with upstream's rules and
// messages. Keys are checked in sorted order, so the first error reported is
// stable. A nil or empty map gives the defaults.
func ParseOptions(raw map[string]string) (Options, error) {
	opts := Options{MaxAllowableNUMANodes: DefaultMaxAllowableNUMANodes}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, name := range keys {
		value := raw[name]
		switch name {
		case OptionPreferClosestNUMANodes:
			v, err := strconv.ParseBool(value)
			if err != nil {
				return opts, fmt.Errorf("bad value for option %q: %w", name, err)
			}
			opts.PreferClosestNUMA = v
		case OptionMaxAllowableNUMANodes:
			v, err := strconv.Atoi(value)
			if err != nil {
				return opts, fmt.Errorf("unable to convert policy option to integer %q: %w", name, err)
			}
			if v < DefaultMaxAllowableNUMANodes {
				return opts, fmt.Errorf("the minimum value of %q should not be less than %v", name, DefaultMaxAllowableNUMANodes)
			}
			opts.MaxAllowableNUMANodes = v
		default:
			return opts, fmt.Errorf("unknown Topology Manager Policy option: %q", name)
		}
	}
	return opts, nil
}

// ValidateConfig checks the topology manager's part of a kubelet
// configuration for a machine with numaNodes NUMA nodes. Policy and scope
// are checked as given (the caller applies the defaults none and container
// first); every problem found is returned, joined.
//
// As upstream, the options are only parsed, and the machine size only
// checked, when the policy is not none: the none policy ignores them.
func ValidateConfig(policy, scope string, options map[string]string, numaNodes int) error {
	var errs []error
	policies := []string{PolicyNone, PolicyBestEffort, PolicyRestricted, PolicySingleNUMANode}
	if !slices.Contains(policies, policy) {
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerPolicy (--topology-manager-policy) %q must be one of: %q", policy, policies))
	}
	if scope != ScopeContainer && scope != ScopePod {
		errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerScope (--topology-manager-scope) %q must be one of: %q, or %q", scope, ScopeContainer, ScopePod))
	}
	if policy != PolicyNone && slices.Contains(policies, policy) {
		opts, err := ParseOptions(options)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerPolicyOptions: %w", err))
		} else if numaNodes > opts.MaxAllowableNUMANodes {
			errs = append(errs, fmt.Errorf("invalid configuration: topologyManagerPolicy %q: unsupported on machines with more than %v NUMA Nodes", policy, opts.MaxAllowableNUMANodes))
		}
	}
	return errors.Join(errs...)
}
