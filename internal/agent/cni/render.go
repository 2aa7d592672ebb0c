package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Defaults of Network and of the file it is written to.
const (
	// Version is the cniVersion of the rendered list.
	Version = "1.0.0"
	// DefaultName is the network's name (the list's "name").
	DefaultName = "knode"
	// DefaultBridge is the Linux bridge the pods are attached to.
	DefaultBridge = "cni0"
	// DefaultDir is the kubelet's historical --cni-conf-dir and containerd's
	// default conf_dir.
	DefaultDir = "/etc/cni/net.d"
	// DefaultFileName sorts before the usual 99-*.conf files, so a runtime
	// that loads only the first config of its directory loads this one.
	DefaultFileName = "10-knode.conflist"
)

// Network is the pod network of one node. Its zero value, with PodCIDRs,
// is a valid network.
type Network struct {
	// Name is the CNI network's name; empty means DefaultName. It must
	// match [a-zA-Z0-9][a-zA-Z0-9_.-]*, libcni's rule.
	Name string
	// Bridge is the Linux bridge's name; empty means DefaultBridge. At most
	// 15 bytes (IFNAMSIZ - 1), with no '/', ':' or white space.
	Bridge string
	// PodCIDRs are the node's spec.podCIDRs: one or two CIDRs, at most one
	// per IP family, each a network address (no host bits set) with room for
	// a gateway and a pod (IPv4 /30 or shorter, IPv6 /126 or shorter). The
	// order is kept: the first is the pods' primary family.
	PodCIDRs []string
	// MTU is the bridge's and the pods' interfaces' MTU; zero leaves it to
	// the plugin (the bridge's default). Otherwise 68 to 65535, and at
	// least 1280 when a CIDR is IPv6.
	MTU int
	// IsGateway gives the bridge the first address of each pod CIDR, the
	// pods' default gateway, and turns on the machine's IP forwarding;
	// nil means true. false leaves the bridge's addresses and forwarding
	// to whoever made the bridge (a test that owns both).
	IsGateway *bool
	// HairpinMode lets a pod reach itself through a Service's address
	// (traffic leaves by the veth and comes back on it); nil means true.
	HairpinMode *bool
	// IPMasq masquerades traffic from the pods to destinations outside
	// their CIDRs with the node's address.
	IPMasq bool
	// IPAMDataDir is where host-local records the addresses it handed out;
	// empty means host-local's own default (/var/lib/cni/networks). It must
	// be an absolute path.
	IPAMDataDir string
}

