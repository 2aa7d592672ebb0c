// Package certificatesigningrequest holds the API rules for
// certificates.k8s.io/v1 CertificateSigningRequests (cluster-scoped, with
// /status and /approval): what a create must carry (a PEM "CERTIFICATE
// REQUEST" whose signature verifies, a signer name, known usages), the
// requester the server records in the spec, what each of the main
// resource, /status and /approval may change, the table kubectl prints and
// the selectable fields (metadata.name and spec.signerName).
//
// It follows Kubernetes 1.33's strategy and validation: the spec never
// changes after create (an update's spec is replaced by the stored one);
// Approved and Denied conditions come only through /approval and exclude
// each other; Approved, Denied and Failed conditions are never removed;
// status.certificate comes only through /status, holds only CERTIFICATE PEM
// blocks and, once set, never changes.
//
// Callers (the generic REST layer) use Kind() and pass
// *certificatesv1.CertificateSigningRequest; every function is pure.
//
// What it does not do: approve, deny or sign anything (the csrsigning
// controller and people with kubectl certificate do), or check who may
// approve for which signer (upstream's CertificateApproval and
// CertificateSigning admission; in knode only system:masters may write
// /approval and /status).
//
// Deviations from upstream, on purpose or for want of a clock:
//   - The server does not fill in a condition's lastUpdateTime and
//     lastTransitionTime (the rules have no clock); clients set them, as
//     kubectl certificate approve and the csrsigning controller do.
//   - A /status update may set status.certificate only on a request that
//     has an Approved condition and no Denied one; upstream leaves that to
//     the signers.
//   - Names are DNS subdomains (the REST layer's rule for every kind);
//     upstream accepts any name that is a valid path segment.
//   - The requester's extra attributes are always empty: knode's
//     authenticators carry none.
package certificatesigningrequest

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// LegacyUnknownSignerName is the v1beta1 signer that the v1 API refuses.
const LegacyUnknownSignerName = "kubernetes.io/legacy-unknown"

// MinExpirationSeconds is the shortest spec.expirationSeconds accepted.
const MinExpirationSeconds = 600

// Upstream's literal messages.
const (
	msgNotRequest          = "PEM block type must be CERTIFICATE REQUEST"
	msgLegacySigner        = "the legacy signerName is not allowed via this API version"
	msgSignerForm          = "must be a fully qualified domain and path of the form 'example.com/signer-name'"
	msgSignerDomain        = "should be a domain with at least two segments separated by dots"
	msgShortExpiration     = "may not specify a duration less than 600 seconds (10 minutes)"
	msgExclusive           = "Approved and Denied conditions are mutually exclusive"
	msgSetCertificate      = "updates may not set certificate content"
	msgModifyCertificate   = "updates may not modify existing certificate content"
	msgCertificateData     = "<certificate data>"
	msgNoCertificateBlocks = "must contain at least one CERTIFICATE PEM block"
	msgCertificateHeaders  = "no PEM block headers are permitted"
	// msgNotApproved is knode's own (see the package documentation).
	msgNotApproved = "may only be set on a request with an Approved condition and no Denied one"
)

// KnownUsages are the key usages the v1 API accepts, sorted as upstream
// lists them in its "supported values".
var KnownUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageAny,
	certificatesv1.UsageCertSign,
	certificatesv1.UsageClientAuth,
	certificatesv1.UsageCodeSigning,
	certificatesv1.UsageContentCommitment,
	certificatesv1.UsageCRLSign,
	certificatesv1.UsageDataEncipherment,
	certificatesv1.UsageDecipherOnly,
	certificatesv1.UsageDigitalSignature,
	certificatesv1.UsageEmailProtection,
	certificatesv1.UsageEncipherOnly,
	certificatesv1.UsageIPsecEndSystem,
	certificatesv1.UsageIPsecTunnel,
	certificatesv1.UsageIPsecUser,
	certificatesv1.UsageKeyAgreement,
	certificatesv1.UsageKeyEncipherment,
	certificatesv1.UsageMicrosoftSGC,
	certificatesv1.UsageNetscapeSGC,
	certificatesv1.UsageOCSPSigning,
	certificatesv1.UsageSMIME,
	certificatesv1.UsageServerAuth,
	certificatesv1.UsageSigning,
	certificatesv1.UsageTimestamping,
}

