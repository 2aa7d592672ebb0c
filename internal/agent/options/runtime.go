package options

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// Defaults of the container runtime settings, upstream's where the kubelet
// has the setting.
const (
	// DefaultStreamingConnectionIdleTimeout is the kubelet's
	// streamingConnectionIdleTimeout: an exec, attach or port-forward
	// session with no traffic for this long is closed.
	DefaultStreamingConnectionIdleTimeout = 4 * time.Hour
	// DefaultRuntimeRequestTimeout is the kubelet's runtimeRequestTimeout,
	// the bound of one CRI call (image pulls excepted).
	DefaultRuntimeRequestTimeout = 2 * time.Minute
	// DefaultCNIConfDir is where the agent writes its CNI network config
	// for a CRI runtime to read: containerd's and CRI-O's default.
	DefaultCNIConfDir = "/etc/cni/net.d"
	// DefaultCNIBridge is the Linux bridge the CNI config names.
	DefaultCNIBridge = "cni0"
)

// RuntimeOptions are the flags of the container runtime.
type RuntimeOptions struct {
	ContainerRuntimeEndpoint       string
	ImageServiceEndpoint           string
	PodLogsDir                     string
	CNIConfDir                     string
	CNIBridge                      string
	CNIIsGateway                   bool
	ServerTLSBootstrap             bool
	StreamingConnectionIdleTimeout time.Duration
	RuntimeRequestTimeout          time.Duration
}

func (o *RuntimeOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ContainerRuntimeEndpoint, "container-runtime-endpoint", "", "the CRI runtime's endpoint, such as unix:///run/containerd/containerd.sock; pods then run as CRI containers from their images (default: none, containers run as processes)")
	fs.StringVar(&o.ImageServiceEndpoint, "image-service-endpoint", "", "the CRI image service's endpoint (default: --container-runtime-endpoint)")
	fs.StringVar(&o.PodLogsDir, "pod-logs-dir", "", "where a CRI runtime writes containers' logs (default: <root-dir>/pod-logs)")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", DefaultCNIConfDir, "where the agent writes the CNI network config for its pod CIDR, for a CRI runtime to read")
	fs.StringVar(&o.CNIBridge, "cni-bridge", DefaultCNIBridge, "the Linux bridge the CNI network config puts pods on")
	fs.BoolVar(&o.CNIIsGateway, "cni-is-gateway", true, "give the CNI bridge the pod CIDR's first address and turn on IP forwarding (false: the bridge is addressed by whoever made it)")
	_ = fs.MarkHidden("cni-is-gateway")
	fs.BoolVar(&o.ServerTLSBootstrap, "rotate-server-certificates", false, "ask the API server for a serving certificate signed by the cluster CA (a CertificateSigningRequest of signer kubernetes.io/kubelet-serving) instead of a self-signed one")
	fs.DurationVar(&o.StreamingConnectionIdleTimeout, "streaming-connection-idle-timeout", DefaultStreamingConnectionIdleTimeout, "close an exec, attach or port-forward session idle this long")
	fs.DurationVar(&o.RuntimeRequestTimeout, "runtime-request-timeout", DefaultRuntimeRequestTimeout, "bound of one CRI call, image pulls excepted")
}

// RuntimeSettings are the container runtime's settings once complete.
type RuntimeSettings struct {
	// ContainerRuntimeEndpoint is a unix:// URL; empty means the process
	// runtime.
	ContainerRuntimeEndpoint string
	// ImageServiceEndpoint is a unix:// URL; set whenever
	// ContainerRuntimeEndpoint is.
	ImageServiceEndpoint string
	// PodLogsDir is an absolute path.
	PodLogsDir string
	// CNIConfDir is an absolute path; CNIBridge a Linux interface name.
	CNIConfDir string
	CNIBridge  string
	// CNIIsGateway: the bridge plugin addresses the bridge (cni.Network's
	// IsGateway).
	CNIIsGateway bool
	// ServerTLSBootstrap asks for a serving certificate by CSR.
	ServerTLSBootstrap             bool
	StreamingConnectionIdleTimeout time.Duration
	RuntimeRequestTimeout          time.Duration
}

