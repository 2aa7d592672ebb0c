package critest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// StartRegistry runs Debian's docker-registry on 127.0.0.1 at a free port,
// storing into a temporary directory, and returns its address
// ("127.0.0.1:PORT") once it answers. It is killed when the test ends.
func StartRegistry(t testing.TB) string {
	t.Helper()
	dir := mkdirTemp(t, "knreg")
	addr := freeAddr(t)
	config := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
`, filepath.Join(dir, "data"), addr)
	configPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command("docker-registry", "serve", configPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	client := &http.Client{Timeout: time.Second}
	ready := poll(30*time.Second, 20*time.Millisecond, func() bool {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := client.Get("http://" + addr + "/v2/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ready {
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("docker-registry on %s did not answer:\n%s", addr, log)
	}
	return addr
}

// freeAddr is a 127.0.0.1 address with a port nobody listened on a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
