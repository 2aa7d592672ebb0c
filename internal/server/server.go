// Package server assembles `knode server`: storage (embedded or external
// etcd), the cluster's credentials, the API server over HTTPS (with the
// kubelet-client credentials it proxies pods/log to agents with), and the
// controllers and the scheduler that run beside it.
//
// Several servers may share one external etcd. Each runs the API server
// and the storage compactor; the controllers run only on the server that
// holds the kube-system/kube-controller-manager Lease, and the scheduler
// only on the one that holds kube-system/kube-scheduler (see
// LeaderElection and package election). With leader election disabled
// they all run at once, and the server must be alone on its storage.
//
// Run blocks until its context ends, then shuts everything down. The data
// directory holds the PKI, etcd's data (when embedded) and admin.kubeconfig;
// nothing else is written.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/http2"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"knode/internal/admission/defaultstorageclass"
	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/admission/noderestriction"
	"knode/internal/admission/priority"
	"knode/internal/admission/storageprotection"
	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/auth/bootstrap"
	"knode/internal/cloudprovider"
	"knode/internal/controller/nodeipam"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/openapi"
	"knode/internal/registry"
	csrreg "knode/internal/registry/certificatesigningrequest"
	crreg "knode/internal/registry/controllerrevision"
	csidriverreg "knode/internal/registry/csidriver"
	csinodereg "knode/internal/registry/csinode"
	dsreg "knode/internal/registry/daemonset"
	epreg "knode/internal/registry/endpoints"
	eventreg "knode/internal/registry/event"
	leasereg "knode/internal/registry/lease"
	nsreg "knode/internal/registry/namespace"
	nodereg "knode/internal/registry/node"
	pvreg "knode/internal/registry/persistentvolume"
	pvcreg "knode/internal/registry/persistentvolumeclaim"
	podreg "knode/internal/registry/pod"
	pdbreg "knode/internal/registry/poddisruptionbudget"
	pcreg "knode/internal/registry/priorityclass"
	rsreg "knode/internal/registry/replicaset"
	ssreg "knode/internal/registry/statefulset"
	screg "knode/internal/registry/storageclass"
	vareg "knode/internal/registry/volumeattachment"
	"knode/internal/server/apiendpoints"
	"knode/internal/server/join"
	"knode/internal/storage"
	"knode/internal/storage/etcd"
	"knode/internal/version"
)

