// Command knode is the whole node subsystem of Kubernetes in one binary:
// `knode up` for a single-node cluster, `knode server` for the control
// plane, and `knode kubeconfig` for credentials.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/agent"
	"knode/internal/agent/host/linux"
	"knode/internal/agent/options"
	agentserver "knode/internal/agent/server"
	"knode/internal/auth"
	"knode/internal/cloudprovider"
	cloudexec "knode/internal/cloudprovider/exec"
	"knode/internal/controller/nodeipam"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/controller/podgc"
	"knode/internal/server"
	"knode/internal/server/election"
	"knode/internal/version"
	"knode/internal/volume"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "knode",
		Short:         "knode runs the Kubernetes node subsystem behind the Kubernetes API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServerCommand(), newUpCommand(), newAgentCommand(), newVersionCommand(), newKubeconfigCommand(), newSimCommand())
	root.AddCommand(newCSIDriverCommand())
	root.AddCommand(newNodeCommand())
	root.AddCommand(newTokenCommand())
	return root
}

// serverFlags are shared by `server` and `up`.
type serverFlags struct {
	dataDir            string
	bindAddress        string
	securePort         int
	etcdServers        []string
	tokenAuthFile      string
	compactionInterval time.Duration
	notReadyToleration int64
	unreachableTol     int64
	nodeMonitorPeriod  time.Duration
	nodeMonitorGrace   time.Duration
	nodeStartupGrace   time.Duration
	evictionRate       float64
	secondaryRate      float64
	unhealthyThreshold float64
	largeClusterSize   int
	allocateNodeCIDRs  bool
	clusterCIDR        string
	nodeCIDRMaskSize   int
	nodeCIDRMaskSizeV4 int
	nodeCIDRMaskSizeV6 int
	cloudProvider      string
	cloudConfig        string
	verbose            bool
	profiling          bool
	noForceDetach      bool
	terminatedPodGC    int
	builtinStorage     bool
	storageDir         string
	kubeletCA          string
	token              string
	tokenFile          string
	leaderElect        bool
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	advertiseAddress   string
	etcdCluster        server.EtcdCluster
}

