package exec_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/cloudprovider"
	"knode/internal/cloudprovider/exec"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func newProvider(t *testing.T, cfg exec.Config) *exec.Provider {
	t.Helper()
	p, err := exec.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testNode(name, providerID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rack": "r1"}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
}

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    exec.Config
		wantErr string
	}{
		{
			name: "everything",
			in:   "command: /usr/bin/ask\nargs: [--inventory, /etc/inv.csv]\ntimeout: 3s\nenv:\n  A: b\n",
			want: exec.Config{Command: "/usr/bin/ask", Args: []string{"--inventory", "/etc/inv.csv"}, Timeout: 3 * time.Second, Env: map[string]string{"A": "b"}},
		},
		{name: "json is yaml", in: `{"command": "ask"}`, want: exec.Config{Command: "ask"}},
		{name: "no command", in: "args: [x]\n", wantErr: "command: Required value"},
		{name: "unknown key", in: "command: ask\ncomand: typo\n", wantErr: `error unmarshaling JSON: while decoding JSON: json: unknown field "comand"`},
		{name: "bad timeout", in: "command: ask\ntimeout: soon\n", wantErr: `timeout: Invalid value: "soon": must be a duration such as 10s`},
		{name: "zero timeout", in: "command: ask\ntimeout: 0s\n", wantErr: `timeout: Invalid value: "0s": must be greater than zero`},
		{name: "bad env name", in: "command: ask\nenv:\n  A=B: c\n", wantErr: `env[A=B]: Invalid value: "A=B": must be a non-empty name without '=' or NUL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := exec.ParseConfig([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigResolvesRelativeCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud.yaml")
	if err := os.WriteFile(path, []byte("command: bin/ask\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := exec.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bin/ask"); cfg.Command != want {
		t.Errorf("Command = %q, want %q", cfg.Command, want)
	}
	// A bare name stays a PATH lookup.
	if err := os.WriteFile(path, []byte("command: ask\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := exec.LoadConfig(path); err != nil || cfg.Command != "ask" {
		t.Errorf("bare name: %q, %v", cfg.Command, err)
	}
	if _, err := exec.LoadConfig(filepath.Join(dir, "missing.yaml")); err == nil || !strings.HasPrefix(err.Error(), "cloud-config: open ") {
		t.Errorf("missing file: %v", err)
	}
}

func TestNewNeedsAnExecutable(t *testing.T) {
	_, err := exec.New(exec.Config{Command: filepath.Join(t.TempDir(), "nope")})
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("New = %v, want an error naming the command", err)
	}
}

func TestCallProtocol(t *testing.T) {
	dir := t.TempDir()
	// The command records how it was called, then answers.
	cmd := script(t, dir, "ask", `
out="$RECORD_DIR/$KNODE_QUESTION"
printf '%s\n' "$@" > "$out.args"
printf 'Q=%s N=%s P=%s X=%s\n' "$KNODE_QUESTION" "$KNODE_NODE_NAME" "$KNODE_PROVIDER_ID" "$EXTRA" > "$out.env"
cat > "$out.stdin"
echo "some logging" >&2
case "$3" in
instance-exists) echo '{"exists": true}' ;;
instance-shutdown) echo '{"shutdown": true}' ;;
instance-metadata) cat <<'EOF'
{"providerID": "ipmi://rack1/n1", "instanceType": "r640", "zone": "rack1", "region": "dc-west",
 "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "Hostname", "address": "n1"}],
 "additionalLabels": {"example.com/bmc": "10.1.0.7"}}
