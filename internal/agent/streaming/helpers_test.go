package streaming_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	osexec "os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	spdytransport "k8s.io/client-go/transport/spdy"

	"knode/internal/agent/streaming"
)

// target is the container every test's requests are for.
var target = streaming.Target{Namespace: "default", Pod: "web", UID: "1234", Container: "main"}

// testExecutor runs commands as real processes on this machine, except
// "resize-echo", which reports the terminal sizes and input lines it gets.
// Attach reports what it attached to and echoes its input; attaching to
// container "stopped" fails.
type testExecutor struct{}

func (testExecutor) Exec(ctx context.Context, t streaming.Target, cmd []string, s streaming.Streams) error {
	if cmd[0] == "resize-echo" {
		return resizeEcho(s)
	}
	c := osexec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = s.Stdin, s.Stdout, s.Stderr
	err := c.Run()
	var exit *osexec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() > 0 {
		return streaming.ExitError{Code: exit.ExitCode()}
	}
	return err
}

func (testExecutor) Attach(ctx context.Context, t streaming.Target, s streaming.Streams) error {
	if t.Container == "stopped" {
		return errors.New("container is not running")
	}
	fmt.Fprintf(s.Stdout, "attached to %s/%s/%s\n", t.Namespace, t.Pod, t.Container)
	if s.Stdin != nil {
		_, err := io.Copy(s.Stdout, s.Stdin)
		return err
	}
	return nil
}

// resizeEcho writes "size WxH" for each terminal size and "in LINE" for
// each input line, until the input ends.
func resizeEcho(s streaming.Streams) error {
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(s.Stdout, format+"\n", args...)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case size, ok := <-s.Resize:
				if !ok {
					return
				}
				say("size %dx%d", size.Width, size.Height)
			case <-stop:
				return
			}
		}
	}()
	lines := bufio.NewScanner(s.Stdin)
	for lines.Scan() {
		say("in %s", lines.Text())
	}
	close(stop)
	wg.Wait()
	return lines.Err()
}

// countingExecutor counts the calls that reach it.
type countingExecutor struct {
	mu    sync.Mutex
	calls int
}

func (c *countingExecutor) Exec(context.Context, streaming.Target, []string, streaming.Streams) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return nil
}

func (c *countingExecutor) Attach(context.Context, streaming.Target, streaming.Streams) error {
	return c.Exec(context.Background(), streaming.Target{}, nil, streaming.Streams{})
}

func (c *countingExecutor) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// dialForwarder forwards to ports on 127.0.0.1, copying both ways until
// the target closes its side.
type dialForwarder struct{}

func (dialForwarder) PortForward(ctx context.Context, _ streaming.Target, port int32, stream io.ReadWriteCloser) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer c.Close()
	go func() {
		_, _ = io.Copy(c, stream)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	_, err = io.Copy(stream, c)
	return err
}