// Kind returns the rules for the "certificatesigningrequests" resource.
func Kind() registry.Kind {
	csr := func(obj runtime.Object) *certificatesv1.CertificateSigningRequest {
		return obj.(*certificatesv1.CertificateSigningRequest)
	}
	return registry.Kind{
		GroupVersion: certificatesv1.SchemeGroupVersion,
		Resource:     "certificatesigningrequests",
		Kind:         "CertificateSigningRequest",
		ListKind:     "CertificateSigningRequestList",
		SingularName: "certificatesigningrequest",
		ShortNames:   []string{"csr"},
		HasStatus:    true,

		New:     func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		NewList: func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },

		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(csr(obj)) },
		RecordRequester:  func(obj runtime.Object, u registry.User) { recordRequester(csr(obj), u) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			c, o := csr(obj), csr(old)
			c.Spec = *o.Spec.DeepCopy()
			c.Status = *o.Status.DeepCopy()
		},
		Validate:       func(obj runtime.Object) field.ErrorList { return Validate(csr(obj)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList { return ValidateUpdate(csr(obj), csr(old)) },
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) { prepareForStatusUpdate(csr(obj), csr(old)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateStatusUpdate(csr(obj), csr(old))
			},
		},
		Approval: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) { prepareForApprovalUpdate(csr(obj), csr(old)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateApprovalUpdate(csr(obj), csr(old))
			},
		},

		Columns: columns(),
		Row:     func(obj runtime.Object, now time.Time) []interface{} { return row(csr(obj), now) },
		Fields: func(obj runtime.Object) fields.Set {
			c := csr(obj)
			set := registry.DefaultFields(c, false)
			set["spec.signerName"] = c.Spec.SignerName
			return set
		},
	}
}

// prepareForCreate: no one creates an approved (or issued) request, and
// the requester is the server's to record.
func prepareForCreate(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status = certificatesv1.CertificateSigningRequestStatus{}
	recordRequester(csr, registry.User{})
}

// recordRequester replaces the spec's requester fields with u.
func recordRequester(csr *certificatesv1.CertificateSigningRequest, u registry.User) {
	csr.Spec.Username = u.Name
	csr.Spec.UID = u.UID
	csr.Spec.Groups = slices.Clone(u.Groups)
	csr.Spec.Extra = nil
	if len(u.Extra) > 0 {
		csr.Spec.Extra = make(map[string]certificatesv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			csr.Spec.Extra[k] = slices.Clone(v)
		}
	}
}

// prepareForStatusUpdate keeps old's spec and old's Approved and Denied
// conditions where the update has as many of each (adding or removing one
// is then refused by validation).
func prepareForStatusUpdate(csr, old *certificatesv1.CertificateSigningRequest) {
	csr.Spec = *old.Spec.DeepCopy()
	keepConditions(csr, old, certificatesv1.CertificateApproved)
	keepConditions(csr, old, certificatesv1.CertificateDenied)
}

// prepareForApprovalUpdate keeps everything of old but the conditions.
func prepareForApprovalUpdate(csr, old *certificatesv1.CertificateSigningRequest) {
	conditions := csr.Status.Conditions
	csr.Spec = *old.Spec.DeepCopy()
	csr.Status = *old.Status.DeepCopy()
	csr.Status.Conditions = conditions
}

// keepConditions copies old's conditions of type t over csr's, in order,
// when both have the same number of them.
func keepConditions(csr, old *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) {
	newIdx, oldIdx := conditionIndices(csr, t), conditionIndices(old, t)
	if len(newIdx) != len(oldIdx) {
		return
	}
	for i, j := range oldIdx {
		csr.Status.Conditions[newIdx[i]] = *old.Status.Conditions[j].DeepCopy()
	}
}

