package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"knode/internal/auth"
	"knode/internal/auth/bootstrap"
	"knode/internal/server/join"
	"knode/internal/storage/etcd"
)

// DefaultEtcdPeerPort is where an embedded cluster member listens for its
// peers, as etcd's default.
const DefaultEtcdPeerPort = 2380

// EtcdCluster configures an embedded etcd that is a member of a cluster of
// servers (--cluster-init, --join) rather than alone.
type EtcdCluster struct {
	// Init starts a new cluster with this server as its first member
	// (--cluster-init).
	Init bool
	// Join is a server of the cluster to join through (--join URL); it
	// needs the cluster's full token.
	Join string
	// PeerPort is the member's peer port on the advertise address
	// (--etcd-peer-port); zero means DefaultEtcdPeerPort.
	PeerPort int
	// Name is the member's name (--etcd-name); empty means the host name
	// and a hash of the peer URL, so that several servers of one machine
	// differ and a server keeps its name across restarts.
	Name string
}

func (c EtcdCluster) enabled() bool { return c.Init || c.Join != "" }

// advertiseAddress is the IP other servers and agents reach this server
// at: --advertise-address, else the bind address unless it is unspecified,
// else the first global unicast address of an interface that is up.
func advertiseAddress(cfg Config) (net.IP, error) {
	if cfg.AdvertiseAddress != "" {
		ip := net.ParseIP(cfg.AdvertiseAddress)
		if ip == nil || ip.IsUnspecified() {
			return nil, fmt.Errorf("--advertise-address %q: must be an IP address other than 0.0.0.0 and ::", cfg.AdvertiseAddress)
		}
		return ip, nil
	}
	if ip := net.ParseIP(cfg.BindAddress); ip != nil && !ip.IsUnspecified() {
		return ip, nil
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("finding an address to advertise: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() {
			return n.IP, nil
		}
	}
	return nil, errors.New("no global unicast address to advertise: set --advertise-address")
}

// memberName is cfg's etcd member name.
func memberName(c EtcdCluster, peerURL string) string {
	if c.Name != "" {
		return c.Name
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "knode"
	}
	sum := sha256.Sum256([]byte(peerURL))
	return host + "-" + hex.EncodeToString(sum[:4])
}

// A joining server tries joinAttempts times, joinRetryPeriod apart, while
// the server it joins through answers that it cannot add the member yet.
const (
	joinAttempts    = 30
	joinRetryPeriod = 2 * time.Second
)

// clusterMember is what openCluster opened.
type clusterMember struct {
	store *etcd.Store
	name  string
}

