package streaming

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/net/websocket"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	pfproto "k8s.io/apimachinery/pkg/util/portforward"
)

// ServePortForward serves a port-forward request (the kubelet's
// /portForward/...) until the client closes the connection, forwarding
// each of its connections with pf:
//
//   - SPDY (portforward.k8s.io), or SPDY tunnelled in a WebSocket
//     (SPDY/3.1+portforward.k8s.io): any number of connections, each a pair
//     of streams naming its port. When the query names ports (port,
//     repeated or comma-separated), only those may be forwarded.
//   - WebSocket (v4.channel.k8s.io and its base64 variant): one connection
//     to each port the query names (at least one is required).
//
// A bad port parameter gets 400 before any upgrade.
func (s *Server) ServePortForward(w http.ResponseWriter, r *http.Request, pf PortForwarder, t Target) {
	ports, err := parsePorts(r.URL.Query())
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	switch {
	case wsstream.IsWebSocketRequestWithTunnelingProtocol(r):
		s.serveTunneledPortForward(w, r, pf, t, ports)
	case wsstream.IsWebSocketRequest(r):
		if len(ports) == 0 {
			badRequest(w, fmt.Sprintf("query parameter %q is required", corev1.PortHeader))
			return
		}
		s.serveWebSocketPortForward(w, r, pf, t, ports)
	default:
		if _, err := httpstream.Handshake(r, w, []string{pfproto.PortForwardV1Name}); err != nil {
			return // Handshake answered the client
		}
		incoming := make(chan incomingStream)
		done := make(chan struct{})
		defer close(done)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(watchHijack(w), r, handOver(incoming, done, checkPortForwardStream))
		if conn == nil {
			return // the upgrader answered the client
		}
		s.forwardPairs(r.Context(), conn, incoming, pf, t, ports)
	}
}

// parsePorts reads the port parameters of q, as upstream's kubelet does
// for WebSocket port-forwarding.
func parsePorts(q url.Values) ([]int32, error) {
	var ports []int32
	for _, v := range q[corev1.PortHeader] {
		if v == "" {
			return nil, fmt.Errorf("query parameter %q cannot be empty", corev1.PortHeader)
		}
		for p := range strings.SplitSeq(v, ",") {
			port, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("unable to parse %q as a port: %v", v, err)
			}
			if port < 1 {
				return nil, fmt.Errorf("port %q must be > 0", v)
			}
			ports = append(ports, int32(port))
		}
	}
	return ports, nil
}

// checkPortForwardStream rejects a SPDY stream without a valid port or
// stream type header, with upstream's messages.
func checkPortForwardStream(st httpstream.Stream) error {
	portString := st.Headers().Get(corev1.PortHeader)
	if portString == "" {
		return fmt.Errorf("%q header is required", corev1.PortHeader)
	}
	port, err := strconv.ParseUint(portString, 10, 16)
	if err != nil {
		return fmt.Errorf("unable to parse %q as a port: %v", portString, err)
	}
	if port < 1 {
		return fmt.Errorf("port %q must be > 0", portString)
	}
	switch typ := st.Headers().Get(corev1.StreamType); typ {
	case corev1.StreamTypeError, corev1.StreamTypeData:
		return nil
	case "":
		return fmt.Errorf("%q header is required", corev1.StreamType)
	default:
		return fmt.Errorf("invalid stream type %q", typ)
	}
}

// serveTunneledPortForward serves SPDY carried in the binary messages of a
// WebSocket, as kubectl 1.31 and later try first.
func (s *Server) serveTunneledPortForward(w http.ResponseWriter, r *http.Request, pf PortForwarder, t Target, ports []int32) {
	srv := websocket.Server{
		Handshake: func(c *websocket.Config, _ *http.Request) error {
			if !slices.Contains(c.Protocol, pfproto.WebsocketsSPDYTunnelingPortForwardV1) {
				return fmt.Errorf("subprotocols %q do not include %q", c.Protocol, pfproto.WebsocketsSPDYTunnelingPortForwardV1)
			}
			c.Protocol = []string{pfproto.WebsocketsSPDYTunnelingPortForwardV1}
			return nil
		},
		Handler: func(ws *websocket.Conn) {
			ws.PayloadType = websocket.BinaryFrame
			incoming := make(chan incomingStream)
			done := make(chan struct{})
			defer close(done)
			conn, err := spdy.NewServerConnection(ws, handOver(incoming, done, checkPortForwardStream))
			if err != nil {
				s.log.Info("cannot start SPDY in a WebSocket", "path", r.URL.Path, "err", err)
				return
			}
			s.forwardPairs(r.Context(), conn, incoming, pf, t, ports)
		},
	}
	srv.ServeHTTP(watchHijack(w), r)
}

// streamPair is one forwarded connection over SPDY: its data and error
// streams, which share a request ID.
type streamPair struct {
	id         string
	data, errs httpstream.Stream
	complete   chan struct{} // closed once both streams are there
}

func (p *streamPair) isComplete() bool { return p.data != nil && p.errs != nil }

// add takes st as the pair's data or error stream.
func (p *streamPair) add(st httpstream.Stream) error {
	switch st.Headers().Get(corev1.StreamType) {
	case corev1.StreamTypeError:
		if p.errs != nil {
			return errors.New("error stream already assigned")
		}
		p.errs = st
	case corev1.StreamTypeData:
		if p.data != nil {
			return errors.New("data stream already assigned")
		}
		p.data = st
	}
	if p.isComplete() {
		close(p.complete)
	}
	return nil
}

