package endpoints

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Upstream messages produced by apimachinery helpers, spelled out so a
// change in which helper runs shows up here.
const (
	msgParseIP       = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
	msgLabel         = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	msgSubdomain     = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	msgPortRange     = "must be between 1 and 65535, inclusive"
	msgProtocols     = `supported values: "SCTP", "TCP", "UDP"`
)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

// apiserverEndpoints is default/kubernetes as a control plane of two
// servers publishes it, after defaulting.
func apiserverEndpoints() *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

func TestValidate(t *testing.T) {
	ip := func(s string) func(*corev1.Endpoints) {
		return func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].IP = s }
	}
	port := func(mutate func(*corev1.EndpointPort)) func(*corev1.Endpoints) {
		return func(ep *corev1.Endpoints) { mutate(&ep.Subsets[0].Ports[0]) }
	}
	const ip0 = "subsets[0].addresses[0].ip"
	const port0 = "subsets[0].ports[0]"
	tests := []struct {
		name   string
		mutate func(*corev1.Endpoints)
		want   []string
	}{
		{name: "apiserver endpoints", mutate: func(*corev1.Endpoints) {}},
		{name: "no subsets", mutate: func(ep *corev1.Endpoints) { ep.Subsets = nil }},
		{name: "only not-ready addresses", mutate: func(ep *corev1.Endpoints) {
			ss := &ep.Subsets[0]
			ss.NotReadyAddresses, ss.Addresses = ss.Addresses, nil
		}},
		{name: "headless: no ports", mutate: func(ep *corev1.Endpoints) { ep.Subsets[0].Ports = nil }},
		{
			name:   "no addresses",
			mutate: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses = nil },
			want:   []string{"subsets[0]|Required value|must specify `addresses` or `notReadyAddresses`"},
		},
		{
			name:   "empty subset",
			mutate: func(ep *corev1.Endpoints) { ep.Subsets = []corev1.EndpointSubset{{}} },
			want:   []string{"subsets[0]|Required value|must specify `addresses` or `notReadyAddresses`"},
		},

		{name: "ipv6", mutate: ip("fd00:10::1")},
		{name: "ipv4 with leading zeros (lenient while StrictIPCIDRValidation is off)", mutate: ip("010.000.000.001")},
		{name: "ipv4-mapped ipv6", mutate: ip("::ffff:10.0.0.1")},
		{name: "site multicast is not refused", mutate: ip("239.1.1.1")},
		{
			name:   "not an ip",
			mutate: ip("apiserver.example.com"),
			want: []string{
				ip0 + "|Invalid value|" + msgParseIP,
				ip0 + "|Invalid value|must be a valid IP address",
			},
		},
		{
			name:   "empty ip",
			mutate: ip(""),
			want: []string{
				ip0 + "|Invalid value|" + msgParseIP,
				ip0 + "|Invalid value|must be a valid IP address",
			},
		},
		{name: "ip with port", mutate: ip("10.0.0.1:6443"), want: []string{
			ip0 + "|Invalid value|" + msgParseIP,
			ip0 + "|Invalid value|must be a valid IP address",
		}},
		{name: "unspecified ipv4", mutate: ip("0.0.0.0"), want: []string{ip0 + "|Invalid value|may not be unspecified (0.0.0.0)"}},
		{name: "unspecified ipv6", mutate: ip("::"), want: []string{ip0 + "|Invalid value|may not be unspecified (::)"}},
		{name: "loopback ipv4", mutate: ip("127.0.0.1"), want: []string{ip0 + "|Invalid value|may not be in the loopback range (127.0.0.0/8, ::1/128)"}},
		{name: "loopback ipv4 end of range", mutate: ip("127.255.255.254"), want: []string{ip0 + "|Invalid value|may not be in the loopback range (127.0.0.0/8, ::1/128)"}},
		{name: "loopback ipv6", mutate: ip("::1"), want: []string{ip0 + "|Invalid value|may not be in the loopback range (127.0.0.0/8, ::1/128)"}},
		{name: "link-local ipv4 (metadata service)", mutate: ip("169.254.169.254"), want: []string{ip0 + "|Invalid value|may not be in the link-local range (169.254.0.0/16, fe80::/10)"}},
		{name: "link-local ipv6", mutate: ip("fe80::1"), want: []string{ip0 + "|Invalid value|may not be in the link-local range (169.254.0.0/16, fe80::/10)"}},
		{name: "link-local multicast ipv4", mutate: ip("224.0.0.251"), want: []string{ip0 + "|Invalid value|may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"}},
		{name: "just past link-local multicast", mutate: ip("224.0.1.1")},
		{name: "link-local multicast ipv6", mutate: ip("ff02::1"), want: []string{ip0 + "|Invalid value|may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"}},
		{
			name: "bad not-ready address",
			mutate: func(ep *corev1.Endpoints) {
				ep.Subsets[0].NotReadyAddresses = []corev1.EndpointAddress{{IP: "127.0.0.2"}}
			},
			want: []string{"subsets[0].notReadyAddresses[0].ip|Invalid value|may not be in the loopback range (127.0.0.0/8, ::1/128)"},
		},

		{name: "hostname, node and target", mutate: func(ep *corev1.Endpoints) {
			a := &ep.Subsets[0].Addresses[0]
			a.Hostname, a.NodeName = "server-0", ptr.To("node-1.example.com")
			a.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "kube-system", Name: "anything goes here"}
		}},
		{
			name:   "hostname not a label",
			mutate: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].Hostname = "Server_0" },
			want:   []string{"subsets[0].addresses[0].hostname|Invalid value|" + msgLabel},
		},
		{
			name:   "hostname with dots",
			mutate: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].Hostname = "server.example.com" },
			want:   []string{"subsets[0].addresses[0].hostname|Invalid value|must not contain dots"},
		},
		{
			name:   "node name not a subdomain",
			mutate: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].NodeName = ptr.To("Node_1") },
			want:   []string{"subsets[0].addresses[0].nodeName|Invalid value|" + msgSubdomain},
		},
		{
			name:   "empty node name",
			mutate: func(ep *corev1.Endpoints) { ep.Subsets[0].Addresses[0].NodeName = ptr.To("") },
			want:   []string{"subsets[0].addresses[0].nodeName|Invalid value|" + msgSubdomain},
		},
		{
			name: "address errors in upstream order",
			mutate: func(ep *corev1.Endpoints) {
				a := &ep.Subsets[0].Addresses[0]
				a.IP, a.Hostname, a.NodeName = "nope", "Bad", ptr.To("Bad")
			},
			want: []string{
				ip0 + "|Invalid value|" + msgParseIP,
				"subsets[0].addresses[0].hostname|Invalid value|" + msgLabel,
				"subsets[0].addresses[0].nodeName|Invalid value|" + msgSubdomain,
				ip0 + "|Invalid value|must be a valid IP address",
			},
		},

		{name: "lowest port", mutate: port(func(p *corev1.EndpointPort) { p.Port = 1 })},
		{name: "highest port", mutate: port(func(p *corev1.EndpointPort) { p.Port = 65535 })},
		{name: "port 0", mutate: port(func(p *corev1.EndpointPort) { p.Port = 0 }), want: []string{port0 + ".port|Invalid value|" + msgPortRange}},
		{name: "port 65536", mutate: port(func(p *corev1.EndpointPort) { p.Port = 65536 }), want: []string{port0 + ".port|Invalid value|" + msgPortRange}},
		{name: "negative port", mutate: port(func(p *corev1.EndpointPort) { p.Port = -1 }), want: []string{port0 + ".port|Invalid value|" + msgPortRange}},
		{name: "udp", mutate: port(func(p *corev1.EndpointPort) { p.Protocol = corev1.ProtocolUDP })},
		{name: "sctp", mutate: port(func(p *corev1.EndpointPort) { p.Protocol = corev1.ProtocolSCTP })},
		{
			name:   "no protocol (Default fills it)",
			mutate: port(func(p *corev1.EndpointPort) { p.Protocol = "" }),
			want:   []string{port0 + ".protocol|Required value|"},
		},
		{
			name:   "unknown protocol",
			mutate: port(func(p *corev1.EndpointPort) { p.Protocol = "HTTP" }),
			want:   []string{port0 + ".protocol|Unsupported value|" + msgProtocols},
		},
		{
			name:   "lower-case protocol",
			mutate: port(func(p *corev1.EndpointPort) { p.Protocol = "tcp" }),
			want:   []string{port0 + ".protocol|Unsupported value|" + msgProtocols},
		},
		{name: "single unnamed port", mutate: port(func(p *corev1.EndpointPort) { p.Name = "" })},
		{
			name:   "port name not a label",
			mutate: port(func(p *corev1.EndpointPort) { p.Name = "HTTPS" }),
			want:   []string{port0 + ".name|Invalid value|" + msgLabel},
		},
		{
			name: "unnamed port among two",
			mutate: func(ep *corev1.Endpoints) {
				ep.Subsets[0].Ports = append(ep.Subsets[0].Ports, corev1.EndpointPort{Port: 2379, Protocol: corev1.ProtocolTCP})
			},
			want: []string{"subsets[0].ports[1].name|Required value|must be specified when the subset has more than one port"},
		},
		{
			name: "repeated port names pass, as upstream lets them",
			mutate: func(ep *corev1.Endpoints) {
				ep.Subsets[0].Ports = append(ep.Subsets[0].Ports, corev1.EndpointPort{Name: "https", Port: 8443, Protocol: corev1.ProtocolTCP})
			},
		},
		{name: "app protocol", mutate: port(func(p *corev1.EndpointPort) { p.AppProtocol = ptr.To("kubernetes.io/h2c") })},
		{
			name:   "app protocol not a qualified name",
			mutate: port(func(p *corev1.EndpointPort) { p.AppProtocol = ptr.To("h2 c") }),
			want:   []string{port0 + ".appProtocol|Invalid value|" + msgQualifiedName},
		},
		{
			name:   "empty app protocol",
			mutate: port(func(p *corev1.EndpointPort) { p.AppProtocol = ptr.To("") }),
			want: []string{
				port0 + ".appProtocol|Invalid value|name part must be non-empty",
				port0 + ".appProtocol|Invalid value|" + msgQualifiedName,
			},
		},
		{
			name: "port errors in upstream order",
			mutate: func(ep *corev1.Endpoints) {
				ep.Subsets[0].Ports = []corev1.EndpointPort{{Name: "a", Port: 1, Protocol: "TCP"}, {Port: 0, Protocol: "ICMP", AppProtocol: ptr.To("x y")}}
			},
			want: []string{
				"subsets[0].ports[1].name|Required value|must be specified when the subset has more than one port",
				"subsets[0].ports[1].port|Invalid value|" + msgPortRange,
				"subsets[0].ports[1].protocol|Unsupported value|" + msgProtocols,
				"subsets[0].ports[1].appProtocol|Invalid value|" + msgQualifiedName,
			},
		},
		{
			name: "errors of later subsets carry their index",
			mutate: func(ep *corev1.Endpoints) {
				ep.Subsets = append(ep.Subsets,
					corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: 80, Protocol: "TCP"}}},
					corev1.EndpointSubset{
						Addresses:         []corev1.EndpointAddress{{IP: "10.0.0.3"}, {IP: "127.0.0.1"}},
						NotReadyAddresses: []corev1.EndpointAddress{{IP: "169.254.1.1"}},
						Ports:             []corev1.EndpointPort{{Port: 70000, Protocol: "TCP"}},
					})
			},
			want: []string{
				"subsets[1]|Required value|must specify `addresses` or `notReadyAddresses`",
				"subsets[2].addresses[1].ip|Invalid value|may not be in the loopback range (127.0.0.0/8, ::1/128)",
				"subsets[2].notReadyAddresses[0].ip|Invalid value|may not be in the link-local range (169.254.0.0/16, fe80::/10)",
				"subsets[2].ports[0].port|Invalid value|" + msgPortRange,
			},
		},
	}
	k := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := apiserverEndpoints()
			tc.mutate(ep)
			if diff := cmp.Diff(tc.want, flat(k.Validate(ep))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, flat(k.ValidateUpdate(ep, apiserverEndpoints()))); diff != "" {
				t.Errorf("ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{
		{Ports: []corev1.EndpointPort{{Name: "a", Port: 1}, {Name: "b", Port: 2, Protocol: corev1.ProtocolUDP}}},
		{},
		{Ports: []corev1.EndpointPort{{Port: 3, Protocol: "bogus"}}},
	}}
	Kind().Default(ep)
	want := []corev1.EndpointSubset{
		{Ports: []corev1.EndpointPort{{Name: "a", Port: 1, Protocol: corev1.ProtocolTCP}, {Name: "b", Port: 2, Protocol: corev1.ProtocolUDP}}},
		{},
		{Ports: []corev1.EndpointPort{{Port: 3, Protocol: "bogus"}}},
	}
	if diff := cmp.Diff(want, ep.Subsets); diff != "" {
		t.Errorf("defaulted subsets (-want +got):\n%s", diff)
	}
	empty := &corev1.Endpoints{}
	Default(empty)
	if empty.Subsets != nil {
		t.Errorf("Default invented subsets: %+v", empty.Subsets)
	}
}