func (f *serverFlags) register(fs *pflag.FlagSet, defaultDataDir string) {
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for the cluster's credentials, admin.kubeconfig and embedded etcd data")
	fs.StringVar(&f.bindAddress, "bind-address", server.DefaultBindAddress, "IP address to serve HTTPS on")
	fs.IntVar(&f.securePort, "secure-port", server.DefaultSecurePort, "port to serve HTTPS on (0 picks a free port)")
	fs.StringSliceVar(&f.etcdServers, "etcd-servers", nil, "external etcd endpoints (comma-separated URLs); empty runs etcd embedded")
	fs.StringVar(&f.tokenAuthFile, "token-auth-file", "", "static bearer tokens, one per line: token,user,uid,\"group1,group2\"")
	fs.DurationVar(&f.compactionInterval, "etcd-compaction-interval", server.DefaultCompactionInterval, "how often storage history is compacted")
	fs.Int64Var(&f.notReadyToleration, "default-not-ready-toleration-seconds", defaulttolerationseconds.DefaultSeconds, "tolerationSeconds of the not-ready:NoExecute toleration added to pods that have none")
	fs.Int64Var(&f.unreachableTol, "default-unreachable-toleration-seconds", defaulttolerationseconds.DefaultSeconds, "tolerationSeconds of the unreachable:NoExecute toleration added to pods that have none")
	fs.DurationVar(&f.nodeMonitorPeriod, "node-monitor-period", nodelifecycle.DefaultNodeMonitorPeriod, "how often node health is checked")
	fs.DurationVar(&f.nodeMonitorGrace, "node-monitor-grace-period", nodelifecycle.DefaultNodeMonitorGracePeriod, "how long a node may stay silent before it is marked Unknown (the documented 40s; upstream moved to 50s in 1.32)")
	fs.DurationVar(&f.nodeStartupGrace, "node-startup-grace-period", nodelifecycle.DefaultNodeStartupGracePeriod, "how long a node that never reported may stay silent before it is marked Unknown")
	fs.Float64Var(&f.evictionRate, "node-eviction-rate", nodelifecycle.DefaultNodeEvictionRate, "nodes per second tainted NoExecute in a healthy zone")
	fs.Float64Var(&f.secondaryRate, "secondary-node-eviction-rate", nodelifecycle.DefaultSecondaryNodeEvictionRate, "nodes per second tainted NoExecute in a partially disrupted zone larger than --large-cluster-size-threshold")
	fs.Float64Var(&f.unhealthyThreshold, "unhealthy-zone-threshold", nodelifecycle.DefaultUnhealthyZoneThreshold, "fraction of not-Ready nodes (at least 3) that makes a zone partially disrupted")
	fs.IntVar(&f.largeClusterSize, "large-cluster-size-threshold", nodelifecycle.DefaultLargeClusterSizeThreshold, "zones of at most this many nodes are not tainted at all when partially disrupted")
	fs.BoolVar(&f.allocateNodeCIDRs, "allocate-node-cidrs", false, "allocate pod CIDRs to nodes from --cluster-cidr")
	fs.StringVar(&f.clusterCIDR, "cluster-cidr", "", "CIDR range of pods (one, or a comma-separated dual-stack pair)")
	fs.IntVar(&f.nodeCIDRMaskSize, "node-cidr-mask-size", 0, "mask size of node CIDRs in a single-stack cluster (24 for IPv4, 64 for IPv6)")
	fs.IntVar(&f.nodeCIDRMaskSizeV4, "node-cidr-mask-size-ipv4", 0, "mask size of IPv4 node CIDRs in a dual-stack cluster (24)")
	fs.IntVar(&f.nodeCIDRMaskSizeV6, "node-cidr-mask-size-ipv6", 0, "mask size of IPv6 node CIDRs in a dual-stack cluster (64)")
	fs.StringVar(&f.cloudProvider, "cloud-provider", "", `cloud provider for node lifecycle: "" for none, or "exec" with --cloud-config`)
	fs.StringVar(&f.cloudConfig, "cloud-config", "", "configuration file of the cloud provider (for exec: see README)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log debug messages")
	fs.BoolVar(&f.profiling, "profiling", true, "serve Go profiles at /debug/pprof/ to authorized users")
	fs.BoolVar(&f.noForceDetach, "disable-force-detach-on-timeout", false, "never force-detach a volume from a node that stays NotReady after the 6-minute unmount wait; only the out-of-service taint detaches it")
	fs.IntVar(&f.terminatedPodGC, "terminated-pod-gc-threshold", podgc.DefaultTerminatedPodThreshold, "number of terminated pods that can exist before PodGC deletes the oldest; <= 0 keeps them all")
	fs.BoolVar(&f.builtinStorage, "builtin-storage", true, "run the built-in CSI driver ("+volume.BuiltinDriver+") with its attacher and provisioner, and install its CSIDriver and the default StorageClass \""+server.DefaultStorageClass+"\"")
	fs.StringVar(&f.kubeletCA, "kubelet-certificate-authority", "", "CA bundle that must sign the agents' serving certificates when the server reaches them (pods/log); empty does not verify them, as upstream")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "run the controllers only while this server holds the kube-system/kube-controller-manager Lease, and the scheduler only while it holds kube-system/kube-scheduler, so that several servers can share one etcd; false runs them at once, for a server alone on its storage")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", election.DefaultLeaseDuration, "how long the other servers wait, after they last saw the leader renew a Lease, before they take it over (whole seconds)")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", election.DefaultRenewDeadline, "how long the leader goes without renewing a Lease before it stops what runs under it; less than --leader-elect-lease-duration")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", election.DefaultRetryPeriod, "pause between attempts to acquire or renew a Lease; --leader-elect-renew-deadline must exceed 1.2 times it")
	fs.StringVar(&f.advertiseAddress, "advertise-address", "", "IP address other servers and agents reach this server at (etcd peer traffic, and the default/kubernetes Endpoints); empty means --bind-address, or this host's first global address when that is 0.0.0.0 or ::")
	fs.StringVar(&f.storageDir, "storage-dir", server.DefaultStorageDir, "data directory of the built-in CSI driver's volumes; every agent must see the same directory (this machine, or a shared mount)")
}

