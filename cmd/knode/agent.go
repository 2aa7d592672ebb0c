package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"

	"knode/internal/agent"
	"knode/internal/agent/cm"
	"knode/internal/agent/host/linux"
	"knode/internal/agent/loadbalancer"
	"knode/internal/agent/nodestatus"
	"knode/internal/agent/options"
	"knode/internal/agent/pods"
	"knode/internal/agent/prober"
	podruntime "knode/internal/agent/runtime"
	"knode/internal/agent/runtime/process"
	agentserver "knode/internal/agent/server"
	"knode/internal/agent/shutdown"
	"knode/internal/agent/volumes"
	pluginwatch "knode/internal/agent/volumes/plugins"
	"knode/internal/csi/hostpath"
	"knode/internal/server"
	"knode/internal/version"
	"knode/internal/volume"
)

// agentClientSettings are the agent's API client limits, as the kubelet's
// (kubeAPIQPS 50, burst 100), with upstream's 10 s heartbeat timeout.
func agentClientSettings(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 10 * time.Second
	cfg.UserAgent = "knode-agent/" + version.Knode
	return cfg
}

func newAgentCommand() *cobra.Command {
	var o options.Options
	var verbose bool
	var runtimeName string
	var servers []string
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the node agent for this machine: register the Node, report its status, renew its Lease",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := o.Complete(cmd.Flags())
			if err != nil {
				return err
			}
			if o.Kubeconfig == "" {
				return fmt.Errorf("--kubeconfig is required")
			}
			restCfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
			if err != nil {
				return fmt.Errorf("--kubeconfig: %w", err)
			}
			log := logger(verbose)
			ctx := cmd.Context()
			urls := servers
			if len(urls) == 0 {
				if urls, err = kubeconfigServers(o.Kubeconfig); err != nil {
					return fmt.Errorf("--kubeconfig: %w", err)
				}
			}
			if len(servers) > 0 || len(urls) > 1 {
				// Several servers: the agent talks to a balancer of its
				// own on 127.0.0.1, which fails over between them, and
				// learns the servers added later from default/kubernetes
				// through it.
				lb, err := serverBalancer(urls, restCfg, log)
				if err != nil {
					return err
				}
				defer lb.Close()
				go func() { _ = lb.Serve(ctx) }()
				restCfg.Host = "https://" + lb.Addr()
				// The watch outlives any request timeout.
				learnCfg := agentClientSettings(restCfg)
				learnCfg.Timeout = 0
				learnClient, err := kubernetes.NewForConfig(learnCfg)
				if err != nil {
					return err
				}
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				learning := make(chan struct{})
				go func() {
					defer close(learning)
					loadbalancer.Learn(ctx, learnClient, lb, log)
				}()
				defer func() {
					cancel()
					<-learning
				}()
			}
			return runAgent(ctx, agentClientSettings(restCfg), settings, runtimeName, log, nil)
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log debug messages")
	cmd.Flags().StringArrayVar(&servers, "server", nil, "an API server's URL (https://host:port), instead of the kubeconfig's; may be given more than once. "+
		"Without it, every cluster entry of the kubeconfig whose certificate authority is the current context's cluster's names a server of the same cluster. "+
		"Given --server, or with several servers, the agent fails over between them through a balancer of its own on 127.0.0.1 and learns further servers from the default/kubernetes Endpoints")
	cmd.Flags().StringVar(&runtimeName, "runtime", runtimeProcess, `how pods run: "process" (each container a process on this machine) or "none" (register and report only)`)
	return cmd
}

// Pod runtimes `knode agent --runtime` offers.
const (
	runtimeProcess = "process"
	runtimeNone    = "none"
)

