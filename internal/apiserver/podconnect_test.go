package apiserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// upgradeAgent answers an upgrade request with 101 and then echoes every
// line it reads, prefixed with the path it was asked for; any other
// request gets the path and whether credentials came through.
func upgradeAgent(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" || r.Header.Get("Impersonate-User") != "" {
		http.Error(w, "client credentials reached the agent", http.StatusTeapot)
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "knode-test") {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: knode-test\r\n\r\n")
	for {
		line, err := buf.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(conn, r.URL.Path+" "+line); err != nil {
			return
		}
	}
}

// upgrade sends an upgrade request for path to the server at base with
// token and returns the connection, the status code, and the body of a
// refusal.
func upgrade(t *testing.T, base, token, method, path string, extraHeaders ...string) (net.Conn, *bufio.Reader, int, string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := method + " " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: Upgrade\r\nUpgrade: knode-test\r\n" +
		"Authorization: Bearer " + token + "\r\n" + strings.Join(extraHeaders, "") + "\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return conn, br, resp.StatusCode, ""
	}
	body, _ := io.ReadAll(resp.Body)
	return conn, br, resp.StatusCode, string(body)
}

// Exec, attach and port-forward are upgrades passed through to the agent,
// at the kubelet's paths and parameters, with the client's credentials
// left behind; the refusals come first, with upstream's words.
func TestPodConnect(t *testing.T) {
	s := startLogServer(t, logServerOptions{kubelet: kubeletClient})
	agent := newFakeAgent(t, s.pki, upgradeAgent)
	s.addNode(t, "n1", agent.port(t), internalIP("127.0.0.1"))
	s.addPod(t, "one", "n1", nil, "c")
	s.addPod(t, "multi", "n1", nil, "a", "b")
	s.addPod(t, "pending", "", nil, "c")
	const pods = "/api/v1/namespaces/default/pods/"

	t.Run("upgrades", func(t *testing.T) {
		for _, tc := range []struct {
			method, path, agentPath, agentQuery string
		}{
			{"POST", pods + "one/exec?command=cat&command=%2Fetc%2Fhostname&stdout=true&stderr=true", "/exec/default/one/c", "command=cat&command=%2Fetc%2Fhostname&error=1&output=1"},
			{"GET", pods + "multi/exec?container=b&command=sh&stdin=1&stdout=1&tty=true", "/exec/default/multi/b", "command=sh&input=1&output=1&tty=1"},
			{"POST", pods + "one/attach?stdin=true&stdout=true", "/attach/default/one/c", "input=1&output=1"},
			{"GET", pods + "one/portforward?ports=8080&ports=9090", "/portForward/default/one", "port=8080&port=9090"},
		} {
			// The admin acting as itself: the Impersonate-* headers are
			// honoured here and not passed on.
			conn, br, code, body := upgrade(t, s.url, "admintoken", tc.method, tc.path,
				"Impersonate-User: admin\r\n", "Impersonate-Group: system:masters\r\n")
			if code != http.StatusSwitchingProtocols {
				t.Fatalf("%s %s: status %d, body %s", tc.method, tc.path, code, body)
			}
			if _, err := io.WriteString(conn, "ping\n"); err != nil {
				t.Fatal(err)
			}
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.agentPath + " ping\n"; line != want {
				t.Errorf("%s: echoed %q, want %q", tc.path, line, want)
			}
			reqs := agent.requests()
			last := reqs[len(reqs)-1]
			if last.Path != tc.agentPath || last.Query != tc.agentQuery {
				t.Errorf("%s: agent saw %s?%s, want %s?%s", tc.path, last.Path, last.Query, tc.agentPath, tc.agentQuery)
			}
			conn.Close()
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			name, token, path string
			code              int
			message           string
		}{
			{"no command", "admintoken", pods + "one/exec?stdout=true", 400, "you must specify at least one command for the container"},
			{"no stream", "admintoken", pods + "one/exec?command=ls", 400, "you must specify at least 1 of stdin, stdout, stderr"},
			{"no container named", "admintoken", pods + "multi/attach?stdout=1", 400, "a container name must be specified for pod multi, choose one of: [a b]"},
			{"not scheduled", "admintoken", pods + "pending/exec?command=ls&stdout=1", 400, "pod pending does not have a host assigned"},
			{"a port out of range", "admintoken", pods + "one/portforward?ports=70000", 400, "ports[0]: Invalid value: 70000: must be between 1 and 65535, inclusive"},
			{"a node may not exec", nodeToken, pods + "one/exec?command=ls&stdout=1", 403, `pods "one" is forbidden: User "system:node:n1" cannot create resource "pods/exec" in API group "" in the namespace "default"`},
			{"no such pod", "admintoken", pods + "ghost/exec?command=ls&stdout=1", 404, `pods "ghost" not found`},
		} {
			_, _, code, body := upgrade(t, s.url, tc.token, "POST", tc.path)
			var st metav1.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("%s: %d %q is not a Status: %v", tc.name, code, body, err)
			}
			if code != tc.code || !strings.HasPrefix(st.Message, tc.message) {
				t.Errorf("%s: %d %q, want %d %q", tc.name, code, st.Message, tc.code, tc.message)
			}
		}
		// Without an upgrade the agent is not asked.
		before := len(agent.requests())
		code, _, body := s.getAll(t, "admintoken", pods+"one/exec?command=ls&stdout=1")
		if code != http.StatusBadRequest || !strings.Contains(body, "Upgrade request required") {
			t.Errorf("plain GET of exec: %d %s", code, body)
		}
		if after := len(agent.requests()); after != before {
			t.Errorf("the agent was asked %d times for a refused request", after-before)
		}
	})

	t.Run("node proxy", func(t *testing.T) {
		code, _, body := s.getAll(t, "admintoken", "/api/v1/nodes/n1/proxy/metrics?x=1")
		if code != 200 || body != "GET /metrics?x=1" {
			t.Errorf("nodes/n1/proxy/metrics: %d %q", code, body)
		}
		code, _, body = s.getAll(t, "admintoken", "/api/v1/nodes/n1/proxy/")
		if code != 200 || body != "GET /?" {
			t.Errorf("nodes/n1/proxy/: %d %q", code, body)
		}
		code, _, body = s.getAll(t, nodeToken, "/api/v1/nodes/n1/proxy/metrics")
		if code != http.StatusForbidden {
			t.Errorf("a node's own nodes/proxy: %d %q, want 403", code, body)
		}
		code, _, body = s.getAll(t, "admintoken", "/api/v1/nodes/n1:1/proxy/metrics")
		if code != http.StatusBadRequest || !strings.Contains(body, "port 1 of node n1 is not its agent's port") {
			t.Errorf("another port: %d %q", code, body)
		}
	})
}
