package cri

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func dockerConfigJSON(name, data string) corev1.Secret {
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(data)},
	}
}

func TestCredentials(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	secrets := []corev1.Secret{
		dockerConfigJSON("regcred", `{"auths": {
			"https://registry.example.com:5000/": {"username": "u1", "password": "p1"},
			"registry.example.com:5000/team/app": {"auth": "`+auth+`"},
			"https://index.docker.io/v1/": {"username": "hub", "password": "hp", "identitytoken": "tok"},
			"other.example.com": {"username": "o", "password": "o"}
		}}`),
		{
			ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: "ns"},
			Type:       corev1.SecretTypeDockercfg,
			Data:       map[string][]byte{corev1.DockerConfigKey: []byte(`{"registry.example.com:5000": {"username": "u2", "password": "p2"}}`)},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: "opaque"}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"x": []byte("y")}},
	}
	reg := func(user, pass string) *runtimeapi.AuthConfig {
		return &runtimeapi.AuthConfig{Username: user, Password: pass, ServerAddress: "registry.example.com:5000"}
	}
	hub := &runtimeapi.AuthConfig{Username: "hub", Password: "hp", IdentityToken: "tok", ServerAddress: "docker.io"}
	tests := []struct {
		image string
		want  []*runtimeapi.AuthConfig
	}{
		{image: "registry.example.com:5000/team/app:1", want: []*runtimeapi.AuthConfig{reg("alice", "s3cret"), reg("u1", "p1"), reg("u2", "p2")}},
		{image: "registry.example.com:5000/team/app/sub@sha256:abc", want: []*runtimeapi.AuthConfig{reg("alice", "s3cret"), reg("u1", "p1"), reg("u2", "p2")}},
		{image: "registry.example.com:5000/team/application:1", want: []*runtimeapi.AuthConfig{reg("u1", "p1"), reg("u2", "p2")}},
		{image: "registry.example.com/team/app:1"},
		{image: "busybox", want: []*runtimeapi.AuthConfig{hub}},
		{image: "docker.io/library/busybox:1", want: []*runtimeapi.AuthConfig{hub}},
		{image: "index.docker.io/me/tool", want: []*runtimeapi.AuthConfig{hub}},
		{image: "localhost/busybox"},
		{image: "evil.com/registry.example.com:5000/x"},
	}
	for _, tt := range tests {
		got, err := Credentials(tt.image, secrets)
		if err != nil {
			t.Errorf("%s: %v", tt.image, err)
		}
		if diff := cmp.Diff(tt.want, got, protocmp.Transform(), cmp.Comparer(func(a, b []*runtimeapi.AuthConfig) bool {
			return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b, protocmp.Transform())
		})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.image, diff)
		}
	}
}

func TestCredentialsBadSecrets(t *testing.T) {
	secrets := []corev1.Secret{
		dockerConfigJSON("broken", `{"auths": `),
		dockerConfigJSON("badauth", `{"auths": {"r.io": {"auth": "not base64!"}}}`),
		{ObjectMeta: metav1.ObjectMeta{Name: "nokey", Namespace: "ns"}, Type: corev1.SecretTypeDockercfg},
		dockerConfigJSON("good", `{"auths": {"r.io": {"username": "u", "password": "p"}}}`),
	}
	got, err := Credentials("r.io/app", secrets)
	if err == nil {
		t.Fatal("no error for broken secrets")
	}
	for _, name := range []string{"ns/broken", "ns/badauth", "ns/nokey"} {
		if !contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	if len(got) != 1 || got[0].Username != "u" {
		t.Errorf("credentials %v, want the good secret's", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestSplitImage(t *testing.T) {
	tests := []struct{ image, host, repo string }{
		{"busybox", "docker.io", "library/busybox"},
		{"busybox:1", "docker.io", "library/busybox"},
		{"me/tool:1", "docker.io", "me/tool"},
		{"localhost/tool", "localhost", "tool"},
		{"localhost:5000/a/b:c", "localhost:5000", "a/b"},
		{"Registry-1.Docker.IO/me/tool", "docker.io", "me/tool"},
		{"r.io/a@sha256:0123", "r.io", "a"},
	}
	for _, tt := range tests {
		if host, repo := splitImage(tt.image); host != tt.host || repo != tt.repo {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tt.image, host, repo, tt.host, tt.repo)
		}
	}
}