// runAgent runs an agent with settings until ctx ends.
func runAgent(ctx context.Context, restCfg *rest.Config, s options.Settings, runtimeName string, log *slog.Logger, onReady func(*corev1.Node)) error {
	h := linux.New(linux.Config{})
	name, err := agent.NodeName(s.HostnameOverride, h)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.RootDir, 0o700); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	// The volume manager resolves the volumes the runtime mounts; the
	// agent it kicks is built below.
	var a *agent.Agent
	plugins, err := pluginwatch.New(pluginwatch.Config{Client: client, NodeName: name, RootDir: s.RootDir, Logger: log})
	if err != nil {
		return err
	}
	vols, err := volumes.New(volumes.Config{
		Client: client, NodeName: name, RootDir: s.RootDir, Drivers: plugins, Logger: log,
		Recorder: func(pod *corev1.Pod, eventType, reason, message string) {
			if a != nil && a.Pods() != nil {
				a.Pods().RecordEvent(ctx, pod, eventType, reason, message)
			}
		},
		InUseChanged: func() {
			if a != nil {
				a.KickStatus()
			}
		},
	})
	if err != nil {
		return err
	}
	swapBytes, err := checkSwap(s, log)
	if err != nil {
		return err
	}
	metrics := prometheus.NewRegistry()
	var rt podruntime.Runtime
	var res *nodeResources
	var streams *agentserver.Streams
	var probeExec prober.ExecRunner
	var criRT *criParts
	switch runtimeName {
	case runtimeProcess:
		if res, err = newNodeResources(ctx, s, h, swapBytes, metrics, log); err != nil {
			return err
		}
		defer res.devices.Stop()
		if s.Runtime.ContainerRuntimeEndpoint != "" {
			// Pods as CRI sandboxes and containers; they outlive the agent
			// in the runtime, and the next agent adopts them.
			if criRT, err = newCRI(ctx, s, vols, res, &a, log); err != nil {
				return err
			}
			defer criRT.rt.Close()
			rt, streams, probeExec = criRT.rt, criRT.streams, criRT.probes
			break
		}
		// The pods outlive the agent: the next one adopts them.
		p, err := process.New(process.Config{
			RootDir: s.RootDir, Volumes: vols.HostPath, Logger: log,
			Cgroups: res.cgroups, Resources: res.manager.ContainerResources,
		})
		if err != nil {
			return err
		}
		rt = p
		if streams, err = processStreams(p, s.Runtime.StreamingConnectionIdleTimeout, log); err != nil {
			return err
		}
		probeExec = streamerProbes{p}
	case runtimeNone:
	default:
		return fmt.Errorf("--runtime %q: supported values: %q, %q", runtimeName, runtimeProcess, runtimeNone)
	}
	var probes *prober.Manager
	var workerProbes pods.Probes
	if rt != nil {
		if probes, err = newProbes(probeExec, &a, metrics, log); err != nil {
			return err
		}
		workerProbes = probes
	}
	srv, err := agentServer(restCfg, s, name, metrics, workerLogs{&a}, streams, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	status := s.StatusConfig(name, name, version.GitVersion())
	status.KubeletPort = int32(srv.Port())
	var runtimeStatus func() []error
	var images func() []corev1.ContainerImage
	var onNode func(*corev1.Node)
	if criRT != nil {
		status.RuntimeName, status.RuntimeVersion = criRT.name, criRT.version
		runtimeStatus = criRT.runtimeStatus
		images = func() []corev1.ContainerImage { return criRT.images.get(false) }
		onNode = func(n *corev1.Node) {
			criRT.syncNetwork(n, log, func() {
				if a != nil {
					a.KickStatus()
				}
			})
		}
	}
	// The shutdown manager needs the agent's pod worker, and the agent
	// asks the manager: mgr is set before the agent runs.
	var mgr *shutdown.Manager
	groups := s.Shutdown.Groups()
	var startEvents []nodestatus.Event
	var podRes pods.Resources
	var deviceCapacity func() (map[corev1.ResourceName]int64, map[corev1.ResourceName]int64, []string)
	if res != nil {
		startEvents = append(startEvents, res.events...)
		podRes = &cm.WorkerHooks{Manager: res.manager, Clock: clock.RealClock{}, Reconcile: s.Resources.CPUManagerReconcilePeriod, Logger: log}
		deviceCapacity = res.devices.Capacity
	}
	if len(groups) == 0 {
		log.Info(shutdown.DisabledMessage)
		startEvents = append(startEvents, nodestatus.Event{Type: corev1.EventTypeNormal, Reason: shutdown.DisabledReason, Message: shutdown.DisabledMessage})
	}
	a, err = agent.New(agent.Config{
		Client:             client,
		NodeName:           name,
		RegisterNode:       s.RegisterNode,
		RegisterWithTaints: s.RegisterWithTaints,
		NodeLabels:         s.NodeLabels,
		ProviderID:         s.ProviderID,
		Status:             status,
		StartEvents:        startEvents,
		ShutdownStatus: func() error {
			if mgr == nil {
				return nil
			}
			return mgr.ShutdownStatus()
		},
		PodAdmit: func(p *corev1.Pod) *pods.Rejection {
			if mgr == nil {
				return nil
			}
			return mgr.Admit(p)
		},
		PodResources:              podRes,
		DeviceCapacity:            deviceCapacity,
		Probes:                    workerProbes,
		PodNetwork:                criRT != nil,
		RuntimeStatus:             runtimeStatus,
		Images:                    images,
		OnNode:                    onNode,
		NodeStatusUpdateFrequency: s.NodeStatusUpdateFrequency,
		NodeStatusReportFrequency: s.NodeStatusReportFrequency,
		NodeLeaseDurationSeconds:  s.NodeLeaseDurationSeconds,
		Host:                      h,
		RootDir:                   s.RootDir,
		Runtime:                   rt,
		Volumes:                   agentVolumes(rt, vols),
		OnReady:                   onReady,
		Logger:                    log,
	})
	if err != nil {
		return err
	}
	if a.Pods() != nil {
		metrics.MustRegister(a.Pods().Collector())
	}
	if len(groups) > 0 {
		if a.Pods() == nil {
			log.Warn("graceful node shutdown needs a pod runtime; it is off with --runtime=none")
		} else if mgr, err = shutdown.New(shutdown.Config{
			Groups:        groups,
			Dial:          func() (shutdown.Bus, error) { return shutdown.Dial("", log) },
			DropInDir:     s.LogindDropInDir,
			StatusReserve: s.ShutdownStatusReserve,
			Pods:          a.Pods(),
			Event:         func(t, reason, msg string) { a.RecordEvent(ctx, t, reason, msg) },
			SyncStatus:    a.KickStatus,
			RootDir:       s.RootDir,
			Registerer:    metrics,
			Logger:        log,
		}); err != nil {
			return err
		}
	}
	log.Info("knode agent starting", "node", name, "port", srv.Port())
	var running sync.WaitGroup
	defer running.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running.Add(1)
	go func() {
		defer running.Done()
		if err := srv.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("the agent's server stopped", "err", err)
		}
	}()
	if mgr != nil {
		running.Add(1)
		go func() {
			defer running.Done()
			_ = mgr.Run(ctx)
		}()
	}
	if probes != nil {
		running.Add(1)
		go func() {
			defer running.Done()
			probes.Run(ctx)
		}()
	}
	if s.Runtime.ServerTLSBootstrap && s.TLSCertFile == "" {
		running.Add(1)
		go func() {
			defer running.Done()
			bootstrapServingCert(ctx, a, client, srv, s, name, log)
		}()
	}
	if res != nil {
		// A device plugin's change is posted at once, not at the next
		// status pass.
		running.Add(1)
		go func() {
			defer running.Done()
			for {
				changed := res.devices.Changed()
				select {
				case <-ctx.Done():
					return
				case <-changed:
					a.KickStatus()
				}
			}
		}()
	}
	if rt != nil {
		running.Add(1)
		go func() {
			defer running.Done()
			// The watcher writes the Node and its CSINode: it starts
			// once the Node exists.
			select {
			case <-a.Registered():
			case <-ctx.Done():
				return
			}
			if err := plugins.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("the CSI plugin watcher stopped", "err", err)
			}
		}()
		if err := startBuiltinNodeDriver(ctx, &running, s, name, log); err != nil {
			return err
		}
	}
	return a.Run(ctx)
}

