package apiserver

import (
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Metadata validation on every write.
//
// validateMeta gives exactly the errors of upstream's
// ValidateObjectMetaAccessor. That function checks names, label keys and
// values and annotation keys with regular expressions and builds a field
// path per check even when all is well, which made it a large part of the
// cost of a Lease renewal. Nearly every object is valid, so validateMeta
// first checks with plain loops whether it plainly is (each loop accepts
// only what the regular expression accepts); only an object that fails
// there, or that has something the loops do not cover, goes through
// upstream's function, which then words the errors.

var (
	metadataPath        = field.NewPath("metadata")
	ownerReferencesPath = metadataPath.Child("ownerReferences")
	finalizersPath      = metadataPath.Child("finalizers")
)

// validateMeta checks an object's metadata as
// apivalidation.ValidateObjectMetaAccessor(m, namespaced, nameFn,
// metadataPath) does, where nameFn is NameIsDNSLabel when namesAreLabels and
// NameIsDNSSubdomain otherwise.
func validateMeta(m metav1.Object, namespaced, namesAreLabels bool) field.ErrorList {
	nameFn, isName := apivalidation.NameIsDNSSubdomain, isDNSSubdomain
	if namesAreLabels {
		nameFn, isName = apivalidation.NameIsDNSLabel, isDNSLabel
	}
	if plainlyValidMeta(m, namespaced, nameFn, isName) {
		return nil
	}
	return apivalidation.ValidateObjectMetaAccessor(m, namespaced, nameFn, metadataPath)
}

// plainlyValidMeta reports whether m passes every metadata check; false
// means it may not. isName must accept only names nameFn accepts.
func plainlyValidMeta(m metav1.Object, namespaced bool, nameFn apivalidation.ValidateNameFunc, isName func(string) bool) bool {
	if g := m.GetGenerateName(); g != "" && len(nameFn(g, true)) > 0 {
		return false
	}
	if !isName(m.GetName()) {
		return false
	}
	if ns := m.GetNamespace(); namespaced != (ns != "") || (namespaced && !isDNSLabel(ns)) {
		return false
	}
	if m.GetGeneration() < 0 || len(m.GetManagedFields()) > 0 {
		return false
	}
	for k, v := range m.GetLabels() {
		if !isLabelKey(k, false) || !isLabelValue(v) {
			return false
		}
	}
	size := 0
	for k, v := range m.GetAnnotations() {
		if !isLabelKey(k, true) {
			return false
		}
		size += len(k) + len(v)
	}
	if size > apivalidation.TotalAnnotationSizeLimitB {
		return false
	}
	if refs := m.GetOwnerReferences(); len(refs) > 0 && len(apivalidation.ValidateOwnerReferences(refs, ownerReferencesPath)) > 0 {
		return false
	}
	if f := m.GetFinalizers(); len(f) > 0 && len(apivalidation.ValidateFinalizers(f, finalizersPath)) > 0 {
		return false
	}
	return true
}

// isDNSLabel reports whether s is a lowercase RFC 1123 label of at most 63
// characters.
func isDNSLabel(s string) bool {
	return len(s) <= 63 && isDNSLabelChars(s)
}

// isDNSSubdomain reports whether s is a lowercase RFC 1123 subdomain of at
// most 253 characters: labels of any length joined by dots.
func isDNSSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isDNSLabelChars(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// isDNSLabelChars reports whether s is non-empty, made of a-z, 0-9 and
// '-', and starts and ends with a letter or digit.
func isDNSLabelChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// isLabelKey reports whether s is a qualified name: an optional DNS
// subdomain prefix and '/', then a name of at most 63 letters, digits, '-',
// '_' and '.' that starts and ends with a letter or digit. With caseless,
// upper-case ASCII letters count as lower case in the prefix, as for
// annotation keys.
func isLabelKey(s string, caseless bool) bool {
	name := s
	for i := 0; i < len(s); i++ {
		if s[i] != '/' {
			continue
		}
		prefix := s[:i]
		name = s[i+1:]
		if caseless && hasUpper(prefix) {
			return false // rare; upstream's check lowers it first
		}
		if !isDNSSubdomain(prefix) {
			return false
		}
		break
	}
	return name != "" && isLabelValue(name)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// isLabelValue reports whether s is empty, or at most 63 letters, digits,
// '-', '_' and '.' that start and end with a letter or digit.
func isLabelValue(s string) bool {
	if len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '-' || c == '_' || c == '.') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
