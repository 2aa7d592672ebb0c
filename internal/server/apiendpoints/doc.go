// Package apiendpoints publishes the control plane's servers in the
// default/kubernetes Endpoints, as kube-apiserver's lease endpoint
// reconciler (--endpoint-reconciler-type=lease, its default) does, so that
// agents can learn every server from any one of them.
//
// Each server keeps one etcd key, <KeyPrefix><ip>:<port>, bound to an etcd
// lease of Config.TTL that it refreshes every Config.Interval (upstream's
// 15 s and 10 s). A server whose key has expired, or that removed it on
// graceful shutdown (Remove), is no longer a member. On every pass a
// server writes the Endpoints to list exactly the live keys, so whichever
// server passes last corrects the object; they all write the same value.
//
// The object's shape follows upstream: label
// endpointslice.kubernetes.io/skip-mirror=true, ports named "https" with
// protocol TCP. Upstream assumes one port shared by every server; knode's
// servers may share an IP and differ by port (several servers on one
// machine), so the Endpoints holds one subset per distinct port, each
// with the addresses serving on it. Subsets and Addresses convert between
// the ip:port list and that shape; they are pure, and Addresses also reads
// upstream's one-subset form.
//
// The caller must give an etcd client (the server's own; the keys live
// outside /registry/, so the API never serves them), a client that may
// get, create and update Endpoints in namespace default, and an
// advertised address the v1 Endpoints validation accepts: an IP literal
// that is not unspecified, loopback or link-local. It calls Run in a
// goroutine and, on graceful shutdown, Remove after Run has ended.
//
// What it does not do: the kubernetes Service (knode has no Services),
// EndpointSlices, health checks of the servers (a live key is the only
// signal: a server that holds its key but does not serve stays listed
// until its process stops refreshing), or upstream's master-count
// reconciler.
package apiendpoints
