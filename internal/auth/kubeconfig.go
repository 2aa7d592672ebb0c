package auth

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"knode/internal/atomicfile"
)

// ClusterName names the cluster entry of every kubeconfig knode writes, and
// the context unless another is asked for.
const ClusterName = "knode"

// Kubeconfig returns a kubeconfig (YAML, apiVersion v1) with one cluster
// (ClusterName, server, embedded CA), one user authenticating with the
// embedded client certificate and key, and one context joining them, which
// is current. An empty contextName means ClusterName.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte, user, contextName string) ([]byte, error) {
	var errs field.ErrorList
	if server == "" {
		errs = append(errs, field.Required(field.NewPath("server"), ""))
	} else if u, err := url.Parse(server); err != nil || u.Scheme != "https" || u.Host == "" {
		errs = append(errs, field.Invalid(field.NewPath("server"), server, "must be an https:// URL with a host"))
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"certificateAuthorityData", caPEM}, {"clientCertificateData", certPEM}, {"clientKeyData", keyPEM}} {
		if len(f.data) == 0 {
			errs = append(errs, field.Required(field.NewPath(f.name), ""))
		}
	}
	if user == "" {
		errs = append(errs, field.Required(field.NewPath("user"), ""))
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if contextName == "" {
		contextName = ClusterName
	}

	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = server
	cluster.CertificateAuthorityData = caPEM
	cfg.Clusters[ClusterName] = cluster

	authInfo := clientcmdapi.NewAuthInfo()
	authInfo.ClientCertificateData = certPEM
	authInfo.ClientKeyData = keyPEM
	cfg.AuthInfos[user] = authInfo

	kctx := clientcmdapi.NewContext()
	kctx.Cluster = ClusterName
	kctx.AuthInfo = user
	cfg.Contexts[contextName] = kctx
	cfg.CurrentContext = contextName

	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("auth: encode kubeconfig: %w", err)
	}
	return out, nil
}

// AdminKubeconfig returns the kubeconfig of the admin (AdminUser in
// MastersGroup) for server.
func AdminKubeconfig(pki *PKI, server string) ([]byte, error) {
	return Kubeconfig(server, pki.caPEM, pki.adminCertPEM, pki.adminKeyPEM, AdminUser, ClusterName)
}

// WriteAdminKubeconfig writes AdminKubeconfig to path, atomically and 0600.
func WriteAdminKubeconfig(pki *PKI, server, path string) error {
	data, err := AdminKubeconfig(pki, server)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, keyFileMode); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// NodeKubeconfig issues a client certificate for node nodeName (user
// "system:node:<name>", group system:nodes, LeafValidity) and returns a
// kubeconfig carrying it. nodeName must be a DNS subdomain, as Node names
// are.
func NodeKubeconfig(pki *PKI, server, nodeName string) ([]byte, error) {
	if nodeName == "" {
		return nil, field.Required(field.NewPath("nodeName"), "")
	}
	if msgs := validation.IsDNS1123Subdomain(nodeName); len(msgs) > 0 {
		return nil, field.Invalid(field.NewPath("nodeName"), nodeName, strings.Join(msgs, "; "))
	}
	user := NodeUser(nodeName)
	certPEM, keyPEM, err := pki.IssueClientCert(user, []string{NodesGroup}, 0)
	if err != nil {
		return nil, err
	}
	return Kubeconfig(server, pki.caPEM, certPEM, keyPEM, user, ClusterName)
}