// The list's JSON, in the order the CNI spec documents its fields.
type (
	confList struct {
		CNIVersion string `json:"cniVersion"`
		Name       string `json:"name"`
		Plugins    []any  `json:"plugins"`
	}
	bridgeConf struct {
		Type        string   `json:"type"`
		Bridge      string   `json:"bridge"`
		IsGateway   bool     `json:"isGateway"`
		IPMasq      bool     `json:"ipMasq"`
		HairpinMode bool     `json:"hairpinMode"`
		MTU         int      `json:"mtu,omitempty"`
		IPAM        ipamConf `json:"ipam"`
	}
	ipamConf struct {
		Type    string       `json:"type"`
		Ranges  [][]ipRange  `json:"ranges"`
		Routes  []routeEntry `json:"routes"`
		DataDir string       `json:"dataDir,omitempty"`
	}
	ipRange struct {
		Subnet string `json:"subnet"`
	}
	routeEntry struct {
		Dst string `json:"dst"`
	}
	portmapConf struct {
		Type         string          `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
		SNAT         bool            `json:"snat"`
	}
)

// Render returns the network config list for n: a JSON document ending in
// a newline, the same bytes for the same Network. Bad fields are reported
// together, each naming the field and the rule.
func Render(n Network) ([]byte, error) {
	n.setDefaults()
	errs := n.validateTemplate(nil)
	prefixes, cidrErrs := parsePodCIDRs(n.PodCIDRs, field.NewPath("podCIDRs"))
	errs = append(errs, cidrErrs...)
	if n.MTU != 0 && n.MTU < 1280 {
		for _, p := range prefixes {
			if p.Addr().Is6() {
				errs = append(errs, field.Invalid(field.NewPath("mtu"), n.MTU, "must be at least 1280 with an IPv6 pod CIDR"))
				break
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	ipam := ipamConf{Type: "host-local", DataDir: n.IPAMDataDir}
	for _, p := range prefixes {
		ipam.Ranges = append(ipam.Ranges, []ipRange{{Subnet: p.String()}})
		dst := "0.0.0.0/0"
		if p.Addr().Is6() {
			dst = "::/0"
		}
		ipam.Routes = append(ipam.Routes, routeEntry{Dst: dst})
	}
	list := confList{
		CNIVersion: Version,
		Name:       n.Name,
		Plugins: []any{
			bridgeConf{
				Type:        "bridge",
				Bridge:      n.Bridge,
				IsGateway:   n.IsGateway == nil || *n.IsGateway,
				IPMasq:      n.IPMasq,
				HairpinMode: *n.HairpinMode,
				MTU:         n.MTU,
				IPAM:        ipam,
			},
			portmapConf{
				Type:         "portmap",
				Capabilities: map[string]bool{"portMappings": true},
				SNAT:         true,
			},
		},
	}
	out, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cni: encoding the network config list: %w", err)
	}
	return append(out, '\n'), nil
}

// setDefaults fills the empty fields that have defaults.
func (n *Network) setDefaults() {
	if n.Name == "" {
		n.Name = DefaultName
	}
	if n.Bridge == "" {
		n.Bridge = DefaultBridge
	}
	if n.HairpinMode == nil {
		on := true
		n.HairpinMode = &on
	}
}

// networkName is libcni's rule for a network's name.
var networkName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

// maxIfName is the longest Linux interface name (IFNAMSIZ - 1).
const maxIfName = 15

// validateTemplate checks every field but PodCIDRs, after setDefaults.
func (n *Network) validateTemplate(base *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !networkName.MatchString(n.Name) {
		errs = append(errs, field.Invalid(base.Child("name"), n.Name, "must match [a-zA-Z0-9][a-zA-Z0-9_.-]*"))
	}
	switch {
	case len(n.Bridge) > maxIfName:
		errs = append(errs, field.TooLong(base.Child("bridge"), n.Bridge, maxIfName))
	case n.Bridge == "." || n.Bridge == ".." || strings.ContainsAny(n.Bridge, "/: \t\n\r\v\f"):
		errs = append(errs, field.Invalid(base.Child("bridge"), n.Bridge, "must be a Linux interface name: not . or .., no '/', ':' or white space"))
	}
	if n.MTU != 0 && (n.MTU < 68 || n.MTU > 65535) {
		errs = append(errs, field.Invalid(base.Child("mtu"), n.MTU, "must be 0 (the plugin's default) or from 68 to 65535"))
	}
	if n.IPAMDataDir != "" && !filepath.IsAbs(n.IPAMDataDir) {
		errs = append(errs, field.Invalid(base.Child("ipamDataDir"), n.IPAMDataDir, "must be an absolute path"))
	}
	return errs
}

// parsePodCIDRs checks a node's pod CIDRs and returns them parsed, in
// order: one or two, at most one per family, each a network address with
// room for a gateway and a pod.
func parsePodCIDRs(cidrs []string, path *field.Path) ([]netip.Prefix, field.ErrorList) {
	var errs field.ErrorList
	switch {
	case len(cidrs) == 0:
		return nil, field.ErrorList{field.Required(path, "the node has no pod CIDR yet")}
	case len(cidrs) > 2:
		return nil, field.ErrorList{field.TooMany(path, len(cidrs), 2)}
	}
	var out []netip.Prefix
	seen := map[bool]int{} // is IPv6 → index
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be a CIDR such as 10.244.1.0/24 or fd00:10:244:1::/64"))
			continue
		}
		if p.Addr().Is4In6() {
			errs = append(errs, field.Invalid(path.Index(i), s, "must be an IPv4 or IPv6 CIDR, not an IPv4-mapped IPv6 one"))
			continue
		}
		if p.Masked() != p {
			errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("must be a network address (no host bits set): %s", p.Masked())))
			continue
		}
		v6 := p.Addr().Is6()
		maxBits, family := 30, "IPv4"
		if v6 {
			maxBits, family = 126, "IPv6"
		}
		if p.Bits() > maxBits {
			errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("must leave room for a gateway and a pod: an %s prefix of /%d or shorter", family, maxBits)))
			continue
		}
		if j, dup := seen[v6]; dup {
			errs = append(errs, field.Invalid(path.Index(i), s, fmt.Sprintf("must be of another IP family than podCIDRs[%d]: at most one %s CIDR", j, family)))
			continue
		}
		seen[v6] = i
		out = append(out, p)
	}
	return out, errs
}
