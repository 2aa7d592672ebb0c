package logindtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
	"k8s.io/utils/clock"

	"knode/internal/agent/shutdown/logind"
)

// Config is what StartFake needs.
type Config struct {
	// Address is the bus to serve on, usually from StartBus. Required.
	Address string
	// InhibitDelayMax is the initial InhibitDelayMaxUSec (µs precision);
	// math.MaxInt64 is served as logind's "infinity" (UINT64_MAX).
	InhibitDelayMax time.Duration
	// DropInDir is where a reload (KillUnit with SIGHUP) reads *.conf files
	// for [Login] InhibitDelayMaxSec=. Empty means a reload reads nothing.
	DropInDir string
	// RefuseRaise makes a reload count, read the drop-ins and keep the old
	// delay anyway, like a logind that ignores the override.
	RefuseRaise bool
	// Clock stamps Inhibitor.Taken and Released. Nil means the real clock.
	Clock clock.PassiveClock
}

func (c *Config) validate() error {
	if c.Address == "" {
		return errors.New("logindtest: Config.Address is required")
	}
	if c.InhibitDelayMax < 0 {
		return fmt.Errorf("logindtest: Config.InhibitDelayMax %v is negative", c.InhibitDelayMax)
	}
	return nil
}

// Inhibitor is one lock taken through Inhibit.
type Inhibitor struct {
	What, Who, Why, Mode string
	// Taken is when the fake handed out the lock. Released is when every
	// copy of the lock's file was closed, or when the fake's logind
	// restarted and forgot it; zero while the lock is held.
	Taken, Released time.Time
}

// Held reports whether the lock is still held.
func (i Inhibitor) Held() bool { return i.Released.IsZero() }

// Fake is a systemd-logind, plus systemd's KillUnit, on a real bus. It owns
// org.freedesktop.login1 and org.freedesktop.systemd1 until Close. It is
// safe for concurrent use.
type Fake struct {
	cfg     Config
	clock   clock.PassiveClock
	handler handler

	// restartMu serializes Restart and Close, which swap the connection.
	restartMu sync.Mutex

	mu         sync.Mutex
	conn       *dbus.Conn // owner of both names; nil while restarting or closed
	closed     bool
	delay      time.Duration
	preparing  bool
	inhibitors []Inhibitor
	readEnds   []*os.File // parallel to inhibitors: the fake's end of each lock
	reloads    int
	restarts   int
	changed    chan struct{}

	readers sync.WaitGroup
}

// StartFake connects to cfg.Address and takes logind's and systemd's names.
// It fails if either name is already owned.
func StartFake(cfg Config) (*Fake, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Fake{cfg: cfg, clock: cfg.Clock, delay: cfg.InhibitDelayMax, changed: make(chan struct{})}
	if f.clock == nil {
		f.clock = clock.RealClock{}
	}
	f.handler = f.objects()
	if err := f.connect(); err != nil {
		return nil, err
	}
	return f, nil
}

// connect opens a connection, makes it the current one and takes both names
// with it. The connection is current before it owns the names, so that no
// call reaching it is refused. On error no connection is current.
func (f *Fake) connect() error {
	conn, err := dbus.Connect(f.cfg.Address, dbus.WithHandler(f.handler))
	if err != nil {
		return fmt.Errorf("logindtest: connecting to %s: %w", f.cfg.Address, err)
	}
	f.mu.Lock()
	f.conn = conn
	f.mu.Unlock()
	for _, name := range []string{logind.Service, logind.SystemdService} {
		reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
		if err == nil && reply != dbus.RequestNameReplyPrimaryOwner {
			err = fmt.Errorf("reply %v, name is taken", reply)
		}
		if err != nil {
			f.mu.Lock()
			f.conn = nil
			f.mu.Unlock()
			conn.Close()
			return fmt.Errorf("logindtest: requesting %s: %w", name, err)
		}
	}
	return nil
}

// Close drops the fake's names and connection. Locks still held stay
// unreleased in Inhibitors. Close is idempotent.
func (f *Fake) Close() error {
	f.restartMu.Lock()
	defer f.restartMu.Unlock()
	f.mu.Lock()
	conn := f.conn
	f.conn = nil
	f.closed = true
	for _, r := range f.readEnds {
		r.Close()
	}
	f.mu.Unlock()
	var err error
	if conn != nil {
		err = conn.Close()
	}
	f.readers.Wait()
	f.notify()
	return err
}

