package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/runtime/process"
	"knode/internal/agent/server"
	"knode/internal/agent/streaming"
	"knode/internal/auth"
)

// restConfig is a client of the agent at s acting as user in groups.
func restConfig(t *testing.T, s *server.Server, ca *auth.PKI, user string, groups ...string) *rest.Config {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueClientCert(user, groups, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := servedCertOf(t, s)
	return &rest.Config{Host: "https://" + s.Addr(), TLSClientConfig: rest.TLSClientConfig{
		CertData: certPEM, KeyData: keyPEM, CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c}),
	}}
}

// servedCertOf is the DER of the certificate s serves.
func servedCertOf(t *testing.T, s *server.Server) ([]byte, error) {
	t.Helper()
	conn, err := tlsDial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

// The streaming endpoints with the process runtime behind them, driven by
// client-go's own executors (SPDY and WebSocket) and port-forwarder.
func TestStreams(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	rt, err := process.New(process.Config{RootDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.KillAll)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-1")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Command: []string{"sleep", "600"},
			Env: []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}}}},
	}
	ctx := context.Background()
	if err := rt.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for st, _ := rt.PodStatus(pod.UID); st.Containers[0].State.Running == nil; st, _ = rt.PodStatus(pod.UID) {
		select {
		case <-rt.Changes():
		case <-time.After(20 * time.Second):
			t.Fatal("the container never ran")
		}
	}
	streams, err := streaming.New(streaming.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, clk, ca)
	cfg.Clock = nil // TLS between real clients and the server, on real time
	cfg.Pods = func() []*corev1.Pod { return []*corev1.Pod{pod} }
	cfg.Streams = &server.Streams{Server: streams, Executor: server.StreamerExecutor(rt), PortForwarder: server.StreamerPortForwarder(rt)}
	s := mustNew(t, cfg)
	start(t, s)
	admin := restConfig(t, s, ca, "admin", auth.MastersGroup)
	execURL := func(path string) *neturl.URL {
		u, _ := neturl.Parse("https://" + s.Addr() + path)
		return u
	}
	const script = "/exec/default/web/main?command=sh&command=-c&command=echo+%24GREETING%3B+cat%3B+echo+err+%3E%262%3B+exit+4&input=1&output=1&error=1"

	for _, proto := range []string{"SPDY", "WebSocket"} {
		var ex remotecommand.Executor
		if proto == "SPDY" {
			ex, err = remotecommand.NewSPDYExecutor(admin, http.MethodPost, execURL(script))
		} else {
			ex, err = remotecommand.NewWebSocketExecutor(admin, http.MethodGet, execURL(script).String())
		}
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("typed\n"), Stdout: &out, Stderr: &errOut})
		var code utilexec.CodeExitError
		if !errors.As(err, &code) || code.Code != 4 {
			t.Errorf("%s: error %v, want exit code 4", proto, err)
		}
		if out.String() != "hello\ntyped\n" || errOut.String() != "err\n" {
			t.Errorf("%s: stdout %q, stderr %q", proto, out.String(), errOut.String())
		}
	}

	// The node's own identity may not exec; nor may a request without
	// credentials.
	node := restConfig(t, s, ca, "system:node:"+nodeName, auth.NodesGroup)
	ex, err := remotecommand.NewSPDYExecutor(node, http.MethodPost, execURL(script))
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), `User "system:node:`+nodeName+`" cannot create path "/exec/default/web/main"`) {
		t.Errorf("a node's exec: %v, want 403", err)
	}

	// /run answers with the output; a missing pod or container is 404.
	c := client(t, nil, clk, clientCert(t, ca, "admin", []string{auth.MastersGroup}, 0))
	c.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	if r := do(t, c, http.MethodPost, url(s, "/run/default/web/main?cmd=sh+-c+env")); r.code != 200 || !strings.Contains(string(r.body), "GREETING=hello") {
		t.Errorf("/run: %d %s", r.code, r.body)
	}
	for _, tc := range []struct{ method, path string }{{http.MethodPut, "/exec/default/web/main"}, {http.MethodGet, "/run/default/web/main"}, {"GE", "/portForward/default/web"}} {
		if r := do(t, c, tc.method, url(s, tc.path)); r.code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 405", tc.method, tc.path, r.code)
		}
	}
	for path, want := range map[string]string{
		"/exec/default/ghost/main?command=ls&output=1": "pod does not exist",
		"/exec/default/web/other?command=ls&output=1":  `container "other" not found in pod "web"`,
		"/portForward/default/web/wrong-uid":           "pod does not exist",
	} {
		r := do(t, c, http.MethodPost, url(s, path))
		var st metav1.Status
		if err := json.Unmarshal(r.body, &st); err != nil || r.code != 404 || st.Message != want {
			t.Errorf("%s: %d %s, want 404 %q", path, r.code, r.body, want)
		}
	}

	// Port-forward reaches the host's port (the pod's, in this runtime).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "served by the pod\n")
	}()
	podPort := ln.Addr().(*net.TCPAddr).Port
	rt2, upgrader, err := spdy.RoundTripperFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt2}, http.MethodPost, execURL("/portForward/default/web"))
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", podPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = fw.ForwardPorts() }()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("port-forward never got ready")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "served by the pod\n" {
		t.Errorf("through port-forward: %q, %v", got, err)
	}
}

// tlsDial opens a TLS connection to addr without verifying it.
func tlsDial(addr string) (*tls.Conn, error) {
	return tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
}
