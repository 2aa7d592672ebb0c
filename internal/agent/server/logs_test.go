package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/server"
	"knode/internal/auth"
)

// fakeLogs serves two runs of default/web/main: 0.log (previous) and
// 1.log (current), the current one live while live is set.
type fakeLogs struct {
	dir  string
	live atomic.Bool
}

func (f *fakeLogs) ContainerLog(namespace, pod, container string, previous bool) (server.LogFile, error) {
	switch {
	case namespace != "default" || pod != "web":
		return server.LogFile{}, fmt.Errorf("%w: pod %q does not exist", server.ErrLogNotFound, pod)
	case container == "init":
		return server.LogFile{}, fmt.Errorf("%w: container %q in pod %q is waiting to start: PodInitializing", server.ErrLogUnavailable, container, pod)
	case container == "cri":
		return server.LogFile{Path: filepath.Join(f.dir, "cri.log"), Live: f.live.Load, CRI: true}, nil
	case container != "main":
		return server.LogFile{}, fmt.Errorf("%w: container %q not found in pod %q", server.ErrLogNotFound, container, pod)
	case previous:
		return server.LogFile{Path: filepath.Join(f.dir, "0.log")}, nil
	}
	return server.LogFile{Path: filepath.Join(f.dir, "1.log"), Live: f.live.Load}, nil
}

func writeLog(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestContainerLogs(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	logs := &fakeLogs{dir: t.TempDir()}
	writeLog(t, filepath.Join(logs.dir, "0.log"), "old 1\nold 2\n")
	writeLog(t, filepath.Join(logs.dir, "1.log"), "one\ntwo\nthree\n")
	writeLog(t, filepath.Join(logs.dir, "cri.log"), "2026-03-01T11:59:00Z stdout F one\n"+
		"2026-03-01T11:59:50Z stderr P tw\n2026-03-01T11:59:55Z stderr F o\n2026-03-01T12:00:00Z stdout F three\n")
	cfg := testConfig(t, clk, ca)
	cfg.Logs = logs
	s := mustNew(t, cfg)
	start(t, s)
	roots := selfSignedRoots(t, cfg.CertDir)
	admin := client(t, roots, clk, clientCert(t, ca, "alice", []string{auth.MastersGroup}, 0))
	self := client(t, roots, clk, clientCert(t, ca, auth.NodeUser(nodeName), []string{auth.NodesGroup}, 0))

	for _, tc := range []struct {
		name, query string
		c           *http.Client
		path        string // default /containerLogs/default/web/main
		wantCode    int
		wantBody    string // the whole body for 200, a substring otherwise
	}{
		{name: "all", wantCode: 200, wantBody: "one\ntwo\nthree\n"},
		{name: "tail", query: "tailLines=2", wantCode: 200, wantBody: "two\nthree\n"},
		{name: "tail zero", query: "tailLines=0", wantCode: 200, wantBody: ""},
		{name: "tail more than there is", query: "tailLines=10", wantCode: 200, wantBody: "one\ntwo\nthree\n"},
		{name: "limit", query: "limitBytes=6", wantCode: 200, wantBody: "one\ntw"},
		{name: "tail and limit", query: "tailLines=1&limitBytes=3", wantCode: 200, wantBody: "thr"},
		{name: "previous", query: "previous=true", wantCode: 200, wantBody: "old 1\nold 2\n"},
		{name: "follow of a run that ended", query: "follow=true", wantCode: 200, wantBody: "one\ntwo\nthree\n"},
		{name: "no such pod", path: "/containerLogs/default/db/main", wantCode: 404, wantBody: `pod \"db\" does not exist`},
		{name: "no such container", path: "/containerLogs/default/web/side", wantCode: 404, wantBody: `container \"side\" not found in pod \"web\"`},
		{name: "not started", path: "/containerLogs/default/web/init", wantCode: 400, wantBody: "is waiting to start: PodInitializing"},
		{name: "short path", path: "/containerLogs/default/web", wantCode: 400, wantBody: "want /containerLogs/"},
		{name: "timestamps", query: "timestamps=true", wantCode: 400, wantBody: "timestamps, sinceSeconds and sinceTime: the process runtime's log files keep no time"},
		{name: "CRI log", path: "/containerLogs/default/web/cri", wantCode: 200, wantBody: "one\ntwo\nthree\n"},
		{name: "CRI log with timestamps", path: "/containerLogs/default/web/cri", query: "timestamps=true&tailLines=2", wantCode: 200,
			wantBody: "2026-03-01T11:59:50.000000000Z two\n2026-03-01T12:00:00.000000000Z three\n"},
		{name: "CRI log since seconds", path: "/containerLogs/default/web/cri", query: "sinceSeconds=30", wantCode: 200, wantBody: "two\nthree\n"},
		{name: "CRI log since a time", path: "/containerLogs/default/web/cri", query: "sinceTime=2026-03-01T12:00:00Z", wantCode: 200, wantBody: "three\n"},
		{name: "CRI log limited", path: "/containerLogs/default/web/cri", query: "limitBytes=5", wantCode: 200, wantBody: "one\nt"},
		{name: "both sinces", path: "/containerLogs/default/web/cri", query: "sinceSeconds=3&sinceTime=2026-03-01T12:00:00Z", wantCode: 400, wantBody: "at most one"},
		{name: "since", query: "sinceSeconds=10", wantCode: 400, wantBody: "sinceSeconds"},
		{name: "negative tail", query: "tailLines=-1", wantCode: 400, wantBody: `tailLines \"-1\": must be a non-negative integer`},
		{name: "zero limit", query: "limitBytes=0", wantCode: 400, wantBody: `limitBytes \"0\": must be a positive integer`},
		{name: "bad follow", query: "follow=maybe", wantCode: 400, wantBody: `follow \"maybe\"`},
		{name: "the node's own identity", c: self, wantCode: 403, wantBody: "cannot get path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			if c == nil {
				c = admin
			}
			path := tc.path
			if path == "" {
				path = "/containerLogs/default/web/main"
			}
			if tc.query != "" {
				path += "?" + tc.query
			}
			r := do(t, c, "GET", url(s, path))
			if r.code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", r.code, tc.wantCode, r.body)
			}
			if tc.wantCode == 200 && string(r.body) != tc.wantBody {
				t.Errorf("body %q, want %q", r.body, tc.wantBody)
			}
			if tc.wantCode != 200 && !strings.Contains(string(r.body), tc.wantBody) {
				t.Errorf("body %s, want it to hold %q", r.body, tc.wantBody)
			}
		})
	}
}

