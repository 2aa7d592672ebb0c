package nodestatus

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/agent/host"
)

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

func TestParseNodeIPs(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "unset", in: ""},
		{name: "one IPv4", in: "10.0.0.1", want: []string{"10.0.0.1"}},
		{name: "one IPv6", in: "fd00::1", want: []string{"fd00::1"}},
		{name: "spaces are trimmed", in: " 10.0.0.1 ", want: []string{"10.0.0.1"}},
		{name: "leading zeros are accepted", in: "010.000.000.001", want: []string{"10.0.0.1"}},
		{name: "dual-stack pair", in: "10.0.0.1,fd00::1", want: []string{"10.0.0.1", "fd00::1"}},
		{name: "dual-stack pair, IPv6 primary", in: "fd00::1, 10.0.0.1", want: []string{"fd00::1", "10.0.0.1"}},
		{name: "unspecified IPv4 prefers IPv4", in: "0.0.0.0", want: []string{"0.0.0.0"}},
		{name: "unspecified IPv6 prefers IPv6", in: "::", want: []string{"::"}},
		{name: "two of one family", in: "10.0.0.1,10.0.0.2", wantErr: `bad --node-ip "10.0.0.1,10.0.0.2": must contain either a single IP or a dual-stack pair of IPs`},
		{name: "three IPs", in: "10.0.0.1,fd00::1,10.0.0.2", wantErr: `bad --node-ip "10.0.0.1,fd00::1,10.0.0.2": must contain either a single IP or a dual-stack pair of IPs`},
		{name: "unspecified in a pair", in: "0.0.0.0,fd00::1", wantErr: `bad --node-ip "0.0.0.0,fd00::1": dual-stack node IP cannot include '0.0.0.0' or '::'`},
		{name: "unspecified IPv6 in a pair", in: "10.0.0.1,::", wantErr: `bad --node-ip "10.0.0.1,::": dual-stack node IP cannot include '0.0.0.0' or '::'`},
		{name: "not an IP", in: "node-1", wantErr: `bad --node-ip "node-1": could not parse "node-1"`},
		{name: "trailing comma", in: "10.0.0.1,", wantErr: `bad --node-ip "10.0.0.1,": could not parse ""`},
		{name: "CIDR", in: "10.0.0.1/24", wantErr: `bad --node-ip "10.0.0.1/24": could not parse "10.0.0.1/24"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNodeIPs(tt.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Fatalf("ParseNodeIPs(%q) error = %q, want %q", tt.in, gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, ipStrings(got)); diff != "" {
				t.Errorf("ParseNodeIPs(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func FuzzParseNodeIPs(f *testing.F) {
	for _, s := range []string{"", "10.0.0.1", "fd00::1", "10.0.0.1,fd00::1", "0.0.0.0", "::", "::ffff:10.0.0.1,fd00::1", " 1.2.3.4 ,::1", "010.1.1.1", "a,b,c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ips, err := ParseNodeIPs(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bad --node-ip ") {
				t.Fatalf("error %q does not name the flag", err)
			}
			return
		}
		if len(ips) > 2 {
			t.Fatalf("ParseNodeIPs(%q) = %v: more than two IPs", s, ips)
		}
		if len(ips) == 2 {
			if (ips[0].To4() != nil) == (ips[1].To4() != nil) {
				t.Fatalf("ParseNodeIPs(%q) = %v: pair of one family", s, ips)
			}
			if ips[0].IsUnspecified() || ips[1].IsUnspecified() {
				t.Fatalf("ParseNodeIPs(%q) = %v: unspecified in a pair", s, ips)
			}
		}
		// The canonical form parses back to the same IPs.
		again, err := ParseNodeIPs(strings.Join(ipStrings(ips), ","))
		if err != nil {
			t.Fatalf("canonical form of %q does not parse: %v", s, err)
		}
		if diff := cmp.Diff(ipStrings(ips), ipStrings(again)); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", s, diff)
		}
	})
}

func TestValidateNodeIP(t *testing.T) {
	network := machine().Network
	tests := []struct {
		name    string
		ip      net.IP
		wantErr string
	}{
		{name: "on eth0", ip: ip("192.0.2.10")},
		{name: "IPv6 on eth0", ip: ip("2001:db8::10")},
		{name: "on a down interface still counts", ip: ip("198.51.100.20")},
		{name: "invalid", ip: net.IP{1, 2, 3}, wantErr: "nodeIP must be a valid IP address"},
		{name: "loopback", ip: ip("127.0.0.1"), wantErr: "nodeIP can't be loopback address"},
		{name: "IPv6 loopback", ip: ip("::1"), wantErr: "nodeIP can't be loopback address"},
		{name: "multicast", ip: ip("239.0.0.254"), wantErr: "nodeIP can't be a multicast address"},
		{name: "link-local", ip: ip("169.254.0.1"), wantErr: "nodeIP can't be a link-local unicast address"},
		{name: "IPv6 link-local even if configured", ip: ip("fe80::1"), wantErr: "nodeIP can't be a link-local unicast address"},
		{name: "unspecified", ip: ip("0.0.0.0"), wantErr: "nodeIP can't be an all zeros address"},
		{name: "not on this host", ip: ip("114.114.114.114"), wantErr: `node IP: "114.114.114.114" not found in the host's network interfaces`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateNodeIP(tt.ip, network)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("ValidateNodeIP(%v) = %q, want %q", tt.ip, gotErr, tt.wantErr)
			}
		})
	}
}

