package streaming_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/streaming"
)

// portForwardDialers are the ways kubectl port-forward reaches a server.
var portForwardDialers = []struct {
	name string
	new  func(t *testing.T, base string) httpstream.Dialer
}{
	{"spdy", func(t *testing.T, base string) httpstream.Dialer {
		return spdyDialer(t, portForwardURL(base))
	}},
	{"spdy over websocket", func(t *testing.T, base string) httpstream.Dialer {
		d, err := portforward.NewSPDYOverWebsocketDialer(portForwardURL(base), restConfig(base))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}},
	{"kubectl fallback dialer", func(t *testing.T, base string) httpstream.Dialer {
		tunnel, err := portforward.NewSPDYOverWebsocketDialer(portForwardURL(base), restConfig(base))
		if err != nil {
			t.Fatal(err)
		}
		return portforward.NewFallbackDialer(tunnel, spdyDialer(t, portForwardURL(base)), func(err error) bool {
			t.Errorf("fell back to SPDY after %v", err)
			return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
		})
	}},
}

// checkPortForward forwards to an echo server with each dialer through
// the server at base: several connections, one after another and at once,
// and then one to a closed port, which ends the forwarding as kubectl's
// does on a forwarding error.
func checkPortForward(t *testing.T, base string) {
	for _, dialer := range portForwardDialers {
		t.Run(dialer.name, func(t *testing.T) {
			echo := echoServer(t)
			local, done := forward(t, dialer.new(t, base), echo)
			echoThrough(t, local, "hello")
			echoThrough(t, local, strings.Repeat("0123456789", 100_000)) // 1 MB
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() { echoThrough(t, local, fmt.Sprintf("connection %d", i)) })
			}
			wg.Wait()
			select {
			case err := <-done:
				t.Fatalf("forwarding ended: %v", err)
			default:
			}

			local, done = forward(t, dialer.new(t, base), closedPort(t))
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(local)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if got, _ := io.ReadAll(c); len(got) != 0 {
				t.Errorf("read %q from a closed port", got)
			}
			select {
			case err := <-done:
				if !errors.Is(err, portforward.ErrLostConnectionToPod) {
					t.Errorf("ForwardPorts: %v, want %v", err, portforward.ErrLostConnectionToPod)
				}
			case <-time.After(20 * time.Second):
				t.Error("forwarding to a closed port did not fail")
			}
		})
	}
}

func TestPortForward(t *testing.T) {
	checkPortForward(t, serve(t, streaming.Config{}, nil, dialForwarder{}))
}

// TestRemotePortForward serves port-forward with a RemotePortForwarder
// that forwards over SPDY to a second server, as the agent does to a CRI
// runtime's streaming server.
func TestRemotePortForward(t *testing.T) {
	back := serve(t, streaming.Config{}, nil, dialForwarder{})
	checkPortForward(t, serve(t, streaming.Config{}, nil, remotePortForwarder(back)))
}