// Config is what `knode server` takes from its flags.
type Config struct {
	// DataDir holds the PKI, admin.kubeconfig and embedded etcd's data.
	DataDir string
	// BindAddress and SecurePort are where HTTPS is served.
	BindAddress string
	SecurePort  int
	// EtcdServers, when set, use an external etcd cluster instead of the
	// embedded one.
	EtcdServers []string
	// EtcdCluster, when it inits or joins, makes the embedded etcd a
	// member of a cluster of servers instead of a lone one.
	EtcdCluster EtcdCluster
	// AdvertiseAddress is the IP this server is reached at by the other
	// servers (etcd peer traffic) and by agents (the default/kubernetes
	// Endpoints); empty means the bind address, or a global unicast
	// address of this host when that is unspecified.
	AdvertiseAddress string
	// TokenAuthFile is a static token file (token,user,uid,"groups").
	TokenAuthFile string
	// Token and TokenFile are the cluster token (--token, --token-file)
	// that opens the CA the servers sharing the etcd cluster keep there
	// (internal/auth/bootstrap). At most one; neither is needed by the
	// first server, nor by one whose data directory holds the token.
	Token     string
	TokenFile string
	// KubeletCertificateAuthority is --kubelet-certificate-authority: a PEM
	// file of the CA certificates that must sign the agents' serving
	// certificates when the API server proxies pods/log to them. Empty, as
	// upstream's default, does not verify agents (they serve self-signed
	// certificates unless given one); requests may still skip the check
	// with insecureSkipTLSVerifyBackend=true. The API server presents the
	// PKI's kubelet-client pair (apiserver-kubelet-client.crt, in
	// system:masters) to agents either way.
	KubeletCertificateAuthority string
	// CompactionInterval is how often old revisions are compacted.
	CompactionInterval time.Duration
	// Profiling serves Go's profiles at /debug/pprof/ (behind
	// authentication and authorization, as every non-resource path), as
	// kube-apiserver's --profiling; nil means true.
	Profiling *bool
	// DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds
	// are the tolerationSeconds DefaultTolerationSeconds admission gives
	// pods (--default-not-ready-toleration-seconds and
	// --default-unreachable-toleration-seconds); nil means 300.
	DefaultNotReadyTolerationSeconds    *int64
	DefaultUnreachableTolerationSeconds *int64
	// IPAM, when set, allocates pod CIDRs to nodes (--allocate-node-cidrs
	// with --cluster-cidr and the mask sizes); Client, Clock and Logger are
	// filled in by Run.
	IPAM *nodeipam.Config
	// Cloud, when set, runs the cloud node lifecycle controller against it
	// (--cloud-provider and --cloud-config).
	Cloud cloudprovider.Interface
	// NodeMonitorPeriod paces the node health controllers (5 s).
	NodeMonitorPeriod time.Duration
	// NodeLifecycle configures the node lifecycle controller; Client,
	// Clock, Registerer, Logger and NodeMonitorPeriod are filled in by Run.
	NodeLifecycle nodelifecycle.Config
	// Storage configures the volume controllers and the built-in CSI
	// driver.
	Storage StorageConfig
	// LeaderElection decides when the controllers and the scheduler run:
	// only while this server holds their Leases, or, when it is disabled,
	// always.
	LeaderElection LeaderElection
	// TerminatedPodGCThreshold is --terminated-pod-gc-threshold: how many
	// finished pods PodGC lets exist (<= 0 keeps them all); nil means
	// podgc.DefaultTerminatedPodThreshold (12500).
	TerminatedPodGCThreshold *int
	// Clock drives every timer; zero value means the real clock.
	Clock clock.WithTicker
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// OnReady, if set, is called once the server answers /readyz with ok.
	OnReady func(s *Server)
}

// Defaults for Config.
const (
	DefaultBindAddress        = "127.0.0.1"
	DefaultSecurePort         = 6443
	DefaultCompactionInterval = 5 * time.Minute
)

// Server is a running `knode server`.
type Server struct {
	cfg            Config
	pki            *auth.PKI
	URL            string
	KubeconfigPath string
	loopback       *rest.Config
}

// Kinds are the resources this release serves.
func Kinds() []registry.Kind {
	return []registry.Kind{
		nsreg.Kind(), nodereg.Kind(), podreg.Kind(), eventreg.Kind(), leasereg.Kind(),
		rsreg.Kind(), dsreg.Kind(), ssreg.Kind(), crreg.Kind(), pdbreg.Kind(), pcreg.Kind(),
		screg.Kind(), csidriverreg.Kind(), csinodereg.Kind(), vareg.Kind(), pvreg.Kind(), pvcreg.Kind(),
		csrreg.Kind(), epreg.Kind(),
	}
}

