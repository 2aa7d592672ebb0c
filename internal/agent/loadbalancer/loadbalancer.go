// Package loadbalancer is the agent's client-side load balancer over the
// control plane's servers, in the role of k3s's agent load balancer: a TCP
// listener on 127.0.0.1 that the agent's API client dials instead of one
// server, and that passes each connection to a server that answers,
// failing over to the next when one does not.
//
// The servers' serving certificates are valid for 127.0.0.1 (knode's PKI
// always includes it), so TLS from the agent to the chosen server is
// verified as it would be against the server directly; the balancer sees
// only encrypted bytes.
//
// Choosing: connections go to the current server while it accepts them.
// A server whose dial fails is marked down for Config.DownFor on the
// clock and the next server in the list becomes current; when all are
// down, every one is tried again, current first. The list can be replaced
// while running (SetServers: the members the agent learns), keeping the
// current server when it is still in the list. Learn keeps it in step
// with the default/kubernetes Endpoints the servers publish (package
// server/apiendpoints, which owns that object's shape and its reading;
// it depends on nothing of the agent's).
//
// Health checks: with Config.Check (the agent's asks a server's /readyz),
// Serve checks every server each CheckPeriod on the clock, CheckOnce
// being the synchronous step. A failed dial is not the only signal then:
// a server that accepts connections but does not answer (a stopped or
// wedged process, whose kernel still completes the handshakes) fails its
// check within CheckTimeout. A server that fails is marked down like one
// whose dial failed; when the current one fails and another passes, the
// one that passes becomes current; and while any passes, the connections
// to those that fail are closed, so that their clients reconnect through
// the balancer at once instead of waiting out their own timeouts on a
// silent server.
//
// What it does not do: balance load across healthy servers (one is
// current at a time, as k3s's), or look inside the connections.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of Config's zero fields.
const (
	DefaultDownFor      = 15 * time.Second
	DefaultDialTimeout  = 5 * time.Second
	DefaultCheckPeriod  = 5 * time.Second
	DefaultCheckTimeout = 2 * time.Second
)

// Config builds a Balancer.
type Config struct {
	// Servers are host:port addresses of the API servers, in order of
	// preference. At least one.
	Servers []string
	// DownFor is how long a server whose dial failed is passed over; zero
	// means DefaultDownFor.
	DownFor time.Duration
	// DialTimeout bounds one dial to a server (a network timeout, on real
	// time); zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// Dial opens a connection to a server; nil means net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Check asks whether the server at address (host:port) can serve; an
	// error means it cannot. Nil means no health checks: a failed dial is
	// the only signal.
	Check func(ctx context.Context, address string) error
	// CheckPeriod is how often Serve checks every server (on the clock);
	// zero means DefaultCheckPeriod.
	CheckPeriod time.Duration
	// CheckTimeout bounds one check (a network timeout, on real time);
	// zero means DefaultCheckTimeout.
	CheckTimeout time.Duration
	// Clock judges DownFor and paces the checks; nil means the real
	// clock.
	Clock clock.WithTicker
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if len(c.Servers) == 0 {
		return errors.New("loadbalancer: Config.Servers: at least one server is required")
	}
	for i, s := range c.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("loadbalancer: Config.Servers[%d] %q: must be host:port: %v", i, s, err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DownFor", c.DownFor}, {"DialTimeout", c.DialTimeout}, {"CheckPeriod", c.CheckPeriod}, {"CheckTimeout", c.CheckTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("loadbalancer: Config.%s %s: must not be negative", d.name, d.v)
		}
	}
	if c.CheckPeriod == 0 {
		c.CheckPeriod = DefaultCheckPeriod
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.DownFor == 0 {
		c.DownFor = DefaultDownFor
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Balancer is a running load balancer. Use New, then Serve.
type Balancer struct {
	cfg Config
	ln  net.Listener
	log *slog.Logger

	mu      sync.Mutex
	servers []string
	current string
	// down holds when each server failed last (a dial or a check).
	down map[string]time.Time
	// open are the connections passed to each server, to close when it
	// fails a check.
	open map[string]map[*passed]struct{}
}

// passed is one connection passed to a server: both its ends.
type passed struct{ client, server net.Conn }

func (p *passed) close() {
	_ = p.client.Close()
	_ = p.server.Close()
}

// New validates cfg and listens on 127.0.0.1 (a free port). The caller
// must call Serve, or Close to give the port back.
func New(cfg Config) (*Balancer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loadbalancer: %w", err)
	}
	b := &Balancer{cfg: cfg, ln: ln, log: cfg.Logger.With("component", "loadbalancer"), down: map[string]time.Time{}, open: map[string]map[*passed]struct{}{}}
	b.servers = slices.Clone(cfg.Servers)
	b.current = b.servers[0]
	return b, nil
}

// Addr is the balancer's address, 127.0.0.1:port: the server the agent's
// client dials.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Current is the server connections go to now.
func (b *Balancer) Current() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.current
}

// Servers is the list, in order of preference.
func (b *Balancer) Servers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.servers)
}

// SetServers replaces the list; an empty list is ignored. The current
// server stays current when it is in the new list.
func (b *Balancer) SetServers(servers []string) {
	if len(servers) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Equal(servers, b.servers) {
		return
	}
	b.servers = slices.Clone(servers)
	if !slices.Contains(b.servers, b.current) {
		b.current = b.servers[0]
	}
	b.log.Info("servers changed", "servers", b.servers, "current", b.current)
}

