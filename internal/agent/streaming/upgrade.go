package streaming

import (
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	rcproto "k8s.io/apimachinery/pkg/util/remotecommand"
)

// spdyExecProtocols are the remotecommand versions served over SPDY, in the
// server's order of preference (the client's order decides). v5 differs
// from v4 only on WebSocket, so over SPDY it is served as v4, as upstream
// does.
var spdyExecProtocols = []string{
	rcproto.StreamProtocolV5Name,
	rcproto.StreamProtocolV4Name,
	rcproto.StreamProtocolV3Name,
	rcproto.StreamProtocolV2Name,
	rcproto.StreamProtocolV1Name,
}

// incomingStream is a stream a SPDY client opened, with the channel that is
// closed once the server's reply to it has been sent.
type incomingStream struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// handOver returns a stream handler for spdy that passes each stream
// accepted by check (nil accepts all) to streams, and rejects every stream
// once done is closed.
func handOver(streams chan<- incomingStream, done <-chan struct{}, check func(httpstream.Stream) error) httpstream.NewStreamHandler {
	return func(st httpstream.Stream, replySent <-chan struct{}) error {
		if check != nil {
			if err := check(st); err != nil {
				return err
			}
		}
		select {
		case streams <- incomingStream{Stream: st, replySent: replySent}:
			return nil
		case <-done:
			return errors.New("the connection accepts no more streams")
		}
	}
}

// openSPDYSession upgrades r to SPDY and waits for the client to open the
// streams opts asks for. It returns nil when that fails; the client has
// then been answered or the connection closed.
func (s *Server) openSPDYSession(w http.ResponseWriter, r *http.Request, opts execOptions) *session {
	protocol, err := httpstream.Handshake(r, w, spdyExecProtocols)
	if err != nil {
		return nil // Handshake answered the client
	}
	incoming := make(chan incomingStream)
	done := make(chan struct{})
	defer close(done)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(watchHijack(w), r, handOver(incoming, done, nil))
	if conn == nil {
		return nil // the upgrader answered the client
	}
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)

	want := map[string]bool{corev1.StreamTypeError: true}
	want[corev1.StreamTypeStdin] = opts.stdin
	want[corev1.StreamTypeStdout] = opts.stdout
	want[corev1.StreamTypeStderr] = opts.stderr
	want[corev1.StreamTypeResize] = opts.tty && protocol != rcproto.StreamProtocolV2Name && protocol != rcproto.StreamProtocolV1Name
	got, err := s.awaitStreams(conn, incoming, want)
	if err != nil {
		s.log.Info("exec or attach connection dropped", "path", r.URL.Path, "err", err)
		_ = conn.Close()
		return nil
	}

	gone := make(chan struct{})
	go func() {
		<-conn.CloseChan()
		close(gone)
	}()
	sess := &session{
		errors:     got[corev1.StreamTypeError],
		jsonStatus: protocol == rcproto.StreamProtocolV5Name || protocol == rcproto.StreamProtocolV4Name,
		gone:       gone,
		close:      func() { _ = conn.Close() },
	}
	if st, ok := got[corev1.StreamTypeStdin]; ok {
		sess.stdin = st
	}
	if st, ok := got[corev1.StreamTypeStdout]; ok {
		sess.stdout = st
	}
	if st, ok := got[corev1.StreamTypeStderr]; ok {
		sess.stderr = st
	}
	if st, ok := got[corev1.StreamTypeResize]; ok {
		sess.resize = st
	}
	return sess
}

