// Package defaulttolerationseconds is upstream's DefaultTolerationSeconds
// admission plugin (section 6.3 of the reference): it gives every pod a
// bounded tolerance of the node lifecycle controller's NoExecute taints
// node.kubernetes.io/not-ready and node.kubernetes.io/unreachable, so that
// ordinary pods leave a dead node after a while (300 s by default) instead
// of at once.
//
// On create and update of a pod (not of a subresource) it appends
//
//	{key: <taint key>, operator: Exists, effect: NoExecute, tolerationSeconds: <configured>}
//
// for each of the two keys the pod does not already tolerate. A pod already
// tolerates a key when one of its tolerations has that key or an empty key,
// and effect NoExecute or an empty effect; the operator and value are not
// looked at, as upstream.
//
// What the caller must do: run it after defaulting and before validation,
// with the typed *corev1.Pod in Object. It changes that object in place
// and never refuses a write except for an Object that is not a pod.
//
// It does not add DaemonSet tolerations (the DaemonSet controller does) and
// does not touch other kinds.
package defaulttolerationseconds

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"knode/internal/apiserver"
)

// DefaultSeconds is the toleration time both flags default to.
const DefaultSeconds int64 = 300

// Config builds a Plugin. Flags: --default-not-ready-toleration-seconds
// and --default-unreachable-toleration-seconds.
type Config struct {
	// NotReadyTolerationSeconds is the tolerationSeconds given for
	// node.kubernetes.io/not-ready:NoExecute. nil means DefaultSeconds; a
	// value of 0 (or less) is kept and means "evict at once".
	NotReadyTolerationSeconds *int64
	// UnreachableTolerationSeconds is the same for
	// node.kubernetes.io/unreachable:NoExecute.
	UnreachableTolerationSeconds *int64
}

// Plugin is the admission plugin. It keeps no state beyond its
// configuration and is safe for concurrent use.
type Plugin struct {
	notReady, unreachable int64
}

var _ apiserver.Admitter = (*Plugin)(nil)

// New returns the plugin; the zero Config gives 300 s for both taints.
func New(cfg Config) *Plugin {
	p := &Plugin{notReady: DefaultSeconds, unreachable: DefaultSeconds}
	if cfg.NotReadyTolerationSeconds != nil {
		p.notReady = *cfg.NotReadyTolerationSeconds
	}
	if cfg.UnreachableTolerationSeconds != nil {
		p.unreachable = *cfg.UnreachableTolerationSeconds
	}
	return p
}

// Admit implements apiserver.Admitter.
func (p *Plugin) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if a.Kind == nil || a.Kind.GroupVersion.Group != "" || a.Kind.Resource != "pods" {
		return nil
	}
	if a.Subresource != "" || (a.Operation != "CREATE" && a.Operation != "UPDATE") {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected *v1.Pod but got %T", a.Object))
	}
	pod.Spec.Tolerations = WithDefaults(pod.Spec.Tolerations, p.notReady, p.unreachable)
	return nil
}

// WithDefaults returns tolerations with the not-ready and unreachable
// NoExecute tolerations appended where missing (see the package comment
// for what counts as present). It may append to the slice it is given;
// tolerations already present are never changed.
func WithDefaults(tolerations []corev1.Toleration, notReadySeconds, unreachableSeconds int64) []corev1.Toleration {
	hasNotReady := tolerates(tolerations, corev1.TaintNodeNotReady)
	hasUnreachable := tolerates(tolerations, corev1.TaintNodeUnreachable)
	if !hasNotReady {
		tolerations = append(tolerations, noExecuteToleration(corev1.TaintNodeNotReady, notReadySeconds))
	}
	if !hasUnreachable {
		tolerations = append(tolerations, noExecuteToleration(corev1.TaintNodeUnreachable, unreachableSeconds))
	}
	return tolerations
}

// tolerates reports whether some toleration covers key with effect
// NoExecute by the plugin's loose rule: same or empty key, NoExecute or
// empty effect.
func tolerates(tolerations []corev1.Toleration, key string) bool {
	for _, t := range tolerations {
		if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}

func noExecuteToleration(key string, seconds int64) corev1.Toleration {
	return corev1.Toleration{
		Key:               key,
		Operator:          corev1.TolerationOpExists,
		Effect:            corev1.TaintEffectNoExecute,
		TolerationSeconds: &seconds,
	}
}
