package apiendpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func port(n int32) []corev1.EndpointPort {
	return []corev1.EndpointPort{{Name: PortName, Port: n, Protocol: corev1.ProtocolTCP}}
}

func ips(s ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range s {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

func TestSubsets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []string
		want  []corev1.EndpointSubset
	}{
		{"none", nil, nil},
		{"one server", []string{"10.0.0.1:6443"}, []corev1.EndpointSubset{{Addresses: ips("10.0.0.1"), Ports: port(6443)}}},
		{"one port: one subset, IPs sorted numerically",
			[]string{"10.0.0.10:6443", "10.0.0.9:6443", "10.0.0.1:6443"},
			[]corev1.EndpointSubset{{Addresses: ips("10.0.0.1", "10.0.0.9", "10.0.0.10"), Ports: port(6443)}}},
		{"one IP, several ports: a subset per port, ports ascending",
			[]string{"10.0.0.1:6445", "10.0.0.1:6443", "10.0.0.2:6443"},
			[]corev1.EndpointSubset{
				{Addresses: ips("10.0.0.1", "10.0.0.2"), Ports: port(6443)},
				{Addresses: ips("10.0.0.1"), Ports: port(6445)},
			}},
		{"IPv6, canonicalized, after IPv4",
			[]string{"[2001:db8:0::1]:6443", "10.0.0.1:6443"},
			[]corev1.EndpointSubset{{Addresses: ips("10.0.0.1", "2001:db8::1"), Ports: port(6443)}}},
		{"duplicates and bad entries left out",
			[]string{"10.0.0.1:6443", "10.0.0.1:6443", "host:6443", "10.0.0.2", "10.0.0.3:0", "[fe80::1%eth0]:6443"},
			[]corev1.EndpointSubset{{Addresses: ips("10.0.0.1"), Ports: port(6443)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Subsets(tc.addrs)); diff != "" {
				t.Errorf("Subsets(%q) (-want +got):\n%s", tc.addrs, diff)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		ep   *corev1.Endpoints
		want []string
	}{
		{"nil", nil, nil},
		{"no subsets", &corev1.Endpoints{}, nil},
		{"upstream's shape", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: ips("10.0.0.2", "10.0.0.1"), Ports: port(6443)}}},
			[]string{"10.0.0.1:6443", "10.0.0.2:6443"}},
		{"a single port whatever its name or protocol default",
			&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: ips("10.0.0.1"), Ports: []corev1.EndpointPort{{Port: 443}}}}},
			[]string{"10.0.0.1:443"}},
		{"several ports: only https",
			&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: ips("10.0.0.1"), Ports: []corev1.EndpointPort{
				{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP},
				{Name: PortName, Port: 6443, Protocol: corev1.ProtocolTCP},
			}}}},
			[]string{"10.0.0.1:6443"}},
		{"not TCP", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: ips("10.0.0.1"), Ports: []corev1.EndpointPort{{Name: PortName, Port: 6443, Protocol: corev1.ProtocolUDP}}}}}, nil},
		{"not-ready addresses and bad IPs left out",
			&corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: ips("10.0.0.1", "nope"), NotReadyAddresses: ips("10.0.0.2"), Ports: port(6443)}}},
			[]string{"10.0.0.1:6443"}},
		{"sorted by IP then port, duplicates once, IPv6 bracketed",
			&corev1.Endpoints{Subsets: []corev1.EndpointSubset{
				{Addresses: ips("2001:db8::1", "10.0.0.2"), Ports: port(10000)},
				{Addresses: ips("10.0.0.2", "10.0.0.1"), Ports: port(9000)},
				{Addresses: ips("10.0.0.1"), Ports: port(9000)},
			}},
			[]string{"10.0.0.1:9000", "10.0.0.2:9000", "10.0.0.2:10000", "[2001:db8::1]:10000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Addresses(tc.ep)); diff != "" {
				t.Errorf("Addresses (-want +got):\n%s", diff)
			}
		})
	}
}

// Every list of distinct ip:port pairs survives Subsets then Addresses.
func TestRoundTrip(t *testing.T) {
	for _, addrs := range [][]string{
		{"10.0.0.1:6443"},
		{"10.0.0.1:6443", "10.0.0.1:6444", "10.0.0.1:6445"},
		{"10.0.0.1:6443", "10.0.0.2:6444", "10.0.0.3:6443", "10.0.0.3:6445"},
		{"10.0.0.1:6443", "[2001:db8::1]:6443", "[2001:db8::2]:7443"},
	} {
		got := Addresses(&corev1.Endpoints{Subsets: Subsets(addrs)})
		if diff := cmp.Diff(addrs, got); diff != "" {
			t.Errorf("round trip of %q (-want +got):\n%s", addrs, diff)
		}
	}
}

func TestPlan(t *testing.T) {
	labels := map[string]string{SkipMirrorLabel: "true"}
	current := func(l map[string]string, addrs ...string) *corev1.Endpoints {
		return &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, ResourceVersion: "7", Labels: l},
			Subsets:    Subsets(addrs),
		}
	}
	for _, tc := range []struct {
		name    string
		current *corev1.Endpoints
		live    []string
		want    *corev1.Endpoints
	}{
		{"missing: create", nil, []string{"10.0.0.1:6443"},
			&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, Labels: labels}, Subsets: Subsets([]string{"10.0.0.1:6443"})}},
		{"in step: nothing", current(labels, "10.0.0.1:6443"), []string{"10.0.0.1:6443"}, nil},
		{"in step with no servers: nothing", &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Subsets: []corev1.EndpointSubset{}}, nil, nil},
		{"a server more", current(labels, "10.0.0.1:6443"), []string{"10.0.0.1:6443", "10.0.0.1:6444"},
			current(labels, "10.0.0.1:6443", "10.0.0.1:6444")},
		{"the last server gone", current(labels, "10.0.0.1:6443"), nil, current(labels)},
		{"the label missing, other labels kept", current(map[string]string{"a": "b"}, "10.0.0.1:6443"), []string{"10.0.0.1:6443"},
			current(map[string]string{"a": "b", SkipMirrorLabel: "true"}, "10.0.0.1:6443")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *corev1.Endpoints
			if tc.current != nil {
				before = tc.current.DeepCopy()
			}
			if diff := cmp.Diff(tc.want, plan(tc.current, tc.live)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.current); diff != "" {
				t.Errorf("plan changed its input:\n%s", diff)
			}
		})
	}
}