func (f *serverFlags) config() (server.Config, error) {
	cfg := server.Config{
		DataDir:                             f.dataDir,
		BindAddress:                         f.bindAddress,
		SecurePort:                          f.securePort,
		EtcdServers:                         f.etcdServers,
		EtcdCluster:                         f.etcdCluster,
		AdvertiseAddress:                    f.advertiseAddress,
		TokenAuthFile:                       f.tokenAuthFile,
		CompactionInterval:                  f.compactionInterval,
		Profiling:                           &f.profiling,
		DefaultNotReadyTolerationSeconds:    &f.notReadyToleration,
		DefaultUnreachableTolerationSeconds: &f.unreachableTol,
		NodeMonitorPeriod:                   f.nodeMonitorPeriod,
		TerminatedPodGCThreshold:            &f.terminatedPodGC,
		KubeletCertificateAuthority:         f.kubeletCA,
		Token:                               f.token,
		TokenFile:                           f.tokenFile,
		NodeLifecycle: nodelifecycle.Config{
			NodeMonitorGracePeriod:    f.nodeMonitorGrace,
			NodeStartupGracePeriod:    f.nodeStartupGrace,
			NodeEvictionRate:          nodelifecycle.RateFlag(f.evictionRate),
			SecondaryNodeEvictionRate: nodelifecycle.RateFlag(f.secondaryRate),
			UnhealthyZoneThreshold:    f.unhealthyThreshold,
			LargeClusterSizeThreshold: f.largeClusterSize,
		},
		Storage: server.StorageConfig{
			DisableForceDetachOnTimeout: f.noForceDetach,
			DisableBuiltinDriver:        !f.builtinStorage,
			DataDir:                     f.storageDir,
		},
		LeaderElection: server.LeaderElection{
			Disabled:      !f.leaderElect,
			LeaseDuration: f.leaseDuration,
			RenewDeadline: f.renewDeadline,
			RetryPeriod:   f.retryPeriod,
		},
		Logger: logger(f.verbose),
	}
	if f.allocateNodeCIDRs {
		ipam, err := nodeipam.ParseFlags(f.clusterCIDR, f.nodeCIDRMaskSize, f.nodeCIDRMaskSizeV4, f.nodeCIDRMaskSizeV6)
		if err != nil {
			return cfg, err
		}
		cfg.IPAM = &ipam
	} else if f.clusterCIDR != "" {
		return cfg, fmt.Errorf("--cluster-cidr needs --allocate-node-cidrs")
	}
	cloud, err := newCloudProvider(f.cloudProvider, f.cloudConfig)
	if err != nil {
		return cfg, err
	}
	cfg.Cloud = cloud
	return cfg, nil
}

// newCloudProvider builds the provider the --cloud-provider and
// --cloud-config flags name; nil (and no error) when name is empty.
func newCloudProvider(name, config string) (cloudprovider.Interface, error) {
	switch name {
	case "":
		if config != "" {
			return nil, fmt.Errorf("--cloud-config needs --cloud-provider")
		}
		return nil, nil
	case cloudexec.ProviderName:
		ec, err := cloudexec.LoadConfig(config)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config: %w", err)
		}
		p, err := cloudexec.New(ec)
		if err != nil {
			return nil, err
		}
		return p, nil
	default:
		return nil, fmt.Errorf("--cloud-provider %q: supported values: %q (or empty)", name, cloudexec.ProviderName)
	}
}