func (c *Config) setDefaults() error {
	if c.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if c.BindAddress == "" {
		c.BindAddress = DefaultBindAddress
	}
	if net.ParseIP(c.BindAddress) == nil {
		return fmt.Errorf("--bind-address %q: must be an IP address", c.BindAddress)
	}
	if c.SecurePort < 0 || c.SecurePort > 65535 {
		return fmt.Errorf("--secure-port %d: must be between 0 and 65535", c.SecurePort)
	}
	if c.CompactionInterval == 0 {
		c.CompactionInterval = DefaultCompactionInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c.LeaderElection.setDefaults()
}

// Run serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	log := cfg.Logger
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	advertise, err := advertiseAddress(cfg)
	if err != nil {
		return err
	}
	hosts := []string{cfg.BindAddress, advertise.String()}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	store, members, err := openStorage(ctx, cfg, advertise, hosts)
	if err != nil {
		return err
	}
	defer store.Close()
	// The cluster's CA is shared through etcd, sealed with the cluster
	// token: the first server makes both, a joining one needs the token.
	pkiDir := filepath.Join(cfg.DataDir, "pki")
	token, err := bootstrap.Ensure(ctx, bootstrap.Config{
		Store:     bootstrap.EtcdStore{Client: store.Client()},
		PKIDir:    pkiDir,
		DataDir:   cfg.DataDir,
		Token:     cfg.Token,
		TokenFile: cfg.TokenFile,
		Clock:     cfg.Clock,
	})
	if err != nil {
		return err
	}
	clusterToken, err := bootstrap.ParseToken(token)
	if err != nil {
		return err
	}
	pki, err := auth.EnsurePKI(auth.PKIConfig{Dir: pkiDir, Hosts: hosts, Clock: cfg.Clock})
	if err != nil {
		return err
	}
	kubelet, err := kubeletClient(pki, cfg.KubeletCertificateAuthority)
	if err != nil {
		return err
	}

	loopbackToken, err := randomToken()
	if err != nil {
		return err
	}
	authn := auth.UnionAuthenticator{loopbackAuthenticator(loopbackToken), pki.X509Authenticator(), join.Authenticator{Secret: clusterToken.Secret}}
	if cfg.TokenAuthFile != "" {
		tf, err := auth.LoadTokenFile(cfg.TokenAuthFile)
		if err != nil {
			return err
		}
		authn = append(authn, tf)
	}

	kinds := Kinds()
	oapi, err := openapi.NewHandler(kinds, version.GitVersion())
	if err != nil {
		return err
	}
	var ready atomic.Bool
	// The node rules look objects up through the API server built below.
	var api *apiserver.Server
	authz, nodeRestriction := NodeAccess(func() *apiserver.Server { return api })
	priorityAdmission, err := PriorityAdmission(func() *apiserver.Server { return api })
	if err != nil {
		return err
	}
	defaultClass, err := DefaultStorageClassAdmission(func() *apiserver.Server { return api })
	if err != nil {
		return err
	}
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	api, err = apiserver.New(apiserver.Config{
		Storage:       store,
		Kinds:         kinds,
		Authenticator: authn,
		Authorizer:    authz,
		Admission: []apiserver.Admitter{
			nodeRestriction,
			priorityAdmission,
			defaulttolerationseconds.New(defaulttolerationseconds.Config{
				NotReadyTolerationSeconds:    cfg.DefaultNotReadyTolerationSeconds,
				UnreachableTolerationSeconds: cfg.DefaultUnreachableTolerationSeconds,
			}),
			defaultClass,
			storageprotection.New(),
		},
		Clock:   cfg.Clock,
		Version: version.Info(),
		OpenAPI: oapi,
		Extra:   extraPaths(cfg, metrics, joinPaths(store, members)),
		Metrics: metrics,
		Logger:  log,
		Kubelet: kubelet,
		Ready: func() error {
			if !ready.Load() {
				return errors.New("starting")
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	defer api.Close()
	if err := api.EnsureNamespaces(ctx); err != nil {
		return err
	}
	for _, pc := range pcreg.System() {
		if _, err := api.Create(ctx, schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), pc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PriorityClass %s: %w", pc.Name, err)
		}
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.SecurePort)))
	if err != nil {
		return fmt.Errorf("listening on %s:%d: %w", cfg.BindAddress, cfg.SecurePort, err)
	}
	url := "https://" + ln.Addr().String()
	kubeconfig := filepath.Join(cfg.DataDir, "admin.kubeconfig")
	if err := auth.WriteAdminKubeconfig(pki, url, kubeconfig); err != nil {
		ln.Close()
		return err
	}
	httpServer := &http.Server{
		Handler:           api,
		TLSConfig:         pki.TLSConfig(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	// HTTP/2's default round-robin write scheduler visits every open
	// stream of a connection for each frame it sends, and a connection may
	// carry hundreds of idle watches; the random scheduler visits only the
	// streams that have something to send.
	if err := http2.ConfigureServer(httpServer, &http2.Server{
		NewWriteScheduler: func() http2.WriteScheduler { return http2.NewRandomWriteScheduler() },
	}); err != nil {
		ln.Close()
		return err
	}
	serveErr := make(chan error, 1)
	// fatal carries errors from controllers that cannot go on.
	fatal := make(chan error, 1)
	go func() { serveErr <- httpServer.ServeTLS(ln, "", "") }()

	srv := &Server{cfg: cfg, pki: pki, URL: url, KubeconfigPath: kubeconfig}
	srv.loopback = &rest.Config{
		Host:            url,
		BearerToken:     loopbackToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.CAPEM()},
		QPS:             -1,
		UserAgent:       "knode-server",
	}

	compactor, err := storage.NewCompactor(storage.CompactorConfig{Store: store, Clock: cfg.Clock, Interval: cfg.CompactionInterval, OnCompact: api.Compacted})
	if err != nil {
		return err
	}
	go compactor.Run(ctx)
	loopbackClient, err := kubernetes.NewForConfig(srv.loopback)
	if err != nil {
		return err
	}
	if !cfg.Storage.DisableBuiltinDriver {
		if err := installBuiltinStorage(ctx, loopbackClient); err != nil {
			return err
		}
	}
	ctrl := &controllers{
		cfg: &cfg, client: loopbackClient, loopback: srv.loopback, pki: pki, metrics: metrics, log: log,
		fatal: func(err error) {
			select {
			case fatal <- err:
			default:
			}
		},
	}
	stopControllers, err := ctrl.start(ctx)
	if err != nil {
		return err
	}
	stopPublishing := publish(ctx, cfg, store, loopbackClient, advertise, ln.Addr().(*net.TCPAddr).Port)

	ready.Store(true)
	log.Info("knode server ready", "url", url, "kubeconfig", kubeconfig)
	if cfg.OnReady != nil {
		cfg.OnReady(srv)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-fatal:
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serving: %w", err)
		}
	}
	// The controllers stop, and the Leases are released, while the API
	// server still serves.
	stopControllers()
	stopPublishing()
	// Ending the watch caches ends the watches they serve, so that the
	// shutdown below does not wait for them.
	api.Close()
	shutdownCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	_ = httpServer.Shutdown(shutdownCtx)
	return runErr
}

// kubeletClient is how the API server reaches agents: with the PKI's
// kubelet-client pair, verifying them against the CA certificates in
// caFile (--kubelet-certificate-authority) when it is set.
func kubeletClient(pki *auth.PKI, caFile string) (*apiserver.KubeletClientConfig, error) {
	cert, ok := pki.KubeletClientCertificate()
	if !ok {
		return nil, errors.New("the PKI has no kubelet-client certificate")
	}
	cfg := &apiserver.KubeletClientConfig{Certificate: cert}
	if caFile == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--kubelet-certificate-authority: %w", err)
	}
	certs, err := auth.ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("--kubelet-certificate-authority %s: %w", caFile, err)
	}
	cfg.RootCAs = x509.NewCertPool()
	for _, c := range certs {
		cfg.RootCAs.AddCert(c)
	}
	return cfg, nil
}

