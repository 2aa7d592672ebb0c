package logind

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// D-Bus names of logind and of the systemd manager that restarts it. They are
// facts of the wire protocol.
const (
	Service   = "org.freedesktop.login1"
	Path      = dbus.ObjectPath("/org/freedesktop/login1")
	Interface = "org.freedesktop.login1.Manager"

	SystemdService   = "org.freedesktop.systemd1"
	SystemdPath      = dbus.ObjectPath("/org/freedesktop/systemd1")
	SystemdInterface = "org.freedesktop.systemd1.Manager"

	// LogindUnit is the unit ReloadLogind sends SIGHUP to.
	LogindUnit = "systemd-logind.service"
)

// Who and Why are what the agent tells logind about its inhibitor lock; they
// show up in `systemd-inhibit --list`.
const (
	Who = "kubelet"
	Why = "Kubelet needs time to handle node shutdown"
)

// DefaultSystemBusAddress is used by Dial when neither the address argument
// nor $DBUS_SYSTEM_BUS_ADDRESS names a bus.
const DefaultSystemBusAddress = "unix:path=/var/run/dbus/system_bus_socket"

// Conn is one private connection to the system bus, speaking to logind.
// It is safe for concurrent use. Its zero value is not usable; call Dial.
type Conn struct {
	bus *dbus.Conn
	log *slog.Logger
}

// Option changes how Dial sets up a Conn.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLogger sets where Conn logs, which today is only the Warn for a dropped
// PrepareForShutdown from a sender that is not logind. Nil, or no option,
// means slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// Dial opens a private connection to the bus at address (a D-Bus address such
// as "unix:path=/run/dbus/system_bus_socket"). An empty address means
// $DBUS_SYSTEM_BUS_ADDRESS, or DefaultSystemBusAddress when that is unset.
// The connection is never shared with other users of godbus in the process.
func Dial(address string, opts ...Option) (*Conn, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if address == "" {
		address = os.Getenv("DBUS_SYSTEM_BUS_ADDRESS")
	}
	if address == "" {
		address = DefaultSystemBusAddress
	}
	// The sequential handler keeps signals in the order the bus sent them,
	// which Watch needs: an owner change must be seen before the signals of
	// the new owner.
	bus, err := dbus.Connect(address, dbus.WithSignalHandler(dbus.NewSequentialSignalHandler()))
	if err != nil {
		return nil, fmt.Errorf("connecting to system bus %q: %w", address, err)
	}
	return &Conn{bus: bus, log: o.log}, nil
}

// Close closes the connection. Channels returned by Watch close. Inhibitor
// files already returned stay valid: the lock lives in the file, not in the
// connection.
func (c *Conn) Close() error {
	return c.bus.Close()
}

func (c *Conn) logind() dbus.BusObject { return c.bus.Object(Service, Path) }

func (c *Conn) property(name string) (dbus.Variant, error) {
	v, err := c.logind().GetProperty(Interface + "." + name)
	if err != nil {
		return dbus.Variant{}, fmt.Errorf("reading %s: %w", name, err)
	}
	return v, nil
}

// InhibitDelayMax returns logind's InhibitDelayMaxUSec: the longest a delay
// lock can hold a shutdown back. logind's "infinity" (and anything longer
// than a time.Duration holds) comes back as math.MaxInt64.
func (c *Conn) InhibitDelayMax() (time.Duration, error) {
	v, err := c.property("InhibitDelayMaxUSec")
	if err != nil {
		return 0, err
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("reading InhibitDelayMaxUSec: got D-Bus type %s, want t", v.Signature())
	}
	return usecToDuration(usec), nil
}

func usecToDuration(usec uint64) time.Duration {
	if usec > uint64(math.MaxInt64/int64(time.Microsecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(usec) * time.Microsecond
}

// PreparingForShutdown returns logind's PreparingForShutdown: true between a
// PrepareForShutdown(true) and its cancellation. An agent starting while it
// is true has missed the signal.
func (c *Conn) PreparingForShutdown() (bool, error) {
	v, err := c.property("PreparingForShutdown")
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("reading PreparingForShutdown: got D-Bus type %s, want b", v.Signature())
	}
	return b, nil
}

// InhibitShutdown takes a delay lock on shutdown for who, giving why as the
// reason. The caller owns the returned file: the lock is held until every
// copy of it is closed (it is close-on-exec, so children do not inherit it).
// logind also forgets the lock if it restarts.
func (c *Conn) InhibitShutdown(who, why string) (*os.File, error) {
	call := c.logind().Call(Interface+".Inhibit", 0, "shutdown", who, why, "delay")
	if call.Err != nil {
		return nil, fmt.Errorf("taking shutdown inhibitor lock: %w", call.Err)
	}
	var fds []int
	for _, v := range call.Body {
		if fd, ok := v.(dbus.UnixFD); ok {
			fds = append(fds, int(fd))
		}
	}
	if len(call.Body) != 1 || len(fds) != 1 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return nil, fmt.Errorf("taking shutdown inhibitor lock: reply %v is not one file descriptor", call.Body)
	}
	syscall.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), "logind-inhibitor"), nil
}

