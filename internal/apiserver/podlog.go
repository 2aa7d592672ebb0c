package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/auth"
)

// The pods/log subresource: GET .../pods/{name}/log streams one
// container's log from the agent of the pod's node, as upstream's API
// server does (its LogREST and LogLocation):
//
//  1. the query is decoded into a corev1.PodLogOptions and validated with
//     upstream's rules (400 for a value that does not parse, 422 Invalid
//     for one that breaks a rule, both naming the field);
//  2. the container is the one named, or the pod's only container (400
//     otherwise, with upstream's messages);
//  3. the pod's node (spec.nodeName; 400 without one) gives the agent's
//     address: the Node's InternalIP, else its first address, and
//     status.daemonEndpoints.kubeletEndpoint.port (503 without either);
//  4. GET https://<address>/containerLogs/<ns>/<pod>/<container>?<options>
//     is sent with Config.Kubelet's client certificate, and the answer is
//     streamed back as text/plain, flushed as it arrives, until the agent
//     ends it or the client goes away. An agent's error status comes back
//     as a Status of the same code.
//
// Deciding (steps 1 to 3 and the URL) is pure; servePodLog is the shell.

const subLog = "log"

// KubeletClientConfig is how the API server reaches node agents (the
// kubelet's port) for pods/log: kube-apiserver's --kubelet-client-certificate,
// --kubelet-client-key and --kubelet-certificate-authority.
type KubeletClientConfig struct {
	// Certificate is presented to every agent, which authorizes the
	// request by its subject (knode's agents allow system:masters).
	// Required.
	Certificate tls.Certificate
	// RootCAs, when set, must sign each agent's serving certificate, which
	// must name the address dialled. Nil verifies nothing, as
	// kube-apiserver without --kubelet-certificate-authority: agents serve
	// self-signed certificates by default, so the log's origin is then
	// trusted only as far as the network is.
	//
	// A request may set insecureSkipTLSVerifyBackend=true to skip this
	// verification, as upstream honours it (its AllowInsecureBackendProxy,
	// on by default): whoever may read a pod's logs may choose to.
	RootCAs *x509.CertPool
}

// Bounds of a connection to an agent. A log stream itself has no time
// limit: follow=true lasts until the client or the agent ends it.
const (
	agentDialTimeout      = 30 * time.Second
	agentTLSTimeout       = 10 * time.Second
	agentKeepAlive        = 30 * time.Second
	agentIdleConnTimeout  = 90 * time.Second
	agentMaxIdlePerHost   = 4
	agentErrorBodyLimit   = 50000 // bytes of an agent's error kept, as upstream
	agentStreamBufferSize = 32 * 1024
)

// kubeletClient holds the two transports to agents: verify checks the
// agent's serving certificate against RootCAs (when set), insecure does not.
// Neither uses a proxy nor follows redirects: they dial exactly the host
// and port of the URL built from the Node, and RoundTrip never follows a
// Location header.
type kubeletClient struct {
	verify, insecure http.RoundTripper
}

func newKubeletClient(cfg *KubeletClientConfig, now func() time.Time) *kubeletClient {
	verify := agentTransport(cfg.Certificate, cfg.RootCAs, now)
	c := &kubeletClient{verify: verify, insecure: verify}
	if cfg.RootCAs != nil {
		c.insecure = agentTransport(cfg.Certificate, nil, now)
	}
	return c
}

// closeIdleConnections drops the connections to agents that no request
// uses.
func (c *kubeletClient) closeIdleConnections() {
	for _, rt := range []http.RoundTripper{c.verify, c.insecure} {
		if t, ok := rt.(*http.Transport); ok {
			t.CloseIdleConnections()
		}
	}
}

// agentTransport dials agents with cert, verifying them against roots when
// it is not nil, at the times now gives.
func agentTransport(cert tls.Certificate, roots *x509.CertPool, now func() time.Time) *http.Transport {
	return &http.Transport{
		// No Proxy: the dial goes to the Node's address and nowhere else.
		DialContext: (&net.Dialer{Timeout: agentDialTimeout, KeepAlive: agentKeepAlive}).DialContext,
		TLSClientConfig: &tls.Config{
			Certificates:       []tls.Certificate{cert},
			RootCAs:            roots,
			InsecureSkipVerify: roots == nil,
			MinVersion:         tls.VersionTLS12,
			Time:               now,
		},
		TLSHandshakeTimeout: agentTLSTimeout,
		MaxIdleConnsPerHost: agentMaxIdlePerHost,
		IdleConnTimeout:     agentIdleConnTimeout,
	}
}

// isPodLog reports whether a request is on the pods/log subresource.
func isPodLog(st *objectStore, a auth.Attributes) bool {
	return st.kind.Resource == "pods" && st.kind.GroupVersion.Group == "" && a.Subresource == subLog
}