func TestEndpointsCell(t *testing.T) {
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	ports := func(nums ...int32) []corev1.EndpointPort {
		var out []corev1.EndpointPort
		for _, n := range nums {
			out = append(out, corev1.EndpointPort{Port: n, Protocol: corev1.ProtocolTCP})
		}
		return out
	}
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{name: "no subsets", want: "<none>"},
		{name: "empty subsets", subsets: []corev1.EndpointSubset{}, want: "<none>"},
		{name: "one server", subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1"), Ports: ports(6443)}}, want: "10.0.0.1:6443"},
		{
			name:    "two servers",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: ports(6443)}},
			want:    "10.0.0.1:6443,10.0.0.2:6443",
		},
		{
			name:    "exactly three",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3"), Ports: ports(6443)}},
			want:    "10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443",
		},
		{
			name:    "four",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"), Ports: ports(6443)}},
			want:    "10.0.0.1:6443,10.0.0.2:6443,10.0.0.3:6443 + 1 more...",
		},
		{
			name:    "ports outer, addresses inner",
			subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "10.0.0.2"), Ports: ports(80, 443)}},
			want:    "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...",
		},
		{
			name: "across subsets, counting every pair",
			subsets: []corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.1"), Ports: ports(80)},
				{Addresses: addrs("10.0.1.1", "10.0.1.2"), Ports: ports(90, 91)},
				{Addresses: addrs("10.0.2.1")},
			},
			want: "10.0.0.1:80,10.0.1.1:90,10.0.1.2:90 + 3 more...",
		},
		{name: "ipv6 is bracketed", subsets: []corev1.EndpointSubset{{Addresses: addrs("fd00::1"), Ports: ports(6443)}}, want: "[fd00::1]:6443"},
		{name: "headless: bare ips", subsets: []corev1.EndpointSubset{{Addresses: addrs("10.0.0.1", "fd00::1")}}, want: "10.0.0.1,fd00::1"},
		{
			name:    "not-ready addresses are not shown",
			subsets: []corev1.EndpointSubset{{NotReadyAddresses: addrs("10.0.0.1"), Ports: ports(6443)}},
			want:    "",
		},
		{
			name: "not-ready beside ready",
			subsets: []corev1.EndpointSubset{
				{Addresses: addrs("10.0.0.1"), NotReadyAddresses: addrs("10.0.0.9"), Ports: ports(6443)},
			},
			want: "10.0.0.1:6443",
		},
		{name: "subset without addresses", subsets: []corev1.EndpointSubset{{Ports: ports(6443)}}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := endpointsCell(tc.subsets); got != tc.want {
				t.Errorf("cell = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTableAndFields(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
		if c.Description == "" {
			t.Errorf("column %s has no description", c.Name)
		}
	}
	if diff := cmp.Diff([]string{"Name", "Endpoints", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}

	ep := apiserverEndpoints()
	ep.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Minute))
	if diff := cmp.Diff([]interface{}{"kubernetes", "10.0.0.1:6443,10.0.0.2:6443", "90m"}, k.Row(ep, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	bare := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if diff := cmp.Diff([]interface{}{"x", "<none>", "<unknown>"}, k.Row(bare, now)); diff != "" {
		t.Errorf("row without subsets or timestamp (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "kubernetes", "metadata.namespace": "default"}, k.Fields(ep)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.GroupVersion.String() != "v1" || k.Resource != "endpoints" || k.Kind != "Endpoints" ||
		k.ListKind != "EndpointsList" || k.SingularName != "endpoints" || !k.Namespaced ||
		k.HasStatus || k.Status != nil || k.Scale != nil || k.Approval != nil {
		t.Errorf("unexpected kind data: %+v", k)
	}
	if diff := cmp.Diff([]string{"ep"}, k.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	if _, ok := k.New().(*corev1.Endpoints); !ok {
		t.Errorf("New() = %T", k.New())
	}
	if _, ok := k.NewList().(*corev1.EndpointsList); !ok {
		t.Errorf("NewList() = %T", k.NewList())
	}
}