// forwardPipe forwards one connection with pf and returns the error it
// ends with; the other end of the connection echoes msg through it first
// when msg is not empty.
func forwardPipe(t *testing.T, pf streaming.PortForwarder, port int, msg string) error {
	t.Helper()
	local, remote := net.Pipe()
	t.Cleanup(func() { local.Close(); remote.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pf.PortForward(ctx, target, int32(port), remote) }()
	if msg != "" {
		go func() {
			_, _ = io.WriteString(local, msg)
		}()
		buf := make([]byte, len(msg))
		_ = local.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(local, buf); err != nil || string(buf) != msg {
			t.Errorf("echoed %q (%v), want %q", buf, err, msg)
		}
		local.Close()
	}
	return <-done
}

// TestPortForwardErrors checks the messages a client gets on the error
// stream, read by RemotePortForwarder.
func TestPortForwardErrors(t *testing.T) {
	back := serve(t, streaming.Config{}, nil, dialForwarder{})
	front := serve(t, streaming.Config{}, nil, remotePortForwarder(back))
	closed := closedPort(t)
	refused := fmt.Sprintf("error forwarding port %d to pod web_default, uid 1234: dial tcp 127.0.0.1:%d: connect: connection refused", closed, closed)

	err := forwardPipe(t, remotePortForwarder(back), closed, "")
	if err == nil || err.Error() != refused {
		t.Errorf("error %v, want %q", err, refused)
	}
	// Through two servers, the first wraps the second's message.
	err = forwardPipe(t, remotePortForwarder(front), closed, "")
	if want := fmt.Sprintf("error forwarding port %d to pod web_default, uid 1234: %s", closed, refused); err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}

	// Ports named in the query restrict what may be forwarded.
	echo := echoServer(t)
	if err := forwardPipe(t, remotePortForwarder(back, echo), echo, "allowed"); err != nil {
		t.Errorf("forwarding an allowed port: %v", err)
	}
	err = forwardPipe(t, remotePortForwarder(back, echo+1), echo, "")
	if want := fmt.Sprintf("error forwarding port %d to pod web_default, uid 1234: port %d is not among the ports this connection was opened for [%d]", echo, echo, echo+1); err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestWebSocketPortForward speaks upstream's v4.channel.k8s.io
// port-forwarding, which client-go has no client for, with a raw
// WebSocket.
func TestWebSocketPortForward(t *testing.T) {
	base := serve(t, streaming.Config{}, nil, dialForwarder{})
	echo, closed := echoServer(t), closedPort(t)
	u := portForwardURL(base, echo, closed)
	ws := dialWebSocket(t, u, "v4.channel.k8s.io")
	read := func() (byte, string) {
		t.Helper()
		var msg []byte
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			t.Fatal(err)
		}
		if len(msg) == 0 {
			t.Fatal("empty message")
		}
		return msg[0], string(msg[1:])
	}
	// Each channel starts with its port.
	got := map[byte]string{}
	for range 4 {
		ch, data := read()
		got[ch] = data
	}
	for ch, port := range map[byte]int{0: echo, 1: echo, 2: closed, 3: closed} {
		if want := string(binary.LittleEndian.AppendUint16(nil, uint16(port))); got[ch] != want {
			t.Errorf("channel %d starts with %q, want port %d", ch, got[ch], port)
		}
	}
	if err := websocket.Message.Send(ws, append([]byte{0}, "ping"...)); err != nil {
		t.Fatal(err)
	}
	want := map[byte]string{
		0: "ping",
		3: fmt.Sprintf("error forwarding port %d to pod web_default, uid 1234: dial tcp 127.0.0.1:%d: connect: connection refused", closed, closed),
	}
	got = map[byte]string{}
	for got[0] != want[0] || got[3] != want[3] {
		ch, data := read()
		got[ch] += data
		if len(got[ch]) > len(want[ch]) {
			t.Fatalf("channel %d: %q, want %q", ch, got[ch], want[ch])
		}
	}
}

// TestPortForwardStreamTimeout: a SPDY connection whose data stream does
// not follow its error stream within StreamCreationTimeout on the
// server's clock gets a message on the error stream, and the forwarder is
// not called.
func TestPortForwardStreamTimeout(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	pf := &countingForwarder{}
	base := serve(t, streaming.Config{Clock: clk}, nil, pf)
	conn := dialSPDY(t, portForwardURL(base), "portforward.k8s.io")
	h := http.Header{}
	h.Set("streamType", "error")
	h.Set("port", "80")
	h.Set("requestID", "7")
	errs, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	_ = errs.Close()
	msg := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(errs)
		msg <- string(b)
	}()
	waitUntil(t, "the server waits for the data stream", clk.HasWaiters)
	clk.Step(streaming.DefaultStreamCreationTimeout)
	select {
	case got := <-msg:
		if want := "timed out waiting for streams of request 7"; got != want {
			t.Errorf("error stream %q, want %q", got, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no message on the error stream")
	}
	if n := pf.count(); n != 0 {
		t.Errorf("forwarder called %d times", n)
	}
}

type countingForwarder struct {
	mu    sync.Mutex
	calls int
}

func (c *countingForwarder) PortForward(context.Context, streaming.Target, int32, io.ReadWriteCloser) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return nil
}

func (c *countingForwarder) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}
