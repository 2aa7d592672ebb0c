package logindtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"knode/internal/agent/shutdown/logind"
)

const waitTimeout = 10 * time.Second

func start(t *testing.T, cfg Config) *Fake {
	t.Helper()
	f, err := StartFake(cfg)
	if err != nil {
		t.Fatalf("StartFake: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// client is a raw godbus connection, so these tests check the fake against
// the wire protocol rather than against package logind.
func client(t *testing.T, addr string) *dbus.Conn {
	t.Helper()
	c, err := dbus.Connect(addr)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return c
}

func dbusErrorName(err error) string {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	return ""
}

func TestStartFakeValidates(t *testing.T) {
	for _, cfg := range []Config{{}, {Address: "unix:path=/nonexistent", InhibitDelayMax: -time.Second}} {
		if f, err := StartFake(cfg); err == nil {
			f.Close()
			t.Errorf("StartFake(%+v) succeeded", cfg)
		}
	}
}

func TestSecondFakeCannotTakeNames(t *testing.T) {
	addr := StartBus(t)
	start(t, Config{Address: addr})
	f, err := StartFake(Config{Address: addr})
	if err == nil {
		f.Close()
		t.Fatal("second StartFake on one bus succeeded")
	}
	if !strings.Contains(err.Error(), logind.Service) {
		t.Errorf("error %q does not name the taken name", err)
	}
}

func TestProperties(t *testing.T) {
	addr := StartBus(t)
	f := start(t, Config{Address: addr, InhibitDelayMax: 2500 * time.Millisecond})
	f.SetPreparingForShutdown(true)
	obj := client(t, addr).Object(logind.Service, logind.Path)

	var all map[string]dbus.Variant
	if err := obj.Call("org.freedesktop.DBus.Properties.GetAll", 0, logind.Interface).Store(&all); err != nil {
		t.Fatalf("GetAll: %v", err)
	}
	if v := all["InhibitDelayMaxUSec"].Value(); v != uint64(2500000) {
		t.Errorf("InhibitDelayMaxUSec = %#v, want uint64(2500000)", v)
	}
	if v := all["PreparingForShutdown"].Value(); v != true {
		t.Errorf("PreparingForShutdown = %#v, want true", v)
	}
	if len(all) != 2 {
		t.Errorf("GetAll returned %d properties, want 2", len(all))
	}

	_, err := obj.GetProperty(logind.Interface + ".NoSuch")
	if got := dbusErrorName(err); got != "org.freedesktop.DBus.Error.UnknownProperty" {
		t.Errorf("Get of unknown property: error %v, want UnknownProperty", err)
	}
	err = obj.SetProperty(logind.Interface+".PreparingForShutdown", dbus.MakeVariant(false))
	if got := dbusErrorName(err); got != "org.freedesktop.DBus.Error.PropertyReadOnly" {
		t.Errorf("Set: error %v, want PropertyReadOnly", err)
	}

	var xml string
	if err := obj.Call("org.freedesktop.DBus.Introspectable.Introspect", 0).Store(&xml); err != nil {
		t.Fatalf("Introspect: %v", err)
	}
	for _, want := range []string{`name="Inhibit"`, `name="PrepareForShutdown"`, `name="InhibitDelayMaxUSec" type="t"`} {
		if !strings.Contains(xml, want) {
			t.Errorf("introspection lacks %s", want)
		}
	}
}

func TestInhibitRejectsBadArguments(t *testing.T) {
	addr := StartBus(t)
	f := start(t, Config{Address: addr})
	obj := client(t, addr).Object(logind.Service, logind.Path)
	for _, args := range [][]any{
		{"shutdown", "who", "why", "forever"},
		{"", "who", "why", "delay"},
		{"reboot", "who", "why", "delay"},
		{"shutdown", "who", "why"},
	} {
		var fd dbus.UnixFD
		err := obj.Call(logind.Interface+".Inhibit", 0, args...).Store(&fd)
		if got := dbusErrorName(err); got != "org.freedesktop.DBus.Error.InvalidArgs" {
			t.Errorf("Inhibit%q: error %v, want InvalidArgs", args, err)
		}
		if err == nil {
			syscall.Close(int(fd))
		}
	}
	if n := len(f.Inhibitors()); n != 0 {
		t.Errorf("%d inhibitors recorded from bad calls", n)
	}
}

func TestKillUnit(t *testing.T) {
	tests := []struct {
		name    string
		unit    string
		who     string
		signal  int32
		wantErr string // D-Bus error name; "" = success
	}{
		{name: "reload", unit: "systemd-logind.service", who: "all", signal: 1},
		{name: "other unit", unit: "sshd.service", who: "all", signal: 1, wantErr: "org.freedesktop.systemd1.NoSuchUnit"},
		{name: "other signal", unit: "systemd-logind.service", who: "all", signal: 15, wantErr: "org.freedesktop.DBus.Error.Failed"},
		{name: "bad who", unit: "systemd-logind.service", who: "everyone", signal: 1, wantErr: "org.freedesktop.DBus.Error.InvalidArgs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := StartBus(t)
			dir := t.TempDir()
			if err := os.WriteFile(dir+"/99-kubelet.conf", []byte("[Login]\nInhibitDelayMaxSec=30\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			f := start(t, Config{Address: addr, InhibitDelayMax: 5 * time.Second, DropInDir: dir})
			obj := client(t, addr).Object(logind.SystemdService, logind.SystemdPath)
			err := obj.Call(logind.SystemdInterface+".KillUnit", 0, tc.unit, tc.who, tc.signal).Err
			wantReloads, wantDelay := 1, 30*time.Second
			if tc.wantErr != "" {
				wantReloads, wantDelay = 0, 5*time.Second
				if got := dbusErrorName(err); got != tc.wantErr {
					t.Errorf("KillUnit error = %v, want %s", err, tc.wantErr)
				}
			} else if err != nil {
				t.Errorf("KillUnit: %v", err)
			}
			if f.Reloads() != wantReloads || f.InhibitDelayMax() != wantDelay {
				t.Errorf("after KillUnit: reloads %d, delay %v; want %d, %v", f.Reloads(), f.InhibitDelayMax(), wantReloads, wantDelay)
			}
		})
	}
}

func TestRestart(t *testing.T) {
	addr := StartBus(t)
	f := start(t, Config{Address: addr, InhibitDelayMax: 8 * time.Second})
	c := client(t, addr)
	obj := c.Object(logind.Service, logind.Path)
	inhibit := func() *os.File {
		t.Helper()
		var fd dbus.UnixFD
		if err := obj.Call(logind.Interface+".Inhibit", 0, "shutdown", "w", "y", "delay").Store(&fd); err != nil {
			t.Fatalf("Inhibit: %v", err)
		}
		return os.NewFile(uintptr(fd), "lock")
	}
	before := inhibit()
	defer before.Close()
	owner := f.Owner()

	if err := f.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if f.Owner() == owner || f.Owner() == "" {
		t.Errorf("owner after restart %q, was %q; want a new unique name", f.Owner(), owner)
	}
	var busOwner string
	if err := c.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, logind.Service).Store(&busOwner); err != nil || busOwner != f.Owner() {
		t.Errorf("bus says owner %q (%v), fake says %q", busOwner, err, f.Owner())
	}
	if f.Restarts() != 1 || f.InhibitDelayMax() != 8*time.Second {
		t.Errorf("restarts %d, delay %v; want 1, 8s", f.Restarts(), f.InhibitDelayMax())
	}
	if f.Inhibitors()[0].Held() {
		t.Error("lock from before the restart still held")
	}

	after := inhibit()
	if got := f.Inhibitors(); len(got) != 2 || !got[1].Held() {
		t.Fatalf("inhibitors after second Inhibit: %+v", got)
	}
	after.Close()
	if err := f.WaitFor(ctx(t), func(f *Fake) bool { return !f.Inhibitors()[1].Held() }); err != nil {
		t.Fatalf("lock taken after restart not released on close: %v", err)
	}
}

func TestInhibitorHeldUntilEveryCopyCloses(t *testing.T) {
	addr := StartBus(t)
	f := start(t, Config{Address: addr})
	var fd dbus.UnixFD
	err := client(t, addr).Object(logind.Service, logind.Path).
		Call(logind.Interface+".Inhibit", 0, "shutdown", "w", "y", "delay").Store(&fd)
	if err != nil {
		t.Fatal(err)
	}
	lock := os.NewFile(uintptr(fd), "lock")
	dupFD, err := syscall.Dup(int(fd))
	if err != nil {
		t.Fatal(err)
	}
	dup := os.NewFile(uintptr(dupFD), "dup")
	lock.Close()
	// Closing one copy must not release. Nothing tells when the fake would
	// have noticed, so a wrong release may be missed here, never invented.
	if !f.Inhibitors()[0].Held() {
		t.Error("released while a copy is open")
	}
	dup.Close()
	if err := f.WaitFor(ctx(t), func(f *Fake) bool { return !f.Inhibitors()[0].Held() }); err != nil {
		t.Fatalf("not released after the last copy closed: %v", err)
	}
}

func TestWaitFor(t *testing.T) {
	addr := StartBus(t)
	f := start(t, Config{Address: addr})

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.WaitFor(cancelled, func(*Fake) bool { return false })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WaitFor on a cancelled context = %v, want context.Canceled", err)
	}

	done := make(chan error, 1)
	go func() { done <- f.WaitFor(ctx(t), func(f *Fake) bool { return f.PreparingForShutdown() }) }()
	f.SetPreparingForShutdown(true)
	if err := <-done; err != nil {
		t.Errorf("WaitFor after the change: %v", err)
	}
}

func TestBusKill(t *testing.T) {
	bus := NewBus(t)
	c, err := dbus.Connect(bus.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bus.Kill()
	bus.Kill() // idempotent
	select {
	case <-c.Context().Done():
	case <-ctx(t).Done():
		t.Fatal("connection still up after Kill")
	}
	if c2, err := dbus.Connect(bus.Address); err == nil {
		c2.Close()
		t.Error("connected to a killed bus")
	}
}

func TestAddressSafe(t *testing.T) {
	for s, want := range map[string]bool{
		"/tmp/TestX123/001": true,
		"/tmp/a-b_c.d":      true,
		"/tmp/with space":   false,
		"/tmp/semi;colon":   false,
		"/tmp/comma,and=eq": false,
		"/tmp/percent%":     false,
	} {
		if got := addressSafe(s); got != want {
			t.Errorf("addressSafe(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestNewBusWithLongTestName(t *testing.T) {
	// t.TempDir here is too long for a unix socket path.
	t.Run(strings.Repeat("long", 30), func(t *testing.T) {
		bus := NewBus(t)
		c, err := dbus.Connect(bus.Address)
		if err != nil {
			t.Fatalf("connecting to %s: %v", bus.Address, err)
		}
		c.Close()
	})
}