// agentVolumes is the volume manager the agent uses: none without a pod
// runtime.
func agentVolumes(rt podruntime.Runtime, v *volumes.Manager) agent.Volumes {
	if rt == nil {
		return nil
	}
	return v
}

// startBuiltinNodeDriver serves the built-in CSI driver's node side on a
// socket under the root dir and registers it through the plugin registry,
// when the storage dir exists (the server makes it; a missing one means no
// shared storage here).
func startBuiltinNodeDriver(ctx context.Context, running *sync.WaitGroup, s options.Settings, name string, log *slog.Logger) error {
	if s.StorageDir == "" {
		return nil
	}
	if info, err := os.Stat(s.StorageDir); err != nil || !info.IsDir() {
		log.Warn("the built-in CSI driver's node side is off: its storage dir is missing", "storage-dir", s.StorageDir)
		return nil
	}
	driver, err := hostpath.New(hostpath.Config{DataDir: s.StorageDir, NodeID: name, Logger: log})
	if err != nil {
		return err
	}
	sock := filepath.Join(s.RootDir, "plugins", volume.BuiltinDriver, "csi.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		return err
	}
	srv, err := driver.Start(sock, hostpath.Node)
	if err != nil {
		return fmt.Errorf("starting the built-in CSI driver's node side: %w", err)
	}
	reg, err := hostpath.NewRegistrar(hostpath.RegistrarConfig{Endpoint: sock, RootDir: s.RootDir, Logger: log})
	if err != nil {
		srv.Stop()
		return err
	}
	regSrv, err := reg.Start()
	if err != nil {
		srv.Stop()
		return fmt.Errorf("registering the built-in CSI driver: %w", err)
	}
	running.Add(1)
	go func() {
		defer running.Done()
		<-ctx.Done()
		regSrv.Stop()
		srv.Stop()
	}()
	return nil
}