// publish lists this server in the default/kubernetes Endpoints, where
// agents learn the servers from, until the returned function is called;
// that removes it at once. An advertise address that Endpoints cannot
// hold (loopback, link-local) publishes nothing: such a server is reached
// only by agents told its address.
func publish(ctx context.Context, cfg Config, store *etcd.Store, client kubernetes.Interface, advertise net.IP, port int) (stop func()) {
	if advertise.IsLoopback() || advertise.IsLinkLocalUnicast() {
		cfg.Logger.Info("not listing this server in the default/kubernetes Endpoints: its advertise address is loopback or link-local; set --advertise-address for agents to learn it", "advertise", advertise.String())
		return func() {}
	}
	r, err := apiendpoints.New(apiendpoints.Config{
		Etcd:    store.Client(),
		Client:  client,
		Address: net.JoinHostPort(advertise.String(), strconv.Itoa(port)),
		Clock:   cfg.Clock,
		Logger:  cfg.Logger,
	})
	if err != nil {
		cfg.Logger.Error("not listing this server in the default/kubernetes Endpoints", "err", err)
		return func() {}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(runCtx)
	}()
	return func() {
		cancel()
		<-done
		removeCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := r.Remove(removeCtx); err != nil {
			cfg.Logger.Warn("removing this server from the default/kubernetes Endpoints", "err", err)
		}
	}
}