var (
	podLogResource = schema.GroupResource{Resource: "pods/log"}
	nodesResource  = corev1.SchemeGroupVersion.WithResource("nodes")
)

// servePodLog answers GET pods/{name}/log. It writes nothing when it
// returns an error, which the caller writes.
func (s *Server) servePodLog(w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes) error {
	if r.Method != http.MethodGet || a.Verb != "get" {
		// Only a GET of one pod's log: not HEAD, not a watch/ path.
		return apierrors.NewMethodNotSupported(podLogResource, r.Method)
	}
	if a.Name == "" {
		return notFound()
	}
	opts, err := decodePodLogOptions(r.URL.Query())
	if err != nil {
		return err
	}
	if errs := validatePodLogOptions(opts); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, a.Name, errs)
	}
	ctx := r.Context()
	obj, _, err := st.getShared(ctx, namespace, a.Name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	container, err := logContainer(pod, opts.Container)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	nodes, ok := s.stores[nodesResource]
	if !ok {
		return apierrors.NewServiceUnavailable("this server does not serve nodes, so it cannot find the agent of a pod")
	}
	obj, _, err = nodes.getShared(ctx, "", pod.Spec.NodeName)
	if err != nil {
		return err
	}
	node := obj.(*corev1.Node)
	hostPort, err := agentAddress(node)
	if err != nil {
		return err
	}
	if s.kubelet == nil {
		return apierrors.NewServiceUnavailable("this server has no client credentials for node agents (apiserver.Config.Kubelet), so it cannot read logs")
	}
	u := containerLogsURL(hostPort, pod.Namespace, pod.Name, container, opts)
	return s.kubelet.stream(ctx, w, u, opts.InsecureSkipTLSVerifyBackend, node.Name, pod.Name)
}

// stream sends GET u to an agent and copies a successful answer to w,
// flushing as bytes arrive, until the agent ends it or ctx ends. An error
// before anything is written (the agent unreachable, its error status) is
// returned; once the answer has begun, a failure just ends it.
func (c *kubeletClient) stream(ctx context.Context, w http.ResponseWriter, u *url.URL, skipVerify bool, nodeName, podName string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	rt := c.verify
	if skipVerify {
		rt = c.insecure
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reaching the agent of node %q at %s: %w", nodeName, u.Host, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusPartialContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, agentErrorBodyLimit))
		return agentError(resp.StatusCode, resp.Header.Get("Content-Type"), body, nodeName, podName)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// Headers first, so that a client following a quiet log knows at once
	// that the stream is open.
	if rc.Flush() != nil {
		return nil
	}
	buf := make([]byte, agentStreamBufferSize)
	for {
		n, readErr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return nil
			}
			if rc.Flush() != nil {
				return nil
			}
		}
		if readErr != nil {
			// io.EOF, or the client went away and ctx ended the read.
			return nil
		}
	}
}

// agentError turns an agent's non-2xx answer into the error the client
// gets: the agent's own Status when it sent one, else a Status of the same
// code whose message is the agent's text. (Upstream keeps the text only for
// 400 and 500; knode keeps it for every code, since it says what is wrong.)
// A redirect is refused, not followed.
func agentError(code int, contentType string, body []byte, nodeName, podName string) error {
	if code >= 300 && code < 400 {
		return apierrors.NewInternalError(fmt.Errorf("the agent of node %q answered with a redirect (%d), which is not followed", nodeName, code))
	}
	if strings.HasPrefix(contentType, "application/json") {
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Kind == "Status" {
			if status.Code == 0 {
				status.Code = int32(code)
			}
			if status.Status == "" {
				status.Status = metav1.StatusFailure
			}
			return &apierrors.StatusError{ErrStatus: status}
		}
	}
	err := apierrors.NewGenericServerResponse(code, "get", podLogResource, podName, "", 0, false)
	if text := strings.TrimSpace(string(body)); text != "" {
		err.ErrStatus.Message = text
	}
	return err
}