// agentServer builds the agent's HTTPS server: the kubeconfig's CA signs
// the client certificates it accepts unless --client-ca-file says
// otherwise.
func agentServer(restCfg *rest.Config, s options.Settings, name string, metrics prometheus.Gatherer, pods workerLogs, streams *agentserver.Streams, log *slog.Logger) (*agentserver.Server, error) {
	var clientCA []byte
	var err error
	switch {
	case s.ClientCAFile != "":
		clientCA, err = os.ReadFile(s.ClientCAFile)
	case len(restCfg.CAData) > 0:
		clientCA = restCfg.CAData
	case restCfg.CAFile != "":
		clientCA, err = os.ReadFile(restCfg.CAFile)
	}
	if err != nil {
		return nil, fmt.Errorf("--client-ca-file: %w", err)
	}
	return agentserver.New(agentserver.Config{
		Address:     s.Address,
		Port:        int(s.Port),
		NodeName:    name,
		TLSCertFile: s.TLSCertFile,
		TLSKeyFile:  s.TLSPrivateKeyFile,
		CertDir:     filepath.Join(s.RootDir, "pki"),
		IPs:         s.NodeIPs,
		ClientCA:    clientCA,
		Gatherer:    metrics,
		Logs:        pods,
		Pods:        pods.Pods,
		Streams:     streams,
		Logger:      log,
	})
}

// workerLogs is the pod worker's LogSource and pod list once the agent is
// built.
type workerLogs struct{ a **agent.Agent }

// Pods is the pod worker's pods, none before it exists.
func (l workerLogs) Pods() []*corev1.Pod {
	if a := *l.a; a != nil && a.Pods() != nil {
		return a.Pods().Pods()
	}
	return nil
}

func (l workerLogs) ContainerLog(namespace, pod, container string, previous bool) (agentserver.LogFile, error) {
	if a := *l.a; a != nil && a.Pods() != nil {
		return a.Pods().ContainerLog(namespace, pod, container, previous)
	}
	return agentserver.LogFile{}, fmt.Errorf("%w: pod %q does not exist", agentserver.ErrLogNotFound, pod)
}

// localAgentConfig is the client of the agent `knode up` runs beside its
// server: a node identity for this machine, issued by the cluster CA.
func localAgentConfig(s *server.Server, nodeName string) (*rest.Config, error) {
	certPEM, keyPEM, err := s.PKI().IssueClientCert("system:node:"+nodeName, []string{"system:nodes"}, 365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return agentClientSettings(&rest.Config{
		Host:            s.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.PKI().CAPEM(), CertData: certPEM, KeyData: keyPEM},
	}), nil
}

