// Package priority is upstream's Priority admission plugin: it gives every
// new pod the priority of its PriorityClass, and keeps PriorityClasses
// consistent.
//
// On pods (not subresources):
//   - CREATE: spec.priorityClassName names the class; without one, the
//     global default class (the lowest-valued one if several claim it)
//     fills the name, or priority 0 and PreemptLowerPriority apply when
//     there is none. A class that does not exist refuses the pod with 403
//     "no PriorityClass with name X was found". spec.priority and
//     spec.preemptionPolicy are set from the class; a pod that already
//     carries a different value is refused with 403.
//   - UPDATE: a pod that omits spec.priority or spec.preemptionPolicy
//     keeps the stored value (the pod rules then refuse any change).
//
// On priorityclasses: CREATE or UPDATE of a globalDefault class while
// another class is already the default is refused with 403 "PriorityClass
// X is already marked as default. Only one default can exist"; DELETE of a
// built-in class is refused with 403 "this is a system priority class and
// cannot be deleted" (upstream refuses it in its storage layer).
//
// What the caller must do: give it Get and List over PriorityClasses
// (FromClient builds them from a clientset) and run it after defaulting
// and before validation. It does not create the built-in classes (see
// registry/priorityclass.System).
package priority

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"knode/internal/apiserver"
	"knode/internal/registry/priorityclass"
)

// Name is the plugin's name, as upstream's.
const Name = "Priority"

// Config builds a Plugin.
type Config struct {
	// Get returns the PriorityClass called name, or an error for which
	// apierrors.IsNotFound is true when there is none. Required.
	Get func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error)
	// List returns every PriorityClass. Required.
	List func(ctx context.Context) ([]schedulingv1.PriorityClass, error)
}

// FromClient is a Config that reads PriorityClasses through cs.
func FromClient(cs kubernetes.Interface) Config {
	return Config{
		Get: func(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
			return cs.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
		},
		List: func(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
			l, err := cs.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		},
	}
}

// Plugin is the admission plugin; it keeps no state and is safe for
// concurrent use.
type Plugin struct {
	cfg Config
}

var _ apiserver.Admitter = (*Plugin)(nil)

// New checks cfg and returns the plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.Get == nil || cfg.List == nil {
		return nil, errors.New("priority admission: Config.Get and Config.List are required")
	}
	return &Plugin{cfg: cfg}, nil
}

var (
	podsResource    = schema.GroupResource{Resource: "pods"}
	classesResource = schema.GroupResource{Group: schedulingv1.GroupName, Resource: "priorityclasses"}
)

// Admit implements apiserver.Admitter.
func (p *Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Kind == nil || a.Subresource != "" {
		return nil
	}
	switch (schema.GroupResource{Group: a.Kind.GroupVersion.Group, Resource: a.Kind.Resource}) {
	case podsResource:
		return p.admitPod(ctx, a)
	case classesResource:
		return p.admitClass(ctx, a)
	}
	return nil
}

func (p *Plugin) admitPod(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Operation != "CREATE" && a.Operation != "UPDATE" {
		return nil
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if a.Operation == "UPDATE" {
		old, ok := a.Old.(*corev1.Pod)
		if !ok {
			return nil
		}
		if pod.Spec.Priority == nil && old.Spec.Priority != nil {
			v := *old.Spec.Priority
			pod.Spec.Priority = &v
		}
		if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
			v := *old.Spec.PreemptionPolicy
			pod.Spec.PreemptionPolicy = &v
		}
		return nil
	}

	var priority int32
	var policy *corev1.PreemptionPolicy
	if pod.Spec.PriorityClassName == "" {
		def, err := p.globalDefault(ctx)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to get default priority class: %w", err))
		}
		if def != nil {
			pod.Spec.PriorityClassName = def.Name
			priority, policy = def.Value, def.PreemptionPolicy
		} else {
			lower := corev1.PreemptLowerPriority
			policy = &lower
		}
	} else {
		pc, err := p.cfg.Get(ctx, pod.Spec.PriorityClassName)
		if apierrors.IsNotFound(err) {
			return forbidden(a, pod, fmt.Errorf("no PriorityClass with name %v was found", pod.Spec.PriorityClassName))
		}
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to get PriorityClass with name %s: %w", pod.Spec.PriorityClassName, err))
		}
		priority, policy = pc.Value, pc.PreemptionPolicy
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return forbidden(a, pod, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return forbidden(a, pod, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
		}
		v := *policy
		pod.Spec.PreemptionPolicy = &v
	}
	return nil
}

func (p *Plugin) admitClass(ctx context.Context, a apiserver.AdmissionAttributes) error {
	switch a.Operation {
	case "DELETE":
		if priorityclass.IsSystem(a.Name) {
			return apierrors.NewForbidden(classesResource, a.Name, errors.New("this is a system priority class and cannot be deleted"))
		}
		return nil
	case "CREATE", "UPDATE":
	default:
		return nil
	}
	pc, ok := a.Object.(*schedulingv1.PriorityClass)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind PriorityClass but was unable to be converted")
	}
	if !pc.GlobalDefault {
		return nil
	}
	def, err := p.globalDefault(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to get default priority class: %w", err))
	}
	if def != nil && (a.Operation == "CREATE" || def.Name != pc.Name) {
		return apierrors.NewForbidden(classesResource, pc.Name, fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
	}
	return nil
}

// globalDefault is the class marked globalDefault, the lowest-valued one
// if a race left several; nil when there is none.
func (p *Plugin) globalDefault(ctx context.Context) (*schedulingv1.PriorityClass, error) {
	list, err := p.cfg.List(ctx)
	if err != nil {
		return nil, err
	}
	var def *schedulingv1.PriorityClass
	for i := range list {
		if pc := &list[i]; pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def, nil
}

// forbidden is upstream's admission.NewForbidden for a pod: the name is the
// request's, else the object's name or generateName.
func forbidden(a apiserver.AdmissionAttributes, pod *corev1.Pod, err error) error {
	name := a.Name
	if name == "" {
		name = pod.Name
	}
	if name == "" {
		name = pod.GenerateName
	}
	return apierrors.NewForbidden(podsResource, name, err)
}
