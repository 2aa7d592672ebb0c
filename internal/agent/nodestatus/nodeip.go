package nodestatus

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	netutils "k8s.io/utils/net"

	"knode/internal/agent/host"
)

// ParseNodeIPs parses the --node-ip flag: empty, one IP, or a
// comma-separated dual-stack pair (one IPv4, one IPv6, primary first).
// 0.0.0.0 or :: alone means "detect, preferring this family"; neither may be
// part of a pair. Spaces around entries are ignored, and IPv4 entries may
// carry leading zeros, as upstream's sloppy parsing allows.
//
// Errors read like the kubelet's: `bad --node-ip "<value>": <rule>`.
// Deviation: upstream logs an unparsable entry and ignores it; here it is an
// error, so a typo stops the agent instead of changing its address.
func ParseNodeIPs(s string) ([]net.IP, error) {
	if s == "" {
		return nil, nil
	}
	var ips []net.IP
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		ip := netutils.ParseIPSloppy(entry)
		if ip == nil {
			return nil, fmt.Errorf("bad --node-ip %q: could not parse %q", s, entry)
		}
		ips = append(ips, ip)
	}
	if err := checkNodeIPs(ips); err != nil {
		return nil, fmt.Errorf("bad --node-ip %q: %w", s, err)
	}
	return ips, nil
}

// checkNodeIPs applies the shape rules of --node-ip to a parsed list.
func checkNodeIPs(ips []net.IP) error {
	switch {
	case len(ips) > 2 || (len(ips) == 2 && netutils.IsIPv6(ips[0]) == netutils.IsIPv6(ips[1])):
		return errors.New("must contain either a single IP or a dual-stack pair of IPs")
	case len(ips) == 2 && (ips[0].IsUnspecified() || ips[1].IsUnspecified()):
		return errors.New("dual-stack node IP cannot include '0.0.0.0' or '::'")
	}
	return nil
}

// ValidateNodeIP checks that ip may be a node's address: not loopback,
// multicast, link-local or unspecified, and configured on one of the
// network's interfaces. Messages are upstream's.
func ValidateNodeIP(ip net.IP, network host.Network) error {
	if ip.To4() == nil && ip.To16() == nil {
		return errors.New("nodeIP must be a valid IP address")
	}
	if ip.IsLoopback() {
		return errors.New("nodeIP can't be loopback address")
	}
	if ip.IsMulticast() {
		return errors.New("nodeIP can't be a multicast address")
	}
	if ip.IsLinkLocalUnicast() {
		return errors.New("nodeIP can't be a link-local unicast address")
	}
	if ip.IsUnspecified() {
		return errors.New("nodeIP can't be an all zeros address")
	}
	want := toAddr(ip)
	for _, iface := range network.Interfaces {
		for _, p := range iface.Addrs {
			if p.Addr().Unmap() == want {
				return nil
			}
		}
	}
	return fmt.Errorf("node IP: %q not found in the host's network interfaces", ip.String())
}

// toAddr converts a valid net.IP to an unmapped netip.Addr.
func toAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// familyOrder returns the families to try, preferred first.
func familyOrder(preferIPv4 bool) []host.Family {
	if preferIPv4 {
		return []host.Family{host.IPv4, host.IPv6}
	}
	return []host.Family{host.IPv6, host.IPv4}
}

// defaultAddress picks the node's address from the default routes, as
// upstream's ResolveBindAddress does for an unset or unspecified bind
// address: the first global unicast address of the preferred family on an
// up interface holding a default route of that family (or on an up loopback
// interface, for BGP-style hosts whose links carry only link-local
// addresses), then the other family. A machine without a routing table
// instead takes the first such address on any up, non-loopback,
// non-point-to-point interface.
func defaultAddress(network host.Network, preferIPv4 bool) (net.IP, error) {
	families := familyOrder(preferIPv4)
	if network.NoRouteTable {
		return addressFromInterfaces(network, families)
	}
	if len(network.DefaultRoutes) == 0 {
		return nil, fmt.Errorf("no default routes found in %q or %q", "/proc/net/route", "/proc/net/ipv6_route")
	}
	for _, family := range families {
		for _, route := range network.DefaultRoutes {
			if route.Family != family {
				continue
			}
			iface, ok := interfaceByName(network, route.Interface)
			if !ok {
				return nil, errors.New("route ip+net: no such network interface")
			}
			if iface.Up() {
				if ip, ok := globalAddress(iface, family); ok {
					return ip, nil
				}
			}
			for _, lo := range network.Interfaces {
				if lo.Up() && lo.Flags&net.FlagLoopback != 0 {
					if ip, ok := globalAddress(lo, family); ok {
						return ip, nil
					}
				}
			}
		}
	}
	return nil, errors.New("unable to select an IP from default routes.")
}

// addressFromInterfaces is the no-routing-table fallback.
func addressFromInterfaces(network host.Network, families []host.Family) (net.IP, error) {
	if len(network.Interfaces) == 0 {
		return nil, errors.New("no interfaces found on host.")
	}
	for _, family := range families {
		for _, iface := range network.Interfaces {
			if !iface.Up() || iface.Flags&(net.FlagLoopback|net.FlagPointToPoint) != 0 {
				continue
			}
			if ip, ok := globalAddress(iface, family); ok {
				return ip, nil
			}
		}
	}
	return nil, errors.New("no acceptable interface with global unicast address found on host")
}

// interfaceByName finds an interface by name.
func interfaceByName(network host.Network, name string) (host.Interface, bool) {
	for _, i := range network.Interfaces {
		if i.Name == name {
			return i, true
		}
	}
	return host.Interface{}, false
}

// globalAddress returns the first global unicast address of family on iface.
func globalAddress(iface host.Interface, family host.Family) (net.IP, bool) {
	for _, p := range iface.Addrs {
		a := p.Addr().Unmap()
		if host.FamilyOf(a) == family && a.IsGlobalUnicast() {
			return net.IP(a.AsSlice()), true
		}
	}
	return nil, false
}