// openCluster starts the embedded etcd as a cluster member: the first one
// (Init), one that joins through another server (Join, when the data
// directory holds no member yet, or held one the cluster removed), or a
// member restarting on its data. The cluster CA must be in the PKI
// directory before the member starts, since its peer certificate comes
// from it: a first server makes it, a joining one gets it sealed from the
// server it joins through and opens it with its token.
func openCluster(ctx context.Context, cfg Config, advertise net.IP, hosts []string) (*clusterMember, error) {
	c := cfg.EtcdCluster
	if c.PeerPort == 0 {
		c.PeerPort = DefaultEtcdPeerPort
	}
	if c.PeerPort < 0 || c.PeerPort > 65535 {
		return nil, fmt.Errorf("--etcd-peer-port %d: must be between 1 and 65535", c.PeerPort)
	}
	if c.Init && c.Join != "" {
		return nil, errors.New("--cluster-init and --join cannot both be given: the first server inits, the others join")
	}
	peerURL := (&url.URL{Scheme: "https", Host: net.JoinHostPort(advertise.String(), strconv.Itoa(c.PeerPort))}).String()
	name := memberName(c, peerURL)
	if strings.ContainsAny(name, "=,") {
		return nil, fmt.Errorf("--etcd-name %q: must not contain '=' or ','", name)
	}
	pkiDir := filepath.Join(cfg.DataDir, "pki")
	etcdDir := filepath.Join(cfg.DataDir, "etcd")
	hasMember := func() bool {
		_, err := os.Stat(filepath.Join(etcdDir, "member"))
		return err == nil
	}
	initial := map[string]string{name: peerURL}
	existing := false
	if !hasMember() && c.Join != "" {
		var err error
		if initial, err = joinThrough(ctx, cfg, name, peerURL); err != nil {
			return nil, err
		}
		existing = true
	}
	start := func(initial map[string]string, existing bool) (*etcd.Store, error) {
		pki, err := auth.EnsurePKI(auth.PKIConfig{Dir: pkiDir, Hosts: hosts, Clock: cfg.Clock})
		if err != nil {
			return nil, err
		}
		certFile, keyFile, err := pki.EnsurePeerPair(pkiDir, []string{advertise.String()})
		if err != nil {
			return nil, err
		}
		return etcd.NewEmbedded(ctx, etcd.EmbeddedConfig{
			DataDir: etcdDir,
			Name:    name,
			Clock:   cfg.Clock,
			Peer: &etcd.PeerConfig{
				URL:            peerURL,
				CertFile:       certFile,
				KeyFile:        keyFile,
				TrustedCAFile:  filepath.Join(pkiDir, auth.CACertFile),
				InitialCluster: initial,
				Existing:       existing,
			},
		})
	}
	store, err := start(initial, existing)
	if errors.Is(err, etcd.ErrMemberRemoved) && c.Join != "" {
		// The cluster removed this member: keep its data aside and join
		// anew, as a new member with the same name.
		aside := etcdDir + ".removed-" + strconv.FormatInt(cfg.Clock.Now().Unix(), 10)
		cfg.Logger.Warn("the etcd cluster removed this member; moving its data aside and joining again", "data", aside)
		if err := os.Rename(etcdDir, aside); err != nil {
			return nil, fmt.Errorf("moving the removed member's data aside: %w", err)
		}
		if initial, err = joinThrough(ctx, cfg, name, peerURL); err != nil {
			return nil, err
		}
		store, err = start(initial, true)
	}
	if err != nil {
		return nil, err
	}
	cfg.Logger.Info("embedded etcd member started", "name", name, "peerURL", peerURL)
	return &clusterMember{store: store, name: name}, nil
}

// joinThrough asks the server at --join to add this member, writes the
// cluster's CA (opened with the token) into the PKI directory, and returns
// the initial cluster to start the member with.
func joinThrough(ctx context.Context, cfg Config, name, peerURL string) (map[string]string, error) {
	token, ok, err := bootstrap.GivenToken(cfg.Token, cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("--join: %w", err)
	}
	if !ok {
		return nil, errors.New("--join needs the cluster's token (--token-file or --token; `knode token` on a server prints it)")
	}
	// etcd adds a member only when enough of the others have been
	// connected for a while (its strict reconfiguration check), so a
	// server joining right after another waits for it.
	var res join.Result
	for attempt := 1; ; attempt++ {
		res, err = join.Join(ctx, join.Config{URL: cfg.EtcdCluster.Join, Token: token, Name: name, PeerURL: peerURL})
		if err == nil {
			break
		}
		if !errors.Is(err, join.ErrUnavailable) || attempt == joinAttempts {
			return nil, err
		}
		cfg.Logger.Warn("joining the cluster failed; trying again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-cfg.Clock.After(joinRetryPeriod):
		}
	}
	if _, err := bootstrap.Ensure(ctx, bootstrap.Config{
		Store:     join.Envelope(res.Envelope),
		PKIDir:    filepath.Join(cfg.DataDir, "pki"),
		DataDir:   cfg.DataDir,
		Token:     cfg.Token,
		TokenFile: cfg.TokenFile,
		Clock:     cfg.Clock,
	}); err != nil {
		return nil, err
	}
	for _, m := range res.Members.Removed {
		cfg.Logger.Info("the cluster replaced an etcd member with this one", "name", m.Name, "id", m.ID)
	}
	return res.Members.InitialCluster(), nil
}
