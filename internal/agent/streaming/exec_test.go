package streaming_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	spdytransport "k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/streaming"
)

// execClient is one way a client-go executor reaches the server.
type execClient struct {
	name string
	new  func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor
	// exitCodes: the protocol (v4 and later) reports exit codes, which
	// client-go returns as CodeExitError.
	exitCodes bool
	// closesStdin: the client can tell the server its input ended (not
	// WebSocket v4, which has no CLOSE signal).
	closesStdin bool
}

func spdyClient(protocols ...string) func(*testing.T, *rest.Config, *url.URL) remotecommand.Executor {
	return func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor {
		t.Helper()
		if len(protocols) == 0 {
			ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
			if err != nil {
				t.Fatal(err)
			}
			return ex
		}
		rt, upgrader, err := spdytransport.RoundTripperFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := remotecommand.NewSPDYExecutorForProtocols(rt, upgrader, http.MethodPost, u, protocols...)
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
}

func webSocketClient(protocols ...string) func(*testing.T, *rest.Config, *url.URL) remotecommand.Executor {
	return func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor {
		t.Helper()
		ex, err := remotecommand.NewWebSocketExecutorForProtocols(cfg, http.MethodGet, u.String(), protocols...)
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
}

// fallbackClient is kubectl's: WebSocket with the given protocol first,
// SPDY when the WebSocket upgrade fails. It fails the test unless the
// fallback happens exactly when wantFallback says.
func fallbackClient(wsProtocol string, wantFallback bool) func(*testing.T, *rest.Config, *url.URL) remotecommand.Executor {
	return func(t *testing.T, cfg *rest.Config, u *url.URL) remotecommand.Executor {
		t.Helper()
		var fellBack atomic.Bool
		ex, err := remotecommand.NewFallbackExecutor(webSocketClient(wsProtocol)(t, cfg, u), spdyClient()(t, cfg, u), func(err error) bool {
			fallBack := streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
			if fallBack {
				fellBack.Store(true)
			}
			return fallBack
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if fellBack.Load() != wantFallback {
				t.Errorf("fell back to SPDY: %v, want %v", fellBack.Load(), wantFallback)
			}
		})
		return ex
	}
}

var execClients = []execClient{
	{name: "spdy", new: spdyClient(), exitCodes: true, closesStdin: true},
	{name: "spdy v4", new: spdyClient("v4.channel.k8s.io"), exitCodes: true, closesStdin: true},
	{name: "spdy v3", new: spdyClient("v3.channel.k8s.io"), closesStdin: true},
	{name: "spdy v2", new: spdyClient("v2.channel.k8s.io"), closesStdin: true},
	{name: "websocket v5", new: webSocketClient("v5.channel.k8s.io"), exitCodes: true, closesStdin: true},
	{name: "websocket v4", new: webSocketClient("v4.channel.k8s.io"), exitCodes: true},
	{name: "kubectl fallback executor", new: fallbackClient("v5.channel.k8s.io", false), exitCodes: true, closesStdin: true},
	{name: "fallback from an unknown websocket protocol", new: fallbackClient("v99.channel.k8s.io", true), exitCodes: true, closesStdin: true},
}

func streamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// checkExecs runs the exec cases with every client against base.
func checkExecs(t *testing.T, base string) {
	for _, client := range execClients {
		t.Run(client.name, func(t *testing.T) {
			cfg := restConfig(base)
			t.Run("output and exit code", func(t *testing.T) {
				u := sessionURL(base, target, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, opts{stdout: true, stderr: true})
				var stdout, stderr bytes.Buffer
				err := client.new(t, cfg, u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
				if stdout.String() != "out\n" || stderr.String() != "err\n" {
					t.Errorf("stdout %q, stderr %q; want \"out\\n\", \"err\\n\"", stdout.String(), stderr.String())
				}
				var exit clientexec.CodeExitError
				switch {
				case client.exitCodes:
					if !errors.As(err, &exit) || exit.Code != 3 {
						t.Errorf("error %#v, want CodeExitError with code 3", err)
					}
				case err == nil || !strings.Contains(err.Error(), "command terminated with non-zero exit code: exit status 3"):
					t.Errorf("error %v, want the non-zero exit message", err)
				}
			})
			t.Run("success", func(t *testing.T) {
				u := sessionURL(base, target, []string{"echo", "hello"}, opts{stdout: true})
				var stdout bytes.Buffer
				if err := client.new(t, cfg, u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: &stdout}); err != nil {
					t.Fatal(err)
				}
				if stdout.String() != "hello\n" {
					t.Errorf("stdout %q, want \"hello\\n\"", stdout.String())
				}
			})
			t.Run("stdin", func(t *testing.T) {
				if !client.closesStdin {
					t.Skip("the protocol cannot end stdin")
				}
				u := sessionURL(base, target, []string{"cat"}, opts{stdin: true, stdout: true})
				var stdout bytes.Buffer
				in := strings.NewReader("hello\nworld\n")
				if err := client.new(t, cfg, u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdin: in, Stdout: &stdout}); err != nil {
					t.Fatal(err)
				}
				if stdout.String() != "hello\nworld\n" {
					t.Errorf("stdout %q, want the input back", stdout.String())
				}
			})
			t.Run("failure", func(t *testing.T) {
				u := sessionURL(base, target, []string{"/nonexistent/command"}, opts{stdout: true})
				err := client.new(t, cfg, u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: io.Discard})
				var exit clientexec.CodeExitError
				if err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "error executing command in container:") || !strings.Contains(err.Error(), "/nonexistent/command") {
					t.Errorf("error %v, want the executor's failure", err)
				}
			})
		})
	}
}

