package fleet

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"

	"knode/internal/agent/loadbalancer"
)

// validateServers checks Config.Servers: each a distinct host:port.
func validateServers(servers []string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("servers")
	seen := map[string]bool{}
	for i, s := range servers {
		p := path.Index(i)
		host, port, err := net.SplitHostPort(s)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p, s, "must be host:port"))
			continue
		case host == "" || port == "":
			errs = append(errs, field.Invalid(p, s, "must be host:port with both a host and a port"))
			continue
		case seen[s]:
			errs = append(errs, field.Duplicate(p, s))
			continue
		}
		seen[s] = true
	}
	return errs
}

// defaultConnections is the number of transports when Config.Connections
// is 0: DefaultConnections rounded up to a multiple of the number of
// servers, so that every server carries as many transports.
func defaultConnections(servers int) int {
	if servers <= 1 {
		return DefaultConnections
	}
	return (DefaultConnections + servers - 1) / servers * servers
}

// preferring returns servers rotated so that server k comes first and the
// others follow in their order: the list of balancer k.
func preferring(servers []string, k int) []string {
	return append(slices.Clone(servers[k:]), servers[:k]...)
}

// spread returns how many of nodes agents prefer each of servers servers,
// when agent i uses transport i mod connections and transport j dials
// through the balancer that prefers server j mod servers.
func spread(nodes, connections, servers int) []int {
	out := make([]int, servers)
	for i := range nodes {
		out[(i%connections)%servers]++
	}
	return out
}

// balancedHost is the Host of a client config that reaches the server of
// base through the balancer listening on addr: base's scheme (as
// client-go picks it when base.Host has none) and path prefix, addr as
// the host.
func balancedHost(base *rest.Config, addr string) (string, error) {
	u, _, err := rest.DefaultServerUrlFor(base)
	if err != nil {
		return "", err
	}
	v := *u
	v.Host = addr
	return v.String(), nil
}

// balancers are the fleet's client-side balancers, one per server, each
// serving until stop.
type balancers struct {
	// preferred[k] is the server balancer k prefers.
	preferred []string
	list      []*loadbalancer.Balancer
	cancel    context.CancelFunc
	serving   sync.WaitGroup
}

// startBalancers starts one balancer per server, balancer k preferring
// server k, and returns them serving. They check the servers' /readyz as
// agents' balancers do.
func (f *Fleet) startBalancers() (*balancers, error) {
	check, err := loadbalancer.ReadyzCheck(f.cfg.Rest)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &balancers{preferred: f.cfg.Servers, cancel: cancel}
	for k := range f.cfg.Servers {
		lb, err := loadbalancer.New(loadbalancer.Config{
			Servers: preferring(f.cfg.Servers, k),
			Check:   check,
			Clock:   f.cfg.Clock,
			Logger:  f.cfg.Logger,
		})
		if err != nil {
			for _, started := range b.list {
				_ = started.Close()
			}
			b.stop()
			return nil, fmt.Errorf("fleet: balancer for %s: %w", f.cfg.Servers[k], err)
		}
		b.list = append(b.list, lb)
	}
	for _, lb := range b.list {
		b.serving.Add(1)
		go func() {
			defer b.serving.Done()
			if err := lb.Serve(ctx); err != nil {
				f.cfg.Logger.Error("balancer stopped", "addr", lb.Addr(), "err", err)
			}
		}()
	}
	return b, nil
}

// hosts returns the Host of the client config that goes through each
// balancer, in order.
func (b *balancers) hosts(base *rest.Config) ([]string, error) {
	var out []string
	for _, lb := range b.list {
		h, err := balancedHost(base, lb.Addr())
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// failedOver counts the balancers whose current server is not the one
// they prefer.
func (b *balancers) failedOver() int {
	n := 0
	for k, lb := range b.list {
		if lb.Current() != b.preferred[k] {
			n++
		}
	}
	return n
}

// stop closes the balancers and every connection they pass, and returns
// once they have stopped serving.
func (b *balancers) stop() {
	b.cancel()
	b.serving.Wait()
}