// Restart models logind restarting: the current connection gives up both
// names and closes, every lock not yet released is marked Released (logind
// forgets them), and a new connection, with a new unique name, takes the
// names again. The delay and PreparingForShutdown are kept. It returns once
// the new connection owns the names. If it fails, the fake stays down.
func (f *Fake) Restart() error {
	f.restartMu.Lock()
	defer f.restartMu.Unlock()
	f.mu.Lock()
	old := f.conn
	if old == nil {
		f.mu.Unlock()
		return errors.New("logindtest: Restart of a closed fake")
	}
	f.conn = nil // calls reaching old from here on are refused
	now := f.clock.Now()
	for i, r := range f.readEnds {
		if f.inhibitors[i].Held() {
			f.inhibitors[i].Released = now
			r.Close()
		}
	}
	f.mu.Unlock()

	// Release the names before closing so the new connection can take them
	// at once; the bus would otherwise notice the disconnect in its own time.
	var err error
	for _, name := range []string{logind.Service, logind.SystemdService} {
		if _, rerr := old.ReleaseName(name); rerr != nil && err == nil {
			err = fmt.Errorf("logindtest: releasing %s: %w", name, rerr)
		}
	}
	old.Close()
	if err == nil {
		err = f.connect()
	}

	f.mu.Lock()
	if err == nil {
		f.restarts++
	} else {
		f.closed = true // the fake is dead; Close still works
	}
	f.mu.Unlock()
	f.notify()
	return err
}

// Owner returns the unique bus name of the fake's current connection, the
// name a client sees as the owner of org.freedesktop.login1; "" once closed.
// It changes on every Restart.
func (f *Fake) Owner() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return ""
	}
	return f.conn.Names()[0]
}

// PrepareForShutdown sets PreparingForShutdown to active and emits the
// signal from the owner of org.freedesktop.login1, as logind does when a
// shutdown starts (true) or is cancelled (false).
func (f *Fake) PrepareForShutdown(active bool) error {
	f.mu.Lock()
	f.preparing = active
	conn := f.conn
	f.mu.Unlock()
	if conn == nil {
		return errors.New("logindtest: PrepareForShutdown while logind is not running")
	}
	if err := conn.Emit(logind.Path, logind.Interface+".PrepareForShutdown", active); err != nil {
		return fmt.Errorf("logindtest: emitting PrepareForShutdown: %w", err)
	}
	f.notify()
	return nil
}

// SetPreparingForShutdown sets the property without emitting the signal,
// modelling a shutdown that was under way before the client connected.
func (f *Fake) SetPreparingForShutdown(active bool) {
	f.mu.Lock()
	f.preparing = active
	f.mu.Unlock()
	f.notify()
}

// Spoof emits PrepareForShutdown(active) with logind's path and interface
// from a fresh connection that does not own org.freedesktop.login1, then
// closes it. It returns once the bus has routed the signal, so anything the
// fake emits afterwards reaches a watcher after the spoof.
func (f *Fake) Spoof(active bool) error {
	conn, err := dbus.Connect(f.cfg.Address)
	if err != nil {
		return fmt.Errorf("logindtest: spoof connection: %w", err)
	}
	defer conn.Close()
	if err := conn.Emit(logind.Path, logind.Interface+".PrepareForShutdown", active); err != nil {
		return fmt.Errorf("logindtest: emitting spoofed PrepareForShutdown: %w", err)
	}
	// The bus handles one connection's messages in order, so once it has
	// answered this call it has dispatched the signal.
	var id string
	if err := conn.BusObject().Call("org.freedesktop.DBus.GetId", 0).Store(&id); err != nil {
		return fmt.Errorf("logindtest: spoof round trip: %w", err)
	}
	return nil
}

// Inhibitors returns a copy of every lock taken so far, in order.
func (f *Fake) Inhibitors() []Inhibitor {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Inhibitor(nil), f.inhibitors...)
}

// Reloads returns how many times KillUnit reloaded logind.
func (f *Fake) Reloads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reloads
}

// Restarts returns how many times Restart succeeded.
func (f *Fake) Restarts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restarts
}

// InhibitDelayMax returns the delay the fake currently serves.
func (f *Fake) InhibitDelayMax() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}

// PreparingForShutdown returns the property the fake currently serves.
func (f *Fake) PreparingForShutdown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.preparing
}

// Changed returns a channel that is closed at the next change: a lock taken
// or released, a reload, a restart, a PrepareForShutdown, or Close. Take the
// channel before looking at the state, then wait on it.
func (f *Fake) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *Fake) notify() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.changed)
	f.changed = make(chan struct{})
}

// WaitFor returns nil once cond(f) holds, checking after every change, or
// ctx's error wrapped when ctx ends first. cond must not block.
func (f *Fake) WaitFor(ctx context.Context, cond func(*Fake) bool) error {
	for {
		changed := f.Changed()
		if cond(f) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("logindtest: condition not met: %w", ctx.Err())
		}
	}
}