// order is the servers to try for one connection: the current one, then
// the others after it in the list that are not down, then those that are
// down (all of them rather than none). Pure in its inputs.
func order(servers []string, current string, down map[string]time.Time, now time.Time, downFor time.Duration) []string {
	start := max(slices.Index(servers, current), 0)
	var up, failed []string
	for i := range servers {
		s := servers[(start+i)%len(servers)]
		if at, ok := down[s]; ok && now.Sub(at) < downFor {
			failed = append(failed, s)
		} else {
			up = append(up, s)
		}
	}
	return append(up, failed...)
}

// afterChecks is the server to make current after a round of checks in
// which the servers in failed failed and the others passed: current when
// it passed (or is not in the list), else the first server after it in
// the list that passed, else current still (none is better). Pure.
func afterChecks(servers []string, current string, failed map[string]bool) string {
	at := slices.Index(servers, current)
	if at < 0 || !failed[current] {
		return current
	}
	for i := 1; i < len(servers); i++ {
		if s := servers[(at+i)%len(servers)]; !failed[s] {
			return s
		}
	}
	return current
}

// CheckOnce checks every server at once with Config.Check and returns
// when all have answered or timed out: those that failed are marked
// down, those that passed up; when the current server failed and another
// passed, the other becomes current; and when any passed, the
// connections to those that failed are closed. Without Config.Check it
// does nothing.
func (b *Balancer) CheckOnce(ctx context.Context) {
	if b.cfg.Check == nil {
		return
	}
	servers := b.Servers()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, b.cfg.CheckTimeout)
			defer cancel()
			errs[i] = b.cfg.Check(cctx, s)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	failed := map[string]bool{}
	now := b.cfg.Clock.Now()
	b.mu.Lock()
	for i, s := range servers {
		_, wasDown := b.down[s]
		if errs[i] != nil {
			failed[s] = true
			b.down[s] = now
			if !wasDown {
				b.log.Warn("server failed its health check", "server", s, "err", errs[i])
			}
			continue
		}
		delete(b.down, s)
		if wasDown {
			b.log.Info("server passed its health check", "server", s)
		}
	}
	if next := afterChecks(servers, b.current, failed); next != b.current && slices.Contains(b.servers, next) {
		b.log.Info("failed over", "from", b.current, "to", next, "reason", "health check")
		b.current = next
	}
	// With some server passing, connections to those that failed are
	// better reopened: a connection dialled to one just before it was
	// passed over, too.
	var stale []*passed
	if len(failed) < len(servers) {
		for s := range failed {
			for p := range b.open[s] {
				stale = append(stale, p)
			}
			delete(b.open, s)
		}
	}
	b.mu.Unlock()
	for _, p := range stale {
		p.close()
	}
}

// runChecks runs CheckOnce now and every CheckPeriod until ctx ends.
func (b *Balancer) runChecks(ctx context.Context) {
	t := b.cfg.Clock.NewTicker(b.cfg.CheckPeriod)
	defer t.Stop()
	for {
		b.CheckOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// dial connects to the first server of order that answers, makes it
// current, and marks those that failed down.
func (b *Balancer) dial(ctx context.Context) (net.Conn, string, error) {
	b.mu.Lock()
	candidates := order(b.servers, b.current, b.down, b.cfg.Clock.Now(), b.cfg.DownFor)
	b.mu.Unlock()
	var errs []error
	for _, s := range candidates {
		dctx, cancel := context.WithTimeout(ctx, b.cfg.DialTimeout)
		conn, err := b.cfg.Dial(dctx, "tcp", s)
		cancel()
		b.mu.Lock()
		if err != nil {
			b.down[s] = b.cfg.Clock.Now()
			b.mu.Unlock()
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
			continue
		}
		delete(b.down, s)
		if b.current != s {
			b.log.Info("failed over", "from", b.current, "to", s)
			b.current = s
		}
		b.mu.Unlock()
		return conn, s, nil
	}
	return nil, "", fmt.Errorf("no server answered: %w", errors.Join(errs...))
}

// Serve accepts connections and passes each to a server until ctx ends
// or the listener is closed, checking the servers meanwhile when
// Config.Check is set; it then closes the listener and returns nil.
func (b *Balancer) Serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		_ = b.ln.Close()
	}()
	var conns sync.WaitGroup
	defer conns.Wait()
	if b.cfg.Check != nil {
		checkCtx, stop := context.WithCancel(ctx)
		conns.Add(1)
		go func() {
			defer conns.Done()
			b.runChecks(checkCtx)
		}()
		// The listener closed without ctx ending stops the checks too.
		defer stop()
	}
	for {
		client, err := b.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("loadbalancer: %w", err)
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			b.pass(ctx, client)
		}()
	}
}

// pass copies client to a server and back until either side closes.
func (b *Balancer) pass(ctx context.Context, client net.Conn) {
	defer client.Close()
	server, addr, err := b.dial(ctx)
	if err != nil {
		b.log.Warn("dropping a connection", "err", err)
		return
	}
	defer server.Close()
	p := &passed{client: client, server: server}
	b.mu.Lock()
	if b.open[addr] == nil {
		b.open[addr] = map[*passed]struct{}{}
	}
	b.open[addr][p] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.open[addr], p)
		if len(b.open[addr]) == 0 {
			delete(b.open, addr)
		}
		b.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(server, client)
		closeWrite(server)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(client, server)
		closeWrite(client)
		done <- struct{}{}
	}()
	// Each direction ends when its source closes (a half-close is passed
	// on); the balancer stopping closes both.
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = client.Close()
			_ = server.Close()
		case <-stop:
		}
	}()
	<-done
	<-done
	close(stop)
	b.log.Debug("connection closed", "server", addr)
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// Close stops listening.
func (b *Balancer) Close() error { return b.ln.Close() }
