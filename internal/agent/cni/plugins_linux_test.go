package cni_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"knode/internal/agent/cni"
)

// pluginDir is where Debian's containernetworking-plugins are.
const pluginDir = "/usr/lib/cni"

// requirePlugins skips the test unless it can run the real plugins (root,
// the plugins and ip(8)); with KNODE_REQUIRE_CONTAINERD=1 it fails instead.
func requirePlugins(t *testing.T) {
	t.Helper()
	var missing string
	switch {
	case os.Geteuid() != 0:
		missing = "root"
	default:
		for _, p := range []string{"bridge", "host-local", "portmap"} {
			if _, err := os.Stat(filepath.Join(pluginDir, p)); err != nil {
				missing = err.Error()
			}
		}
		if _, err := exec.LookPath("ip"); err != nil {
			missing = err.Error()
		}
	}
	if missing == "" {
		return
	}
	if os.Getenv("KNODE_REQUIRE_CONTAINERD") == "1" {
		t.Fatalf("KNODE_REQUIRE_CONTAINERD=1 but the CNI plugins cannot run: %s", missing)
	}
	t.Skipf("needs root and the CNI plugins in %s: %s", pluginDir, missing)
}

var netnsSeq atomic.Int32

// newNetns adds a network namespace named prefix<pid>-<n>, deleted when the
// test ends, however it ends.
func newNetns(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), netnsSeq.Add(1))
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting netns %s: %v: %s", name, err, out)
		}
	})
	return name
}

