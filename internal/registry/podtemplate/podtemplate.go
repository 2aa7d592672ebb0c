// Package podtemplate holds the API rules for the pod templates that
// workloads (ReplicaSets, DaemonSets) embed: the defaults upstream gives a
// PodTemplateSpec and its validation, with the checks every pod-creating
// controller adds on top (the selector must match the template's labels,
// restartPolicy must be Always, no activeDeadlineSeconds).
//
// It reuses internal/registry/pod for everything a pod and a template share:
// the template is wrapped in a pod, defaulted and validated by the pod rules,
// and the pod-only parts are undone (defaults) or re-pathed (errors) so
// clients see upstream's template behaviour and field paths, e.g.
// spec.template.spec.containers[0].image.
//
// Callers are the workload registries; they pass the path of the template
// inside their object (field.NewPath("spec", "template")). Every function is
// pure.
//
// What it does not do: the PodTemplate kind itself (not served), and the
// pod rules the pod package leaves out (see its validation.go).
package podtemplate

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	podreg "knode/internal/registry/pod"
)

// Upstream's literal messages.
const (
	msgSelectorMismatch = "`selector` does not match template `labels`"
	msgEphemeral        = "ephemeral containers not allowed in pod template"
)

var podKind = podreg.Kind()

// Default applies the defaults upstream's decoder gives a pod template
// (SetDefaults_PodSpec and the nested container, volume and probe
// defaults). Three pod-only defaults are not applied, as upstream does not
// apply them to templates: enableServiceLinks, requests copied from limits,
// and hostPort copied from containerPort under hostNetwork. The pods a
// controller creates from the template get those when they are created.
func Default(t *corev1.PodTemplateSpec) {
	orig := t.Spec.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	podKind.Default(pod)
	t.Spec = pod.Spec
	t.Spec.EnableServiceLinks = orig.EnableServiceLinks
	undoPodOnly(t.Spec.InitContainers, orig.InitContainers)
	undoPodOnly(t.Spec.Containers, orig.Containers)
}

// undoPodOnly removes the requests the pod defaults copied from limits and
// the host ports they copied from container ports; defaulted contains the
// same containers as orig, in order.
func undoPodOnly(defaulted, orig []corev1.Container) {
	for i := range defaulted {
		d, o := &defaulted[i], &orig[i]
		for name := range d.Resources.Requests {
			if _, had := o.Resources.Requests[name]; !had {
				delete(d.Resources.Requests, name)
			}
		}
		if o.Resources.Requests == nil && len(d.Resources.Requests) == 0 {
			d.Resources.Requests = nil
		}
		for j := range d.Ports {
			if o.Ports[j].HostPort == 0 {
				d.Ports[j].HostPort = 0
			}
		}
	}
}

// Validate checks a template as upstream's ValidatePodTemplateSpec does: its
// labels and annotations, and its spec by the pod rules. path is where the
// template sits in the object, e.g. spec.template. Upstream reports label
// errors at <path>.labels (not .metadata.labels); that path is kept.
func Validate(t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, path.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, path.Child("annotations"))...)

	pod := &corev1.Pod{ObjectMeta: *t.ObjectMeta.DeepCopy(), Spec: *t.Spec.DeepCopy()}
	pod.Spec.EphemeralContainers = nil
	for _, e := range podKind.Validate(pod) {
		if e.Type == field.ErrorTypeForbidden && e.Field == "spec.nodeName" {
			// A pod-create rule (nodeName with scheduling gates); upstream
			// does not apply it to templates.
			continue
		}
		e.Field = repath(e.Field, path)
		errs = append(errs, e)
	}
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("spec", "ephemeralContainers"), msgEphemeral))
	}
	return errs
}

// repath moves an error path of the wrapped pod under the template's path:
// spec.x becomes <path>.spec.x and metadata.annotations becomes
// <path>.annotations, as upstream's template validation reports them.
func repath(p string, path *field.Path) string {
	base := path.String()
	switch {
	case p == "spec" || strings.HasPrefix(p, "spec.") || strings.HasPrefix(p, "spec["):
		return base + "." + p
	case strings.HasPrefix(p, "metadata."):
		return base + "." + strings.TrimPrefix(p, "metadata.")
	}
	return base + "." + p
}

// ValidateForController adds to Validate the rules every pod-creating
// workload applies to its template (upstream's
// ValidatePodTemplateSpecForReplicaSet and the DaemonSet equivalent):
// the selector, when it parses and is not empty, must match the template's
// labels; restartPolicy must be Always; activeDeadlineSeconds is refused
// with "activeDeadlineSeconds in <kind> is not Supported". kind is the
// workload's Kind, e.g. "ReplicaSet".
func ValidateForController(t *corev1.PodTemplateSpec, selector *metav1.LabelSelector, kind string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil && !sel.Empty() && !sel.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(path.Child("metadata", "labels"), t.Labels, msgSelectorMismatch))
	}
	errs = append(errs, Validate(t, path)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(path.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(path.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

// ContainerCells are the CONTAINERS and IMAGES cells kubectl prints for a
// workload with -o wide: names and images joined by commas.
func ContainerCells(t *corev1.PodTemplateSpec) (names, images string) {
	n := make([]string, len(t.Spec.Containers))
	im := make([]string, len(t.Spec.Containers))
	for i, c := range t.Spec.Containers {
		n[i], im[i] = c.Name, c.Image
	}
	return strings.Join(n, ","), strings.Join(im, ",")
}