func TestNodeAddress(t *testing.T) {
	errNetwork := errors.New("list network interfaces: netlink denied")
	hostnameAddr := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1"}
	internal := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	lookup := func(addrs ...string) func(string) ([]net.IP, error) {
		return func(name string) ([]net.IP, error) {
			if name != "node-1" {
				return nil, errors.New("looked up the wrong name: " + name)
			}
			var out []net.IP
			for _, a := range addrs {
				out = append(out, ip(a))
			}
			return out, nil
		}
	}
	withNetwork := func(change func(n *host.Network)) host.Facts {
		f := machine()
		n := f.Network
		n.Interfaces = append([]host.Interface(nil), n.Interfaces...)
		change(&n)
		f.Network = n
		return f
	}

	tests := []struct {
		name            string
		nodeIPs         string
		cloud           string
		hostname        string
		lookupIP        func(string) ([]net.IP, error)
		facts           host.Facts
		annotations     map[string]string
		addresses       []corev1.NodeAddress
		wantAddresses   []corev1.NodeAddress
		wantAnnotations map[string]string
		wantErr         string
	}{
		{
			name:          "no node IP: the IPv4 address of the default-route interface",
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:          "specified IPv4",
			nodeIPs:       "192.0.2.10",
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:          "0.0.0.0 prefers IPv4",
			nodeIPs:       "0.0.0.0",
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:          ":: prefers IPv6",
			nodeIPs:       "::",
			wantAddresses: []corev1.NodeAddress{internal("2001:db8::10"), hostnameAddr},
		},
		{
			name:          "dual-stack pair",
			nodeIPs:       "192.0.2.10,2001:db8::10",
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), internal("2001:db8::10"), hostnameAddr},
		},
		{
			name:          "dual-stack pair, IPv6 primary keeps its order",
			nodeIPs:       "2001:db8::10,192.0.2.10",
			wantAddresses: []corev1.NodeAddress{internal("2001:db8::10"), internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:      "loopback is refused",
			nodeIPs:   "127.0.0.1",
			addresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
			// The setter fails before touching the addresses.
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
			wantErr:       "failed to validate nodeIP: nodeIP can't be loopback address",
		},
		{
			name:    "multicast is refused",
			nodeIPs: "224.0.0.1",
			wantErr: "failed to validate nodeIP: nodeIP can't be a multicast address",
		},
		{
			name:    "an IP not on the host is refused",
			nodeIPs: "203.0.113.9",
			wantErr: `failed to validate nodeIP: node IP: "203.0.113.9" not found in the host's network interfaces`,
		},
		{
			name:    "a secondary IP not on the host is refused",
			nodeIPs: "192.0.2.10,2001:db8::99",
			wantErr: `failed to validate secondaryNodeIP: node IP: "2001:db8::99" not found in the host's network interfaces`,
		},
		{
			name:    "unreadable interfaces fail validation",
			nodeIPs: "192.0.2.10",
			facts:   withErr(machine(), host.FactNetwork, errNetwork),
			wantErr: "failed to validate nodeIP: list network interfaces: netlink denied",
		},
		{
			name:          "hostname that is an IP is used as is",
			hostname:      "203.0.113.7",
			wantAddresses: []corev1.NodeAddress{internal("203.0.113.7"), {Type: corev1.NodeHostName, Address: "203.0.113.7"}},
		},
		{
			name:          "DNS: the first valid address of the preferred family",
			lookupIP:      lookup("127.0.0.1", "2001:db8::10", "192.0.2.10"),
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:          "DNS: the other family when the preferred has none",
			lookupIP:      lookup("127.0.0.1", "2001:db8::10"),
			wantAddresses: []corev1.NodeAddress{internal("2001:db8::10"), hostnameAddr},
		},
		{
			name:          "DNS with :: prefers IPv6",
			nodeIPs:       "::",
			lookupIP:      lookup("192.0.2.10", "2001:db8::10"),
			wantAddresses: []corev1.NodeAddress{internal("2001:db8::10"), hostnameAddr},
		},
		{
			name:          "DNS with no valid address falls back to the default route",
			lookupIP:      lookup("127.0.0.1", "203.0.113.50"),
			nodeIPs:       "::",
			wantAddresses: []corev1.NodeAddress{internal("2001:db8::10"), hostnameAddr},
		},
		{
			name: "only an IPv6 default route: IPv6 even though IPv4 is preferred",
			facts: withNetwork(func(n *host.Network) {
				n.DefaultRoutes = []host.Route{{Interface: "eth0", Family: host.IPv6}}
			}),
			wantAddresses: []corev1.NodeAddress{internal("2001:db8::10"), hostnameAddr},
		},
		{
			name: "default-route interface down: a global address on loopback",
			facts: withNetwork(func(n *host.Network) {
				n.Interfaces[0].Addrs = append(n.Interfaces[0].Addrs, netip.MustParsePrefix("198.51.100.5/32"))
				n.DefaultRoutes = []host.Route{{Interface: "eth1", Family: host.IPv4}}
			}),
			wantAddresses: []corev1.NodeAddress{internal("198.51.100.5"), hostnameAddr},
		},
		{
			name: "default route via an unknown interface",
			facts: withNetwork(func(n *host.Network) {
				n.DefaultRoutes = []host.Route{{Interface: "wg0", Family: host.IPv4}}
			}),
			wantErr: "can't get ip address of node node-1. error: route ip+net: no such network interface",
		},
		{
			name: "no default routes",
			facts: withNetwork(func(n *host.Network) {
				n.DefaultRoutes = nil
			}),
			wantErr: `can't get ip address of node node-1. error: no default routes found in "/proc/net/route" or "/proc/net/ipv6_route"`,
		},
		{
			name: "default routes without a usable address",
			facts: withNetwork(func(n *host.Network) {
				n.DefaultRoutes = []host.Route{{Interface: "eth1", Family: host.IPv4}}
			}),
			wantErr: "can't get ip address of node node-1. error: unable to select an IP from default routes.",
		},
		{
			name: "no routing table: the first global address on an up, non-loopback interface",
			facts: withNetwork(func(n *host.Network) {
				n.NoRouteTable = true
				n.DefaultRoutes = nil
				n.Interfaces = append([]host.Interface{{Name: "tun0", Flags: net.FlagUp | net.FlagPointToPoint, Addrs: []netip.Prefix{netip.MustParsePrefix("100.64.0.1/32")}}}, n.Interfaces...)
			}),
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name: "no routing table and nothing acceptable",
			facts: withNetwork(func(n *host.Network) {
				n.NoRouteTable = true
				n.Interfaces = n.Interfaces[:1]
			}),
			wantErr: "can't get ip address of node node-1. error: no acceptable interface with global unicast address found on host",
		},
		{
			name: "no routing table and no interfaces",
			facts: withNetwork(func(n *host.Network) {
				n.NoRouteTable = true
				n.Interfaces = nil
			}),
			wantErr: "can't get ip address of node node-1. error: no interfaces found on host.",
		},
		{
			name:    "unreadable network and nothing specified",
			facts:   withErr(machine(), host.FactNetwork, errNetwork),
			wantErr: "can't get ip address of node node-1. error: list network interfaces: netlink denied",
		},
		{
			name:            "stale annotation is removed without a cloud provider",
			nodeIPs:         "192.0.2.10",
			annotations:     map[string]string{AnnotationProvidedNodeIP: "10.9.9.9", "keep": "me"},
			wantAnnotations: map[string]string{"keep": "me"},
			wantAddresses:   []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:          "addresses are replaced without a cloud provider",
			addresses:     []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.1"}},
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:          "external cloud without a node IP reports only the hostname",
			cloud:         CloudProviderExternal,
			annotations:   map[string]string{AnnotationProvidedNodeIP: "10.9.9.9"},
			wantAddresses: []corev1.NodeAddress{hostnameAddr},
		},
		{
			name:            "external cloud with a node IP annotates and reports it until the cloud sets addresses",
			cloud:           CloudProviderExternal,
			nodeIPs:         "192.0.2.10",
			wantAnnotations: map[string]string{AnnotationProvidedNodeIP: "192.0.2.10"},
			wantAddresses:   []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:            "external cloud with a dual-stack node IP",
			cloud:           CloudProviderExternal,
			nodeIPs:         "2001:db8::10,192.0.2.10",
			wantAnnotations: map[string]string{AnnotationProvidedNodeIP: "2001:db8::10,192.0.2.10"},
			wantAddresses:   []corev1.NodeAddress{internal("2001:db8::10"), internal("192.0.2.10"), hostnameAddr},
		},
		{
			name:            "external cloud owns addresses once set",
			cloud:           CloudProviderExternal,
			nodeIPs:         "192.0.2.10",
			addresses:       []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.1"}},
			wantAnnotations: map[string]string{AnnotationProvidedNodeIP: "192.0.2.10"},
			wantAddresses:   []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.1"}},
		},
		{
			name:          "external cloud with 0.0.0.0: no annotation, addresses detected",
			cloud:         CloudProviderExternal,
			nodeIPs:       "0.0.0.0",
			wantAddresses: []corev1.NodeAddress{internal("192.0.2.10"), hostnameAddr},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodeIPs, err := ParseNodeIPs(tt.nodeIPs)
			if err != nil {
				t.Fatal(err)
			}
			cfg := baseConfig()
			cfg.NodeIPs = nodeIPs
			cfg.CloudProvider = tt.cloud
			cfg.LookupIP = tt.lookupIP
			if tt.hostname != "" {
				cfg.Hostname = tt.hostname
			}
			facts := tt.facts
			if facts.CPUs == 0 && facts.Errs == nil {
				facts = machine()
			}
			node := newNode()
			node.Annotations = tt.annotations
			node.Status.Addresses = tt.addresses

			err = NodeAddress(cfg)(node, Facts{Host: facts}, t0)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Fatalf("error = %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantAddresses, node.Status.Addresses, cmpOpts...); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnnotations, node.Annotations, cmpOpts...); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeAddressLeavesOtherFieldsAlone guards the setter's ownership.
func TestNodeAddressLeavesOtherFieldsAlone(t *testing.T) {
	node := newNode()
	node.Labels = map[string]string{"a": "b"}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(t0)}}
	want := node.DeepCopy()
	want.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}, {Type: corev1.NodeHostName, Address: "node-1"}}
	if err := NodeAddress(baseConfig())(node, Facts{Host: machine()}, t1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, node, cmpOpts...); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
}
