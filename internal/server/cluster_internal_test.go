package server

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"k8s.io/utils/clock"
)

func TestAdvertiseAddress(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cfg       Config
		want, err string
	}{
		{"the flag wins", Config{AdvertiseAddress: "10.1.2.3", BindAddress: "127.0.0.1"}, "10.1.2.3", ""},
		{"else the bind address", Config{BindAddress: "192.0.2.9"}, "192.0.2.9", ""},
		{"an unspecified flag is refused", Config{AdvertiseAddress: "0.0.0.0"}, "", "--advertise-address \"0.0.0.0\": must be an IP address other than 0.0.0.0 and ::"},
		{"a name is refused", Config{AdvertiseAddress: "example.com"}, "", "--advertise-address \"example.com\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ip, err := advertiseAddress(tc.cfg)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case ip.String() != tc.want:
				t.Fatalf("got %s, want %s", ip, tc.want)
			}
		})
	}
	// With an unspecified bind address, an address of this host that is
	// not loopback: whatever it is, it must be a global unicast one.
	if ip, err := advertiseAddress(Config{BindAddress: "0.0.0.0"}); err == nil && !ip.IsGlobalUnicast() {
		t.Errorf("picked %s, not a global unicast address", ip)
	}
}

func TestMemberName(t *testing.T) {
	a := memberName(EtcdCluster{}, "https://10.0.0.1:2380")
	if a != memberName(EtcdCluster{}, "https://10.0.0.1:2380") {
		t.Error("the default name is not stable for one peer URL")
	}
	if a == memberName(EtcdCluster{}, "https://10.0.0.1:2381") {
		t.Error("two peer URLs of one host got the same default name")
	}
	if got := memberName(EtcdCluster{Name: "s1"}, "https://10.0.0.1:2380"); got != "s1" {
		t.Errorf("--etcd-name gave %q", got)
	}
}

func TestOpenClusterFlags(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Clock: clock.RealClock{}, Logger: slog.Default()}
	for _, tc := range []struct {
		c    EtcdCluster
		want string
	}{
		{EtcdCluster{Init: true, Join: "https://10.0.0.1:6443"}, "--cluster-init and --join cannot both be given"},
		{EtcdCluster{Init: true, PeerPort: 70000}, "--etcd-peer-port 70000: must be between 1 and 65535"},
		{EtcdCluster{Init: true, Name: "a,b"}, "--etcd-name \"a,b\": must not contain '=' or ','"},
		{EtcdCluster{Join: "https://10.0.0.1:6443"}, "--join needs the cluster's token"},
	} {
		cfg.EtcdCluster = tc.c
		_, err := openCluster(context.Background(), cfg, net.IPv4(10, 0, 0, 1), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}
