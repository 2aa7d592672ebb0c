package apiserver

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/auth"
)

// The connect subresources: pods/exec, pods/attach, pods/portforward and
// nodes/proxy are proxied to the agent of the node, as upstream's API
// server does (its ExecLocation, AttachLocation, PortForwardLocation and
// the node proxy):
//
//   - pods/exec and pods/attach (GET or POST) name one container (the only
//     one when the pod has one) and the streams wanted; the agent gets
//     /exec/<ns>/<pod>/<container> or /attach/... with the kubelet's query
//     parameters (command, input, output, error, tty set to 1).
//   - pods/portforward (GET or POST) goes to /portForward/<ns>/<pod>, with
//     the ports asked for as port parameters.
//   - nodes/<name>/proxy/<path> (any method) goes to /<path> on the node's
//     agent, with the query as it came.
//
// Exec, attach and port-forward must be upgrades (SPDY or WebSocket); the
// upgrade is passed through to the agent, which speaks the protocol, and
// bytes are then copied both ways until either side closes. The request's
// credentials (Authorization, Impersonate-*) are dropped: the agent sees
// the API server's kubelet-client certificate, as with pods/log.

// Subresources served by proxying to an agent.
const (
	subExec        = "exec"
	subAttach      = "attach"
	subPortForward = "portforward"
	subProxy       = "proxy"
)

// The kubelet's query parameters for exec and attach (upstream's
// ExecStdinParam and friends), set to "1" when on.
const (
	kubeletStdinParam   = "input"
	kubeletStdoutParam  = "output"
	kubeletStderrParam  = "error"
	kubeletTTYParam     = "tty"
	kubeletCommandParam = "command"
)

// isPodConnect reports whether a request is on pods/exec, pods/attach or
// pods/portforward.
func isPodConnect(st *objectStore, a auth.Attributes) bool {
	if st.kind.Resource != "pods" || st.kind.GroupVersion.Group != "" {
		return false
	}
	switch a.Subresource {
	case subExec, subAttach, subPortForward:
		return true
	}
	return false
}

// isNodeProxy reports whether a request is on nodes/proxy.
func isNodeProxy(st *objectStore, a auth.Attributes) bool {
	return st.kind.Resource == "nodes" && st.kind.GroupVersion.Group == "" && a.Subresource == subProxy
}

// connectOptions are what a connect request asks of the agent.
type connectOptions struct {
	subresource                  string
	container                    string
	command                      []string
	stdin, stdout, stderr, tty   bool
	ports                        []int32
	insecureSkipTLSVerifyBackend bool
}

// decodeConnectOptions reads a pods/exec, pods/attach or pods/portforward
// query the way upstream's parameter codec decodes PodExecOptions,
// PodAttachOptions and PodPortForwardOptions: booleans are true when
// present and not "false" or "0"; ports are base-10 integers. A value that
// does not parse is a 400 naming its field, and so is a port out of range.
func decodeConnectOptions(sub string, q url.Values) (*connectOptions, error) {
	o := &connectOptions{subresource: sub}
	var errs field.ErrorList
	flag := func(name string, out *bool) {
		if v, ok := q[name]; ok && len(v) > 0 {
			_ = runtime.Convert_Slice_string_To_bool(&v, out, nil)
		}
	}
	switch sub {
	case subExec, subAttach:
		o.container = q.Get("container")
		flag("stdin", &o.stdin)
		flag("stdout", &o.stdout)
		flag("stderr", &o.stderr)
		flag("tty", &o.tty)
		if sub == subExec {
			o.command = q["command"]
		}
	case subPortForward:
		for i, v := range q["ports"] {
			p, err := strconv.ParseInt(v, 10, 32)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(field.NewPath("ports").Index(i), v, "must be an integer"))
			case p < 1 || p > 65535:
				errs = append(errs, field.Invalid(field.NewPath("ports").Index(i), p, "must be between 1 and 65535, inclusive"))
			default:
				o.ports = append(o.ports, int32(p))
			}
		}
	}
	flag("insecureSkipTLSVerifyBackend", &o.insecureSkipTLSVerifyBackend)
	if len(errs) > 0 {
		return nil, badRequestFields(errs)
	}
	return o, nil
}

// agentConnectURL is the agent's URL for o on the given pod and container,
// in the kubelet's paths and parameters.
func agentConnectURL(hostPort, namespace, pod, container string, o *connectOptions) *url.URL {
	q := url.Values{}
	var p string
	switch o.subresource {
	case subPortForward:
		p = "/portForward/" + url.PathEscape(namespace) + "/" + url.PathEscape(pod)
		for _, port := range o.ports {
			q.Add("port", strconv.Itoa(int(port)))
		}
	default:
		p = "/" + o.subresource + "/" + url.PathEscape(namespace) + "/" + url.PathEscape(pod) + "/" + url.PathEscape(container)
		for _, c := range o.command {
			q.Add(kubeletCommandParam, c)
		}
		for name, on := range map[string]bool{kubeletStdinParam: o.stdin, kubeletStdoutParam: o.stdout, kubeletStderrParam: o.stderr, kubeletTTYParam: o.tty} {
			if on {
				q.Set(name, "1")
			}
		}
	}
	return &url.URL{Scheme: "https", Host: hostPort, Path: p, RawQuery: q.Encode()}
}

