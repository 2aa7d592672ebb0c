package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// knodeBinary is the binary under test, built once by TestMain.
var knodeBinary string

const (
	// readyTimeout bounds how long a server may take to answer /readyz.
	readyTimeout = 60 * time.Second
	// stopTimeout bounds a graceful stop before the process is killed.
	stopTimeout = 15 * time.Second
	// commandTimeout bounds one kubectl or python invocation.
	commandTimeout = 90 * time.Second
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	before := rootKubepods()
	code := run(m)
	// Every agent a test starts keeps its cgroups under a root of the
	// test's own (testCgroupRoot): one at the machine's root is a leak.
	if after := rootKubepods(); len(after) > len(before) {
		fmt.Fprintf(os.Stderr, "e2e: the tests left kubepods cgroups at the machine's root: %v (start agents with --cgroup-root testCgroupRoot(t))\n", after)
		code = 1
	}
	os.Exit(code)
}

// rootKubepods lists the kubepods cgroups at the root of the machine's
// hierarchies.
func rootKubepods() []string {
	found, _ := filepath.Glob(filepath.Join(cgroupMount, "*", "kubepods"))
	if st, err := os.Stat(filepath.Join(cgroupMount, "kubepods")); err == nil && st.IsDir() {
		found = append(found, filepath.Join(cgroupMount, "kubepods"))
	}
	return found
}

func run(m *testing.M) int {
	if bin := os.Getenv("KNODE_E2E_BINARY"); bin != "" {
		knodeBinary = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "knode-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	knodeBinary = filepath.Join(dir, "knode")
	start := time.Now()
	build := exec.Command("go", "build", "-o", knodeBinary, "./cmd/knode")
	build.Dir = root
	build.Stdout = os.Stderr
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/knode in %s: %v\n", root, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %s\n", knodeBinary, time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// repoRoot walks up from the working directory to the go.mod of module knode.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module knode")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod for module knode above the working directory")
		}
		dir = parent
	}
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before the server binds; startServer retries in that case.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// syncBuffer is an io.Writer safe for a process's output and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// process is a running knode command whose exit is observed.
type process struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{} // closed once the process has exited
	err    error         // Wait's result; read only after exited is closed
}