// inhibit serves org.freedesktop.login1.Manager.Inhibit.
func (f *Fake) inhibit(c *call) ([]any, func(), error) {
	what, who, why, mode := c.args[0].(string), c.args[1].(string), c.args[2].(string), c.args[3].(string)
	if err := validInhibit(what, mode); err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, dbus.MakeFailedError(err)
	}
	f.mu.Lock()
	if c.conn != f.conn {
		f.mu.Unlock()
		r.Close()
		w.Close()
		return nil, nil, dbus.MakeFailedError(errors.New("logind is not running"))
	}
	i := len(f.inhibitors)
	f.inhibitors = append(f.inhibitors, Inhibitor{What: what, Who: who, Why: why, Mode: mode, Taken: f.clock.Now()})
	f.readEnds = append(f.readEnds, r)
	f.readers.Add(1)
	f.mu.Unlock()
	go f.watchLock(i, r)
	f.notify()
	// The fake's copy of the write end must outlive the reply carrying it;
	// after closing it only the holder's copies keep the pipe open.
	return []any{dbus.UnixFD(w.Fd())}, func() { w.Close() }, nil
}

// watchLock stamps Released on inhibitor i when its pipe reaches EOF, that
// is when the holder closed every copy of the write end. A read error means
// the fake closed r itself (Restart, Close) and already did the bookkeeping.
func (f *Fake) watchLock(i int, r *os.File) {
	defer f.readers.Done()
	var buf [64]byte
	var err error
	for err == nil {
		_, err = r.Read(buf[:])
	}
	if !errors.Is(err, os.ErrClosed) {
		r.Close()
	}
	f.mu.Lock()
	if f.closed || !f.inhibitors[i].Held() {
		f.mu.Unlock()
		return
	}
	f.inhibitors[i].Released = f.clock.Now()
	f.mu.Unlock()
	f.notify()
}

func validInhibit(what, mode string) error {
	if what == "" {
		return invalidArgs("what is empty")
	}
	for _, w := range strings.Split(what, ":") {
		switch w {
		case "shutdown", "sleep", "idle", "handle-power-key", "handle-suspend-key",
			"handle-hibernate-key", "handle-lid-switch", "handle-reboot-key":
		default:
			return invalidArgs("unknown inhibit what %q", w)
		}
	}
	switch mode {
	case "block", "block-weak", "delay":
	default:
		return invalidArgs("unknown inhibit mode %q", mode)
	}
	return nil
}

// killUnit serves org.freedesktop.systemd1.Manager.KillUnit for the one case
// the agent uses: SIGHUP to systemd-logind.service, which reloads.
func (f *Fake) killUnit(c *call) ([]any, func(), error) {
	unit, who, signal := c.args[0].(string), c.args[1].(string), c.args[2].(int32)
	if unit != logind.LogindUnit {
		return nil, nil, dbus.NewError("org.freedesktop.systemd1.NoSuchUnit", []any{fmt.Sprintf("Unit %s not loaded.", unit)})
	}
	switch who {
	case "all", "main", "control":
	default:
		return nil, nil, invalidArgs("invalid who %q", who)
	}
	if signal != int32(syscall.SIGHUP) {
		return nil, nil, dbus.MakeFailedError(fmt.Errorf("fake only handles SIGHUP to %s, got signal %d", unit, signal))
	}
	delay, found, err := readDropIns(f.cfg.DropInDir)
	if err != nil {
		return nil, nil, dbus.MakeFailedError(err)
	}
	f.mu.Lock()
	f.reloads++
	if found && !f.cfg.RefuseRaise {
		f.delay = delay
	}
	f.mu.Unlock()
	f.notify()
	return nil, nil, nil
}

// readDropIns applies every *.conf in dir in name order, like logind, and
// returns the last InhibitDelayMaxSec found. A missing dir has none.
func readDropIns(dir string) (time.Duration, bool, error) {
	if dir == "" {
		return 0, false, nil
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.conf"))
	if err != nil {
		return 0, false, err
	}
	sort.Strings(paths)
	var delay time.Duration
	var found bool
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return 0, false, fmt.Errorf("reading drop-in: %w", err)
		}
		if d, ok := parseInhibitDelayMax(string(data)); ok {
			delay, found = d, true
		}
	}
	return delay, found, nil
}

// parseInhibitDelayMax returns the last valid InhibitDelayMaxSec in the
// [Login] section of a logind config file. Like logind, it ignores comments
// (# and ;), other sections, and values it cannot parse. A value is seconds
// ("30", "1.5"), a Go duration ("90s", "2m"), or "infinity".
func parseInhibitDelayMax(conf string) (time.Duration, bool) {
	var delay time.Duration
	var found bool
	section := ""
	for _, line := range strings.Split(conf, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || section != "Login" || strings.TrimSpace(key) != "InhibitDelayMaxSec" {
			continue
		}
		if d, ok := parseSeconds(strings.TrimSpace(value)); ok {
			delay, found = d, true
		}
	}
	return delay, found
}

func parseSeconds(v string) (time.Duration, bool) {
	if v == "infinity" {
		return time.Duration(math.MaxInt64), true
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(secs) || secs < 0 || secs >= math.MaxInt64/float64(time.Second) {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}
