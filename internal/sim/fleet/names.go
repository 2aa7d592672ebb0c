package fleet

import (
	"fmt"
	"net/netip"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ZoneNames returns n zone names: zone-a … zone-z, then zone-aa, zone-ab
// and so on, as spreadsheet columns are named.
func ZoneNames(n int) []string {
	zones := make([]string, n)
	for i := range zones {
		zones[i] = "zone-" + letters(i)
	}
	return zones
}

// letters names i (from 0) as a, b, …, z, aa, ab, ….
func letters(i int) string {
	var out []byte
	for i++; i > 0; i = (i - 1) / 26 {
		out = append([]byte{byte('a' + (i-1)%26)}, out...)
	}
	return string(out)
}

// Placement is where the i-th node of a fleet (counting from 0, in start
// order) lives.
type Placement struct {
	// Name is <prefix>-<zone>-<index>.
	Name string
	Zone string
	// Index counts the zone's nodes from 1.
	Index int
	// IP is the node's only address, unique in the fleet.
	IP netip.Addr
}

// Place spreads nodes over zones round-robin, so that a ramp starts every
// zone's nodes at the same pace: node i is the (i/len(zones)+1)-th node of
// zone i%len(zones). Its address is 10.0.0.0 + i + 1.
func Place(prefix string, zones []string, i int) Placement {
	zone := zones[i%len(zones)]
	index := i/len(zones) + 1
	n := i + 1
	return Placement{
		Name:  prefix + "-" + zone + "-" + strconv.Itoa(index),
		Zone:  zone,
		Index: index,
		IP:    netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}),
	}
}

// MaxNodes is the largest fleet Place can give distinct addresses in
// 10.0.0.0/8.
const MaxNodes = 1<<24 - 2

// validateNames checks the parts of node names: the prefix and each zone
// must be DNS labels, and zones distinct (they also become
// topology.kubernetes.io/zone values). Node names are then valid: two
// labels of at most 63 characters and a number, joined by dashes, are a
// DNS subdomain well under 253 characters.
func validateNames(prefix string, zones []string) field.ErrorList {
	var errs field.ErrorList
	prefixPath := field.NewPath("namePrefix")
	if prefix == "" {
		errs = append(errs, field.Required(prefixPath, "node names start with it"))
	} else {
		for _, msg := range validation.IsDNS1123Label(prefix) {
			errs = append(errs, field.Invalid(prefixPath, prefix, msg))
		}
	}
	zonesPath := field.NewPath("zones")
	if len(zones) == 0 {
		errs = append(errs, field.Required(zonesPath, "at least one zone"))
	}
	seen := map[string]bool{}
	for i, z := range zones {
		p := zonesPath.Index(i)
		if seen[z] {
			errs = append(errs, field.Duplicate(p, z))
			continue
		}
		seen[z] = true
		if z == "" {
			errs = append(errs, field.Required(p, "a zone needs a name"))
			continue
		}
		for _, msg := range validation.IsDNS1123Label(z) {
			errs = append(errs, field.Invalid(p, z, fmt.Sprintf("zone names are part of node names: %s", msg)))
		}
	}
	return errs
}