func TestExec(t *testing.T) {
	checkExecs(t, serve(t, streaming.Config{}, testExecutor{}, nil))
}

// TestRemoteExec serves exec with a RemoteExecutor that forwards over
// SPDY to a second server, as the agent does to a CRI runtime's streaming
// server: every client sees the same as when talking to the second server.
func TestRemoteExec(t *testing.T) {
	back := serve(t, streaming.Config{}, testExecutor{}, nil)
	checkExecs(t, serve(t, streaming.Config{}, remoteExecutor(back), nil))
}

func TestAttach(t *testing.T) {
	back := serve(t, streaming.Config{}, testExecutor{}, nil)
	front := serve(t, streaming.Config{}, remoteExecutor(back), nil)
	for _, server := range []struct{ name, base string }{{"direct", back}, {"remote", front}} {
		for _, client := range []execClient{execClients[0], execClients[4]} {
			t.Run(server.name+"/"+client.name, func(t *testing.T) {
				cfg := restConfig(server.base)
				u := sessionURL(server.base, target, nil, opts{stdin: true, stdout: true})
				var stdout bytes.Buffer
				if err := client.new(t, cfg, u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdin: strings.NewReader("hi\n"), Stdout: &stdout}); err != nil {
					t.Fatal(err)
				}
				if want := "attached to default/web/main\nhi\n"; stdout.String() != want {
					t.Errorf("stdout %q, want %q", stdout.String(), want)
				}

				stopped := target
				stopped.Container = "stopped"
				u = sessionURL(server.base, stopped, nil, opts{stdout: true})
				err := client.new(t, cfg, u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: io.Discard})
				if err == nil || !strings.Contains(err.Error(), "error attaching to container: container is not running") {
					t.Errorf("error %v, want the attach failure", err)
				}
			})
		}
	}
}

// TestTTY checks terminal sizes and input reach the executor of a TTY
// session, directly and through a RemoteExecutor.
func TestTTY(t *testing.T) {
	back := serve(t, streaming.Config{}, testExecutor{}, nil)
	front := serve(t, streaming.Config{}, remoteExecutor(back), nil)
	for _, server := range []struct{ name, base string }{{"direct", back}, {"remote", front}} {
		for _, client := range []execClient{execClients[0], execClients[2], execClients[4]} {
			t.Run(server.name+"/"+client.name, func(t *testing.T) {
				u := sessionURL(server.base, target, []string{"resize-echo"}, opts{stdin: true, stdout: true, tty: true})
				ex := client.new(t, restConfig(server.base), u)
				stdinR, stdinW := io.Pipe()
				stdoutR, stdoutW := io.Pipe()
				sizes := make(sizeQueue)
				t.Cleanup(func() { close(sizes) })
				done := make(chan error, 1)
				go func() {
					done <- ex.StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdoutW, Tty: true, TerminalSizeQueue: sizes})
					stdoutW.Close()
				}()
				lines := lineReader(stdoutR)
				sizes <- remotecommand.TerminalSize{Width: 80, Height: 24}
				expectLine(t, lines, "size 80x24")
				io.WriteString(stdinW, "ls\n")
				expectLine(t, lines, "in ls")
				sizes <- remotecommand.TerminalSize{Width: 120, Height: 40}
				expectLine(t, lines, "size 120x40")
				stdinW.Close()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("session did not end with its input")
				}
			})
		}
	}
}