func conditionIndices(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []int {
	var idx []int
	for i, c := range csr.Status.Conditions {
		if c.Type == t {
			idx = append(idx, i)
		}
	}
	return idx
}

func conditionsOf(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

// HasCondition reports whether csr has a condition of type t whose status
// is True (the only status Approved, Denied and Failed may have).
func HasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// ParseRequest decodes the first PEM block of data, which must be a
// CERTIFICATE REQUEST, into a certificate request. It does not check the
// signature.
func ParseRequest(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New(msgNotRequest)
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// options relax the rules, for the subresource an update comes through
// and for problems the stored object already has (upstream keeps
// accepting those so that old objects can still be updated).
type options struct {
	settingApproval    bool
	settingCertificate bool

	bothApprovedAndDenied bool
	duplicateConditions   bool
	emptyConditionType    bool
	arbitraryCertificate  bool
	unknownUsages         bool
	duplicateUsages       bool
	legacySignerName      bool
}

// tolerate returns the options for an update of old into csr (nil old: a
// create).
func tolerate(csr, old *certificatesv1.CertificateSigningRequest) options {
	if old == nil {
		return options{}
	}
	approved, denied, dupConditions, emptyType := conditionProblems(old)
	unknown, dupUsages := usageProblems(old.Spec.Usages)
	return options{
		bothApprovedAndDenied: approved && denied,
		duplicateConditions:   dupConditions,
		emptyConditionType:    emptyType,
		arbitraryCertificate:  bytes.Equal(csr.Status.Certificate, old.Status.Certificate) || validateCertificate(old.Status.Certificate) != nil,
		unknownUsages:         unknown,
		duplicateUsages:       dupUsages,
		legacySignerName:      old.Spec.SignerName == LegacyUnknownSignerName,
	}
}

// conditionProblems reports what upstream tolerates in stored conditions.
func conditionProblems(csr *certificatesv1.CertificateSigningRequest) (approved, denied, duplicate, emptyType bool) {
	seen := map[certificatesv1.RequestConditionType]bool{}
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case "":
			emptyType = true
		}
		if seen[c.Type] {
			duplicate = true
		}
		seen[c.Type] = true
	}
	return approved, denied, duplicate, emptyType
}

func usageProblems(usages []certificatesv1.KeyUsage) (unknown, duplicate bool) {
	seen := map[certificatesv1.KeyUsage]bool{}
	for _, u := range usages {
		if !slices.Contains(KnownUsages, u) {
			unknown = true
		}
		if seen[u] {
			duplicate = true
		}
		seen[u] = true
	}
	return unknown, duplicate
}

// Validate checks a new request (upstream
// ValidateCertificateSigningRequestCreate).
func Validate(csr *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return validateObject(csr, options{})
}

// ValidateUpdate checks an update of the main resource.
func ValidateUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	return validateUpdate(csr, old, tolerate(csr, old))
}

// ValidateStatusUpdate checks an update through /status: it may set
// status.certificate once (on an approved request) and add a Failed
// condition, but not touch the Approved and Denied ones.
func ValidateStatusUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	opts := tolerate(csr, old)
	opts.settingCertificate = true
	return validateUpdate(csr, old, opts)
}

// ValidateApprovalUpdate checks an update through /approval: it may add
// an Approved or a Denied condition.
func ValidateApprovalUpdate(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	opts := tolerate(csr, old)
	opts.settingApproval = true
	return validateUpdate(csr, old, opts)
}

func validateUpdate(csr, old *certificatesv1.CertificateSigningRequest, opts options) field.ErrorList {
	errs := validateObject(csr, opts)
	conditions := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if len(conditionsOf(csr, t)) < len(conditionsOf(old, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if !opts.settingApproval {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			got, had := conditionsOf(csr, t), conditionsOf(old, t)
			switch {
			case len(got) < len(had):
				// Refused above.
			case len(got) > len(had):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !apiequality.Semantic.DeepEqual(got, had):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q", t)))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, old.Status.Certificate) {
		certificate := field.NewPath("status", "certificate")
		switch {
		case !opts.settingCertificate:
			errs = append(errs, field.Forbidden(certificate, msgSetCertificate))
		case len(old.Status.Certificate) > 0:
			errs = append(errs, field.Forbidden(certificate, msgModifyCertificate))
		case !HasCondition(old, certificatesv1.CertificateApproved) || HasCondition(old, certificatesv1.CertificateDenied):
			errs = append(errs, field.Forbidden(certificate, msgNotApproved))
		}
	}
	return errs
}

// validateObject holds upstream's validateCertificateSigningRequest.
func validateObject(csr *certificatesv1.CertificateSigningRequest, opts options) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if err := checkRequest(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	usages := spec.Child("usages")
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(usages, ""))
	}
	if !opts.unknownUsages {
		for i, u := range csr.Spec.Usages {
			if !slices.Contains(KnownUsages, u) {
				errs = append(errs, field.NotSupported(usages.Index(i), u, KnownUsages))
			}
		}
	}
	if !opts.duplicateUsages {
		seen := map[certificatesv1.KeyUsage]bool{}
		for i, u := range csr.Spec.Usages {
			if seen[u] {
				errs = append(errs, field.Duplicate(usages.Index(i), u))
			}
			seen[u] = true
		}
	}
	if !opts.legacySignerName && csr.Spec.SignerName == LegacyUnknownSignerName {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, msgLegacySigner))
	} else {
		errs = append(errs, validateSignerName(csr.Spec.SignerName, spec.Child("signerName"))...)
	}
	if s := csr.Spec.ExpirationSeconds; s != nil && *s < MinExpirationSeconds {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *s, msgShortExpiration))
	}
	errs = append(errs, validateConditions(csr.Status.Conditions, opts, field.NewPath("status", "conditions"))...)
	if !opts.arbitraryCertificate {
		if err := validateCertificate(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), msgCertificateData, err.Error()))
		}
	}
	return errs
}

// checkRequest parses data as ParseRequest does and checks the request's
// signature.
func checkRequest(data []byte) error {
	req, err := ParseRequest(data)
	if err != nil {
		return err
	}
	return req.CheckSignature()
}

