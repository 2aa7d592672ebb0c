// Package cni writes the node's pod network as a CNI network config list,
// the way upstream's kubenet gave pods a network from the node's pod CIDRs.
//
// What it owns: one file, by default 10-knode.conflist, in the container
// runtime's CNI config directory (containerd's conf_dir, the kubelet's
// historical --cni-conf-dir, /etc/cni/net.d). The file names a bridge
// (cni0) that the node's pods are attached to by veth pairs, with the
// bridge as their gateway, addresses handed out by host-local from
// spec.podCIDRs (one range set per CIDR: IPv4, IPv6 or both) and a default
// route per family, followed by portmap for hostPort (capability
// portMappings, snat). Render is the pure part; Writer puts its output on
// disk when the node's pod CIDRs are known and differ from the file.
//
// Versions: the list declares cniVersion 1.0.0, which Debian's
// containernetworking-plugins 1.1.1 (spec 0.1.0 to 1.0.0) and containerd
// 1.6 (libcni with spec 1.0.0 results) both accept. No loopback config is
// written: containerd's CRI plugin brings up lo in every pod itself, with a
// built-in "cni-loopback" network that only needs the loopback binary in
// its bin_dir (Debian's /usr/lib/cni/loopback). A 99-loopback.conf would in
// fact be harmful: containerd loads only the first file of its conf_dir in
// lexical order (max_conf_num = 1), so the caller must keep this file the
// first one there.
//
// What the caller must do: give Writer.Sync the agent's view of its Node
// whenever it changes, and report the runtime's network as not ready
// (ReasonNotReady, MessageNotReady) while Writer.Ready is false. The CNI
// plugins and containerd must be installed; this package neither checks
// nor runs them.
//
// What it does not do: it never calls a plugin, never touches iptables,
// sysctls or links (the plugins do, when the runtime calls them), and it
// does not remove the file when the node's pod CIDRs are cleared: pods that
// run keep their addresses, and containerd keeps a network to tear them
// down with. Remove is for the agent's own teardown.
package cni
