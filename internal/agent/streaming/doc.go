// Package streaming is the server side of kubectl exec, attach and
// port-forward: the protocols the kubelet speaks on its /exec, /attach and
// /portForward endpoints, as kubectl 1.27 to 1.33 (client-go
// tools/remotecommand and tools/portforward) use them, either directly or
// through the API server, which passes the upgrade through.
//
// # Protocols
//
// Exec and attach (Server.ServeExec, Server.ServeAttach):
//
//   - SPDY/3.1 with X-Stream-Protocol-Version v5, v4, v3 or v2.channel.k8s.io
//     or channel.k8s.io. The client opens an error stream and the stdin,
//     stdout, stderr and (with a TTY, v3 and later) resize streams it asked
//     for; the server waits Config.StreamCreationTimeout for all of them.
//     v5 is v4 over SPDY.
//   - WebSocket with subprotocol v5.channel.k8s.io (v4 plus the CLOSE
//     signal, by which client-go's WebSocket executor, tried first by
//     kubectl 1.29 and later, ends stdin), v4.channel.k8s.io,
//     v4.base64.channel.k8s.io, channel.k8s.io, base64.channel.k8s.io or
//     none: channels 0-4 are stdin, stdout, stderr, error and resize.
//
// The streams wanted are the query parameters input, output, error and tty
// ("1" for on) and the command is command, repeated, as the API server
// passes them to a kubelet. A request for no stream, for tty with error, or
// (exec) without a command gets 400 with upstream's message, as a JSON
// Status. The outcome goes on the error stream: for v4 and later a
// metav1.Status, Success, or Failure with reason NonZeroExitCode and an
// ExitCode cause for an ExitError (kubectl exits with that code), or an
// InternalError for any other error; for earlier versions the message of a
// failure.
//
// Port-forward (Server.ServePortForward):
//
//   - SPDY/3.1 with portforward.k8s.io: each forwarded connection is a pair
//     of streams (error and data) with the headers port and requestID. A
//     failure is written on the error stream as upstream words it ("error
//     forwarding port P to pod NAME_NAMESPACE, uid U: ..."); a broken pipe
//     or a reset by the target resets both streams instead.
//   - The same SPDY tunnelled through a WebSocket, subprotocol
//     SPDY/3.1+portforward.k8s.io (kubectl 1.31 and later try it first).
//   - WebSocket v4.channel.k8s.io (and its base64 variant, or none) with
//     ?port=N: one connection per port, on channels 2i (data) and 2i+1
//     (error), each beginning with the port in two little-endian bytes.
//
// Over SPDY, port query parameters (which the API server adds for the
// ports asked for) restrict the ports that may be forwarded; upstream
// ignores them there.
//
// # What the caller does
//
// The caller authenticates and authorizes the request, routes it, finds
// the pod and container (the Target) and passes the Executor or
// PortForwarder that reaches them: its runtime's own, or RemoteExecutor and
// RemotePortForwarder for a runtime (a CRI runtime) whose streaming server
// speaks SPDY at a URL. The ResponseWriter must allow hijacking (directly
// or through Unwrap), on HTTP/1.1.
//
// # What is not here
//
// No routing, authentication or authorization, no knowledge of runtimes.
// No streaming-server URLs or tokens: the caller serves the endpoints
// itself. No /run (a command's output in a plain response). Idle timeouts
// of upgraded connections are enforced by the SPDY and WebSocket libraries
// on the real clock; only the stream-creation timeout uses Config.Clock.
package streaming
