package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/auth"
	"knode/internal/server"
)

// knode server reads pods/log from a node's agent with the PKI's
// kubelet-client pair, and verifies the agent with
// --kubelet-certificate-authority.
func TestServerPodLog(t *testing.T) {
	// A CA that did not sign the agent's certificate, so that verifying
	// refuses it: that shows the flag is wired.
	otherCA, err := auth.EnsurePKI(auth.PKIConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "kubelet-ca.crt")
	if err := os.WriteFile(caFile, otherCA.CAPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := startServer(t, func(c *server.Config) { c.KubeletCertificateAuthority = caFile })
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clusterCA := x509.NewCertPool()
	if !clusterCA.AppendCertsFromPEM(cfg.TLSClientConfig.CAData) {
		t.Fatal("no cluster CA in the admin kubeconfig")
	}

	var mu sync.Mutex
	var seen []string
	agent := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cert := r.TLS.PeerCertificates[0]
		mu.Lock()
		seen = append(seen, cert.Subject.CommonName+" "+strings.Join(cert.Subject.Organization, ",")+" "+r.URL.String())
		mu.Unlock()
		_, _ = io.WriteString(w, "hello from the agent\n")
	}))
	agent.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clusterCA}
	agent.Config.ErrorLog = log.New(io.Discard, "", 0)
	agent.StartTLS()
	defer agent.Close()
	_, portText, _ := net.SplitHostPort(agent.Listener.Addr().String())
	port, _ := strconv.Atoi(portText)

	ctx := context.Background()
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("default")

	// Stream, as kubectl logs reads.
	readLog := func(opts *corev1.PodLogOptions) (string, error) {
		body, err := pods.GetLogs("web", opts).Stream(ctx)
		if err != nil {
			return "", err
		}
		defer body.Close()
		out, err := io.ReadAll(body)
		return string(out), err
	}
	if _, err := readLog(&corev1.PodLogOptions{}); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Errorf("reading an agent the CA did not sign: %v, want a 500 about its certificate", err)
	}
	out, err := readLog(&corev1.PodLogOptions{InsecureSkipTLSVerifyBackend: true, TailLines: ptr.To[int64](2)})
	if err != nil || out != "hello from the agent\n" {
		t.Fatalf("reading the log without verifying the agent: %q, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"kube-apiserver-kubelet-client system:masters /containerLogs/default/web/app?tailLines=2"}; strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("the agent saw %q, want %q", seen, want)
	}
}