func newServerCommand() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: etcd, the API server and the controllers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config()
			if err != nil {
				return err
			}
			return server.Run(cmd.Context(), cfg)
		},
	}
	f.register(cmd.Flags(), "")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "`FILE` holding the cluster token, to join the servers already sharing --etcd-servers (\"knode token\" on one of them prints it); the first server needs none: it makes one")
	cmd.Flags().StringVar(&f.token, "token", "", "the cluster token, as --token-file; other users of this machine can see it in the process list")
	cmd.Flags().BoolVar(&f.etcdCluster.Init, "cluster-init", false, "start a new cluster of servers whose embedded etcd members talk to each other over TLS, with this server as the first member; other servers join it with --join")
	cmd.Flags().StringVar(&f.etcdCluster.Join, "join", "", "`URL` of a server of the cluster (https://host:port) to join: it adds this server's embedded etcd as a member; needs the cluster's token (--token-file or --token)")
	cmd.Flags().IntVar(&f.etcdCluster.PeerPort, "etcd-peer-port", server.DefaultEtcdPeerPort, "port the embedded etcd member listens on for its peers, on --advertise-address (with --cluster-init or --join)")
	cmd.Flags().StringVar(&f.etcdCluster.Name, "etcd-name", "", "the embedded etcd member's name (with --cluster-init or --join); empty means the host name and a hash of the peer URL. A server that joins with the name of a member replaces it")
	return cmd
}

func defaultDataDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ".knode"
	}
	return filepath.Join(home, ".knode")
}

func newUpCommand() *cobra.Command {
	var f serverFlags
	var kubeletPort int32
	var kubeletAddress string
	var cgroupRoot string
	var criEndpoint, cniConfDir, cniBridge string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a whole single-node cluster in this process: the server and an agent for this machine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			if !cmd.Flags().Changed("kubelet-certificate-authority") {
				// The agent's serving certificate comes from the cluster
				// CA (below), so the server can verify it.
				f.kubeletCA = filepath.Join(f.dataDir, "pki", "ca.crt")
			}
			if criEndpoint != "" && !cmd.Flags().Changed("cluster-cidr") {
				// Pods of a CRI runtime need addresses: the node gets a
				// pod CIDR from this range, as k3s's default.
				f.allocateNodeCIDRs, f.clusterCIDR = true, defaultUpClusterCIDR
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			log := cfg.Logger
			agentErr := make(chan error, 1)
			cfg.OnReady = func(s *server.Server) {
				var o options.Options
				fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
				o.AddFlags(fs)
				o.RootDir = filepath.Join(f.dataDir, "agent")
				// The agent serves the node side of the server's driver.
				o.BuiltinStorage, o.StorageDir = f.builtinStorage, f.storageDir
				// The agent's own server listens where the API server
				// reaches it, the node's address: on every interface by
				// default, as the kubelet's --address.
				o.Address, o.Port = kubeletAddress, kubeletPort
				// As k3s does for its single binary: a machine with swap
				// runs, and workloads get none of it (NoSwap).
				err := errors.Join(fs.Set("fail-swap-on", "false"), fs.Set("cgroup-root", cgroupRoot),
					fs.Set("rotate-server-certificates", "true"))
				if criEndpoint != "" {
					err = errors.Join(err, fs.Set("container-runtime-endpoint", criEndpoint),
						fs.Set("cni-conf-dir", cniConfDir), fs.Set("cni-bridge", cniBridge))
				}
				if err != nil {
					agentErr <- err
					return
				}
				settings, err := o.Complete(fs)
				if err != nil {
					agentErr <- err
					return
				}
				name, err := agent.NodeName("", linux.New(linux.Config{}))
				if err != nil {
					agentErr <- err
					return
				}
				restCfg, err := localAgentConfig(s, name)
				if err != nil {
					agentErr <- err
					return
				}
				onNodeReady := func(node *corev1.Node) {
					fmt.Printf("knode is up at %s; node %s is Ready\n", s.URL, node.Name)
					fmt.Printf("kubeconfig: %s\n", s.KubeconfigPath)
					fmt.Printf("try: kubectl --kubeconfig %s get nodes\n", s.KubeconfigPath)
				}
				go func() { agentErr <- runAgent(ctx, restCfg, settings, runtimeProcess, log, onNodeReady) }()
			}
			serverErr := make(chan error, 1)
			go func() { serverErr <- server.Run(ctx, cfg) }()
			select {
			case err := <-serverErr:
				return err
			case err := <-agentErr:
				cancel()
				<-serverErr
				if err != nil && ctx.Err() == nil {
					return fmt.Errorf("agent: %w", err)
				}
				return err
			}
		},
	}
	f.register(cmd.Flags(), defaultDataDir())
	cmd.Flags().Int32Var(&kubeletPort, "kubelet-port", agentserver.DefaultPort, "port of the agent's HTTPS server (0 picks a free one)")
	cmd.Flags().StringVar(&kubeletAddress, "kubelet-address", agentserver.DefaultAddress, "IP address the agent's HTTPS server listens on; the API server reaches it at the node's InternalIP")
	cmd.Flags().StringVar(&cgroupRoot, "cgroup-root", "", "cgroup under which the agent makes kubepods (default: the hierarchy's root)")
	cmd.Flags().StringVar(&criEndpoint, "container-runtime-endpoint", "", "run pods from their images with this CRI runtime (unix:///run/containerd/containerd.sock); pods get addresses from --cluster-cidr (default "+defaultUpClusterCIDR+"); default: containers run as processes")
	cmd.Flags().StringVar(&cniConfDir, "cni-conf-dir", options.DefaultCNIConfDir, "where the agent writes the pod network's CNI config, for the CRI runtime to read")
	cmd.Flags().StringVar(&cniBridge, "cni-bridge", options.DefaultCNIBridge, "the Linux bridge pods are attached to")
	return cmd
}