// decodePodLogOptions reads a pods/log query the way upstream's parameter
// codec converts it into a PodLogOptions: a boolean is true when present
// and not "false" or "0", an integer is base 10, sinceTime is RFC 3339.
// Unknown parameters are ignored. A value that does not parse is a 400
// naming its field.
func decodePodLogOptions(q url.Values) (*corev1.PodLogOptions, error) {
	opts := &corev1.PodLogOptions{}
	var errs field.ErrorList
	present := func(name string) ([]string, bool) {
		v, ok := q[name]
		return v, ok && len(v) > 0
	}
	if v, ok := present("container"); ok {
		opts.Container = v[0]
	}
	for name, out := range map[string]*bool{
		"follow":                       &opts.Follow,
		"previous":                     &opts.Previous,
		"timestamps":                   &opts.Timestamps,
		"insecureSkipTLSVerifyBackend": &opts.InsecureSkipTLSVerifyBackend,
	} {
		if v, ok := present(name); ok {
			_ = runtime.Convert_Slice_string_To_bool(&v, out, nil)
		}
	}
	for _, p := range []struct {
		name string
		out  **int64
	}{{"sinceSeconds", &opts.SinceSeconds}, {"tailLines", &opts.TailLines}, {"limitBytes", &opts.LimitBytes}} {
		if v, ok := present(p.name); ok {
			if err := runtime.Convert_Slice_string_To_Pointer_int64(&v, p.out, nil); err != nil {
				errs = append(errs, field.Invalid(field.NewPath(p.name), v[0], "must be an integer"))
			}
		}
	}
	if v, ok := present("sinceTime"); ok {
		if err := metav1.Convert_Slice_string_To_Pointer_v1_Time(&v, &opts.SinceTime, nil); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("sinceTime"), v[0], "must be an RFC 3339 time, such as 2006-01-02T15:04:05Z"))
		}
	}
	if v, ok := present("stream"); ok {
		stream := v[0]
		opts.Stream = &stream
	}
	if len(errs) > 0 {
		return nil, badRequestFields(errs)
	}
	return opts, nil
}

// badRequestFields is a 400 Status listing errs as its causes.
func badRequestFields(errs field.ErrorList) error {
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: e.ErrorBody(), Field: e.Field})
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusBadRequest,
		Reason:  metav1.StatusReasonBadRequest,
		Message: errs.ToAggregate().Error(),
		Details: &metav1.StatusDetails{Causes: causes},
	}}
}

// agentLogStreams are the values of stream knode's agents serve. Upstream
// also has Stdout and Stderr (PodLogsQuerySplitStreams); the agent's
// containerLogs endpoint takes no stream parameter, so asking for one
// stream is refused rather than answered with both.
var agentLogStreams = []string{corev1.LogStreamAll}

// validatePodLogOptions is upstream's ValidatePodLogOptions, with its
// messages. The one difference: upstream reports sinceSeconds with
// sinceTime on the empty path ("[]: Forbidden"); here it is on
// sinceSeconds, so that the error names a field.
func validatePodLogOptions(opts *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if opts.TailLines != nil && *opts.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *opts.TailLines, "must be greater than or equal to 0"))
	}
	if opts.LimitBytes != nil && *opts.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *opts.LimitBytes, "must be greater than 0"))
	}
	switch {
	case opts.SinceSeconds != nil && opts.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath("sinceSeconds"), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case opts.SinceSeconds != nil:
		if *opts.SinceSeconds < 1 {
			errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *opts.SinceSeconds, "must be greater than 0"))
		}
	}
	if opts.Stream != nil {
		supported := false
		for _, s := range agentLogStreams {
			supported = supported || *opts.Stream == s
		}
		if !supported {
			errs = append(errs, field.NotSupported(field.NewPath("stream"), *opts.Stream, agentLogStreams))
		}
	}
	return errs
}

// logContainer is the container whose log is read: name when the pod has
// a container (init and ephemeral ones included) of that name, or the
// pod's only container when name is empty. The errors are upstream's 400s;
// the names offered are the init containers, the containers and the
// ephemeral containers, in that order, as upstream lists them.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	var all []string
	for _, c := range pod.Spec.InitContainers {
		all = append(all, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		all = append(all, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		all = append(all, c.Name)
	}
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, all))
		}
	}
	for _, c := range all {
		if c == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// agentAddress is host:port of node's agent: its InternalIP, else its first
// address, and status.daemonEndpoints.kubeletEndpoint.port. A node that
// reports neither yet (its agent has not posted its status) gives a 503.
// Unlike upstream, which falls back to the default port 10250, a node
// without a port is refused: knode's agents always report theirs.
func agentAddress(node *corev1.Node) (string, error) {
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 || port > 65535 {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no agent port (status.daemonEndpoints.kubeletEndpoint.port is %d), so its agent cannot be reached; has its agent started?", node.Name, port))
	}
	host := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			host = a.Address
			break
		}
	}
	if host == "" {
		for _, a := range node.Status.Addresses {
			if a.Address != "" {
				host = a.Address
				break
			}
		}
	}
	if host == "" {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports no address (status.addresses is empty), so its agent cannot be reached; has its agent started?", node.Name))
	}
	if net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(host)) > 0 {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf("node %q reports address %q, which is neither an IP address nor a DNS name", node.Name, host))
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// containerLogsURL is the agent's containerLogs URL for one container with
// opts as its query, in the parameters and formats of the kubelet's
// endpoint. sinceTime is sent in UTC.
func containerLogsURL(hostPort, namespace, pod, container string, opts *corev1.PodLogOptions) *url.URL {
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.UTC().Format(time.RFC3339))
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	return &url.URL{
		Scheme:   "https",
		Host:     hostPort,
		Path:     "/containerLogs/" + namespace + "/" + pod + "/" + container,
		RawQuery: q.Encode(),
	}
}
