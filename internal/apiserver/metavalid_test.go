package apiserver

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The plain checks must agree with upstream's regular expressions: each
// accepts a string exactly when upstream does (annotation keys: only when
// upstream does).
func TestPlainChecksAgreeWithUpstream(t *testing.T) {
	fixed := []string{
		"", "a", "A", "0", "-", "a-", "-a", "a-b", "a--b", "a.b", "a..b", ".a", "a.", "a_b", "a/b", "/b", "a/",
		"a/b/c", "example.com/x", "Example.com/x", "example.com/X", "a.b-c.d/e_f.g-h", "é", "k/é", "\u212a",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "ab",
		strings.Repeat("a", 63) + "/" + strings.Repeat("b", 63), strings.Repeat("a", 63) + "/" + strings.Repeat("b", 64),
	}
	rng := rand.New(rand.NewSource(1))
	const alphabet = "ab09AZ-_./é"
	runes := []rune(alphabet)
	for i := 0; i < 20000; i++ {
		n := rng.Intn(12)
		var b strings.Builder
		for j := 0; j < n; j++ {
			b.WriteRune(runes[rng.Intn(len(runes))])
		}
		fixed = append(fixed, b.String())
	}
	for _, s := range fixed {
		checks := []struct {
			name     string
			plain    bool
			upstream []string
			exact    bool
		}{
			{"dns label", isDNSLabel(s), apivalidation.NameIsDNSLabel(s, false), true},
			{"dns subdomain", isDNSSubdomain(s), apivalidation.NameIsDNSSubdomain(s, false), true},
			{"label key", isLabelKey(s, false), validation.IsQualifiedName(s), true},
			{"label value", isLabelValue(s), validation.IsValidLabelValue(s), true},
			{"annotation key", isLabelKey(s, true), validation.IsQualifiedName(strings.ToLower(s)), false},
		}
		for _, c := range checks {
			upstreamOK := len(c.upstream) == 0
			if c.plain && !upstreamOK || c.exact && c.plain != upstreamOK {
				t.Errorf("%s %q: plain check says %v, upstream says %q", c.name, s, c.plain, c.upstream)
			}
		}
	}
}

func TestValidateMetaMatchesUpstream(t *testing.T) {
	valid := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "zone-a-1", Namespace: "kube-node-lease", Generation: 2,
			Labels:          map[string]string{"kubernetes.io/hostname": "zone-a-1", "app": "Web_1.x", "empty": ""},
			Annotations:     map[string]string{"node.alpha.kubernetes.io/ttl": "0", "Example.COM/Key": "v"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "zone-a-1", UID: "u"}},
			Finalizers:      []string{"example.com/f"},
		}
	}
	cases := []struct {
		name       string
		namespaced bool
		labels     bool // names are DNS labels
		change     func(m *metav1.ObjectMeta)
		plain      bool // expected to pass the plain checks
	}{
		{name: "valid", namespaced: true, change: func(*metav1.ObjectMeta) {}},
		{name: "valid cluster-scoped", change: func(m *metav1.ObjectMeta) { m.Namespace = "" }},
		{name: "plain", namespaced: true, plain: true, change: func(m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0", "b/Key": "v"}
		}},
		{name: "generateName", namespaced: true, change: func(m *metav1.ObjectMeta) { m.GenerateName = "web-" }},
		{name: "bad generateName", namespaced: true, change: func(m *metav1.ObjectMeta) { m.GenerateName = "Web-" }},
		{name: "no name", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Name = "" }},
		{name: "bad name", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Name = "Zone" }},
		{name: "dotted namespace name", labels: true, change: func(m *metav1.ObjectMeta) { m.Name = "a.b"; m.Namespace = "" }},
		{name: "missing namespace", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Namespace = "" }},
		{name: "namespace on cluster kind", change: func(*metav1.ObjectMeta) {}},
		{name: "bad namespace", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Namespace = "a.b" }},
		{name: "negative generation", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Generation = -1 }},
		{name: "bad label key", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a//b": "x"} }},
		{name: "bad label value", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "-x"} }},
		{name: "bad annotation key", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{"a b": "x"} }},
		{name: "annotations too large", namespaced: true, change: func(m *metav1.ObjectMeta) {
			m.Annotations = map[string]string{"a": strings.Repeat("x", apivalidation.TotalAnnotationSizeLimitB)}
		}},
		{name: "bad owner reference", namespaced: true, change: func(m *metav1.ObjectMeta) { m.OwnerReferences[0].UID = "" }},
		{name: "two controllers", namespaced: true, change: func(m *metav1.ObjectMeta) {
			m.OwnerReferences = []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "Node", Name: "a", UID: "u", Controller: ptr.To(true)},
				{APIVersion: "v1", Kind: "Node", Name: "b", UID: "v", Controller: ptr.To(true)},
			}
		}},
		{name: "bad finalizer", namespaced: true, change: func(m *metav1.ObjectMeta) { m.Finalizers = []string{"a b"} }},
		{name: "conflicting finalizers", namespaced: true, change: func(m *metav1.ObjectMeta) {
			m.Finalizers = []string{metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}
		}},
		{name: "managed fields", namespaced: true, change: func(m *metav1.ObjectMeta) {
			m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: "Bogus"}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := valid()
			c.change(&m)
			nameFn := apivalidation.NameIsDNSSubdomain
			if c.labels {
				nameFn = apivalidation.NameIsDNSLabel
			}
			want := errorStrings(apivalidation.ValidateObjectMetaAccessor(&m, c.namespaced, nameFn, field.NewPath("metadata")))
			got := errorStrings(validateMeta(&m, c.namespaced, c.labels))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("errors (-upstream +validateMeta):\n%s", diff)
			}
			isName := isDNSSubdomain
			if c.labels {
				isName = isDNSLabel
			}
			if c.plain && !plainlyValidMeta(&m, c.namespaced, nameFn, isName) {
				t.Errorf("plainlyValidMeta is false for valid metadata")
			}
		})
	}
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