// bootstrapServingCert asks, once the Node is registered with its
// addresses, for a serving certificate of the cluster CA (a
// kubernetes.io/kubelet-serving CertificateSigningRequest) and serves it in
// place of the self-signed one as soon as it is signed.
func bootstrapServingCert(ctx context.Context, a *agent.Agent, client kubernetes.Interface, srv *agentserver.Server, s options.Settings, name string, log *slog.Logger) {
	select {
	case <-a.Registered():
	case <-ctx.Done():
		return
	}
	var hostnames []string
	var ips []net.IP
	// The Node's addresses are what the signer checks the request against;
	// they come with the first status post.
	for ctx.Err() == nil && len(ips) == 0 {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, addr := range node.Status.Addresses {
				if ip := net.ParseIP(addr.Address); ip != nil {
					ips = append(ips, ip)
				} else if addr.Type == corev1.NodeHostName {
					hostnames = append(hostnames, addr.Address)
				}
			}
		}
		if len(ips) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-clock.RealClock{}.After(time.Second):
			}
		}
	}
	path, err := agentserver.Bootstrap(ctx, agentserver.BootstrapConfig{
		Client: client, NodeName: name, Hostnames: hostnames, IPs: ips,
		CertDir: filepath.Join(s.RootDir, "pki"), Logger: log,
	})
	if err != nil {
		if ctx.Err() == nil {
			log.Error("no serving certificate from the cluster CA; the self-signed one stays", "err", err)
		}
		return
	}
	pair, err := tls.LoadX509KeyPair(path, path)
	if err != nil {
		log.Error("reading the serving certificate failed; the self-signed one stays", "file", path, "err", err)
		return
	}
	srv.SetServingCertificate(pair)
	log.Info("serving a certificate of the cluster CA", "file", path)
}

// kubeconfigServers are the API server URLs the kubeconfig at path names
// for the cluster of its current context: that cluster's server first,
// then the server of every other cluster entry whose certificate
// authority (certificate-authority-data, or the contents of the
// certificate-authority file) holds the same certificates, in the
// entries' name order, each URL once. This is knode's reading of "a
// kubeconfig may name several servers": entries that trust the same CA
// are servers of one cluster, since knode's servers share the cluster CA.
// An entry without a CA, or whose CA file cannot be read, matches
// nothing; a current cluster without a readable CA gives its server
// alone.
func kubeconfigServers(path string) ([]string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		return nil, err
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("current context %q: not found", cfg.CurrentContext)
	}
	current, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("cluster %q of context %q: not found", kctx.Cluster, cfg.CurrentContext)
	}
	urls := []string{current.Server}
	ca, err := clusterCA(current)
	if err != nil || len(ca) == 0 {
		// The client reports an unreadable CA; alone, the server is used
		// as it always was.
		return urls, nil
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		c := cfg.Clusters[name]
		if name == kctx.Cluster || c.Server == "" || slices.Contains(urls, c.Server) {
			continue
		}
		if other, err := clusterCA(c); err == nil && bytes.Equal(other, ca) {
			urls = append(urls, c.Server)
		}
	}
	return urls, nil
}

// clusterCA is the DER of the certificates in c's certificate authority,
// in order; nil when it has none.
func clusterCA(c *clientcmdapi.Cluster) ([]byte, error) {
	data := c.CertificateAuthorityData
	if len(data) == 0 && c.CertificateAuthority != "" {
		var err error
		if data, err = os.ReadFile(c.CertificateAuthority); err != nil {
			return nil, err
		}
	}
	var der []byte
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return der, nil
		}
		if block.Type == "CERTIFICATE" {
			der = append(der, block.Bytes...)
		}
	}
}

// serverBalancer is the agent's balancer over the servers' URLs (--server
// or the kubeconfig's), checking each server's /readyz with the CA of
// restCfg.
func serverBalancer(urls []string, restCfg *rest.Config, log *slog.Logger) (*loadbalancer.Balancer, error) {
	var addrs []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("--server %q: must be an https:// URL with a host and port", raw)
		}
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "443")
		}
		addrs = append(addrs, host)
	}
	check, err := loadbalancer.ReadyzCheck(restCfg)
	if err != nil {
		return nil, err
	}
	return loadbalancer.New(loadbalancer.Config{Servers: addrs, Check: check, Logger: log})
}
