package csrsigning

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"knode/internal/auth"
	csrreg "knode/internal/registry/certificatesigningrequest"
)

// Action is what Decide asks the controller to do with one request.
type Action int

const (
	// Leave: nothing to do (another signer's, finished, or waiting for a
	// person to approve or deny it).
	Leave Action = iota
	// Approve: add the Approved condition through /approval.
	Approve
	// Sign: issue the certificate into status.certificate.
	Sign
	// Fail: add the Failed condition through /status; the request will
	// never be signed.
	Fail
)

func (a Action) String() string {
	switch a {
	case Approve:
		return "Approve"
	case Sign:
		return "Sign"
	case Fail:
		return "Fail"
	default:
		return "Leave"
	}
}

// Reasons and messages of the conditions the controller adds.
const (
	// ReasonAutoApproved is upstream's reason for an automatic approval.
	ReasonAutoApproved = "AutoApproved"
	// MessageAutoApproved is knode's wording: upstream approves only client
	// certificates automatically, after a SubjectAccessReview; knode checks
	// the requester and the node's addresses instead.
	MessageAutoApproved = "Auto approving kubelet serving certificate after checking the requesting node and its addresses."
	// ReasonSignerValidationFailure is upstream's reason when an approved
	// request is not one the signer may sign.
	ReasonSignerValidationFailure = "SignerValidationFailure"
)

// Decision is the outcome of Decide for one request.
type Decision struct {
	Action Action
	// Reason and Message are the condition's, for Approve and Fail.
	Reason, Message string
	// Why says, for Leave on a pending request, why it was not approved
	// automatically ("" when it is not a candidate at all).
	Why string
	// For Sign: the certificate's lifetime and usages.
	TTL         time.Duration
	KeyUsage    x509.KeyUsage
	ExtKeyUsage []x509.ExtKeyUsage
}

// ApprovalCandidate returns the node whose Node object Decide needs to
// judge csr: the requester's, when csr is a pending kubelet-serving
// request made by a node identity. ok is false when no Node is needed.
func ApprovalCandidate(csr *certificatesv1.CertificateSigningRequest) (node string, ok bool) {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || settled(csr) ||
		csrreg.HasCondition(csr, certificatesv1.CertificateApproved) {
		return "", false
	}
	return requestingNode(csr)
}

// requestingNode is the node that made csr: its spec.username is
// system:node:<name> and its groups hold system:nodes.
func requestingNode(csr *certificatesv1.CertificateSigningRequest) (string, bool) {
	name, ok := auth.NodeName(&auth.User{Name: csr.Spec.Username, Groups: csr.Spec.Groups})
	return name, ok && name != ""
}

// settled: denied, failed or issued; nothing more happens to it.
func settled(csr *certificatesv1.CertificateSigningRequest) bool {
	return csrreg.HasCondition(csr, certificatesv1.CertificateDenied) ||
		csrreg.HasCondition(csr, certificatesv1.CertificateFailed) ||
		len(csr.Status.Certificate) > 0
}

// Decide is the controller's pure decision for one request. node is the
// requesting node's Node (see ApprovalCandidate; nil when there is none
// or it was not needed); maxTTL is the longest lifetime it issues.
//
// Only kubernetes.io/kubelet-serving requests are its business. A pending
// one is approved when it passes AutoApprovable; otherwise it waits for a
// person. An approved one is signed when it passes the signer's checks
// (ValidateKubeletServing), and fails otherwise.
func Decide(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node, maxTTL time.Duration) Decision {
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || settled(csr) {
		return Decision{Action: Leave}
	}
	if !csrreg.HasCondition(csr, certificatesv1.CertificateApproved) {
		if err := AutoApprovable(csr, node); err != nil {
			return Decision{Action: Leave, Why: err.Error()}
		}
		return Decision{Action: Approve, Reason: ReasonAutoApproved, Message: MessageAutoApproved}
	}
	req, err := csrreg.ParseRequest(csr.Spec.Request)
	if err == nil {
		err = req.CheckSignature()
	}
	if err == nil {
		err = ValidateKubeletServing(req, csr.Spec.Usages)
	}
	var keyUsage x509.KeyUsage
	var ext []x509.ExtKeyUsage
	if err == nil {
		keyUsage, ext, err = KeyUsages(csr.Spec.Usages)
	}
	if err != nil {
		return Decision{Action: Fail, Reason: ReasonSignerValidationFailure, Message: err.Error()}
	}
	return Decision{Action: Sign, TTL: Lifetime(csr.Spec.ExpirationSeconds, maxTTL), KeyUsage: keyUsage, ExtKeyUsage: ext}
}

// AutoApprovable says why csr may not be approved automatically, or nil
// if it may: it was made by a node identity (system:node:<n> in
// system:nodes), asks for the kubelet-serving signer's shape
// (ValidateKubeletServing) with subject CN system:node:<n>, and every DNS
// and IP name it asks for is n itself or one of node's status.addresses.
// node must be Node <n>; nil means it does not exist.
func AutoApprovable(csr *certificatesv1.CertificateSigningRequest, node *corev1.Node) error {
	name, ok := requestingNode(csr)
	if !ok {
		return fmt.Errorf("requester %q is not a node identity", csr.Spec.Username)
	}
	req, err := csrreg.ParseRequest(csr.Spec.Request)
	if err != nil {
		return err
	}
	if err := ValidateKubeletServing(req, csr.Spec.Usages); err != nil {
		return err
	}
	if want := auth.NodeUser(name); req.Subject.CommonName != want {
		return fmt.Errorf("subject common name %q is not the requester's, %q", req.Subject.CommonName, want)
	}
	if node == nil || node.Name != name {
		return fmt.Errorf("node %q does not exist", name)
	}
	return namesOfNode(req, node)
}

