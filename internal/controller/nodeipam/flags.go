package nodeipam

import (
	"errors"
	"fmt"
	"net"
	"strings"

	netutils "k8s.io/utils/net"
)

// Default node CIDR mask sizes, as kube-controller-manager's.
const (
	DefaultNodeCIDRMaskSizeIPv4 = 24
	DefaultNodeCIDRMaskSizeIPv6 = 64
)

// ErrInvalidFlags is matched (errors.Is) by every error ParseFlags returns.
var ErrInvalidFlags = errors.New("invalid node IPAM flags")

// flagError keeps upstream's message text and matches ErrInvalidFlags.
type flagError struct{ msg string }

func (e *flagError) Error() string { return e.msg }
func (e *flagError) Unwrap() error { return ErrInvalidFlags }

func flagErrorf(format string, args ...any) error {
	return &flagError{msg: fmt.Sprintf(format, args...)}
}

// ParseFlags turns kube-controller-manager's node IPAM flags into the
// range part of a Config (ClusterCIDRs and both mask sizes); the caller
// adds Client, Clock and Logger. Call it only when --allocate-node-cidrs
// is set.
//
//   - clusterCIDR is --cluster-cidr: one CIDR, or a comma-separated
//     IPv4/IPv6 pair (dual stack) in either order; the order is the order
//     of every node's spec.podCIDRs.
//   - maskSize is --node-cidr-mask-size, maskSizeIPv4 and maskSizeIPv6 are
//     --node-cidr-mask-size-ipv4 and -ipv6; 0 means the flag is not set.
//
// The rules are upstream's: the generic mask flag is refused with dual
// stack and may not be combined with the per-family ones; a per-family
// flag must match a single-stack cluster's family; unset masks default to
// 24 (IPv4) and 64 (IPv6); a node mask may not be shorter than its cluster
// CIDR's mask, and an IPv6 one may be at most 16 bits longer.
func ParseFlags(clusterCIDR string, maskSize, maskSizeIPv4, maskSizeIPv6 int) (Config, error) {
	cidrs, err := parseClusterCIDRs(clusterCIDR)
	if err != nil {
		return Config{}, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"--node-cidr-mask-size", maskSize}, {"--node-cidr-mask-size-ipv4", maskSizeIPv4}, {"--node-cidr-mask-size-ipv6", maskSizeIPv6}} {
		if f.v < 0 {
			return Config{}, flagErrorf("%s must not be negative, got %d", f.name, f.v)
		}
	}
	v4, v6, err := nodeMaskSizes(cidrs, maskSize, maskSizeIPv4, maskSizeIPv6)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{ClusterCIDRs: cidrs, NodeCIDRMaskSizeIPv4: v4, NodeCIDRMaskSizeIPv6: v6}
	if _, err := newSets(cfg); err != nil {
		return Config{}, &flagError{msg: err.Error()}
	}
	return cfg, nil
}

// parseClusterCIDRs applies upstream's --cluster-cidr rules: at most two
// CIDRs, and two must be one of each family.
func parseClusterCIDRs(list string) ([]*net.IPNet, error) {
	if strings.TrimSpace(list) == "" {
		return nil, flagErrorf("must specify --cluster-cidr if --allocate-node-cidrs is set")
	}
	var cidrs []*net.IPNet
	for i, s := range strings.Split(strings.TrimSpace(list), ",") {
		_, cidr, err := netutils.ParseCIDRSloppy(strings.TrimSpace(s))
		if err != nil {
			return nil, flagErrorf("--cluster-cidr: invalid CIDR[%d] %q: %v", i, s, err)
		}
		cidrs = append(cidrs, cidr)
	}
	dualStack, err := netutils.IsDualStackCIDRs(cidrs)
	if err != nil {
		return nil, flagErrorf("--cluster-cidr: %v", err)
	}
	if len(cidrs) > 1 && !dualStack {
		// Upstream's text, unbalanced parenthesis included.
		return nil, flagErrorf("len of ClusterCIDRs==%v and they are not configured as dual stack (at least one from each IPFamily", len(cidrs))
	}
	if len(cidrs) > 2 {
		return nil, flagErrorf("length of clusterCIDRs is:%v more than max allowed of 2", len(cidrs))
	}
	return cidrs, nil
}

// nodeMaskSizes decides the IPv4 and IPv6 node mask sizes from the three
// flags (0 = unset), as upstream's setNodeCIDRMaskSizes does.
func nodeMaskSizes(cidrs []*net.IPNet, maskSize, maskSizeIPv4, maskSizeIPv6 int) (v4, v6 int, err error) {
	v4, v6 = DefaultNodeCIDRMaskSizeIPv4, DefaultNodeCIDRMaskSizeIPv6
	if len(cidrs) > 1 {
		if maskSize != 0 {
			return 0, 0, flagErrorf("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
		}
		if maskSizeIPv4 != 0 {
			v4 = maskSizeIPv4
		}
		if maskSizeIPv6 != 0 {
			v6 = maskSizeIPv6
		}
		return v4, v6, nil
	}
	if maskSize != 0 {
		if maskSizeIPv4 != 0 || maskSizeIPv6 != 0 {
			return 0, 0, flagErrorf("usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags")
		}
		return maskSize, maskSize, nil
	}
	singleStackIPv6 := netutils.IsIPv6CIDR(cidrs[0])
	if maskSizeIPv4 != 0 {
		if singleStackIPv6 {
			return 0, 0, flagErrorf("usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster")
		}
		v4 = maskSizeIPv4
	}
	if maskSizeIPv6 != 0 {
		if !singleStackIPv6 {
			return 0, 0, flagErrorf("usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster")
		}
		v6 = maskSizeIPv6
	}
	return v4, v6, nil
}