// defaultUpClusterCIDR is the pods' range of `knode up` with a CRI runtime
// when --cluster-cidr is not given (k3s's default).
const defaultUpClusterCIDR = "10.42.0.0/16"

// logger is the process's structured logger.
func logger(verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			info := version.Info()
			fmt.Printf("knode %s (Kubernetes API %s, %s, %s)\n", version.Knode, info.GitVersion, info.GoVersion, info.Platform)
		},
	}
}

func newKubeconfigCommand() *cobra.Command {
	var dataDir, nodeName, serverURL string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for the admin, or for one node identity with --node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			pki, err := auth.LoadPKI(auth.PKIConfig{Dir: filepath.Join(dataDir, "pki")})
			if err != nil {
				return fmt.Errorf("reading the cluster's credentials from %s (has `knode server --data-dir %s` run?): %w", dataDir, dataDir, err)
			}
			if serverURL == "" {
				serverURL, err = serverFromAdminKubeconfig(filepath.Join(dataDir, "admin.kubeconfig"))
				if err != nil {
					return err
				}
			}
			var out []byte
			if nodeName != "" {
				out, err = auth.NodeKubeconfig(pki, serverURL, nodeName)
			} else {
				out, err = auth.AdminKubeconfig(pki, serverURL)
			}
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "the server's data directory")
	cmd.Flags().StringVar(&nodeName, "node", "", "issue a client certificate for system:node:NAME in group system:nodes")
	cmd.Flags().StringVar(&serverURL, "server", "", "API server URL to put in the kubeconfig (default: the one in DATA-DIR/admin.kubeconfig)")
	return cmd
}

// serverFromAdminKubeconfig reads the server URL the server last wrote.
func serverFromAdminKubeconfig(path string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if ctx, ok := cfg.Contexts[cfg.CurrentContext]; ok {
		if cluster, ok := cfg.Clusters[ctx.Cluster]; ok && cluster.Server != "" {
			return cluster.Server, nil
		}
	}
	return "", fmt.Errorf("%s names no server", path)
}