EOF
;;
esac
`)
	p := newProvider(t, exec.Config{Command: cmd, Args: []string{"--inventory", "x.csv"}, Env: map[string]string{"RECORD_DIR": dir, "EXTRA": "yes"}})
	ctx := context.Background()
	node := testNode("n1", "ipmi://rack1/n1")

	exists, err := p.InstanceExists(ctx, node)
	if err != nil || !exists {
		t.Fatalf("InstanceExists = %v, %v", exists, err)
	}
	shutdown, err := p.InstanceShutdown(ctx, node)
	if err != nil || !shutdown {
		t.Fatalf("InstanceShutdown = %v, %v", shutdown, err)
	}
	md, err := p.InstanceMetadata(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	wantMD := &cloudprovider.InstanceMetadata{
		ProviderID: "ipmi://rack1/n1", InstanceType: "r640", Zone: "rack1", Region: "dc-west",
		NodeAddresses:    []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: "n1"}},
		AdditionalLabels: map[string]string{"example.com/bmc": "10.1.0.7"},
	}
	if diff := cmp.Diff(wantMD, md); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("instance-exists.args"), "--inventory\nx.csv\ninstance-exists\nn1\n"; got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
	if got, want := read("instance-shutdown.env"), "Q=instance-shutdown N=n1 P=ipmi://rack1/n1 X=yes\n"; got != want {
		t.Errorf("env = %q, want %q", got, want)
	}
	stdin := read("instance-metadata.stdin")
	for _, want := range []string{`"kind":"Node"`, `"apiVersion":"v1"`, `"name":"n1"`, `"rack":"r1"`, `"providerID":"ipmi://rack1/n1"`} {
		if !strings.Contains(stdin, want) {
			t.Errorf("stdin %s lacks %s", stdin, want)
		}
	}
	if node.Kind != "" {
		t.Errorf("the caller's node was changed: kind %q", node.Kind)
	}
}

func TestAnswers(t *testing.T) {
	ctx := context.Background()
	node := testNode("n1", "")
	cases := []struct {
		name     string
		body     string
		ask      func(p *exec.Provider) (any, error)
		want     any
		wantErr  string // substring after the command description
		notImpl  bool
		isCmdErr bool
	}{
		{
			name: "does not exist", body: `echo '{"exists": false}'`,
			ask: func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) }, want: false,
		},
		{
			name: "not shut down, spaces and newlines around the answer", body: `printf '\n  {"shutdown": false}  \n\n'`,
			ask: func(p *exec.Provider) (any, error) { return p.InstanceShutdown(ctx, node) }, want: false,
		},
		{
			name: "exit 3 is not implemented", body: `exit 3`,
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceShutdown(ctx, node) },
			wantErr: ": unimplemented", notImpl: true,
		},
		{
			name: "failure shows stderr", body: "echo 'bmc unreachable' >&2; exit 1",
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) },
			wantErr: ": cloud provider command failed: exit status 1: stderr: bmc unreachable", isCmdErr: true,
		},
		{
			name: "missing key", body: `echo '{}'`,
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) },
			wantErr: ": cloud provider command failed: answer: exists: Required value", isCmdErr: true,
		},
		{
			name: "unknown key", body: `echo '{"exist": true}'`,
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) },
			wantErr: `: cloud provider command failed: answer "{\"exist\": true}": json: unknown field "exist"`, isCmdErr: true,
		},
		{
			name: "two answers", body: `echo '{"exists": true}{"exists": false}'`,
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) },
			wantErr: "more than one JSON value", isCmdErr: true,
		},
		{
			name: "not JSON", body: `echo yes`,
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) },
			wantErr: `answer "yes": invalid character 'y'`, isCmdErr: true,
		},
		{
			name: "wrong type", body: `echo '{"exists": "yes"}'`,
			ask:     func(p *exec.Provider) (any, error) { return p.InstanceExists(ctx, node) },
			wantErr: "cannot unmarshal string", isCmdErr: true,
		},
		{
			name: "bad address", body: `echo '{"addresses": [{"type": "Public", "address": ""}]}'`,
			ask:      func(p *exec.Provider) (any, error) { return p.InstanceMetadata(ctx, node) },
			wantErr:  `answer: [addresses[0].type: Unsupported value: "Public": supported values: "Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", addresses[0].address: Required value]`,
			isCmdErr: true,
		},
		{
			name: "empty metadata is allowed", body: `echo '{}'`,
			ask:  func(p *exec.Provider) (any, error) { return p.InstanceMetadata(ctx, node) },
			want: &cloudprovider.InstanceMetadata{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := script(t, t.TempDir(), "ask", tc.body+"\n")
			got, err := tc.ask(newProvider(t, exec.Config{Command: cmd}))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, got %v", got)
			}
			if !strings.HasPrefix(err.Error(), `exec cloud provider: "`+cmd+" ") || !strings.Contains(err.Error(), " n1\"") {
				t.Errorf("error %q does not name the command and node", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q\nlacks %q", err, tc.wantErr)
			}
			if errors.Is(err, cloudprovider.ErrNotImplemented) != tc.notImpl || errors.Is(err, exec.ErrCommand) != tc.isCmdErr {
				t.Errorf("error %q: ErrNotImplemented %v ErrCommand %v, want %v %v", err,
					errors.Is(err, cloudprovider.ErrNotImplemented), errors.Is(err, exec.ErrCommand), tc.notImpl, tc.isCmdErr)
			}
		})
	}
}

// hangingCommand returns a command that tells the test it started (through
// a FIFO) and then waits, through a child process, far longer than any
// test.
func hangingCommand(t *testing.T) (cmd string, started func()) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = script(t, dir, "hang", `echo started > "`+fifo+`"; sleep 1000; echo '{"exists": true}'`+"\n")
	return cmd, func() {
		f, err := os.Open(fifo) // blocks until the command opens it
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if _, err := bufio.NewReader(f).ReadString('\n'); err != nil {
			t.Error(err)
		}
	}
}

func TestTimeoutOnTheProviderClock(t *testing.T) {
	cmd, started := hangingCommand(t)
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	p := newProvider(t, exec.Config{Command: cmd, Timeout: 7 * time.Second, Clock: clk})
	done := make(chan error, 1)
	go func() {
		_, err := p.InstanceExists(context.Background(), testNode("n1", ""))
		done <- err
	}()
	started()
	clk.Step(6 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("returned before the timeout: %v", err)
	default:
	}
	clk.Step(time.Second)
	err := <-done
	if !errors.Is(err, exec.ErrCommand) || !strings.HasSuffix(err.Error(), "instance-exists n1\": cloud provider command failed: timed out after 7s") {
		t.Fatalf("error = %v", err)
	}
}

func TestCallerContextEndsTheCall(t *testing.T) {
	cmd, started := hangingCommand(t)
	p := newProvider(t, exec.Config{Command: cmd, Clock: clocktesting.NewFakeClock(time.Now())})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.InstanceExists(ctx, testNode("n1", ""))
		done <- err
	}()
	started()
	cancel()
	err := <-done
	if !errors.Is(err, exec.ErrCommand) || !strings.HasSuffix(err.Error(), ": context canceled") {
		t.Fatalf("error = %v", err)
	}
}
