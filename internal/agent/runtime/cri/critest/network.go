package critest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// Network is a test's pod network: a bridge with Gateway on it, pods'
// addresses from Subnet.
type Network struct {
	// Name is the CNI network's name.
	Name string
	// Bridge is the bridge's interface name.
	Bridge  string
	Subnet  *net.IPNet
	Gateway net.IP
}

// networks counts the networks this process made, for unique names.
var networks atomic.Int32

// BridgeNetwork creates a bridge of the test's own with the first address
// of an unused 198.18.x.0/24 (a benchmarking range, never routed) on it,
// and writes into confDir a CNI conflist that attaches pods to it with the
// bridge plugin (isGateway off: the address is already there, and the
// machine's IP forwarding is left alone; no masquerading) and host-local
// (its allocations in a temporary directory). The bridge is deleted when
// the test ends; the conflist is the caller's (confDir is usually
// temporary).
func BridgeNetwork(t testing.TB, confDir string) Network {
	t.Helper()
	n := networks.Add(1)
	name := fmt.Sprintf("kncri%d%d", os.Getpid()%1000, n%100)
	run(t, nil, "ip", "link", "add", name, "type", "bridge")
	t.Cleanup(func() {
		if out, err := output(nil, "ip", "link", "del", name); err != nil {
			t.Errorf("deleting bridge %s: %v: %s", name, err, out)
		}
	})
	// Another test process may pick the same /24 at the same moment:
	// whoever finds the other's address once its own is on moves on.
	var subnet *net.IPNet
	var gw net.IP
	start := (os.Getpid()+int(n)*37)%200 + 20
	for attempt := 0; subnet == nil; attempt++ {
		if attempt == 20 {
			fatalf(t, "no 198.18.x.0/24 to be had for bridge %s", name)
		}
		third := freeSubnet(t, start)
		gw = net.IPv4(198, 18, byte(third), 1).To4()
		run(t, nil, "ip", "addr", "add", gw.String()+"/24", "dev", name)
		if subnetUsers(t, third) == 1 {
			subnet = &net.IPNet{IP: net.IPv4(198, 18, byte(third), 0).To4(), Mask: net.CIDRMask(24, 32)}
			break
		}
		run(t, nil, "ip", "addr", "del", gw.String()+"/24", "dev", name)
		start = third + 1
	}
	run(t, nil, "ip", "link", "set", name, "up")

	ipamDir := filepath.Join(t.TempDir(), "ipam")
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       name,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      name,
			"isGateway":   false,
			"ipMasq":      false,
			"hairpinMode": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": ipamDir,
				"ranges":  [][]map[string]string{{{"subnet": subnet.String(), "gateway": gw.String()}}},
			},
		}},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-"+name+".conflist"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return Network{Name: name, Bridge: name, Subnet: subnet, Gateway: gw}
}

// subnetUse maps the third byte of each 198.18.x.0/24 the machine's
// interfaces have addresses in to how many addresses there are.
func subnetUse(t testing.TB) map[int]int {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	used := map[int]int{}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 198 && ip4[1] == 18 {
			used[int(ip4[2])]++
		}
	}
	return used
}

// subnetUsers is how many addresses the machine has in 198.18.third.0/24.
func subnetUsers(t testing.TB, third int) int { return subnetUse(t)[third] }

// freeSubnet is the third byte of a 198.18.x.0/24 no interface of this
// machine has an address in, trying from start.
func freeSubnet(t testing.TB, start int) int {
	t.Helper()
	used := subnetUse(t)
	for i := 0; i < 250; i++ {
		third := (start+i)%250 + 2
		if used[third] == 0 {
			return third
		}
	}
	fatalf(t, "no free 198.18.x.0/24")
	return 0
}
