package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// t0 is an arbitrary fixed start for fake clocks.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func mustEnsure(t *testing.T, cfg PKIConfig) *PKI {
	t.Helper()
	p, err := EnsurePKI(cfg)
	if err != nil {
		t.Fatalf("EnsurePKI: %v", err)
	}
	return p
}

func TestEnsurePKIFirstCall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: dir, Hosts: []string{"Node-A.example.com", "10.0.0.7", "localhost"}, Clock: clk})

	modes := map[string]fs.FileMode{}
	for _, name := range pkiFiles {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		modes[name] = fi.Mode().Perm()
	}
	wantModes := map[string]fs.FileMode{
		CACertFile: 0o644, CAKeyFile: 0o600,
		ServingCertFile: 0o644, ServingKeyFile: 0o600,
		AdminCertFile: 0o644, AdminKeyFile: 0o600,
		KubeletClientCertFile: 0o644, KubeletClientKeyFile: 0o600,
	}
	if diff := cmp.Diff(wantModes, modes); diff != "" {
		t.Errorf("file modes (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(pkiFiles) {
		t.Errorf("dir holds %d entries, want the %d files and no temporaries", len(entries), len(pkiFiles))
	}

	if !bytes.Equal(p.CAPEM(), readFile(t, dir, CACertFile)) {
		t.Error("CAPEM differs from ca.crt")
	}
	ca := parseCert(t, p.CAPEM())
	if !ca.IsCA || ca.NotAfter.Sub(t0) < 9*365*24*time.Hour {
		t.Errorf("CA: IsCA=%v NotAfter=%v; want a CA valid about ten years", ca.IsCA, ca.NotAfter)
	}
	if _, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("CA key is %T, want ECDSA", ca.PublicKey)
	}

	serving := parseCert(t, readFile(t, dir, ServingCertFile))
	type names struct {
		DNS []string
		IPs []string
	}
	got := names{DNS: serving.DNSNames}
	for _, ip := range serving.IPAddresses {
		got.IPs = append(got.IPs, ip.String())
	}
	want := names{DNS: []string{"localhost", "node-a.example.com"}, IPs: []string{"127.0.0.1", "::1", "10.0.0.7"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("serving SANs (-want +got):\n%s", diff)
	}
	if _, err := serving.Verify(x509.VerifyOptions{Roots: p.CertPool(), DNSName: "node-a.example.com", CurrentTime: t0}); err != nil {
		t.Errorf("serving cert does not verify for its host: %v", err)
	}
	if serving.NotAfter.Sub(t0) < 365*24*time.Hour-time.Minute {
		t.Errorf("serving cert valid until %v, want at least a year", serving.NotAfter)
	}

	admin := parseCert(t, readFile(t, dir, AdminCertFile))
	if admin.Subject.CommonName != "kubernetes-admin" || !cmp.Equal(admin.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("admin subject = %v, want CN=kubernetes-admin O=system:masters", admin.Subject)
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: p.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: t0}); err != nil {
		t.Errorf("admin cert does not verify as a client cert: %v", err)
	}

	kubelet := parseCert(t, readFile(t, dir, KubeletClientCertFile))
	if kubelet.Subject.CommonName != "kube-apiserver-kubelet-client" || !cmp.Equal(kubelet.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("kubelet-client subject = %v, want CN=kube-apiserver-kubelet-client O=system:masters", kubelet.Subject)
	}
	if _, err := kubelet.Verify(x509.VerifyOptions{Roots: p.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: t0}); err != nil {
		t.Errorf("kubelet-client cert does not verify as a client cert: %v", err)
	}
	if _, err := kubelet.Verify(x509.VerifyOptions{Roots: p.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: t0}); err == nil {
		t.Error("kubelet-client cert verifies as a serving cert, want client auth only")
	}
	if kubelet.NotAfter.Sub(t0) < LeafValidity-time.Minute {
		t.Errorf("kubelet-client cert valid until %v, want LeafValidity", kubelet.NotAfter)
	}
	pair, ok := p.KubeletClientCertificate()
	if !ok || pair.Leaf == nil || !bytes.Equal(pair.Leaf.Raw, kubelet.Raw) {
		t.Fatalf("KubeletClientCertificate = %v, ok %v; want the pair on disk", pair.Leaf, ok)
	}
	// An agent authenticating the pair (as internal/agent/server does)
	// sees the API server as a member of system:masters.
	r := httptest.NewRequest("GET", "https://node/containerLogs/ns/p/c", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{pair.Leaf}}
	user, ok, err := NewX509Authenticator(X509Config{Roots: p.CertPool(), Clock: clk}).Authenticate(r)
	if err != nil || !ok {
		t.Fatalf("authenticating the kubelet-client cert: ok %v, err %v", ok, err)
	}
	if user.Name != KubeletClientUser || !user.InGroup(MastersGroup) {
		t.Errorf("kubelet-client cert authenticates as %+v, want %s in %s", user, KubeletClientUser, MastersGroup)
	}
}

func TestEnsurePKITwiceKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	clk := testingclock.NewFakePassiveClock(t0)
	cfg := PKIConfig{Dir: dir, Hosts: []string{"knode.local"}, Clock: clk}
	first := mustEnsure(t, cfg)
	before := snapshot(t, dir)
	clk.SetTime(t0.Add(24 * time.Hour))
	second := mustEnsure(t, cfg)
	if !bytes.Equal(first.CAPEM(), second.CAPEM()) {
		t.Error("second EnsurePKI returned a different CA")
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("second EnsurePKI changed files (-before +after):\n%s", diff)
	}
}

// pkiFiles are every file EnsurePKI writes.
var pkiFiles = []string{CACertFile, CAKeyFile, ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile, KubeletClientCertFile, KubeletClientKeyFile}

// snapshot maps each PKI file to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range pkiFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			out[name] = "<" + err.Error() + ">"
			continue
		}
		out[name] = string(data)
	}
	return out
}

func TestEnsurePKIReissues(t *testing.T) {
	// Leaves are issued at t0 and expire at t0+LeafValidity.
	expiry := t0.Add(LeafValidity)
	tests := []struct {
		name string
		// hosts for the second call; nil means the same as the first.
		hosts []string
		now   time.Time
		// damage changes the directory before the second call.
		damage func(t *testing.T, dir string)
		// wantChanged lists the files the second call must rewrite; all
		// others must stay byte for byte.
		wantChanged []string
	}{
		{name: "nothing to do", now: t0.Add(time.Hour)},
		{name: "a host removed keeps the cert", hosts: []string{}, now: t0},
		{name: "new host", hosts: []string{"knode.local", "192.168.1.5"}, now: t0,
			wantChanged: []string{ServingCertFile, ServingKeyFile}},
		{name: "just outside the renewal window", now: expiry.Add(-RenewBefore),
			wantChanged: nil},
		{name: "just inside the renewal window", now: expiry.Add(-RenewBefore).Add(time.Second),
			wantChanged: []string{ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile, KubeletClientCertFile, KubeletClientKeyFile}},
		{name: "expired", now: expiry.Add(time.Hour),
			wantChanged: []string{ServingCertFile, ServingKeyFile, AdminCertFile, AdminKeyFile, KubeletClientCertFile, KubeletClientKeyFile}},
		{name: "serving key does not match (crash between writes)", now: t0,
			damage: func(t *testing.T, dir string) {
				key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				keyPEM, _ := encodeKey(key)
				if err := os.WriteFile(filepath.Join(dir, ServingKeyFile), keyPEM, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantChanged: []string{ServingCertFile, ServingKeyFile}},
		{name: "admin cert missing", now: t0,
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, AdminCertFile)); err != nil {
					t.Fatal(err)
				}
			},
			wantChanged: []string{AdminCertFile, AdminKeyFile}},
		{name: "kubelet-client key missing", now: t0,
			damage: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, KubeletClientKeyFile)); err != nil {
					t.Fatal(err)
				}
			},
			wantChanged: []string{KubeletClientCertFile, KubeletClientKeyFile}},
		{name: "kubelet-client cert of another subject", now: t0,
			damage: func(t *testing.T, dir string) {
				p := mustEnsure(t, PKIConfig{Dir: dir, Clock: testingclock.NewFakePassiveClock(t0)})
				certPEM, keyPEM, err := p.IssueClientCert(KubeletClientUser, []string{"system:nodes"}, 0)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, KubeletClientCertFile), certPEM, 0o644)
				os.WriteFile(filepath.Join(dir, KubeletClientKeyFile), keyPEM, 0o600)
			},
			wantChanged: []string{KubeletClientCertFile, KubeletClientKeyFile}},
		{name: "serving cert is garbage", now: t0,
			damage: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, ServingCertFile), []byte("junk"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantChanged: []string{ServingCertFile, ServingKeyFile}},
		{name: "admin cert signed by another CA", now: t0,
			damage: func(t *testing.T, dir string) {
				other := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: testingclock.NewFakePassiveClock(t0)})
				certPEM, keyPEM, err := other.IssueClientCert(AdminUser, []string{MastersGroup}, 0)
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, AdminCertFile), certPEM, 0o644)
				os.WriteFile(filepath.Join(dir, AdminKeyFile), keyPEM, 0o600)
			},
			wantChanged: []string{AdminCertFile, AdminKeyFile}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := testingclock.NewFakePassiveClock(t0)
			mustEnsure(t, PKIConfig{Dir: dir, Hosts: []string{"knode.local"}, Clock: clk})
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			before := snapshot(t, dir)
			clk.SetTime(tc.now)
			hosts := tc.hosts
			if hosts == nil {
				hosts = []string{"knode.local"}
			}
			p := mustEnsure(t, PKIConfig{Dir: dir, Hosts: hosts, Clock: clk})
			after := snapshot(t, dir)

			var changed []string
			for _, name := range pkiFiles {
				if before[name] != after[name] {
					changed = append(changed, name)
				}
			}
			if diff := cmp.Diff(tc.wantChanged, changed); diff != "" {
				t.Errorf("rewritten files (-want +got):\n%s", diff)
			}
			served := p.TLSConfig().Certificates[0].Leaf
			if served == nil || !bytes.Equal(served.Raw, parseCert(t, []byte(after[ServingCertFile])).Raw) {
				t.Error("TLSConfig does not serve the certificate on disk")
			}
			kc, ok := p.KubeletClientCertificate()
			if !ok || kc.Leaf == nil || !bytes.Equal(kc.Leaf.Raw, parseCert(t, []byte(after[KubeletClientCertFile])).Raw) {
				t.Error("KubeletClientCertificate is not the certificate on disk")
			}
		})
	}
}