func TestBadRequests(t *testing.T) {
	base := serve(t, streaming.Config{}, testExecutor{}, dialForwarder{})
	cases := []struct {
		name string
		url  string
		want string
	}{
		{"no streams", sessionURL(base, target, []string{"ls"}, opts{}).String(), "you must specify at least 1 of stdin, stdout, stderr"},
		{"tty and stderr", sessionURL(base, target, []string{"ls"}, opts{stdout: true, stderr: true, tty: true}).String(), "cannot exec with tty and stderr"},
		{"attach without streams", sessionURL(base, target, nil, opts{tty: true}).String(), "you must specify at least 1 of stdin, stdout, stderr"},
		{"exec without command", sessionURL(base, target, []string{}, opts{stdout: true}).String(), "you must specify at least one command for the container"},
		{"bad port", base + "/portForward/default/web?port=http", `unable to parse "http" as a port: strconv.ParseUint: parsing "http": invalid syntax`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(tc.url, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st metav1.Status
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || st.Code != http.StatusBadRequest || st.Message != tc.want {
				t.Errorf("got %d %q, want 400 %q", resp.StatusCode, st.Message, tc.want)
			}
		})
	}

	// The clients show the message; WebSocket's refusal is an upgrade
	// failure, on which kubectl falls back to SPDY (refused again).
	u := sessionURL(base, target, []string{"ls"}, opts{stdout: true, stderr: true, tty: true})
	for _, client := range []execClient{execClients[0], execClients[4]} {
		err := client.new(t, restConfig(base), u).StreamWithContext(streamCtx(t), remotecommand.StreamOptions{Stdout: io.Discard, Tty: true})
		if err == nil || !strings.Contains(err.Error(), "cannot exec with tty and stderr") {
			t.Errorf("%s: error %v, want the refusal", client.name, err)
		}
	}

	// WebSocket port-forwarding needs ports in the query.
	req, err := http.NewRequest(http.MethodGet, base+"/portForward/default/web", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-Websocket-Version": "13", "Sec-Websocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-Websocket-Protocol": "v4.channel.k8s.io"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st metav1.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if want := `query parameter "port" is required`; resp.StatusCode != http.StatusBadRequest || st.Message != want {
		t.Errorf("WebSocket port-forward without port: %d %q, want 400 %q", resp.StatusCode, st.Message, want)
	}
}

// dialWebSocket opens a raw WebSocket to u with subprotocol.
func dialWebSocket(t *testing.T, u *url.URL, subprotocol string) *websocket.Conn {
	t.Helper()
	u.Scheme = "ws"
	cfg, err := websocket.NewConfig(u.String(), "http://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Protocol = []string{subprotocol}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if got := ws.Config().Protocol; len(got) != 1 || got[0] != subprotocol {
		t.Fatalf("subprotocol %q, want %q", got, subprotocol)
	}
	_ = ws.SetDeadline(time.Now().Add(20 * time.Second))
	return ws
}

// TestBase64WebSocket speaks base64.channel.k8s.io, which client-go does
// not, with a raw WebSocket.
func TestBase64WebSocket(t *testing.T) {
	base := serve(t, streaming.Config{}, testExecutor{}, nil)
	u := sessionURL(base, target, []string{"sh", "-c", "echo hi; exit 2"}, opts{stdout: true})
	ws := dialWebSocket(t, u, "base64.channel.k8s.io")
	channels := map[byte]string{}
	for {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err == io.EOF {
			break // the server closed the connection
		} else if err != nil {
			t.Fatal(err)
		}
		data, err := base64.StdEncoding.DecodeString(msg[1:])
		if err != nil {
			t.Fatalf("message %q: %v", msg, err)
		}
		channels[msg[0]-'0'] += string(data)
	}
	if channels[1] != "hi\n" {
		t.Errorf("stdout %q, want \"hi\\n\"", channels[1])
	}
	// Before v4 the error channel carries only the failure's message.
	if want := "command terminated with non-zero exit code: exit status 2"; channels[3] != want {
		t.Errorf("error channel %q, want %q", channels[3], want)
	}
}

// TestStreamCreationTimeout: a SPDY client that does not open the streams
// it asked for is dropped after StreamCreationTimeout on the server's
// clock, and nothing is run.
func TestStreamCreationTimeout(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	ex := &countingExecutor{}
	base := serve(t, streaming.Config{Clock: clk, StreamCreationTimeout: time.Minute}, ex, nil)
	conn := dialSPDY(t, sessionURL(base, target, []string{"true"}, opts{stdout: true}), "v4.channel.k8s.io")
	h := http.Header{}
	h.Set("streamType", "error")
	if _, err := conn.CreateStream(h); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server waits for streams", clk.HasWaiters)
	clk.Step(time.Minute - time.Nanosecond)
	select {
	case <-conn.CloseChan():
		t.Fatal("connection closed before the timeout")
	default:
	}
	clk.Step(time.Nanosecond)
	select {
	case <-conn.CloseChan():
	case <-time.After(20 * time.Second):
		t.Fatal("connection still open after the timeout")
	}
	if n := ex.count(); n != 0 {
		t.Errorf("executor called %d times", n)
	}
}
