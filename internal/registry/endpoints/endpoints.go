// Package endpoints holds the API rules for core/v1 Endpoints (namespaced,
// short name "ep", no subresources): the v1 default (a port's protocol is
// TCP), validation of subsets, the table kubectl prints and the selectable
// fields. Agents read the default/kubernetes Endpoints to learn the
// control plane's servers, so knode serves the kind although upstream
// deprecates it in favour of EndpointSlices.
//
// It follows Kubernetes 1.33 with its default feature gates: with
// StrictIPCIDRValidation off, an address's ip is parsed leniently (IPv4
// octets with leading zeros and IPv4-mapped IPv6 addresses pass).
//
// Callers (the generic REST layer) use Kind() and pass *corev1.Endpoints;
// every function is pure.
//
// What it does not do: metadata (the REST layer validates it), the
// warnings upstream returns (the deprecation of v1 Endpoints, IPs in a
// non-canonical form), create-on-update (upstream allows a PUT to create
// Endpoints; that choice is the REST layer's), and keeping endpoints in
// step with Services or Pods (that is a controller's job).
//
// Upstream deviation, on purpose: a missing port name when the subset has
// more than one port is reported with a detail saying so, where upstream
// sends a bare "Required value".
package endpoints

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"knode/internal/registry"
)

// Upstream's literal messages (the port-name one is knode's; see the
// package comment).
const (
	msgNoAddresses       = "must specify `addresses` or `notReadyAddresses`"
	msgNotIP             = "must be a valid IP address"
	msgLoopback          = "may not be in the loopback range (127.0.0.0/8, ::1/128)"
	msgLinkLocal         = "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
	msgLinkLocalMcast    = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
	msgPortNameMultiPort = "must be specified when the subset has more than one port"
)

// protocols are the port protocols accepted, sorted as upstream lists them.
var protocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

// maxCellEntries is how many ip:port pairs the ENDPOINTS cell shows before
// "+ N more...".
const maxCellEntries = 3

// Kind returns the rules for the "endpoints" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "endpoints",
		Kind:         "Endpoints",
		ListKind:     "EndpointsList",
		SingularName: "endpoints",
		ShortNames:   []string{"ep"},
		Namespaced:   true,

		New:     func() runtime.Object { return &corev1.Endpoints{} },
		NewList: func() runtime.Object { return &corev1.EndpointsList{} },

		Default:        func(obj runtime.Object) { Default(obj.(*corev1.Endpoints)) },
		Validate:       func(obj runtime.Object) field.ErrorList { return Validate(obj.(*corev1.Endpoints)) },
		ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList { return Validate(obj.(*corev1.Endpoints)) },

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*corev1.Endpoints), true)
		},
	}
}

// Default applies upstream's v1 default: every port without a protocol
// gets TCP.
func Default(ep *corev1.Endpoints) {
	for i := range ep.Subsets {
		ports := ep.Subsets[i].Ports
		for j := range ports {
			if ports[j].Protocol == "" {
				ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

// Validate checks the subsets of an Endpoints object, on create and on
// every update (upstream ValidateEndpoints; an update has no further
// rules). Errors are in upstream's order: per subset, the missing-address
// error, then each ready address, each not-ready address and each port.
func Validate(ep *corev1.Endpoints) field.ErrorList {
	var errs field.ErrorList
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		path := field.NewPath("subsets").Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(path, msgNoAddresses))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateAddress(&ss.Addresses[j], path.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateAddress(&ss.NotReadyAddresses[j], path.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, validatePort(&ss.Ports[j], len(ss.Ports) > 1, path.Child("ports").Index(j))...)
		}
	}
	return errs
}

// validateAddress: ip is an IP that is not special, hostname a DNS label,
// nodeName (when set, even to "") a DNS subdomain. targetRef is not
// checked, as upstream does not check it. An ip that does not parse is
// reported twice, once by each ip rule, as upstream reports it.
func validateAddress(a *corev1.EndpointAddress, path *field.Path) field.ErrorList {
	ipPath := path.Child("ip")
	errs := validation.IsValidIPForLegacyField(ipPath, a.IP, false, nil)
	if a.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(a.Hostname) {
			errs = append(errs, field.Invalid(path.Child("hostname"), a.Hostname, msg))
		}
	}
	if a.NodeName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*a.NodeName) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), *a.NodeName, msg))
		}
	}
	return append(errs, validateNonSpecialIP(a.IP, ipPath)...)
}

