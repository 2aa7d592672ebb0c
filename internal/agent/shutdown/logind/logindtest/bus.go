package logindtest

import (
	"bufio"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireDBusEnv names the variable that turns a missing dbus-daemon from a
// skip into a failure, for CI machines that must run these tests.
const RequireDBusEnv = "KNODE_REQUIRE_DBUS"

// startTimeout bounds how long NewBus waits for the daemon to print its
// address. A healthy daemon takes milliseconds.
const startTimeout = 30 * time.Second

// Bus is a private system-type dbus-daemon started for one test.
type Bus struct {
	// Address is the bus's D-Bus address, for logind.Dial, StartFake or
	// DBUS_SYSTEM_BUS_ADDRESS of a child process.
	Address string

	cmd    *exec.Cmd
	stderr string // path of the daemon's stderr log
	once   sync.Once
}

// StartBus starts a private bus for t and returns its address. It is
// NewBus(t).Address.
func StartBus(t testing.TB) string {
	t.Helper()
	return NewBus(t).Address
}

// NewBus starts a private bus for t: a dbus-daemon on a unix socket in a
// directory of t's, with a policy that lets anyone own any name, call
// anything and pass file descriptors. It returns once the daemon accepts
// connections and kills it at t's cleanup.
func NewBus(t testing.TB) *Bus {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		msg := "dbus-daemon not found (install the dbus package); these tests need a private D-Bus bus"
		if os.Getenv(RequireDBusEnv) == "1" {
			t.Fatalf("%s, and %s=1: %v", msg, RequireDBusEnv, err)
		}
		t.Skipf("%s; set %s=1 to make this a failure", msg, RequireDBusEnv)
	}

	dir := t.TempDir()
	sockDir := dir
	if len(sockDir) > 90 || !addressSafe(sockDir) {
		// A unix socket path must fit in 108 bytes and the address must not
		// need escaping; long test names break both, so fall back to a short
		// directory of our own.
		sockDir, err = os.MkdirTemp("", "knode-dbus-")
		if err != nil {
			t.Fatalf("making bus socket directory: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(sockDir) })
	}
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, busConfig(filepath.Join(sockDir, "bus")), 0o644); err != nil {
		t.Fatalf("writing bus config: %v", err)
	}
	stderr, err := os.Create(filepath.Join(dir, "dbus-daemon.log"))
	if err != nil {
		t.Fatalf("creating bus log: %v", err)
	}
	defer stderr.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("making pipe for bus address: %v", err)
	}
	defer r.Close()

	b := &Bus{stderr: stderr.Name()}
	b.cmd = exec.Command(daemon, "--config-file="+conf, "--nofork", "--nosyslog", "--print-address")
	b.cmd.Stdout = w
	b.cmd.Stderr = stderr
	err = b.cmd.Start()
	w.Close()
	if err != nil {
		t.Fatalf("starting dbus-daemon: %v", err)
	}
	t.Cleanup(b.Kill)

	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		got <- line{s, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	select {
	case l := <-got:
		if l.err != nil || strings.TrimSpace(l.s) == "" {
			b.Kill()
			t.Fatalf("dbus-daemon printed no address (%v); its log:\n%s", l.err, b.Log())
		}
		b.Address = strings.TrimSpace(l.s)
	case <-ctx.Done():
		b.Kill() // closes the pipe, which ends the reader
		t.Fatalf("dbus-daemon printed no address within %v; its log:\n%s", startTimeout, b.Log())
	}
	return b
}

// Kill stops the daemon and reaps it, which drops every connection to the
// bus. It is idempotent and also runs at the test's cleanup.
func (b *Bus) Kill() {
	b.once.Do(func() {
		b.cmd.Process.Kill()
		b.cmd.Wait()
	})
}

// Log returns what the daemon wrote to stderr so far, for failure messages.
func (b *Bus) Log() string {
	data, err := os.ReadFile(b.stderr)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", b.stderr, err)
	}
	return string(data)
}

// addressSafe reports whether s can go into a D-Bus address unescaped.
func addressSafe(s string) bool {
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case strings.ContainsRune("-_/.", r):
		default:
			return false
		}
	}
	return true
}

func busConfig(socket string) []byte {
	var path strings.Builder
	xml.EscapeText(&path, []byte(socket))
	return []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=` + path.String() + `</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
`)
}