// servePodConnect answers pods/exec, pods/attach and pods/portforward. It
// writes nothing when it returns an error, which the caller writes.
func (s *Server) servePodConnect(w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes) error {
	gr := schema.GroupResource{Resource: "pods/" + a.Subresource}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return apierrors.NewMethodNotSupported(gr, r.Method)
	}
	if a.Name == "" {
		return notFound()
	}
	o, err := decodeConnectOptions(a.Subresource, r.URL.Query())
	if err != nil {
		return err
	}
	ctx := r.Context()
	obj, _, err := st.getShared(ctx, namespace, a.Name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	container := ""
	if a.Subresource != subPortForward {
		if container, err = logContainer(pod, o.container); err != nil {
			return err
		}
		if a.Subresource == subExec && len(o.command) == 0 {
			return apierrors.NewBadRequest("you must specify at least one command for the container")
		}
		if !o.stdin && !o.stdout && !o.stderr {
			return apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr")
		}
	}
	if pod.Spec.NodeName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	node, hostPort, err := s.agentOf(r, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	u := agentConnectURL(hostPort, pod.Namespace, pod.Name, container, o)
	return s.proxyToAgent(w, r, u, true, o.insecureSkipTLSVerifyBackend, node.Name)
}

// serveNodeProxy answers nodes/<name>/proxy/<path>: any method, passed to
// the node's agent at /<path>.
func (s *Server) serveNodeProxy(w http.ResponseWriter, r *http.Request, a auth.Attributes) error {
	if a.Name == "" {
		return notFound()
	}
	// The node's name may carry a port (<name>:<port>), as upstream allows;
	// only the agent's own port is served.
	name, port, hasPort := strings.Cut(a.Name, ":")
	node, hostPort, err := s.agentOf(r, name)
	if err != nil {
		return err
	}
	if hasPort && port != strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)) {
		return apierrors.NewBadRequest(fmt.Sprintf("port %s of node %s is not its agent's port; only the agent's port can be proxied to", port, name))
	}
	rest := proxyRest(a.Path, a.Name)
	u := &url.URL{Scheme: "https", Host: hostPort, Path: rest, RawQuery: r.URL.RawQuery}
	return s.proxyToAgent(w, r, u, false, false, node.Name)
}

// proxyRest is the part of a nodes/<name>/proxy path after "proxy", always
// starting with "/".
func proxyRest(urlPath, name string) string {
	marker := "/nodes/" + name + "/proxy"
	i := strings.Index(urlPath, marker)
	if i < 0 {
		return "/"
	}
	rest := urlPath[i+len(marker):]
	if rest == "" {
		return "/"
	}
	cleaned := path.Clean(rest)
	if strings.HasSuffix(rest, "/") && cleaned != "/" {
		cleaned += "/"
	}
	return cleaned
}

// agentOf is the Node named and its agent's host:port.
func (s *Server) agentOf(r *http.Request, name string) (*corev1.Node, string, error) {
	nodes, ok := s.stores[nodesResource]
	if !ok {
		return nil, "", apierrors.NewServiceUnavailable("this server does not serve nodes, so it cannot find a node's agent")
	}
	obj, _, err := nodes.getShared(r.Context(), "", name)
	if err != nil {
		return nil, "", err
	}
	node := obj.(*corev1.Node)
	hostPort, err := agentAddress(node)
	if err != nil {
		return nil, "", err
	}
	if s.kubelet == nil {
		return nil, "", apierrors.NewServiceUnavailable("this server has no client credentials for node agents (apiserver.Config.Kubelet), so it cannot reach them")
	}
	return node, hostPort, nil
}

// proxyToAgent passes r to the agent at u with the kubelet-client
// credentials: an upgrade is dialled through and then copied both ways; a
// plain request (upgradeRequired false only) is reverse-proxied. The
// client's own credentials are not passed on.
func (s *Server) proxyToAgent(w http.ResponseWriter, r *http.Request, u *url.URL, upgradeRequired, skipVerify bool, nodeName string) error {
	if upgradeRequired && !httpstream.IsUpgradeRequest(r) {
		return apierrors.NewBadRequest("Upgrade request required")
	}
	rt := s.kubelet.verify
	if skipVerify {
		rt = s.kubelet.insecure
	}
	out := r.Clone(r.Context())
	if httpstream.IsUpgradeRequest(r) {
		// An upgrade has no body: what follows the headers is the
		// protocol's, copied once the agent has switched.
		out.Body, out.ContentLength = http.NoBody, 0
		out.Header.Del("Transfer-Encoding")
	}
	out.Header.Del("Authorization")
	for name := range out.Header {
		if strings.HasPrefix(name, "Impersonate-") {
			out.Header.Del(name)
		}
	}
	h := proxy.NewUpgradeAwareHandler(u, rt, false, upgradeRequired, agentProxyResponder{node: nodeName})
	h.UseRequestLocation = false
	h.MaxBytesPerSec = 0
	h.ServeHTTP(w, out)
	return nil
}

// agentProxyResponder writes a failure to reach an agent as a Status.
type agentProxyResponder struct{ node string }

func (p agentProxyResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error reaching the agent of node %q: %v", p.node, err)))
}
