package server

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestWantedNames(t *testing.T) {
	for _, tc := range []struct {
		name               string
		nodeName, hostname string
		extra              []net.IP
		wantDNS, wantIPs   []string
	}{
		{
			name: "node, host and extra", nodeName: "n1", hostname: "Host-A.example.com",
			extra:   []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("fd00::7")},
			wantDNS: []string{"n1", "localhost", "host-a.example.com"},
			wantIPs: []string{"127.0.0.1", "::1", "10.0.0.7", "fd00::7"},
		},
		{
			name: "duplicates dropped", nodeName: "localhost", hostname: "localhost",
			extra:   []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::ffff:127.0.0.1"), net.ParseIP("::1")},
			wantDNS: []string{"localhost"},
			wantIPs: []string{"127.0.0.1", "::1"},
		},
		{
			name: "hostname that is not a DNS name left out", nodeName: "n1", hostname: "bad_host",
			wantDNS: []string{"n1", "localhost"},
			wantIPs: []string{"127.0.0.1", "::1"},
		},
		{
			name: "no hostname", nodeName: "n1",
			wantDNS: []string{"n1", "localhost"},
			wantIPs: []string{"127.0.0.1", "::1"},
		},
		{
			name: "node named by an IP address", nodeName: "10.0.0.9",
			wantDNS: []string{"10.0.0.9", "localhost"},
			wantIPs: []string{"10.0.0.9", "127.0.0.1", "::1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wantedNames(tc.nodeName, tc.hostname, tc.extra)
			var ips []string
			for _, ip := range got.ips {
				ips = append(ips, ip.String())
			}
			if diff := cmp.Diff(tc.wantDNS, got.dns); diff != "" {
				t.Errorf("DNS names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantIPs, ips); diff != "" {
				t.Errorf("IP addresses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelfSignedProblem(t *testing.T) {
	want := wantedNames("n1", "", []net.IP{net.ParseIP("10.0.0.7")})
	notBefore, notAfter := t0, t0.Add(SelfSignedValidity)
	good := func() *x509.Certificate {
		return &x509.Certificate{
			NotBefore:   notBefore,
			NotAfter:    notAfter,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    []string{"n1", "localhost", "extra.example.com"},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP("10.0.0.7")},
		}
	}
	for _, tc := range []struct {
		name    string
		change  func(*x509.Certificate)
		now     time.Time
		wantErr bool
	}{
		{name: "fresh", now: t0},
		{name: "exactly at the renewal window", now: notAfter.Add(-SelfSignedRenewBefore)},
		{name: "just inside the renewal window", now: notAfter.Add(-SelfSignedRenewBefore + time.Nanosecond), wantErr: true},
		{name: "exactly at expiry", now: notAfter, wantErr: true},
		{name: "after expiry", now: notAfter.Add(time.Hour), wantErr: true},
		{name: "exactly at not-before", now: notBefore},
		{name: "before not-before", now: notBefore.Add(-time.Nanosecond), wantErr: true},
		{name: "no extended usage", now: t0, change: func(c *x509.Certificate) { c.ExtKeyUsage = nil }},
		{name: "client usage only", now: t0, change: func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }, wantErr: true},
		{name: "lacks the node name", now: t0, change: func(c *x509.Certificate) { c.DNSNames = []string{"localhost"} }, wantErr: true},
		{name: "lacks an extra IP", now: t0, change: func(c *x509.Certificate) { c.IPAddresses = c.IPAddresses[:2] }, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			if tc.change != nil {
				tc.change(c)
			}
			err := selfSignedProblem(c, want, tc.now)
			if (err != nil) != tc.wantErr {
				t.Errorf("selfSignedProblem = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestEnsureSelfSignedReplacesUnusableFiles(t *testing.T) {
	names := wantedNames("n1", "", nil)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{name: "missing", setup: func(*testing.T, string) {}},
		{name: "garbage", setup: func(t *testing.T, dir string) {
			writeTestFile(t, filepath.Join(dir, CertFile), "junk")
			writeTestFile(t, filepath.Join(dir, KeyFile), "junk")
		}},
		{name: "key of another pair", setup: func(t *testing.T, dir string) {
			certPEM, _, err := newSelfSigned("n1", names, t0)
			if err != nil {
				t.Fatal(err)
			}
			_, keyPEM, err := newSelfSigned("n1", names, t0)
			if err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, filepath.Join(dir, CertFile), string(certPEM))
			writeTestFile(t, filepath.Join(dir, KeyFile), string(keyPEM))
		}},
		{name: "names changed", setup: func(t *testing.T, dir string) {
			certPEM, keyPEM, err := newSelfSigned("old", wantedNames("old", "", nil), t0)
			if err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, filepath.Join(dir, CertFile), string(certPEM))
			writeTestFile(t, filepath.Join(dir, KeyFile), string(keyPEM))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			pair, why, err := ensureSelfSigned(dir, "n1", names, t0)
			if err != nil {
				t.Fatal(err)
			}
			if why == "" {
				t.Error("reason for regenerating is empty")
			}
			if err := selfSignedProblem(pair.Leaf, names, t0); err != nil {
				t.Errorf("generated certificate: %v", err)
			}
			if _, err := loadPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)); err != nil {
				t.Errorf("files left on disk do not load: %v", err)
			}
			_, why, err = ensureSelfSigned(dir, "n1", names, t0)
			if err != nil || why != "" {
				t.Errorf("second call: reason %q, err %v; want the pair kept", why, err)
			}
		})
	}
}

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
