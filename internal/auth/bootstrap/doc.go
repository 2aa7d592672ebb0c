// Package bootstrap lets several `knode server` processes that share one
// etcd cluster share one cluster CA, with a cluster token as the only
// secret an operator carries from one server to the next (k3s's model).
//
// What it owns:
//   - The cluster token (token.go): "K10<sha256 of ca.crt>::server:<secret>"
//     in full, or the bare secret. The secret opens the bootstrap data; the
//     hash pins the CA, so a token of one cluster never joins another.
//   - The envelope (envelope.go): the files every server must share, sealed
//     with AES-256-GCM under a key derived from the token's secret.
//   - Ensure (ensure.go): run before auth.EnsurePKI, it makes the PKI
//     directory hold the cluster's shared files. The first server (the one
//     that finds no bootstrap data in etcd) seals its CA, creating one if
//     it has none, and stores it if no other server stored one first; a
//     joining server opens what is stored with its token and writes the
//     files. Either way the full token is left in <data-dir>/token (0600).
//
// What is shared: ca.crt and ca.key, nothing else. Every other file in the
// PKI directory is issued per server by auth.EnsurePKI from the shared CA:
// the serving pair must name each server's own addresses, and the admin
// and kubelet-client pairs are only as good as the CA that signs them, so
// per-server copies are as trusted as shared ones (and one server's leaked
// key need not be every server's). A future cluster-wide secret (a
// service-account signing key) belongs in sharedFiles; the envelope carries
// any set of files, and a joining server writes whatever it holds.
//
// What callers must do: give Ensure a Store on the cluster's etcd (EtcdStore
// for a clientv3.Client), the PKI directory auth.EnsurePKI will use, and,
// on every server but the first, the token (--token or --token-file).
// Only one process at a time may run Ensure and EnsurePKI on a data
// directory.
//
// What it deliberately does not do:
//   - It never replaces a CA already in the PKI directory: a directory whose
//     CA differs from the cluster's is refused (ErrOtherCluster), since every
//     credential it issued would stop working.
//   - It does not rotate the token or the CA, and does not delete the
//     bootstrap key: a new token needs a new cluster.
//   - It does not authenticate agents: the token is for servers, and the
//     stored data is readable by anyone who can read etcd, which is why it
//     is sealed.
//   - It does not retry: an unreachable etcd is an error for the caller.
package bootstrap