// run runs a command and returns its stdout, failing the test on an error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// inNetns runs f on an OS thread that has joined the named network
// namespace, so the sockets f makes live there. The thread is never
// unlocked, so it ends with its goroutine instead of going back to the
// runtime's pool in the wrong namespace.
func inNetns(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("joining netns %s: %w", name, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// runtimeArgs are what a runtime hands each plugin of a list.
type runtimeArgs struct {
	hostNS, podNS, containerID string
	portMappings               []map[string]any
}

// callPlugin runs one plugin as a runtime does, in hostNS (the test's
// stand-in for the host's namespace), with conf on stdin.
func callPlugin(a runtimeArgs, command, typ string, conf []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", a.hostNS, filepath.Join(pluginDir, typ))
	cmd.Env = append(os.Environ(),
		"CNI_COMMAND="+command,
		"CNI_CONTAINERID="+a.containerID,
		"CNI_NETNS=/var/run/netns/"+a.podNS,
		"CNI_IFNAME=eth0",
		"CNI_PATH="+pluginDir,
		"PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin", // iptables
	)
	cmd.Stdin = bytes.NewReader(conf)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v\nstdin: %s\nstdout: %s\nstderr: %s", typ, command, err, conf, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// execList runs the list's plugins as the CNI spec says: ADD in order, each
// given the previous one's result; DEL in reverse order, each given the
// result of the whole ADD. Each plugin's config is its object in the list
// plus the list's name and cniVersion, prevResult, and runtimeConfig for
// the capabilities it declares.
func execList(t *testing.T, a runtimeArgs, command string, list []byte, addResult json.RawMessage) (json.RawMessage, error) {
	t.Helper()
	var l struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(list, &l); err != nil {
		t.Fatal(err)
	}
	plugins := l.Plugins
	prev := addResult
	if command == "DEL" {
		plugins = slices.Clone(plugins)
		slices.Reverse(plugins)
	}
	for _, p := range plugins {
		conf := map[string]any{}
		for k, v := range p {
			conf[k] = v
		}
		conf["name"], conf["cniVersion"] = l.Name, l.CNIVersion
		if prev != nil {
			conf["prevResult"] = prev
		}
		if caps, _ := p["capabilities"].(map[string]any); caps["portMappings"] == true && a.portMappings != nil {
			conf["runtimeConfig"] = map[string]any{"portMappings": a.portMappings}
		}
		in, err := json.Marshal(conf)
		if err != nil {
			t.Fatal(err)
		}
		out, err := callPlugin(a, command, p["type"].(string), in)
		if err != nil {
			return nil, err
		}
		if command == "ADD" {
			prev = out
		}
	}
	return prev, nil
}

// cniResult is the part of a CNI 1.0.0 result the test checks.
type cniResult struct {
	CNIVersion string `json:"cniVersion"`
	Interfaces []struct {
		Name    string `json:"name"`
		Sandbox string `json:"sandbox"`
	} `json:"interfaces"`
	IPs []struct {
		Interface *int   `json:"interface"`
		Address   string `json:"address"`
		Gateway   string `json:"gateway"`
	} `json:"ips"`
}

// ipJSON runs `ip -j args...` and decodes its output.
func ipJSON(t *testing.T, dst any, args ...string) {
	t.Helper()
	out := run(t, "ip", append([]string{"-j"}, args...)...)
	if err := json.Unmarshal([]byte(out), dst); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// greet dials addr from the named netns and returns the first line the
// other side sends.
func greet(ns, addr string) (string, error) {
	var line string
	err := inNetns(ns, func() error {
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return err
		}
		line, err = bufio.NewReader(c).ReadString('\n')
		return err
	})
	return strings.TrimSpace(line), err
}

// TestPluginsRunTheRenderedList runs Debian's bridge, host-local and
// portmap plugins on a rendered dual-stack list, as containerd would, and
// checks the pod's addresses, routes, MTU, hairpin and masquerading, that
// the host reaches the pod directly and through a hostPort, and that DEL
// undoes it all. Everything happens in two network namespaces the test
// makes: "host" stands in for the node's namespace, so the bridge, the
// iptables rules and the forwarding sysctls the plugins set are the test's
// own; the host-local data dir is a temp dir.
func TestPluginsRunTheRenderedList(t *testing.T) {
	requirePlugins(t)
	hostNS := newNetns(t, "kncnih")
	podNS := newNetns(t, "kncni")
	for _, ns := range []string{hostNS, podNS} {
		// No duplicate address detection, so IPv6 addresses are usable at
		// once; these are the namespaces' own sysctls.
		run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w",
			"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	bridge := fmt.Sprintf("kncni%d", netnsSeq.Load())
	dataDir := t.TempDir()
	cidrs := []string{"198.18.200.0/24", "fd00:198:18:200::/64"}
	list, err := cni.Render(cni.Network{
		Name: "kncnitest", Bridge: bridge, PodCIDRs: cidrs, MTU: 1400,
		IPMasq: true, IPAMDataDir: dataDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := runtimeArgs{
		hostNS: hostNS, podNS: podNS, containerID: fmt.Sprintf("kncnitest%d", os.Getpid()),
		portMappings: []map[string]any{{"hostPort": 18080, "containerPort": 8080, "protocol": "tcp"}},
	}

	raw, err := execList(t, a, "ADD", list, nil)
	if err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			if _, err := execList(t, a, "DEL", list, raw); err != nil {
				t.Errorf("DEL at cleanup: %v", err)
			}
		}
	})
	var res cniResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	if res.CNIVersion != cni.Version || len(res.IPs) != len(cidrs) {
		t.Fatalf("want a %s result with %d addresses, got %s", cni.Version, len(cidrs), raw)
	}

	// The pod's addresses: in the CIDRs, on eth0 in the pod's namespace.
	var eth0 []struct {
		MTU      int `json:"mtu"`
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	ipJSON(t, &eth0, "-n", podNS, "addr", "show", "dev", "eth0")
	if len(eth0) != 1 || eth0[0].MTU != 1400 {
		t.Fatalf("eth0 in the pod: want MTU 1400, got %+v", eth0)
	}
	podIPs := map[bool]netip.Addr{} // is IPv6 → address
	gateways := map[bool]netip.Addr{}
	for i, ipc := range res.IPs {
		p, err := netip.ParsePrefix(ipc.Address)
		if err != nil {
			t.Fatal(err)
		}
		cidr := netip.MustParsePrefix(cidrs[i])
		if !cidr.Contains(p.Addr()) || p.Bits() != cidr.Bits() {
			t.Errorf("address %s is not in pod CIDR %s", p, cidr)
		}
		gw := netip.MustParseAddr(ipc.Gateway)
		if !cidr.Contains(gw) || gw == p.Addr() {
			t.Errorf("gateway %s: want another address in %s", gw, cidr)
		}
		if ipc.Interface == nil || *ipc.Interface >= len(res.Interfaces) ||
			res.Interfaces[*ipc.Interface].Name != "eth0" || res.Interfaces[*ipc.Interface].Sandbox != "/var/run/netns/"+podNS {
			t.Errorf("address %s is not on the pod's eth0: %s", p, raw)
		}
		found := slices.ContainsFunc(eth0[0].AddrInfo, func(ai struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		}) bool {
			return ai.Local == p.Addr().String() && ai.PrefixLen == p.Bits()
		})
		if !found {
			t.Errorf("ip -n %s addr: %s is not on eth0: %+v", podNS, p, eth0[0].AddrInfo)
		}
		podIPs[p.Addr().Is6()], gateways[p.Addr().Is6()] = p.Addr(), gw
	}

	// Default routes of both families, through the bridge.
	for _, family := range []string{"-4", "-6"} {
		var routes []struct {
			Dst     string `json:"dst"`
			Gateway string `json:"gateway"`
		}
		ipJSON(t, &routes, "-n", podNS, family, "route", "show", "default")
		want := gateways[family == "-6"].String()
		if len(routes) != 1 || routes[0].Gateway != want {
			t.Errorf("pod's %s default route: want via %s, got %+v", family, want, routes)
		}
	}

	// Hairpin mode on the pod's port of the bridge.
	var ports []struct {
		IfName   string `json:"ifname"`
		LinkInfo struct {
			SlaveData struct {
				Hairpin bool `json:"hairpin"`
			} `json:"info_slave_data"`
		} `json:"linkinfo"`
	}
	ipJSON(t, &ports, "-n", hostNS, "-d", "link", "show", "master", bridge)
	if len(ports) != 1 || !ports[0].LinkInfo.SlaveData.Hairpin {
		t.Errorf("bridge %s: want one port with hairpin on, got %+v", bridge, ports)
	}

	// Masquerading of the pod's traffic, and the hostPort's DNAT.
	nat := run(t, "ip", "netns", "exec", hostNS, "iptables", "-t", "nat", "-S")
	if !strings.Contains(nat, a.containerID) || !strings.Contains(nat, "MASQUERADE") || !strings.Contains(nat, "--dport 18080") {
		t.Errorf("host's nat table lacks the pod's masquerade or hostPort rules:\n%s", nat)
	}

	// The host reaches the pod: a listener in the pod answers on both
	// addresses, and on the hostPort through portmap.
	var ln net.Listener
	if err := inNetns(podNS, func() (err error) {
		ln, err = net.Listen("tcp", ":8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "hello from the pod\n")
			c.Close()
		}
	}()
	for _, addr := range []string{
		net.JoinHostPort(podIPs[false].String(), "8080"),
		net.JoinHostPort(podIPs[true].String(), "8080"),
		net.JoinHostPort(gateways[false].String(), "18080"), // the hostPort on the node's own address
	} {
		got, err := greet(hostNS, addr)
		if err != nil || got != "hello from the pod" {
			t.Errorf("from the host to %s: got %q, %v", addr, got, err)
		}
	}

	// DEL undoes the pod's side: eth0, the addresses, the rules.
	if _, err := execList(t, a, "DEL", list, raw); err != nil {
		t.Fatal(err)
	}
	deleted = true
	if _, err := runErr("ip", "-n", podNS, "link", "show", "eth0"); err == nil {
		t.Error("eth0 is still in the pod after DEL")
	}
	leases, err := filepath.Glob(filepath.Join(dataDir, "kncnitest", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if b := filepath.Base(l); b != "lock" && !strings.HasPrefix(b, "last_reserved_ip") {
			t.Errorf("host-local still holds %s after DEL", b)
		}
	}
	nat = run(t, "ip", "netns", "exec", hostNS, "iptables", "-t", "nat", "-S")
	if strings.Contains(nat, a.containerID) || strings.Contains(nat, "--dport 18080") {
		t.Errorf("host's nat table keeps the pod's rules after DEL:\n%s", nat)
	}
}