// validateConditions: a type is required, Approved, Denied and Failed may
// only be True (others True, False or Unknown), Approved and Denied
// exclude each other, and no type appears twice.
func validateConditions(conditions []certificatesv1.CertificateSigningRequestCondition, opts options, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	trueOnly := []corev1.ConditionStatus{corev1.ConditionTrue}
	anyStatus := []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionUnknown}
	seen := map[certificatesv1.RequestConditionType]bool{}
	approved, denied := false, false
	for i, c := range conditions {
		p := path.Index(i)
		if !opts.emptyConditionType && c.Type == "" {
			errs = append(errs, field.Required(p.Child("type"), ""))
		}
		allowed := anyStatus
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			allowed = trueOnly
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(p.Child("status"), ""))
		case !slices.Contains(allowed, c.Status):
			errs = append(errs, field.NotSupported(p.Child("status"), c.Status, allowed))
		}
		if !opts.bothApprovedAndDenied {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				approved = true
				if denied {
					errs = append(errs, field.Invalid(p.Child("type"), c.Type, msgExclusive))
				}
			case certificatesv1.CertificateDenied:
				denied = true
				if approved {
					errs = append(errs, field.Invalid(p.Child("type"), c.Type, msgExclusive))
				}
			}
		}
		if !opts.duplicateConditions {
			if seen[c.Type] {
				errs = append(errs, field.Duplicate(p.Child("type"), c.Type))
			}
			seen[c.Type] = true
		}
	}
	return errs
}

// validateCertificate: empty, or one or more CERTIFICATE PEM blocks
// without headers, each holding a parsable certificate; text around the
// blocks is allowed.
func validateCertificate(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New(msgCertificateHeaders)
		}
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		blocks++
		data = rest
	}
	if blocks == 0 {
		return errors.New(msgNoCertificateBlocks)
	}
	return nil
}

// validateSignerName checks that name is "<domain>/<path>": a domain of
// at least two DNS labels (at most 253 characters), a path of DNS
// subdomains joined by dots, 571 characters in all (upstream
// ValidateSignerName).
func validateSignerName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	parts := strings.Split(name, "/")
	if len(parts) != 2 {
		return field.ErrorList{field.Invalid(path, name, msgSignerForm)}
	}
	var errs field.ErrorList
	domain, rest := parts[0], parts[1]
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(path, "", validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	for _, l := range labels {
		msgs := validation.IsDNS1123Label(l)
		for _, m := range msgs {
			errs = append(errs, field.Invalid(path, domain, fmt.Sprintf("validating label %q: %s", l, m)))
		}
		if len(msgs) > 0 {
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(path, domain, msgSignerDomain))
	}
	for _, l := range strings.Split(rest, ".") {
		msgs := validation.IsDNS1123Subdomain(l)
		for _, m := range msgs {
			errs = append(errs, field.Invalid(path, rest, fmt.Sprintf("validating label %q: %s", l, m)))
		}
		if len(msgs) > 0 {
			break
		}
	}
	maxLen := validation.DNS1123SubdomainMaxLength + (validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1) + 1
	if len(name) > maxLen {
		errs = append(errs, field.TooLong(path, "", maxLen))
	}
	return errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "SignerName", Type: "string", Description: spec["signerName"]},
		// Upstream describes REQUESTOR with the request's doc.
		{Name: "Requestor", Type: "string", Description: spec["request"]},
		{Name: "RequestedDuration", Type: "string", Description: spec["expirationSeconds"]},
		{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
	}
}

// row is kubectl's CSR row: "<none>" for a missing signer or duration.
func row(csr *certificatesv1.CertificateSigningRequest, now time.Time) []interface{} {
	signer := "<none>"
	if csr.Spec.SignerName != "" {
		signer = csr.Spec.SignerName
	}
	requested := "<none>"
	if s := csr.Spec.ExpirationSeconds; s != nil {
		requested = duration.HumanDuration(time.Duration(*s) * time.Second)
	}
	return []interface{}{csr.Name, age(csr.CreationTimestamp, now), signer, csr.Spec.Username, requested, Summary(csr)}
}

// Summary is the CONDITION cell: Denied, Approved or Pending (in that
// precedence), then ",Failed" and ",Issued" when they apply.
func Summary(csr *certificatesv1.CertificateSigningRequest) string {
	var approved, denied, failed bool
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	s := "Pending"
	switch {
	case denied:
		s = "Denied"
	case approved:
		s = "Approved"
	}
	if failed {
		s += ",Failed"
	}
	if len(csr.Status.Certificate) > 0 {
		s += ",Issued"
	}
	return s
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
