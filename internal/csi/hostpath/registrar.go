package hostpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"knode/internal/volume"
)

// RegistryDir is the directory under the agent's root dir where plugins
// put their registration sockets.
const RegistryDir = "plugins_registry"

// SupportedVersions are the CSI versions the registration reports.
var SupportedVersions = []string{"1.0.0"}

// RegistrationSocket is where the registrar of driver listens:
// <rootDir>/plugins_registry/<driver>-reg.sock.
func RegistrationSocket(rootDir, driver string) string {
	return filepath.Join(rootDir, RegistryDir, driver+"-reg.sock")
}

// RegistrarConfig builds a Registrar.
type RegistrarConfig struct {
	// DriverName is the name to register; "" means volume.BuiltinDriver.
	DriverName string
	// Endpoint is the driver's CSI socket that GetInfo reports, as a path
	// ("unix://" is stripped). Required.
	Endpoint string
	// RootDir is the agent's root dir; the registrar listens on
	// RegistrationSocket(RootDir, DriverName). Required.
	RootDir string
	Logger  *slog.Logger
}

// RegistrationStatus is what the agent last said of the registration.
type RegistrationStatus struct {
	// Notified is false until NotifyRegistrationStatus was called.
	Notified bool
	// Registered and Error are its arguments.
	Registered bool
	Error      string
}

// Registrar does for the driver what upstream's node-driver-registrar
// does: it serves the k8s.io/kubelet pluginregistration/v1 Registration
// service on a socket in the agent's plugin registry, telling the agent
// the driver's name and CSI endpoint, and records what the agent answers.
// Start it after the CSI socket is up: the agent dials the endpoint as
// soon as it finds the registration socket. Use NewRegistrar.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer
	cfg      RegistrarConfig
	endpoint string
	log      *slog.Logger

	mu     sync.Mutex
	status RegistrationStatus
}

// NewRegistrar checks cfg and builds a Registrar.
func NewRegistrar(cfg RegistrarConfig) (*Registrar, error) {
	if cfg.DriverName == "" {
		cfg.DriverName = volume.BuiltinDriver
	}
	var errs []error
	if !driverNamePattern.MatchString(cfg.DriverName) {
		errs = append(errs, fmt.Errorf("hostpath: RegistrarConfig.DriverName %q is not a CSI driver name", cfg.DriverName))
	}
	endpoint, err := socketPath(cfg.Endpoint)
	if err != nil {
		errs = append(errs, fmt.Errorf("hostpath: RegistrarConfig.Endpoint: %w", err))
	}
	if cfg.RootDir == "" || !filepath.IsAbs(cfg.RootDir) {
		errs = append(errs, fmt.Errorf("hostpath: RegistrarConfig.RootDir must be an absolute path, got %q", cfg.RootDir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Registrar{
		cfg:      cfg,
		endpoint: endpoint,
		log:      cfg.Logger.With("component", "csi-registrar", "driver", cfg.DriverName),
	}, nil
}

// Socket is the registration socket's path.
func (r *Registrar) Socket() string { return RegistrationSocket(r.cfg.RootDir, r.cfg.DriverName) }

// Status returns what the agent last said.
func (r *Registrar) Status() RegistrationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Start listens on Socket and serves in the background. Stopping the
// returned Server removes the socket, which tells the agent the driver is
// gone.
func (r *Registrar) Start() (*Server, error) {
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, r)
	srv, err := startServer(s, r.Socket())
	if err != nil {
		return nil, err
	}
	r.log.Info("serving plugin registration", "socket", srv.Path(), "endpoint", r.endpoint)
	return srv, nil
}

// Serve is Start, then a wait until ctx is done, then Stop.
func (r *Registrar) Serve(ctx context.Context) error {
	srv, err := r.Start()
	if err != nil {
		return err
	}
	return srv.serveUntil(ctx)
}

func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.cfg.DriverName,
		Endpoint:          r.endpoint,
		SupportedVersions: SupportedVersions,
	}, nil
}

func (r *Registrar) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	r.status = RegistrationStatus{Notified: true, Registered: st.GetPluginRegistered(), Error: st.GetError()}
	r.mu.Unlock()
	if st.GetPluginRegistered() {
		r.log.Info("registered with the agent")
	} else {
		r.log.Error("registration with the agent failed", "err", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