func startProcess(t testing.TB, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:    exec.Command(knodeBinary, args...),
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting knode %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to stopTimeout, then kills. It reports
// whether the process exited by itself within the bound.
func (p *process) stop() (graceful bool) {
	if p.hasExited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
// killContainers kills the containers that agents left running under
// rootDir (pods outlive their agent, as with the kubelet): every process
// group named by a pid file of the process runtime.
func killContainers(rootDir string) {
	files, _ := filepath.Glob(filepath.Join(rootDir, "pods", "*", "*", "pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(string(data), "%d", &pid); err == nil && pid > 1 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

func (p *process) kill() {
	if p.hasExited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// server is one `knode server` process on a loopback port.
type server struct {
	DataDir    string
	URL        string
	Port       int
	Kubeconfig string // DataDir/admin.kubeconfig
	CAFile     string // DataDir/pki/ca.crt
	// Home is HOME for kubectl: it keeps kubectl's discovery cache per server.
	Home string
	// StorageDir is the built-in CSI driver's data directory, which the
	// test's agents share.
	StorageDir string

	args []string
	proc *process
}

// serverOptions change how startServer runs `knode server`.
type serverOptions struct {
	// DataDir reuses a data directory (for restarts); empty means a fresh one.
	DataDir string
	// Args are extra flags.
	Args []string
	// Host is the address to serve on; empty means 127.0.0.1.
	Host string
}

// startServer runs `knode server` on a free port, waits until /readyz says
// ok, and stops it when the test ends.
func startServer(t testing.TB, opts serverOptions) *server {
	t.Helper()
	dataDir := opts.DataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	s := &server{
		DataDir:    dataDir,
		Kubeconfig: filepath.Join(dataDir, "admin.kubeconfig"),
		CAFile:     filepath.Join(dataDir, "pki", "ca.crt"),
		Home:       t.TempDir(),
		StorageDir: storageDir(t, opts.Args),
	}
	const attempts = 3
	for i := 1; ; i++ {
		host := opts.Host
		if host == "" {
			host = "127.0.0.1"
		}
		s.Port = freePort(t)
		s.URL = fmt.Sprintf("https://%s:%d", host, s.Port)
		s.args = append([]string{"server", "--data-dir", dataDir, "--bind-address", host,
			"--secure-port", strconv.Itoa(s.Port), "--storage-dir", s.StorageDir}, opts.Args...)
		s.proc = startProcess(t, s.args...)
		proc := s.proc
		t.Cleanup(func() {
			proc.stop()
			if t.Failed() {
				t.Logf("knode %s\n--- server log (tail) ---\n%s", strings.Join(s.args, " "), tail(proc.stderr.String(), 60))
			}
		})
		err := waitReady(s.URL, s.CAFile, proc, readyTimeout)
		if err == nil {
			return s
		}
		if i < attempts && proc.hasExited() && strings.Contains(proc.stderr.String(), "address already in use") {
			continue
		}
		t.Fatalf("knode %s: %v\n--- server log (tail) ---\n%s", strings.Join(s.args, " "), err, tail(proc.stderr.String(), 60))
	}
}

// storageDir is the --storage-dir that args give, or a fresh temporary
// directory: no test may use the machine's default.
func storageDir(t testing.TB, args []string) string {
	for i, a := range args {
		if a == "--storage-dir" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return t.TempDir()
}

// Stop stops the server gracefully and reports whether it exited in time.
func (s *server) Stop() bool { return s.proc.stop() }

// Kill9 kills the server with SIGKILL.
func (s *server) Kill9() { s.proc.kill() }

// Log is what the server has written to stderr so far.
func (s *server) Log() string { return s.proc.stderr.String() }

// waitReady polls url/readyz over HTTPS, trusting only the CA in caFile,
// until it answers 200 "ok". It gives up when proc exits or after timeout.
func waitReady(url, caFile string, proc *process, timeout time.Duration) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var client *http.Client
	lastErr := errors.New("the CA file never appeared")
	for {
		if client == nil {
			if c, err := httpsClient(caFile); err == nil {
				client = c
			} else {
				lastErr = err
			}
		}
		if client != nil {
			status, body, err := get(client, url+"/readyz", "")
			switch {
			case err != nil:
				lastErr = err
			case status == http.StatusOK && strings.TrimSpace(body) == "ok":
				return nil
			default:
				lastErr = fmt.Errorf("/readyz answered %d %q", status, body)
			}
		}
		select {
		case <-proc.exited:
			return fmt.Errorf("exited before it was ready (%v); last: %v", proc.err, lastErr)
		case <-deadline:
			return fmt.Errorf("not ready after %s; last: %v", timeout, lastErr)
		case <-tick.C:
		}
	}
}

// httpsClient trusts only the CA in caFile and presents no credentials.
func httpsClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
	}, nil
}

// get does one GET, with a bearer token when token is not empty.
func get(client *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// RestConfig is the admin client config from the server's kubeconfig.
func (s *server) RestConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatalf("loading %s: %v", s.Kubeconfig, err)
	}
	if cfg.Host != s.URL {
		t.Fatalf("%s names server %q, want %q", s.Kubeconfig, cfg.Host, s.URL)
	}
	cfg.QPS = -1 // no client-side throttling: the tests measure the server
	// Left empty, client-go's typed clients send protobuf, as they do for
	// every user; the variable narrows a failure down to the encoding.
	cfg.ContentType = os.Getenv("KNODE_E2E_CLIENT_CONTENT_TYPE")
	return cfg
}

// Clientset is an admin client-go clientset for the server.
func (s *server) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.RestConfig(t))
	if err != nil {
		t.Fatalf("building a clientset: %v", err)
	}
	return cs
}

// kubectlResult is what one kubectl run printed and how it exited.
type kubectlResult struct {
	Args     []string
	Stdout   string
	Stderr   string
	ExitCode int
}

func (r kubectlResult) String() string {
	return fmt.Sprintf("kubectl %s\nexit code %d\n--- stdout ---\n%s--- stderr ---\n%s",
		strings.Join(r.Args, " "), r.ExitCode, r.Stdout, r.Stderr)
}

func kubectlDir() string {
	if d := os.Getenv("KNODE_E2E_KUBECTL_DIR"); d != "" {
		return d
	}
	return "/usr/lib/google-cloud-sdk/bin"
}

// kubectlPath is where kubectl of the given minor version ("1.30") lives.
func kubectlPath(version string) string {
	return filepath.Join(kubectlDir(), "kubectl."+version)
}

// kubectlCommand builds a kubectl command against s, with a HOME of the
// server's own so discovery caches never cross servers.
func (s *server) kubectlCommand(ctx context.Context, version string, args ...string) *exec.Cmd {
	full := append([]string{"--kubeconfig", s.Kubeconfig}, args...)
	cmd := exec.CommandContext(ctx, kubectlPath(version), full...)
	cmd.Env = append(os.Environ(), "HOME="+s.Home, "KUBECONFIG=")
	return cmd
}

// kubectl runs kubectl of the given version against s and returns what it
// printed. A run that cannot start or times out fails the test.
func (s *server) kubectl(t testing.TB, version string, args ...string) kubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := s.kubectlCommand(ctx, version, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	res := kubectlResult{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		res.ExitCode = exitErr.ExitCode()
	default:
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, res)
	}
	return res
}

// mustKubectl is kubectl that fails the test on a non-zero exit.
func (s *server) mustKubectl(t testing.TB, version string, args ...string) kubectlResult {
	t.Helper()
	res := s.kubectl(t, version, args...)
	if res.ExitCode != 0 {
		t.Fatalf("want exit code 0:\n%s", res)
	}
	return res
}

// collapse joins the whitespace-separated fields of s with single spaces.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}

// tail is the last n lines of s, each cut to 600 bytes (a panic's stack
// is logged on one line).
func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	for i, l := range ls {
		if len(l) > 600 {
			ls[i] = l[:600] + " [...]"
		}
	}
	return strings.Join(ls, "\n")
}

// writeFile writes content into a new file in a test temp dir.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// parseRV reads a resourceVersion as the etcd revision it is.
func parseRV(t testing.TB, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an etcd revision: %v", rv, err)
	}
	return n
}
