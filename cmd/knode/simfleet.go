package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"knode/internal/sim/fleet"
)

// Pod runtimes `knode sim fleet --runtime` offers.
const (
	fleetRuntimeFake = "fake"
	fleetRuntimeNone = "none"
)

func newSimFleetCommand() *cobra.Command {
	var (
		kubeconfig string
		zones      int
		zoneNames  []string
		identity   string
		runtime    string
		cleanup    bool
		verbose    bool
		servers    []string
		cfg        fleet.Config
	)
	cmd := &cobra.Command{
		Use:   "fleet --kubeconfig FILE --nodes N",
		Short: "Run N simulated agents against a live server and measure it",
		Long: `Run N simulated nodes - the real agent on a fake machine and the fake pod
runtime - against a live knode server, on the real clock.

The agents start spread over --ramp, then run for --duration. Every
--progress-interval a line of progress goes to stderr; at the end one JSON
line goes to stdout:

  {"nodes":N,"duration_s":...,"lease_renewals":...,"renew_p50_ms":...,
   "renew_p99_ms":...,"errors":...,"not_ready_max":...,...}

Renewals, their latency and errors cover the --duration after the ramp;
the ramp_* keys report the ramp, when registrations make the most load.
not_ready_max is the most fleet nodes at once that had been Ready and were
not, over the whole run. At the end the fleet's nodes and leases are
deleted, unless --cleanup=false.

Nodes are named <prefix>-<zone>-<i>, spread over zones zone-a, zone-b, ...
(or the zones --zone names)
(label topology.kubernetes.io/zone) and labelled knode.io/fleet=<prefix>.

--identity=node (the default): each agent acts as its own node identity,
system:node:<name> in system:nodes, by impersonation through the
kubeconfig's credentials, which must be allowed to impersonate (the admin
kubeconfig is), so the node authorizer and NodeRestriction apply to every
agent as to a real kubelet. --identity=admin: every agent acts as the
kubeconfig's user (admin mode: no node rules apply).

--server URL (https://host:port; repeatable) replaces the kubeconfig's
server, whose credentials and CA are still used. With --server, the fleet
runs one client-side balancer per server on 127.0.0.1 (the agent's own
load balancer), balancer k preferring the k-th --server and failing over
to the others, in order, when a dial fails; transport j dials through
balancer j mod the number of servers. The agents are thus spread over the
servers (evenly when --connections is a multiple of their number, as the
default is: 8 rounded up to a multiple), and those whose server dies
reconnect to the next one, as real agents do. The servers' certificates cover
127.0.0.1, so TLS through a balancer is verified. The fleet's own watch of
its nodes (for not_ready_max) and its cleanup go through the first
balancer and fail over too. The JSON then also gives "servers",
"agents_per_server" (by preferred server, in --server order) and
"failed_over" (balancers on a server other than their own at the end).

renew_p99_window_max_ms is the worst renewal p99 over one
--progress-interval (renew_p99_window_s) after the ramp, the p99_<interval>
of the progress lines at its highest: across a server's death (kill the
leading server during the run), that is the lease renewal p99 during the
failover, and not_ready_max says whether any node went NotReady.

The agents share --connections HTTP transports. Errors count every failed
agent request (transport errors, timeouts after --request-timeout, and
statuses of 400 and over, except 404 to a get and 409 to a create, which
the agent expects). Ctrl-C ends the run early and still prints the JSON.
The exit status is non-zero only when the fleet could not be set up.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			if zones < 1 {
				return fmt.Errorf("--zones %d: must be at least 1", zones)
			}
			switch runtime {
			case fleetRuntimeFake:
			case fleetRuntimeNone:
				cfg.WithoutPods = true
			default:
				return fmt.Errorf("--runtime %q: supported values: %q, %q", runtime, fleetRuntimeFake, fleetRuntimeNone)
			}
			first, addrs, err := fleetServers(servers)
			if err != nil {
				return err
			}
			restCfg, err := clientcmd.BuildConfigFromFlags(first, kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			cfg.Rest = restCfg
			cfg.Servers = addrs
			cfg.Zones = fleet.ZoneNames(zones)
			if len(zoneNames) > 0 {
				if cmd.Flags().Changed("zones") {
					return fmt.Errorf("--zone and --zones cannot both be given")
				}
				cfg.Zones = zoneNames
			}
			cfg.Identity = fleet.Identity(identity)
			cfg.KeepNodes = !cleanup
			cfg.Progress = cmd.ErrOrStderr()
			level := slog.LevelError
			if verbose {
				level = slog.LevelWarn
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			f, err := fleet.New(cfg)
			if err != nil {
				return err
			}
			res, err := f.Run(cmd.Context())
			if err != nil {
				return err
			}
			line, err := json.Marshal(res)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), string(line))
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the server and the credentials to use (normally <data-dir>/admin.kubeconfig)")
	fs.IntVar(&cfg.Nodes, "nodes", 0, "number of simulated nodes")
	fs.IntVar(&zones, "zones", 1, "number of zones, named zone-a, zone-b, ...; nodes are spread over them round-robin")
	fs.StringArrayVar(&zoneNames, "zone", nil, "a zone's name, instead of --zones: repeat it for several; nodes are spread over them round-robin (fleets of several processes can so share a zone)")
	fs.DurationVar(&cfg.Duration, "duration", fleet.DefaultDuration, "how long to run once every agent has started")
	fs.DurationVar(&cfg.Ramp, "ramp", 0, "spread the agents' starts over this long (0: 4ms per node, 250 starts a second)")
	fs.StringVar(&identity, "identity", string(fleet.IdentityNode), `whom the agents act as: "node" (each its own node identity, by impersonation) or "admin" (the kubeconfig's user)`)
	fs.StringArrayVar(&servers, "server", nil, "an API server's URL (https://host:port), instead of the kubeconfig's; repeat it to spread the agents over several servers through balancers that fail over")
	fs.IntVar(&cfg.Connections, "connections", 0, "number of HTTP transports the agents share (0: 8, rounded up to a multiple of the number of --server)")
	fs.StringVar(&runtime, "runtime", fleetRuntimeFake, `pod runtime of the agents: "fake" (the pod worker lists and watches the node's pods) or "none"`)
	fs.BoolVar(&cleanup, "cleanup", true, "delete the fleet's nodes and leases at the end")
	fs.StringVar(&cfg.NamePrefix, "name-prefix", fleet.DefaultNamePrefix, "first part of every node name, and the value of the knode.io/fleet label")
	fs.Int32Var(&cfg.NodeLeaseDurationSeconds, "node-lease-duration-seconds", 40, "duration of each node's Lease; it is renewed every quarter of it")
	fs.DurationVar(&cfg.NodeStatusUpdateFrequency, "node-status-update-frequency", 0, "how often each agent computes its node status (0: 10s)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", fleet.DefaultRequestTimeout, "an agent request (but a watch) taking longer fails and counts as an error")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", fleet.DefaultProgressInterval, "how often to print progress to stderr")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the agents' jitter")
	fs.BoolVarP(&verbose, "verbose", "v", false, "log the agents' warnings to stderr (errors are always logged)")
	return cmd
}

// fleetServers checks the --server URLs and returns the first, as the
// kubeconfig's server to override ("" when there are none), and the
// host:port of each (443 when the URL has no port).
func fleetServers(urls []string) (string, []string, error) {
	var addrs []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return "", nil, fmt.Errorf("--server %q: must be an https:// URL of a host and an optional port, with no path", raw)
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		addrs = append(addrs, net.JoinHostPort(u.Hostname(), port))
	}
	if len(addrs) == 0 {
		return "", nil, nil
	}
	return "https://" + addrs[0], addrs, nil
}