// requestID is the ID pairing a stream with its partner. Clients before
// the requestID header paired streams by consecutive stream IDs (error n,
// data n+2), which upstream still accepts; so does this.
func requestID(st httpstream.Stream) string {
	if id := st.Headers().Get(corev1.PortForwardRequestIDHeader); id != "" {
		return id
	}
	n := int(st.Identifier())
	if st.Headers().Get(corev1.StreamType) == corev1.StreamTypeData {
		n -= 2
	}
	return strconv.Itoa(n)
}

// forwardPairs pairs the streams from incoming and forwards each complete
// pair with pf, until conn is closed; then it closes conn and waits for the
// forwarding to end. A pair not complete within StreamCreationTimeout is
// dropped with an error on its error stream. With allowed not empty, a
// pair for another port gets an error instead of being forwarded.
func (s *Server) forwardPairs(ctx context.Context, conn httpstream.Connection, incoming <-chan incomingStream, pf PortForwarder, t Target, allowed []int32) {
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = conn.Close()
		wg.Wait()
	}()

	pairs := map[string]*streamPair{}
	expired := make(chan *streamPair)
	for {
		select {
		case <-conn.CloseChan():
			return
		case st := <-incoming:
			id := requestID(st)
			p := pairs[id]
			if p == nil {
				p = &streamPair{id: id, complete: make(chan struct{})}
				pairs[id] = p
				timer := s.cfg.Clock.NewTimer(s.cfg.StreamCreationTimeout)
				go func() {
					defer timer.Stop()
					select {
					case <-timer.C():
						select {
						case expired <- p:
						case <-ctx.Done():
						}
					case <-p.complete:
					case <-ctx.Done():
					}
				}()
			}
			if err := p.add(st.Stream); err != nil {
				msg := fmt.Sprintf("error processing stream for request %s: %v", id, err)
				s.log.Info("port-forward stream refused", "message", msg)
				if p.errs != nil {
					_, _ = fmt.Fprint(p.errs, msg)
				}
				continue
			}
			if !p.isComplete() {
				continue
			}
			delete(pairs, id)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.forwardPair(ctx, p, pf, t, allowed)
				conn.RemoveStreams(p.data, p.errs)
			}()
		case p := <-expired:
			if pairs[p.id] != p {
				continue // completed meanwhile
			}
			delete(pairs, p.id)
			msg := fmt.Sprintf("timed out waiting for streams of request %s", p.id)
			s.log.Info("port-forward connection dropped", "message", msg)
			if p.errs != nil {
				_, _ = fmt.Fprint(p.errs, msg)
				_ = p.errs.Close()
			}
			if p.data != nil {
				_ = p.data.Close()
			}
			conn.RemoveStreams(p.data, p.errs)
		}
	}
}

// forwardPair forwards one connection and reports its outcome as upstream:
// on success both streams are closed; on a broken pipe or a reset by the
// target both are reset; any other error is written to the error stream.
func (s *Server) forwardPair(ctx context.Context, p *streamPair, pf PortForwarder, t Target, allowed []int32) {
	port64, _ := strconv.ParseInt(p.data.Headers().Get(corev1.PortHeader), 10, 32)
	port := int32(port64)
	var err error
	if len(allowed) > 0 && !slices.Contains(allowed, port) {
		err = fmt.Errorf("port %d is not among the ports this connection was opened for %v", port, allowed)
	} else {
		err = pf.PortForward(ctx, t, port, p.data)
	}
	switch {
	case err == nil:
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET):
		s.log.Info("port-forward connection reset", "port", port, "request", p.id, "err", err)
		_ = p.data.Reset()
		_ = p.errs.Reset()
		return
	default:
		msg := forwardError(port, t, err)
		s.log.Info("port-forward failed", "message", msg)
		_, _ = fmt.Fprint(p.errs, msg)
	}
	_ = p.data.Close()
	_ = p.errs.Close()
}

// forwardError is upstream's message for a failed forward.
func forwardError(port int32, t Target, err error) string {
	return fmt.Sprintf("error forwarding port %d to pod %s, uid %v: %v", port, t.podFullName(), t.UID, err)
}

// The WebSocket port-forward protocols, as upstream's kubelet serves them.
var wsPortForwardProtocols = []string{"", v4BinaryProtocol, v4Base64Protocol}

// serveWebSocketPortForward forwards one connection to each of ports over
// WebSocket channels: data 2i and error 2i+1 for ports[i], each starting
// with the port as two little-endian bytes.
func (s *Server) serveWebSocketPortForward(w http.ResponseWriter, r *http.Request, pf PortForwarder, t Target, ports []int32) {
	channels := make([]wsstream.ChannelType, 0, 2*len(ports))
	for range ports {
		channels = append(channels, wsstream.ReadWriteChannel, wsstream.WriteChannel)
	}
	protocols := map[string]wsstream.ChannelProtocolConfig{}
	for _, p := range wsPortForwardProtocols {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: p != v4Base64Protocol, Channels: channels}
	}
	conn := wsstream.NewConn(protocols)
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	hw := watchHijack(w)
	_, streams, err := conn.Open(hw, r)
	if err != nil {
		s.log.Info("cannot upgrade to a WebSocket", "path", r.URL.Path, "err", err)
		return
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-hw.gone():
			cancel()
		case <-ctx.Done():
		}
	}()

	var wg sync.WaitGroup
	for i, port := range ports {
		data, errs := streams[2*i], streams[2*i+1]
		prefix := binary.LittleEndian.AppendUint16(nil, uint16(port))
		_, _ = data.Write(prefix)
		_, _ = errs.Write(prefix)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pf.PortForward(ctx, t, port, data); err != nil {
				msg := forwardError(port, t, err)
				s.log.Info("port-forward failed", "message", msg)
				_, _ = fmt.Fprint(errs, msg)
			}
		}()
	}
	wg.Wait()
}
