package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// TestAuthOverHTTPS checks who may call what, over the server's real TLS.
func TestAuthOverHTTPS(t *testing.T) {
	const (
		userToken  = "e2e-user-token-0123456789"
		adminToken = "e2e-admin-token-0123456789"
	)
	tokens := writeFile(t, "tokens.csv", "# e2e tokens\n"+
		userToken+",alice,1001,\"developers,qa\"\n"+
		adminToken+",root,1002,\"system:masters\"\n")
	s := startServer(t, serverOptions{Args: []string{"--token-auth-file", tokens}})
	client, err := httpsClient(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("open-endpoints", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/livez"} {
			code, body, err := get(client, s.URL+path, "")
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
				t.Errorf("GET %s without credentials = %d %q, want 200 ok", path, code, body)
			}
		}
		code, body, err := get(client, s.URL+"/version", "")
		if err != nil {
			t.Fatal(err)
		}
		var info version.Info
		if code != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil || info.Major != "1" || !strings.HasPrefix(info.GitVersion, "v1.") {
			t.Errorf("GET /version without credentials = %d %q, want 200 and a version.Info for v1.N", code, body)
		}
	})

	t.Run("profiles", func(t *testing.T) {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {userToken, http.StatusForbidden}, {adminToken, http.StatusOK}} {
			code, body, err := get(client, s.URL+"/debug/pprof/goroutine?debug=1", tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Errorf("GET /debug/pprof/goroutine with token %q = %d, want %d", tc.token, code, tc.want)
			}
			if code == http.StatusOK && !strings.Contains(body, "goroutine profile:") {
				t.Errorf("GET /debug/pprof/goroutine answered %.80q, want a goroutine profile", body)
			}
		}
	})

	cases := []struct {
		name       string
		token      string
		wantCode   int
		wantReason metav1.StatusReason
		wantInMsg  string
	}{
		{name: "no credentials", wantCode: http.StatusUnauthorized, wantReason: metav1.StatusReasonUnauthorized},
		{name: "unknown token", token: "not-a-token", wantCode: http.StatusUnauthorized, wantReason: metav1.StatusReasonUnauthorized},
		{
			name: "user outside system:masters", token: userToken,
			wantCode: http.StatusForbidden, wantReason: metav1.StatusReasonForbidden,
			wantInMsg: `User "alice" cannot list resource "nodes"`,
		},
		{name: "user in system:masters", token: adminToken, wantCode: http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := get(client, s.URL+"/api/v1/nodes", tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("GET /api/v1/nodes = %d %s, want %d", code, body, tc.wantCode)
			}
			if tc.wantCode == http.StatusOK {
				var list struct {
					Kind string `json:"kind"`
				}
				if err := json.Unmarshal([]byte(body), &list); err != nil || list.Kind != "NodeList" {
					t.Errorf("GET /api/v1/nodes answered %q, want a NodeList", body)
				}
				return
			}
			var status metav1.Status
			if err := json.Unmarshal([]byte(body), &status); err != nil {
				t.Fatalf("GET /api/v1/nodes = %d with body %q, want a Status: %v", code, body, err)
			}
			if status.Kind != "Status" || status.Status != metav1.StatusFailure || status.Code != int32(tc.wantCode) || status.Reason != tc.wantReason {
				t.Errorf("Status = kind %q status %q code %d reason %q, want Status Failure %d %s (body %s)",
					status.Kind, status.Status, status.Code, status.Reason, tc.wantCode, tc.wantReason, body)
			}
			if !strings.Contains(status.Message, tc.wantInMsg) {
				t.Errorf("Status message %q, want it to contain %q", status.Message, tc.wantInMsg)
			}
		})
	}
}