// namesOfNode checks that every DNS name of req is the node's name or one
// of its addresses (any type, case-insensitively) and every IP address is
// one of its addresses.
func namesOfNode(req *x509.CertificateRequest, node *corev1.Node) error {
	dns := []string{strings.ToLower(node.Name)}
	var ips []net.IP
	for _, a := range node.Status.Addresses {
		if ip := net.ParseIP(a.Address); ip != nil {
			ips = append(ips, ip)
			continue
		}
		dns = append(dns, strings.ToLower(a.Address))
	}
	for _, name := range req.DNSNames {
		if !slices.Contains(dns, strings.ToLower(name)) {
			return fmt.Errorf("DNS name %q is not one of node %q's addresses", name, node.Name)
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return fmt.Errorf("IP address %s is not one of node %q's addresses", ip, node.Name)
		}
	}
	return nil
}

// Upstream's words for a request the kubelet-serving signer refuses.
var (
	errOrganization = errors.New("subject organization is not system:nodes")
	errCommonName   = errors.New("subject common name does not begin with system:node:")
	errNoNames      = errors.New("DNS or IP subjectAltName is required")
	errEmail        = errors.New("Email subjectAltNames are not allowed")
	errURI          = errors.New("URI subjectAltNames are not allowed")
)

// servingUsages are the usage sets a kubelet serving certificate may ask
// for: with key encipherment (RSA keys) or without.
var servingUsages = [][]certificatesv1.KeyUsage{
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
	{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
}

// ValidateKubeletServing applies the kubernetes.io/kubelet-serving
// signer's rules (upstream ValidateKubeletServingCSR): organization exactly
// system:nodes, at least one DNS or IP name, no email or URI names, usages
// exactly digital signature and server auth (key encipherment allowed),
// and a common name beginning with system:node:.
func ValidateKubeletServing(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	if !slices.Equal(req.Subject.Organization, []string{auth.NodesGroup}) {
		return errOrganization
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return errNoNames
	}
	if len(req.EmailAddresses) > 0 {
		return errEmail
	}
	if len(req.URIs) > 0 {
		return errURI
	}
	if !slices.ContainsFunc(servingUsages, func(want []certificatesv1.KeyUsage) bool { return sameSet(want, usages) }) {
		return fmt.Errorf("usages did not match %v", []string{
			string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageServerAuth),
		})
	}
	if !strings.HasPrefix(req.Subject.CommonName, auth.NodeUserPrefix) {
		return errCommonName
	}
	return nil
}

// sameSet reports whether a and b hold the same usages, ignoring order and
// repeats.
func sameSet(a, b []certificatesv1.KeyUsage) bool {
	for _, u := range a {
		if !slices.Contains(b, u) {
			return false
		}
	}
	for _, u := range b {
		if !slices.Contains(a, u) {
			return false
		}
	}
	return true
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning:           x509.KeyUsageDigitalSignature,
	certificatesv1.UsageDigitalSignature:  x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment,
	certificatesv1.UsageKeyEncipherment:   x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement:      x509.KeyUsageKeyAgreement,
	certificatesv1.UsageDataEncipherment:  x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign:          x509.KeyUsageCertSign,
	certificatesv1.UsageCRLSign:           x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly:      x509.KeyUsageEncipherOnly,
	certificatesv1.UsageDecipherOnly:      x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny:             x509.ExtKeyUsageAny,
	certificatesv1.UsageServerAuth:      x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth:      x509.ExtKeyUsageClientAuth,
	certificatesv1.UsageCodeSigning:     x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageSMIME:           x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem:  x509.ExtKeyUsageIPSECEndSystem,
	certificatesv1.UsageIPsecTunnel:     x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser:       x509.ExtKeyUsageIPSECUser,
	certificatesv1.UsageTimestamping:    x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning:     x509.ExtKeyUsageOCSPSigning,
	certificatesv1.UsageMicrosoftSGC:    x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC:     x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// KeyUsages turns API usages into the certificate's key usage bits and
// extended key usages (each once, in the order first asked for). An
// unknown usage is an error.
func KeyUsages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var ext []x509.ExtKeyUsage
	for _, u := range usages {
		if bit, ok := keyUsages[u]; ok {
			ku |= bit
			continue
		}
		e, ok := extKeyUsages[u]
		if !ok {
			return 0, nil, fmt.Errorf("unknown key usage %q", u)
		}
		if !slices.Contains(ext, e) {
			ext = append(ext, e)
		}
	}
	return ku, ext, nil
}

// Lifetime is the certificate lifetime for a request asking for
// expirationSeconds (nil: maxTTL): at least csrreg.MinExpirationSeconds,
// at most maxTTL.
func Lifetime(expirationSeconds *int32, maxTTL time.Duration) time.Duration {
	if expirationSeconds == nil {
		return maxTTL
	}
	d := max(time.Duration(*expirationSeconds)*time.Second, csrreg.MinExpirationSeconds*time.Second)
	return min(d, maxTTL)
}