// completeRuntime applies the file, then the flags set on the command line,
// and checks the result. rootDir gives PodLogsDir's default.
func (o *RuntimeOptions) completeRuntime(fs *pflag.FlagSet, file kubeletconfig.KubeletConfiguration, rootDir string) (RuntimeSettings, []error) {
	s := RuntimeSettings{
		ContainerRuntimeEndpoint:       file.ContainerRuntimeEndpoint,
		ImageServiceEndpoint:           file.ImageServiceEndpoint,
		PodLogsDir:                     file.PodLogsDir,
		CNIConfDir:                     o.CNIConfDir,
		CNIBridge:                      o.CNIBridge,
		CNIIsGateway:                   o.CNIIsGateway,
		ServerTLSBootstrap:             file.ServerTLSBootstrap,
		StreamingConnectionIdleTimeout: DefaultStreamingConnectionIdleTimeout,
		RuntimeRequestTimeout:          DefaultRuntimeRequestTimeout,
	}
	if d := file.StreamingConnectionIdleTimeout.Duration; d != 0 {
		s.StreamingConnectionIdleTimeout = d
	}
	if d := file.RuntimeRequestTimeout.Duration; d != 0 {
		s.RuntimeRequestTimeout = d
	}
	for name, apply := range map[string]func(){
		"container-runtime-endpoint":        func() { s.ContainerRuntimeEndpoint = o.ContainerRuntimeEndpoint },
		"image-service-endpoint":            func() { s.ImageServiceEndpoint = o.ImageServiceEndpoint },
		"pod-logs-dir":                      func() { s.PodLogsDir = o.PodLogsDir },
		"rotate-server-certificates":        func() { s.ServerTLSBootstrap = o.ServerTLSBootstrap },
		"streaming-connection-idle-timeout": func() { s.StreamingConnectionIdleTimeout = o.StreamingConnectionIdleTimeout },
		"runtime-request-timeout":           func() { s.RuntimeRequestTimeout = o.RuntimeRequestTimeout },
	} {
		if fs.Changed(name) {
			apply()
		}
	}
	var errs []error
	if s.ContainerRuntimeEndpoint != "" {
		if err := checkEndpoint(s.ContainerRuntimeEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("--container-runtime-endpoint %q: %w", s.ContainerRuntimeEndpoint, err))
		}
		if s.ImageServiceEndpoint == "" {
			s.ImageServiceEndpoint = s.ContainerRuntimeEndpoint
		}
	}
	if s.ImageServiceEndpoint != "" {
		if s.ContainerRuntimeEndpoint == "" {
			errs = append(errs, fmt.Errorf("--image-service-endpoint %q: needs --container-runtime-endpoint", s.ImageServiceEndpoint))
		} else if err := checkEndpoint(s.ImageServiceEndpoint); err != nil {
			errs = append(errs, fmt.Errorf("--image-service-endpoint %q: %w", s.ImageServiceEndpoint, err))
		}
	}
	if s.PodLogsDir == "" {
		s.PodLogsDir = filepath.Join(rootDir, "pod-logs")
	}
	if !filepath.IsAbs(s.PodLogsDir) {
		errs = append(errs, fmt.Errorf("podLogsDir %q: must be an absolute path", s.PodLogsDir))
	}
	if !filepath.IsAbs(s.CNIConfDir) {
		errs = append(errs, fmt.Errorf("--cni-conf-dir %q: must be an absolute path", s.CNIConfDir))
	}
	if n := len(s.CNIBridge); n == 0 || n > 15 || strings.ContainsAny(s.CNIBridge, "/ :") {
		errs = append(errs, fmt.Errorf("--cni-bridge %q: must be a Linux interface name: 1 to 15 characters, without '/', ':' or spaces", s.CNIBridge))
	}
	if s.StreamingConnectionIdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("streamingConnectionIdleTimeout %v: must be greater than 0", s.StreamingConnectionIdleTimeout))
	}
	if s.RuntimeRequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("runtimeRequestTimeout %v: must be greater than 0", s.RuntimeRequestTimeout))
	}
	return s, errs
}

// checkEndpoint accepts a CRI endpoint the agent can dial: unix:// with an
// absolute path.
func checkEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("must be a URL: %v", err)
	}
	if u.Scheme != "unix" {
		return fmt.Errorf("must be a unix:// URL, such as unix:///run/containerd/containerd.sock")
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("must name an absolute socket path")
	}
	return nil
}