// joinPaths serve servers joining the cluster (package join); members is
// nil unless the embedded etcd is a cluster member.
func joinPaths(store *etcd.Store, members *clusterMember) map[string]http.Handler {
	cfg := join.PathsConfig{
		Envelope: func(ctx context.Context) ([]byte, error) {
			data, ok, err := bootstrap.EtcdStore{Client: store.Client()}.Get(ctx, bootstrap.DefaultKey)
			if err == nil && !ok {
				err = errors.New("no bootstrap data in etcd")
			}
			return data, err
		},
	}
	if members != nil {
		cfg.Members = members.store
	}
	return join.Paths(cfg)
}

// extraPaths are the non-resource paths served beside the API: /metrics,
// the join paths, and the profiles when profiling is on.
func extraPaths(cfg Config, metrics *prometheus.Registry, joining map[string]http.Handler) map[string]http.Handler {
	extra := map[string]http.Handler{"/metrics": promhttp.HandlerFor(metrics, promhttp.HandlerOpts{})}
	for path, h := range joining {
		extra[path] = h
	}
	if cfg.Profiling != nil && !*cfg.Profiling {
		return extra
	}
	extra["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
	extra["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
	extra["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
	extra["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
	extra["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
	for _, name := range []string{"heap", "goroutine", "allocs", "block", "mutex", "threadcreate"} {
		extra["/debug/pprof/"+name] = pprof.Handler(name)
	}
	return extra
}

// NodeAccess returns the authorizer the API server uses and the
// NodeRestriction admission plugin, wired together as `knode server` wires
// them:
//
//   - the authorizer asks, in order, auth.MastersAuthorizer, the node
//     authorizer, auth.DiscoveryAuthorizer, and join.Authorizer (the
//     cluster token's paths); what none allows is refused;
//   - the admitter is NodeRestriction, which must run on every write, before
//     any other admission plugin, for the node authorizer's grants to be
//     safe.
//
// Both read pods and nodes through the server api returns, without
// authorization. api is called on each lookup, not now, so it may return
// a server built after this call; it must not return nil once requests
// are served.
func NodeAccess(api func() *apiserver.Server) (auth.Authorizer, apiserver.Admitter) {
	pods := func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		obj, err := api().Get(ctx, corev1.SchemeGroupVersion.WithResource("pods"), namespace, name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Pod), nil
	}
	nodes := func(ctx context.Context, name string) (*corev1.Node, error) {
		obj, err := api().Get(ctx, corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Node), nil
	}
	namespacePods := func(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
		objs, err := api().List(ctx, corev1.SchemeGroupVersion.WithResource("pods"), namespace)
		if err != nil {
			return nil, err
		}
		out := make([]*corev1.Pod, 0, len(objs))
		for _, o := range objs {
			out = append(out, o.(*corev1.Pod))
		}
		return out, nil
	}
	pvs := func(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
		obj, err := api().Get(ctx, corev1.SchemeGroupVersion.WithResource("persistentvolumes"), "", name)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.PersistentVolume), nil
	}
	attachments := func(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
		obj, err := api().Get(ctx, storagev1.SchemeGroupVersion.WithResource("volumeattachments"), "", name)
		if err != nil {
			return nil, err
		}
		return obj.(*storagev1.VolumeAttachment), nil
	}
	authz := append(auth.Chain(auth.NewNodeAuthorizer(auth.NodeAuthorizerConfig{
		Pods: pods, NamespacePods: namespacePods, PersistentVolumes: pvs, VolumeAttachments: attachments,
	})), auth.DiscoveryAuthorizer{}, join.Authorizer{})
	return authz, noderestriction.New(noderestriction.Config{Pods: pods, Nodes: nodes})
}

// PriorityAdmission is the Priority admission plugin as knode server wires
// it, reading PriorityClasses through the server api returns (called on
// each lookup, as for NodeAccess).
func PriorityAdmission(api func() *apiserver.Server) (apiserver.Admitter, error) {
	gvr := schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
	return priority.New(priority.Config{
		Get: func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
			obj, err := api().Get(ctx, gvr, "", name)
			if err != nil {
				return nil, err
			}
			return obj.(*schedulingv1.PriorityClass), nil
		},
		List: func(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
			objs, err := api().List(ctx, gvr, "")
			if err != nil {
				return nil, err
			}
			out := make([]schedulingv1.PriorityClass, 0, len(objs))
			for _, o := range objs {
				out = append(out, *o.(*schedulingv1.PriorityClass))
			}
			return out, nil
		},
	})
}

// DefaultStorageClassAdmission is the DefaultStorageClass admission plugin
// as knode server wires it, listing StorageClasses through the server api
// returns (called on each lookup, as for NodeAccess).
func DefaultStorageClassAdmission(api func() *apiserver.Server) (apiserver.Admitter, error) {
	gvr := storagev1.SchemeGroupVersion.WithResource("storageclasses")
	return defaultstorageclass.New(defaultstorageclass.Config{
		List: func(ctx context.Context) ([]storagev1.StorageClass, error) {
			objs, err := api().List(ctx, gvr, "")
			if err != nil {
				return nil, err
			}
			out := make([]storagev1.StorageClass, 0, len(objs))
			for _, o := range objs {
				out = append(out, *o.(*storagev1.StorageClass))
			}
			return out, nil
		},
	})
}

// LoopbackConfig is a client config with full access, for components that
// run in the server's process.
func (s *Server) LoopbackConfig() *rest.Config { return rest.CopyConfig(s.loopback) }

// PKI is the cluster's credentials.
func (s *Server) PKI() *auth.PKI { return s.pki }

// openStorage opens the external etcd, or starts the embedded one, alone
// or as a cluster member (then members is set).
func openStorage(ctx context.Context, cfg Config, advertise net.IP, hosts []string) (store *etcd.Store, members *clusterMember, err error) {
	switch {
	case len(cfg.EtcdServers) > 0 && cfg.EtcdCluster.enabled():
		return nil, nil, errors.New("--cluster-init and --join run etcd embedded in the servers: they cannot be given with --etcd-servers")
	case len(cfg.EtcdServers) > 0:
		store, err = etcd.NewClient(ctx, etcd.ClientConfig{Endpoints: cfg.EtcdServers})
		return store, nil, err
	case cfg.EtcdCluster.enabled():
		m, err := openCluster(ctx, cfg, advertise, hosts)
		if err != nil {
			return nil, nil, err
		}
		return m.store, m, nil
	}
	store, err = etcd.NewEmbedded(ctx, etcd.EmbeddedConfig{DataDir: filepath.Join(cfg.DataDir, "etcd")})
	return store, nil, err
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// loopbackAuthenticator admits the in-process components, which hold a
// token that lives only as long as this process.
type loopbackAuthenticator string

func (l loopbackAuthenticator) Authenticate(r *http.Request) (*auth.User, bool, error) {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return nil, false, nil
	}
	if subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(l)) != 1 {
		return nil, false, nil
	}
	return &auth.User{Name: "system:apiserver", Groups: []string{"system:masters", "system:authenticated"}}, true, nil
}