// ReloadLogind asks systemd to send SIGHUP to systemd-logind, which makes it
// re-read its configuration, including drop-ins written by WriteDropIn. It
// returns once systemd has sent the signal, not once logind has reloaded:
// read InhibitDelayMax again to see the effect.
func (c *Conn) ReloadLogind() error {
	obj := c.bus.Object(SystemdService, SystemdPath)
	err := obj.Call(SystemdInterface+".KillUnit", 0, LogindUnit, "all", int32(syscall.SIGHUP)).Err
	if err != nil {
		return fmt.Errorf("reloading %s: %w", LogindUnit, err)
	}
	return nil
}

// SignalKind says which event a Signal reports.
type SignalKind int

const (
	// PrepareForShutdown: logind's signal of that name, from logind itself.
	// Active is true when a shutdown starts and false when it is cancelled.
	PrepareForShutdown SignalKind = iota + 1
	// OwnerChanged: org.freedesktop.login1 changed hands, which means logind
	// stopped or (re)started. Owner is the new unique name, "" when logind
	// went away. Locks taken from the previous owner are gone.
	OwnerChanged
)

func (k SignalKind) String() string {
	switch k {
	case PrepareForShutdown:
		return "PrepareForShutdown"
	case OwnerChanged:
		return "OwnerChanged"
	}
	return fmt.Sprintf("SignalKind(%d)", int(k))
}

// Signal is one event from Watch.
type Signal struct {
	Kind   SignalKind
	Active bool   // PrepareForShutdown only
	Owner  string // OwnerChanged only
}

const (
	busService   = "org.freedesktop.DBus"
	busPath      = dbus.ObjectPath("/org/freedesktop/DBus")
	busInterface = "org.freedesktop.DBus"
)

// Watch subscribes to PrepareForShutdown and to changes of logind's owner,
// and returns the events in the order the bus sent them. Each call returns an
// independent stream.
//
// A PrepareForShutdown whose sender is not the current owner of
// org.freedesktop.login1 is dropped and logged at Warn. The channel is
// closed when the connection closes or is lost; the caller must keep reading
// until then or Close the Conn, or the stream stalls.
func (c *Conn) Watch() (<-chan Signal, error) {
	raw := make(chan *dbus.Signal)
	// Register the channel and the matches before reading the owner, so no
	// owner change can fall between the read and the subscription.
	c.bus.Signal(raw)
	matches := [][]dbus.MatchOption{{
		dbus.WithMatchObjectPath(Path),
		dbus.WithMatchInterface(Interface),
		dbus.WithMatchMember("PrepareForShutdown"),
	}, {
		dbus.WithMatchSender(busService),
		dbus.WithMatchObjectPath(busPath),
		dbus.WithMatchInterface(busInterface),
		dbus.WithMatchMember("NameOwnerChanged"),
		dbus.WithMatchArg(0, Service),
	}}
	for _, m := range matches {
		if err := c.bus.AddMatchSignal(m...); err != nil {
			c.bus.RemoveSignal(raw)
			return nil, fmt.Errorf("subscribing to logind signals: %w", err)
		}
	}
	owner, err := c.nameOwner()
	if err != nil {
		c.bus.RemoveSignal(raw)
		return nil, err
	}
	out := make(chan Signal)
	go c.relay(raw, out, owner)
	return out, nil
}

// nameOwner returns the unique name owning org.freedesktop.login1, or "" when
// nobody does.
func (c *Conn) nameOwner() (string, error) {
	var owner string
	err := c.bus.BusObject().Call(busInterface+".GetNameOwner", 0, Service).Store(&owner)
	var dbusErr dbus.Error
	if errors.As(err, &dbusErr) && dbusErr.Name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading owner of %s: %w", Service, err)
	}
	return owner, nil
}

// relay turns raw bus signals into Signals until raw closes. owner is only
// touched here.
func (c *Conn) relay(raw <-chan *dbus.Signal, out chan<- Signal, owner string) {
	defer close(out)
	done := c.bus.Context().Done()
	for sig := range raw {
		s, ok := c.translate(sig, &owner)
		if !ok {
			continue
		}
		select {
		case out <- s:
		case <-done:
			return
		}
	}
}

func (c *Conn) translate(sig *dbus.Signal, owner *string) (Signal, bool) {
	switch {
	case sig.Name == Interface+".PrepareForShutdown" && sig.Path == Path:
		active, ok := oneBool(sig.Body)
		if !ok {
			c.log.Warn("dropping malformed PrepareForShutdown", "sender", sig.Sender, "body", sig.Body)
			return Signal{}, false
		}
		if sig.Sender == "" || sig.Sender != *owner {
			c.log.Warn("dropping PrepareForShutdown not sent by logind",
				"sender", sig.Sender, "owner", *owner, "active", active)
			return Signal{}, false
		}
		return Signal{Kind: PrepareForShutdown, Active: active}, true
	case sig.Name == busInterface+".NameOwnerChanged" && sig.Sender == busService:
		if len(sig.Body) != 3 {
			return Signal{}, false
		}
		name, _ := sig.Body[0].(string)
		newOwner, ok := sig.Body[2].(string)
		if name != Service || !ok {
			return Signal{}, false
		}
		*owner = newOwner
		return Signal{Kind: OwnerChanged, Owner: newOwner}, true
	}
	return Signal{}, false
}

func oneBool(body []any) (bool, bool) {
	if len(body) != 1 {
		return false, false
	}
	b, ok := body[0].(bool)
	return b, ok
}