// TestContainerLogsFollow: a followed log streams what the run writes, read
// on every tick of the clock, and ends after the run ends.
func TestContainerLogsFollow(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	logs := &fakeLogs{dir: t.TempDir()}
	logs.live.Store(true)
	current := filepath.Join(logs.dir, "1.log")
	writeLog(t, current, "one\n")
	cfg := testConfig(t, clk, ca)
	cfg.Logs = logs
	s := mustNew(t, cfg)
	start(t, s)
	admin := client(t, selfSignedRoots(t, cfg.CertDir), clk, clientCert(t, ca, "alice", []string{auth.MastersGroup}, 0))
	resp, err := admin.Get(url(s, "/containerLogs/default/web/main?follow=true"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 10)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended early")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line within 10s")
		}
		return ""
	}
	if got := next(); got != "one" {
		t.Fatalf("first line %q, want one", got)
	}
	// The handler waits on the clock's ticker before reading again.
	waitTicker := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the follow loop never waited on the clock")
			}
			runtime.Gosched()
		}
	}
	f, err := os.OpenFile(current, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitTicker()
	fmt.Fprintln(f, "two")
	clk.Step(server.DefaultFollowPeriod)
	if got := next(); got != "two" {
		t.Fatalf("second line %q, want two", got)
	}
	fmt.Fprintln(f, "three")
	logs.live.Store(false)
	waitTicker()
	clk.Step(server.DefaultFollowPeriod)
	if got := next(); got != "three" {
		t.Fatalf("last line %q, want three", got)
	}
	wg.Wait()
	if l, ok := <-lines; ok {
		t.Errorf("a line after the run ended: %q", l)
	}
}

// TestPods: /pods lists the agent's pods as a v1 PodList, for admins only.
func TestPods(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)
	cfg.Pods = func() []*corev1.Pod {
		return []*corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "dns"}},
		}
	}
	s := mustNew(t, cfg)
	start(t, s)
	roots := selfSignedRoots(t, cfg.CertDir)
	admin := client(t, roots, clk, clientCert(t, ca, "alice", []string{auth.MastersGroup}, 0))
	self := client(t, roots, clk, clientCert(t, ca, auth.NodeUser(nodeName), []string{auth.NodesGroup}, 0))

	r := do(t, admin, "GET", url(s, "/pods"))
	if r.code != 200 || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /pods: %d %s: %s", r.code, r.header.Get("Content-Type"), r.body)
	}
	var list corev1.PodList
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || strings.Join(names, " ") != "default/web kube-system/dns" {
		t.Errorf("GET /pods = %s %s %v, want a v1 PodList of default/web and kube-system/dns", list.APIVersion, list.Kind, names)
	}
	if r := do(t, self, "GET", url(s, "/pods")); r.code != 403 {
		t.Errorf("the node's own identity: %d, want 403", r.code)
	}
	if r := do(t, admin, "POST", url(s, "/pods")); r.code != 405 {
		t.Errorf("POST /pods: %d, want 405", r.code)
	}
}