func TestEnsurePKICAProblems(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		now     time.Time
		wantErr error
		// wantNewCA: the CA is regenerated rather than refused.
		wantNewCA bool
	}{
		{name: "key missing", wantErr: ErrCAUnusable,
			damage: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, CAKeyFile)) }},
		{name: "key of another CA", wantErr: ErrCAUnusable,
			damage: func(t *testing.T, dir string) {
				key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
				keyPEM, _ := encodeKey(key)
				os.WriteFile(filepath.Join(dir, CAKeyFile), keyPEM, 0o600)
			}},
		{name: "certificate is not PEM", wantErr: ErrCAUnusable,
			damage: func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, CACertFile), []byte("x"), 0o644) }},
		{name: "expired", now: t0.Add(CAValidity + time.Hour), wantErr: ErrCAUnusable},
		{name: "certificate missing (crash before it was written)", wantNewCA: true,
			damage: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, CACertFile)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := testingclock.NewFakePassiveClock(t0)
			first := mustEnsure(t, PKIConfig{Dir: dir, Clock: clk})
			if tc.damage != nil {
				tc.damage(t, dir)
			}
			if !tc.now.IsZero() {
				clk.SetTime(tc.now)
			}
			p, err := EnsurePKI(PKIConfig{Dir: dir, Clock: clk})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantNewCA {
				if bytes.Equal(p.CAPEM(), first.CAPEM()) {
					t.Error("CA kept, want a new one")
				}
				// Leaves of the lost CA are replaced.
				admin := parseCert(t, readFile(t, dir, AdminCertFile))
				if err := admin.CheckSignatureFrom(parseCert(t, p.CAPEM())); err != nil {
					t.Errorf("admin cert not reissued under the new CA: %v", err)
				}
			}
		})
	}
}

func TestEnsurePKIBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     PKIConfig
		wantErr string
	}{
		{name: "no dir", cfg: PKIConfig{}, wantErr: "dir: Required value"},
		{name: "bad host", cfg: PKIConfig{Dir: "x", Hosts: []string{"ok", "under_score!"}}, wantErr: `hosts[1]: Invalid value: "under_score!"`},
		{name: "empty host", cfg: PKIConfig{Dir: "x", Hosts: []string{""}}, wantErr: `hosts[0]: Invalid value: ""`},
		{name: "zoned IP", cfg: PKIConfig{Dir: "x", Hosts: []string{"fe80::1%eth0"}}, wantErr: `hosts[0]: Invalid value: "fe80::1%eth0": an IP address in a certificate cannot carry a zone`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EnsurePKI(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestServingNames(t *testing.T) {
	tests := []struct {
		name    string
		hosts   []string
		wantDNS []string
		wantIPs []string
	}{
		{name: "none", wantDNS: []string{"localhost"}, wantIPs: []string{"127.0.0.1", "::1"}},
		{name: "duplicates and case", hosts: []string{"LOCALHOST", "127.0.0.1", "::ffff:127.0.0.1", "a.b", "A.B"},
			wantDNS: []string{"localhost", "a.b"}, wantIPs: []string{"127.0.0.1", "::1"}},
		{name: "wildcard and v6", hosts: []string{"*.nodes.example", "2001:db8::1"},
			wantDNS: []string{"localhost", "*.nodes.example"}, wantIPs: []string{"127.0.0.1", "::1", "2001:db8::1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dns, ips, err := servingNames(tc.hosts)
			if err != nil {
				t.Fatal(err)
			}
			var gotIPs []string
			for _, ip := range ips {
				gotIPs = append(gotIPs, ip.String())
			}
			if diff := cmp.Diff(tc.wantDNS, dns); diff != "" {
				t.Errorf("DNS (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantIPs, gotIPs); diff != "" {
				t.Errorf("IPs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadPKI(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadPKI(PKIConfig{Dir: dir}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadPKI of an empty dir: err = %v, want fs.ErrNotExist", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("LoadPKI wrote %d files", len(entries))
	}
	clk := testingclock.NewFakePassiveClock(t0)
	want := mustEnsure(t, PKIConfig{Dir: dir, Clock: clk})
	before := snapshot(t, dir)
	// Inside the renewal window LoadPKI still loads and rewrites nothing.
	clk.SetTime(t0.Add(LeafValidity - time.Hour))
	got, err := LoadPKI(PKIConfig{Dir: dir, Hosts: []string{"new.host"}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want.CAPEM(), got.CAPEM()) {
		t.Error("LoadPKI returned a different CA")
	}
	if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
		t.Errorf("LoadPKI changed files:\n%s", diff)
	}
	clk.SetTime(t0.Add(LeafValidity + time.Hour))
	if _, err := LoadPKI(PKIConfig{Dir: dir, Clock: clk}); err == nil || !strings.Contains(err.Error(), "expires") {
		t.Errorf("LoadPKI with expired leaves: err = %v, want an expiry error", err)
	}
}

func TestLoadPKIWithoutKubeletClient(t *testing.T) {
	// A data directory made before the kubelet-client pair existed still
	// loads (for `knode kubeconfig`); EnsurePKI then adds the pair and
	// leaves everything else alone.
	dir := t.TempDir()
	clk := testingclock.NewFakePassiveClock(t0)
	mustEnsure(t, PKIConfig{Dir: dir, Clock: clk})
	for _, name := range []string{KubeletClientCertFile, KubeletClientKeyFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := LoadPKI(PKIConfig{Dir: dir, Clock: clk})
	if err != nil {
		t.Fatalf("LoadPKI without the kubelet-client pair: %v", err)
	}
	if _, ok := loaded.KubeletClientCertificate(); ok {
		t.Error("KubeletClientCertificate ok without the pair on disk")
	}
	before := snapshot(t, dir)
	p := mustEnsure(t, PKIConfig{Dir: dir, Clock: clk})
	if _, ok := p.KubeletClientCertificate(); !ok {
		t.Error("EnsurePKI did not create the kubelet-client pair")
	}
	after := snapshot(t, dir)
	var changed []string
	for _, name := range pkiFiles {
		if before[name] != after[name] {
			changed = append(changed, name)
		}
	}
	if diff := cmp.Diff([]string{KubeletClientCertFile, KubeletClientKeyFile}, changed); diff != "" {
		t.Errorf("rewritten files (-want +got):\n%s", diff)
	}

	// A pair that is there but unusable is an error, as for admin.
	if err := os.WriteFile(filepath.Join(dir, KubeletClientCertFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPKI(PKIConfig{Dir: dir, Clock: clk}); err == nil || !strings.Contains(err.Error(), KubeletClientCertFile) {
		t.Errorf("LoadPKI with a garbage kubelet-client cert: err = %v, want an error naming %s", err, KubeletClientCertFile)
	}
}

func TestLoadForeignCAKeyFormats(t *testing.T) {
	// A CA made elsewhere with an SEC 1 "EC PRIVATE KEY" is usable.
	dir := t.TempDir()
	certPEM, keyPEM, err := newCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, CACertFile), certPEM, 0o644)
	os.WriteFile(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
	p := mustEnsure(t, PKIConfig{Dir: dir, Clock: testingclock.NewFakePassiveClock(t0)})
	if !bytes.Equal(p.CAPEM(), certPEM) {
		t.Error("CA replaced")
	}
}

func TestIssueClientCert(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	ca := parseCert(t, p.CAPEM())
	tests := []struct {
		name         string
		user         string
		groups       []string
		ttl          time.Duration
		wantNotAfter time.Time
		wantErr      string
	}{
		{name: "node", user: "system:node:n1", groups: []string{"system:nodes"}, ttl: time.Hour, wantNotAfter: t0.Add(time.Hour)},
		{name: "default ttl", user: "u", wantNotAfter: t0.Add(LeafValidity)},
		{name: "capped at the CA", user: "u", ttl: 2 * CAValidity, wantNotAfter: ca.NotAfter},
		{name: "no user", wantErr: "user: Required value"},
		{name: "empty group", user: "u", groups: []string{"a", ""}, wantErr: `groups[1]: Invalid value: "": must not be empty`},
		{name: "negative ttl", user: "u", ttl: -time.Second, wantErr: `ttl: Invalid value: "-1s"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, keyPEM, err := p.IssueClientCert(tc.user, tc.groups, tc.ttl)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parsePrivateKey(keyPEM); err != nil {
				t.Fatal(err)
			}
			c := parseCert(t, certPEM)
			if diff := cmp.Diff(tc.user, c.Subject.CommonName); diff != "" {
				t.Error(diff)
			}
			if diff := cmp.Diff(tc.groups, c.Subject.Organization); diff != "" {
				t.Error(diff)
			}
			if !c.NotAfter.Equal(tc.wantNotAfter) {
				t.Errorf("NotAfter = %v, want %v", c.NotAfter, tc.wantNotAfter)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: p.CertPool(), CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("issued cert does not verify: %v", err)
			}
			if len(c.DNSNames)+len(c.IPAddresses) != 0 {
				t.Errorf("client cert carries SANs %v %v", c.DNSNames, c.IPAddresses)
			}
		})
	}
}

func TestSignCSR(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	ca := parseCert(t, p.CAPEM())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:n1", Organization: []string{NodesGroup}},
		DNSNames:    []string{"n1"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.5")},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	forged := *req
	forged.Signature = bytes.Clone(req.Signature)
	forged.Signature[len(forged.Signature)-1] ^= 0xff

	tests := []struct {
		name         string
		req          *x509.CertificateRequest
		ttl          time.Duration
		wantNotAfter time.Time
		wantErr      string
	}{
		{name: "an hour", req: req, ttl: time.Hour, wantNotAfter: t0.Add(time.Hour)},
		{name: "default ttl", req: req, wantNotAfter: t0.Add(LeafValidity)},
		{name: "capped at the CA", req: req, ttl: 2 * CAValidity, wantNotAfter: ca.NotAfter},
		{name: "no request", wantErr: "req: Required value"},
		{name: "negative ttl", req: req, ttl: -time.Second, wantErr: `ttl: Invalid value: "-1s"`},
		{name: "forged signature", req: &forged, ttl: time.Hour, wantErr: "certificate request signature"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			certPEM, err := p.SignCSR(tc.req, x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, tc.ttl)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := parseCert(t, certPEM)
			if !c.NotAfter.Equal(tc.wantNotAfter) || !c.NotBefore.Equal(t0.Add(-backdate)) {
				t.Errorf("validity %v to %v, want %v to %v", c.NotBefore, c.NotAfter, t0.Add(-backdate), tc.wantNotAfter)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: p.CertPool(), CurrentTime: t0, DNSName: "n1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("issued cert does not verify: %v", err)
			}
			if c.Subject.CommonName != "system:node:n1" || !slices.Equal(c.Subject.Organization, []string{NodesGroup}) || c.IsCA ||
				c.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment || MissingName(c, nil, []net.IP{net.ParseIP("10.0.0.5")}) != nil {
				t.Errorf("certificate: %v CA=%v usage=%b IPs=%v", c.Subject, c.IsCA, c.KeyUsage, c.IPAddresses)
			}
			if !key.PublicKey.Equal(c.PublicKey) {
				t.Error("certificate is not for the request's key")
			}
		})
	}
}

// TestEnsurePeerPair: the peer pair serves and authenticates (both usages),
// names the hosts, is kept on the next call, and the serving chain carries
// the CA for joining servers to pin.
func TestEnsurePeerPair(t *testing.T) {
	dir := t.TempDir()
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: dir, Clock: clk})
	certFile, keyFile, err := p.EnsurePeerPair(dir, []string{"10.1.2.3", "peer.example"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: p.CertPool(), CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{u}, DNSName: "peer.example"}
		if _, err := pair.Leaf.Verify(opts); err != nil {
			t.Errorf("usage %v: %v", u, err)
		}
	}
	if err := MissingName(pair.Leaf, []string{"localhost"}, []net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("127.0.0.1")}); err != nil {
		t.Error(err)
	}
	before := readFile(t, dir, EtcdPeerCertFile)
	if _, _, err := p.EnsurePeerPair(dir, []string{"10.1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, readFile(t, dir, EtcdPeerCertFile)) {
		t.Error("a usable peer pair was reissued")
	}
	if _, _, err := p.EnsurePeerPair(dir, []string{"10.9.9.9"}); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, readFile(t, dir, EtcdPeerCertFile)) {
		t.Error("a peer pair lacking a wanted address was kept")
	}
	chain := p.TLSConfig().Certificates[0].Certificate
	if len(chain) != 2 || !bytes.Equal(chain[1], p.caCert.Raw) {
		t.Errorf("serving chain has %d certificates, want the leaf and the CA", len(chain))
	}
}
