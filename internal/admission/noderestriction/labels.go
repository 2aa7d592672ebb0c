package noderestriction

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// kubeletLabels are the keys in the kubernetes.io and k8s.io namespaces a
// node may set on itself, sorted (the kubelet prints them in this order).
var kubeletLabels = []string{
	"beta.kubernetes.io/arch",
	corev1.LabelInstanceType,
	"beta.kubernetes.io/os",
	corev1.LabelFailureDomainBetaRegion,
	corev1.LabelFailureDomainBetaZone,
	corev1.LabelArchStable,
	corev1.LabelHostname,
	corev1.LabelOSStable,
	corev1.LabelInstanceTypeStable,
	corev1.LabelTopologyRegion,
	corev1.LabelTopologyZone,
}

// kubeletLabelNamespaces are the label namespaces, with their subdomains,
// in which a node may set any key; sorted.
var kubeletLabelNamespaces = []string{
	corev1.LabelNamespaceSuffixKubelet,
	corev1.LabelNamespaceSuffixNode,
}

// KubeletLabels returns the keys in the kubernetes.io and k8s.io
// namespaces that a node may set, sorted. The caller may change the slice.
func KubeletLabels() []string { return slices.Clone(kubeletLabels) }

// KubeletLabelNamespaces returns the label namespaces in which a node may
// set any key (subdomains included), sorted. The caller may change the
// slice.
func KubeletLabelNamespaces() []string { return slices.Clone(kubeletLabelNamespaces) }

// IsKubeletLabel reports whether key is on the kubelet allow-list: one of
// KubeletLabels, or a key whose namespace is one of KubeletLabelNamespaces
// or a subdomain of one. Keys outside kubernetes.io and k8s.io are not on
// the list, yet a node may set them; ForbiddenNodeLabels says what is
// refused.
func IsKubeletLabel(key string) bool {
	if slices.Contains(kubeletLabels, key) {
		return true
	}
	ns := labelNamespace(key)
	for _, allowed := range kubeletLabelNamespaces {
		if inNamespace(ns, allowed) {
			return true
		}
	}
	return false
}

// ForbiddenNodeLabel reports whether a node may not set, change or remove
// the label key on its own Node: keys in node-restriction.kubernetes.io
// (and its subdomains), which only administrators set, and keys in
// kubernetes.io or k8s.io (and their subdomains) that are not kubelet
// labels, such as node-role.kubernetes.io/worker.
func ForbiddenNodeLabel(key string) bool {
	ns := labelNamespace(key)
	if inNamespace(ns, corev1.LabelNamespaceNodeRestriction) {
		return true
	}
	return isKubernetesLabel(key) && !IsKubeletLabel(key)
}

// ForbiddenNodeLabels returns the keys of labels that ForbiddenNodeLabel
// refuses, sorted; nil if there are none. Values do not matter.
func ForbiddenNodeLabels(labels map[string]string) []string {
	var out []string
	for k := range labels {
		if ForbiddenNodeLabel(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// ValidateNodeLabelsFlag checks the labels of --node-labels as the kubelet
// does at start-up: first that none is forbidden (the error lists them and
// the allowed prefixes and keys), then that every key is a qualified name
// and every value a label value. The messages are the kubelet's; the
// caller prefixes them as it reports flag errors.
func ValidateNodeLabelsFlag(labels map[string]string) error {
	if forbidden := ForbiddenNodeLabels(labels); len(forbidden) > 0 {
		return fmt.Errorf("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: %v\n--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (%s) or be in the specifically allowed set (%s)",
			forbidden, strings.Join(kubeletLabelNamespaces, ", "), strings.Join(kubeletLabels, ", "))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var problems []string
	for _, k := range keys {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("'%s' - %s", k, strings.Join(errs, ", ")))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("'%s' - %s", labels[k], strings.Join(errs, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid node labels: %s", strings.Join(problems, "; "))
	}
	return nil
}

// modifiedLabels returns the keys whose presence or value differs between
// a and b, in either direction.
func modifiedLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if w, ok := b[k]; !ok || v != w {
			out[k] = v
		}
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || v != w {
			out[k] = v
		}
	}
	return out
}

// isKubernetesLabel: the key's namespace is kubernetes.io or k8s.io, or a
// subdomain of either.
func isKubernetesLabel(key string) bool {
	ns := labelNamespace(key)
	return inNamespace(ns, "kubernetes.io") || inNamespace(ns, "k8s.io")
}

// labelNamespace is the prefix before the first "/", or "" if none.
func labelNamespace(key string) string {
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return ""
	}
	return ns
}

// inNamespace: ns is domain or one of its subdomains.
func inNamespace(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}