// validateNonSpecialIP refuses IPs no client should be sent to: the
// unspecified address, loopback, link-local unicast and link-local
// multicast (other multicast passes, as upstream lets it).
func validateNonSpecialIP(value string, path *field.Path) field.ErrorList {
	ip := netutils.ParseIPSloppy(value)
	if ip == nil {
		return field.ErrorList{field.Invalid(path, value, msgNotIP)}
	}
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(path, value, fmt.Sprintf("may not be unspecified (%s)", value)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(path, value, msgLoopback))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(path, value, msgLinkLocal))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(path, value, msgLinkLocalMcast))
	}
	return errs
}

// validatePort: name is a DNS label, required when the subset has more
// than one port; port is 1-65535; protocol is SCTP, TCP or UDP (required,
// though Default fills it); appProtocol, when set, is a qualified name.
// Names are not checked for uniqueness, as upstream does not check them.
func validatePort(p *corev1.EndpointPort, requireName bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case p.Name == "" && requireName:
		errs = append(errs, field.Required(path.Child("name"), msgPortNameMultiPort))
	case p.Name != "":
		for _, msg := range validation.IsDNS1123Label(p.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), p.Name, msg))
		}
	}
	for _, msg := range validation.IsValidPortNum(int(p.Port)) {
		errs = append(errs, field.Invalid(path.Child("port"), p.Port, msg))
	}
	switch {
	case p.Protocol == "":
		errs = append(errs, field.Required(path.Child("protocol"), ""))
	case !knownProtocol(p.Protocol):
		errs = append(errs, field.NotSupported(path.Child("protocol"), p.Protocol, protocols))
	}
	if p.AppProtocol != nil {
		for _, msg := range validation.IsQualifiedName(*p.AppProtocol) {
			errs = append(errs, field.Invalid(path.Child("appProtocol"), *p.AppProtocol, msg))
		}
	}
	return errs
}

func knownProtocol(p corev1.Protocol) bool {
	for _, known := range protocols {
		if p == known {
			return true
		}
	}
	return false
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Endpoints", Type: "string", Description: corev1.Endpoints{}.SwaggerDoc()["subsets"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

func row(obj runtime.Object, now time.Time) []interface{} {
	ep := obj.(*corev1.Endpoints)
	return []interface{}{ep.Name, endpointsCell(ep.Subsets), age(ep.CreationTimestamp, now)}
}

// endpointsCell is the ENDPOINTS cell as upstream prints it: the ready
// addresses as ip:port (one entry per address and port, subsets and ports
// in order; a bare ip for a subset without ports), the first three joined
// by commas and then " + N more..." for the N left out. It is "<none>"
// with no subsets and "" when the subsets hold no ready address; not-ready
// addresses are never shown.
func endpointsCell(subsets []corev1.EndpointSubset) string {
	if len(subsets) == 0 {
		return "<none>"
	}
	var shown []string
	total := 0
	add := func(entry string) {
		total++
		if len(shown) < maxCellEntries {
			shown = append(shown, entry)
		}
	}
	for _, ss := range subsets {
		if len(ss.Ports) == 0 {
			for _, a := range ss.Addresses {
				add(a.IP)
			}
			continue
		}
		for _, p := range ss.Ports {
			for _, a := range ss.Addresses {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	cell := strings.Join(shown, ",")
	if total > maxCellEntries {
		cell += fmt.Sprintf(" + %d more...", total-maxCellEntries)
	}
	return cell
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