// awaitStreams collects one stream of each type want marks true, and
// returns once the replies to all of them have been sent. Streams of other
// types are ignored, as upstream does. It fails when the client has not
// opened them all within StreamCreationTimeout, or the connection ends.
func (s *Server) awaitStreams(conn httpstream.Connection, incoming <-chan incomingStream, want map[string]bool) (map[string]httpstream.Stream, error) {
	n := 0
	for _, w := range want {
		if w {
			n++
		}
	}
	timer := s.cfg.Clock.NewTimer(s.cfg.StreamCreationTimeout)
	defer timer.Stop()
	stop := make(chan struct{})
	defer close(stop)
	replied := make(chan struct{}, n)
	got := make(map[string]httpstream.Stream, n)
	for sent := 0; sent < n; {
		select {
		case st := <-incoming:
			typ := st.Headers().Get(corev1.StreamType)
			if !want[typ] || got[typ] != nil {
				s.log.Info("ignoring an unexpected stream", "streamType", typ)
				continue
			}
			got[typ] = st.Stream
			go func() {
				select {
				case <-st.replySent:
					replied <- struct{}{}
				case <-stop:
				}
			}()
		case <-replied:
			sent++
		case <-timer.C():
			return nil, errors.New("timed out waiting for client to create streams")
		case <-conn.CloseChan():
			return nil, errors.New("connection closed before the client created its streams")
		}
	}
	return got, nil
}

// The remotecommand WebSocket channels, numbered as upstream.
const (
	wsStdin = iota
	wsStdout
	wsStderr
	wsError
	wsResize
)

// v4 and v5 subprotocols of channel.k8s.io (wsstream knows the unversioned
// ones, and that v5 has the CLOSE signal).
const (
	v4BinaryProtocol = "v4." + wsstream.ChannelWebSocketProtocol
	v4Base64Protocol = "v4." + wsstream.Base64ChannelWebSocketProtocol
)

// openWebSocketSession upgrades r to a WebSocket carrying the remotecommand
// channels. It returns nil when that fails; the client has then been
// answered.
func (s *Server) openWebSocketSession(w http.ResponseWriter, r *http.Request, opts execOptions) *session {
	channels := make([]wsstream.ChannelType, wsResize+1)
	channels[wsStdin] = channelIf(opts.stdin, wsstream.ReadChannel)
	channels[wsStdout] = channelIf(opts.stdout, wsstream.WriteChannel)
	channels[wsStderr] = channelIf(opts.stderr, wsstream.WriteChannel)
	channels[wsError] = wsstream.WriteChannel
	channels[wsResize] = wsstream.ReadChannel
	binary := wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	base64 := wsstream.ChannelProtocolConfig{Binary: false, Channels: channels}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"":                                      binary,
		wsstream.ChannelWebSocketProtocol:       binary,
		wsstream.Base64ChannelWebSocketProtocol: base64,
		v4BinaryProtocol:                        binary,
		v4Base64Protocol:                        base64,
		rcproto.StreamProtocolV5Name:            binary,
	})
	conn.SetIdleTimeout(s.cfg.StreamIdleTimeout)
	hw := watchHijack(w)
	protocol, streams, err := conn.Open(hw, r)
	if err != nil {
		s.log.Info("cannot upgrade to a WebSocket", "path", r.URL.Path, "err", err)
		return nil
	}
	// An empty message on the lowest writable channel tells the client the
	// connection is up, as upstream's kubelet does.
	switch {
	case opts.stdout:
		_, _ = streams[wsStdout].Write(nil)
	case opts.stderr:
		_, _ = streams[wsStderr].Write(nil)
	default:
		_, _ = streams[wsError].Write(nil)
	}
	sess := &session{
		errors:     streams[wsError],
		jsonStatus: protocol == v4BinaryProtocol || protocol == v4Base64Protocol || protocol == rcproto.StreamProtocolV5Name,
		gone:       hw.gone(),
		close:      func() { _ = conn.Close() },
	}
	if opts.stdin {
		sess.stdin = streams[wsStdin]
	}
	if opts.stdout {
		sess.stdout = streams[wsStdout]
	}
	if opts.stderr {
		sess.stderr = streams[wsStderr]
	}
	if opts.tty {
		sess.resize = streams[wsResize]
	}
	return sess
}

// channelIf is t when on, else a channel that is ignored.
func channelIf(on bool, t wsstream.ChannelType) wsstream.ChannelType {
	if on {
		return t
	}
	return wsstream.IgnoreChannel
}