// serve starts an HTTP server on 127.0.0.1 serving the kubelet's paths
// with a Server made from cfg, and returns its base URL.
func serve(t *testing.T, cfg streaming.Config, ex streaming.Executor, pf streaming.PortForwarder) string {
	t.Helper()
	srv, err := streaming.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	targetOf := func(r *http.Request) streaming.Target {
		return streaming.Target{Namespace: r.PathValue("ns"), Pod: r.PathValue("pod"), UID: target.UID, Container: r.PathValue("container")}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		srv.ServeExec(w, r, ex, targetOf(r))
	})
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		srv.ServeAttach(w, r, ex, targetOf(r))
	})
	mux.HandleFunc("/portForward/{ns}/{pod}", func(w http.ResponseWriter, r *http.Request) {
		srv.ServePortForward(w, r, pf, targetOf(r))
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL
}

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

func restConfig(base string) *rest.Config {
	return &rest.Config{Host: base, Proxy: noProxy}
}

// opts are the streams a request asks for.
type opts struct{ stdin, stdout, stderr, tty bool }

// sessionURL is the kubelet URL of an exec (with cmd) or attach (cmd nil)
// of t.
func sessionURL(base string, t streaming.Target, cmd []string, o opts) *url.URL {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	kind := "exec"
	if cmd == nil {
		kind = "attach"
	}
	u.Path = fmt.Sprintf("/%s/%s/%s/%s", kind, t.Namespace, t.Pod, t.Container)
	q := url.Values{}
	for _, c := range cmd {
		q.Add("command", c)
	}
	for name, on := range map[string]bool{"input": o.stdin, "output": o.stdout, "error": o.stderr, "tty": o.tty} {
		if on {
			q.Set(name, "1")
		}
	}
	u.RawQuery = q.Encode()
	return u
}

func portForwardURL(base string, ports ...int) *url.URL {
	u, err := url.Parse(base + "/portForward/default/web")
	if err != nil {
		panic(err)
	}
	q := url.Values{}
	for _, p := range ports {
		q.Add("port", strconv.Itoa(p))
	}
	u.RawQuery = q.Encode()
	return u
}

// remoteExecutor forwards to the server at base, as the agent forwards to
// a CRI runtime's streaming server.
func remoteExecutor(base string) streaming.RemoteExecutor {
	optsOf := func(s streaming.Streams) opts {
		return opts{stdin: s.Stdin != nil, stdout: s.Stdout != nil, stderr: s.Stderr != nil, tty: s.TTY}
	}
	return streaming.RemoteExecutor{
		ExecURL: func(_ context.Context, t streaming.Target, cmd []string, s streaming.Streams) (*url.URL, error) {
			return sessionURL(base, t, cmd, optsOf(s)), nil
		},
		AttachURL: func(_ context.Context, t streaming.Target, s streaming.Streams) (*url.URL, error) {
			return sessionURL(base, t, nil, optsOf(s)), nil
		},
	}
}

func remotePortForwarder(base string, ports ...int) streaming.RemotePortForwarder {
	return streaming.RemotePortForwarder{URL: func(context.Context, streaming.Target) (*url.URL, error) {
		return portForwardURL(base, ports...), nil
	}}
}

// echoServer listens on 127.0.0.1 and echoes each connection until its
// client closes its side; it returns the port.
func echoServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort is a port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// spdyDialer dials u with SPDY, as kubectl port-forward does.
func spdyDialer(t *testing.T, u *url.URL) httpstream.Dialer {
	t.Helper()
	rt, upgrader, err := spdytransport.RoundTripperFor(restConfig("http://" + u.Host))
	if err != nil {
		t.Fatal(err)
	}
	return spdytransport.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
}

// forward starts client-go's port forwarder from a free local port to
// remote through dialer; it returns the local port and the channel
// ForwardPorts' result arrives on.
func forward(t *testing.T, dialer httpstream.Dialer, remote int) (int, <-chan error) {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remote)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() { close(stop) })
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("port forwarder not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return int(ports[0].Local), done
}

// echoThrough sends msg to the local port, closes its side, and checks
// the same bytes come back.
func echoThrough(t *testing.T, local int, msg string) {
	t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Errorf("echoed %q, want %q", got, msg)
	}
}

// dialSPDY upgrades a request to u to SPDY with protocol, as a client.
func dialSPDY(t *testing.T, u *url.URL, protocol string) httpstream.Connection {
	t.Helper()
	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{Proxier: noProxy})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, got, err := spdytransport.Negotiate(rt, &http.Client{Transport: rt}, req, protocol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if got != protocol {
		t.Fatalf("negotiated %q, want %q", got, protocol)
	}
	return conn
}

// waitUntil polls cond until it holds, failing the test after a generous
// deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		runtime.Gosched()
	}
}

// sizeQueue gives client-go the sizes sent on it; closing it ends them.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	size, ok := <-q
	if !ok {
		return nil
	}
	return &size
}

// lineReader reads lines from r in the background.
func lineReader(r io.Reader) <-chan string {
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(r)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	return lines
}

func expectLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case got, ok := <-lines:
		if !ok {
			t.Fatalf("output ended, want line %q", want)
		}
		if got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no line, want %q", want)
	}
}
