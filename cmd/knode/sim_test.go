package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"knode/internal/sim/timeline"
)

// TestSimRun runs `knode sim run` on a small scenario and reads what it
// wrote.
func TestSimRun(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"sim", "run", "../../internal/sim/testdata/stop-start.txt", "--out", out, "--seed", "3", "--workers", "2"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(out, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(csv), "\n"); first != timeline.Header {
		t.Fatalf("timeline.csv starts %q, want %q", first, timeline.Header)
	}
	rows, err := timeline.ReadCSV(bytes.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	// 6 minutes sampled every 10 s, from 0 to 360 s, for zones a and b.
	if len(rows) != 37*2 || rows[len(rows)-1].TimeS != 360 {
		t.Fatalf("timeline has %d rows ending at %d s, want 74 ending at 360 s", len(rows), rows[len(rows)-1].TimeS)
	}
	svg, err := os.ReadFile(filepath.Join(out, "timeline.svg"))
	if err != nil || !bytes.Contains(svg, []byte("<svg")) {
		t.Fatalf("timeline.svg: %v, %d bytes", err, len(svg))
	}
	for _, want := range []string{"6m0s of virtual time", "(seed 3)", "zone a: 4 nodes", "zone b: 2 nodes", "wrote " + filepath.Join(out, "timeline.csv")} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestSimRunNeedsOut(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"sim", "run", "../../internal/sim/testdata/stop-start.txt"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--out is required") {
		t.Fatalf("err = %v, want --out is required", err)
	}
}

func TestSimRunRejectsNegativeWorkers(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"sim", "run", "../../internal/sim/testdata/stop-start.txt", "--out", t.TempDir(), "--workers", "-1"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--workers=-1: must be 0 or more") {
		t.Fatalf("err = %v, want --workers=-1: must be 0 or more", err)
	}
}

// TestSimRunVolumes runs a scenario whose pods mount volumes: the summary,
// the timeline's volume columns and the plot show them.
func TestSimRunVolumes(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "volumes.txt")
	if err := os.WriteFile(scenario, []byte("nodes 2 zone=a\npods 2 volume\npods 1\nrun 1m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"sim", "run", scenario, "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "zone a: 2 nodes, at most 0 not Ready, none tainted NoExecute, no pod evicted, at most 2 volumes attached, none force-detached, 2 attached at the end, 3 pods running at the end"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
	}
	csv, err := os.ReadFile(filepath.Join(out, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := timeline.ReadCSV(bytes.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	if last := rows[len(rows)-1]; last.VolumesAttached != 2 || last.VolumesForceDetached != 0 {
		t.Errorf("last row %+v, want 2 volumes attached, none force-detached", last)
	}
	svg, err := os.ReadFile(filepath.Join(out, "timeline.svg"))
	if err != nil || !bytes.Contains(svg, []byte("volumes_attached (right axis)")) {
		t.Errorf("timeline.svg does not plot volumes_attached: %v", err)
	}
}

// TestSimRunStatefulSet runs a scenario with a StatefulSet: the summary
// reports its readiness and the timeline counts its ready replicas.
func TestSimRunStatefulSet(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "statefulset.txt")
	if err := os.WriteFile(scenario, []byte("nodes 2 zone=a\nstatefulset db replicas=2 volume\nrun 30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"sim", "run", scenario, "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "\nstatefulset db: ready 2/2 at "; !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), ", never lost readiness\n") {
		t.Errorf("stdout lacks the StatefulSet's line:\n%s", stdout.String())
	}
	csv, err := os.ReadFile(filepath.Join(out, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := timeline.ReadCSV(bytes.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	if last := rows[len(rows)-1]; last.StatefulSetReady != 2 || last.Pods != 2 || last.PodsTerminating != 0 {
		t.Errorf("last row %+v, want 2 replicas ready, 2 pods, none terminating", last)
	}
}

func TestFleetServers(t *testing.T) {
	tests := []struct {
		name      string
		urls      []string
		wantFirst string
		wantAddrs []string
		wantErr   string
	}{
		{name: "none", urls: nil},
		{name: "one with a port", urls: []string{"https://10.0.0.1:6443"}, wantFirst: "https://10.0.0.1:6443", wantAddrs: []string{"10.0.0.1:6443"}},
		{name: "default port and a slash", urls: []string{"https://a.example/", "https://b.example:6443"},
			wantFirst: "https://a.example:443", wantAddrs: []string{"a.example:443", "b.example:6443"}},
		{name: "IPv6", urls: []string{"https://[fd00::1]:6443"}, wantFirst: "https://[fd00::1]:6443", wantAddrs: []string{"[fd00::1]:6443"}},
		{name: "plain http", urls: []string{"http://10.0.0.1:6443"}, wantErr: `--server "http://10.0.0.1:6443": must be an https:// URL`},
		{name: "host:port without a scheme", urls: []string{"10.0.0.1:6443"}, wantErr: `--server "10.0.0.1:6443": must be an https:// URL`},
		{name: "a path", urls: []string{"https://10.0.0.1:6443", "https://10.0.0.2:6443/api"}, wantErr: `--server "https://10.0.0.2:6443/api"`},
		{name: "no host", urls: []string{"https://:6443"}, wantErr: `--server "https://:6443"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first, addrs, err := fleetServers(tc.urls)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if first != tc.wantFirst || !slices.Equal(addrs, tc.wantAddrs) {
				t.Errorf("fleetServers(%q) = %q, %q; want %q, %q", tc.urls, first, addrs, tc.wantFirst, tc.wantAddrs)
			}
		})
	}
}

// TestSimFleetRejectsPlainHTTPServer: a --server that is not https fails
// before any kubeconfig is read or any agent runs.
func TestSimFleetRejectsPlainHTTPServer(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"sim", "fleet", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--nodes", "1",
		"--server", "https://127.0.0.1:6443", "--server", "http://127.0.0.1:6444"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `--server "http://127.0.0.1:6444": must be an https:// URL`) {
		t.Fatalf("err = %v, want the plain-http --server refused", err)
	}
}
