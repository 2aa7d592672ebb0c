package apiendpoints

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The object this package writes, and its fixed parts (upstream's).
const (
	Namespace = metav1.NamespaceDefault
	Name      = "kubernetes"
	// PortName names every port of the object.
	PortName = "https"
	// SkipMirrorLabel, set to "true", keeps the EndpointSlice mirroring
	// controller off the object, as upstream sets it.
	SkipMirrorLabel = "endpointslice.kubernetes.io/skip-mirror"
)

// parseAddress reads "ip:port" with an IP literal (no zone) and a port in
// 1-65535, and returns it in canonical form.
func parseAddress(s string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("%q is not an IP address without a zone", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %q is not in 1-65535", port)
	}
	return netip.AddrPortFrom(ip, uint16(n)), nil
}

// formatAddress is the "ip:port" form of a, IPv6 bracketed.
func formatAddress(a netip.AddrPort) string {
	return net.JoinHostPort(a.Addr().String(), strconv.Itoa(int(a.Port())))
}

// compareAddrPort orders by IP (numerically, IPv4 first), then port.
func compareAddrPort(a, b netip.AddrPort) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Port(), b.Port()))
}

// Subsets is the subsets of the Endpoints listing addrs ("ip:port"
// entries): one subset per distinct port, in ascending port order, each
// with its IPs sorted and one TCP port named PortName. Entries that are
// not an IP literal and a port are left out, as are duplicates. No
// entries give nil.
func Subsets(addrs []string) []corev1.EndpointSubset {
	var parsed []netip.AddrPort
	for _, s := range addrs {
		if a, err := parseAddress(s); err == nil {
			parsed = append(parsed, a)
		}
	}
	slices.SortFunc(parsed, func(a, b netip.AddrPort) int {
		return cmp.Or(cmp.Compare(a.Port(), b.Port()), a.Addr().Compare(b.Addr()))
	})
	parsed = slices.Compact(parsed)
	var subsets []corev1.EndpointSubset
	for i, a := range parsed {
		if i == 0 || parsed[i-1].Port() != a.Port() {
			subsets = append(subsets, corev1.EndpointSubset{
				Ports: []corev1.EndpointPort{{Name: PortName, Port: int32(a.Port()), Protocol: corev1.ProtocolTCP}},
			})
		}
		last := &subsets[len(subsets)-1]
		last.Addresses = append(last.Addresses, corev1.EndpointAddress{IP: a.Addr().String()})
	}
	return subsets
}

// Addresses is the inverse of Subsets: the servers ep lists, as sorted,
// distinct "ip:port" entries (IPv6 bracketed). It reads each subset's
// ready addresses with each of its TCP ports, except that a subset with
// several ports contributes only those named PortName; not-ready
// addresses and IPs that do not parse are left out. A nil ep gives nil.
// Upstream's own shape (one subset, one port) reads the same way.
func Addresses(ep *corev1.Endpoints) []string {
	if ep == nil {
		return nil
	}
	var found []netip.AddrPort
	for _, ss := range ep.Subsets {
		for _, p := range ss.Ports {
			if (len(ss.Ports) > 1 && p.Name != PortName) ||
				(p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) ||
				p.Port < 1 || p.Port > 65535 {
				continue
			}
			for _, a := range ss.Addresses {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil {
					continue
				}
				found = append(found, netip.AddrPortFrom(ip, uint16(p.Port)))
			}
		}
	}
	slices.SortFunc(found, compareAddrPort)
	found = slices.Compact(found)
	if len(found) == 0 {
		return nil
	}
	out := make([]string, len(found))
	for i, a := range found {
		out[i] = formatAddress(a)
	}
	return out
}

// plan decides the write that makes current list exactly live: nil when
// current already does, a new object to create when current is nil, or
// otherwise a changed copy of current to update (current is not
// modified). Pure.
func plan(current *corev1.Endpoints, live []string) *corev1.Endpoints {
	subsets := Subsets(live)
	if current == nil {
		return &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, Labels: map[string]string{SkipMirrorLabel: "true"}},
			Subsets:    subsets,
		}
	}
	if current.Labels[SkipMirrorLabel] == "true" && equality.Semantic.DeepEqual(normalize(current.Subsets), subsets) {
		return nil
	}
	next := current.DeepCopy()
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	next.Labels[SkipMirrorLabel] = "true"
	next.Subsets = subsets
	return next
}

// normalize treats an empty subset list as nil, as the API returns either.
func normalize(s []corev1.EndpointSubset) []corev1.EndpointSubset {
	if len(s) == 0 {
		return nil
	}
	return s
}
