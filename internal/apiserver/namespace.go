package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SystemNamespaces exist from the first start. The first three may never be
// deleted, as upstream protects them.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

func protectNamespace(name string) error {
	switch name {
	case metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic:
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, name, errors.New("this namespace may not be deleted"))
		return err
	}
	return nil
}

// namespaceFinalized: a namespace is removed once spec.finalizers is empty.
func namespaceFinalized(obj runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return !ok || len(ns.Spec.Finalizers) == 0
}

func markNamespaceTerminating(obj runtime.Object) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		ns.Status.Phase = corev1.NamespaceTerminating
	}
}

// finalizeNamespace serves PUT namespaces/<name>/finalize: it replaces
// spec.finalizers and nothing else, and removes a terminating namespace
// whose finalizers are all gone.
func (s *Server) finalizeNamespace(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, name string, body runtime.Object, wo writeOptions) error {
	want := body.(*corev1.Namespace).Spec.Finalizers
	fn := func(current runtime.Object) (runtime.Object, error) {
		ns := current.(*corev1.Namespace)
		ns.Spec.Finalizers = want
		return ns, nil
	}
	// The main-resource rules keep spec.finalizers from the stored object,
	// so finalize writes through the raw path below.
	updated, err := st.finalize(ctx, name, fn, wo.dryRun)
	if err != nil {
		return err
	}
	s.respond(w, r, st, http.StatusOK, updated)
	return nil
}

// finalize applies fn to a namespace without the main resource's rules
// (which keep spec.finalizers), deleting it when it is terminating and no
// finalizer is left.
func (st *objectStore) finalize(ctx context.Context, name string, fn updateFunc, dryRun bool) (runtime.Object, error) {
	check := func(current runtime.Object) (runtime.Object, error) {
		obj, err := fn(current)
		if err != nil {
			return nil, err
		}
		for i, f := range obj.(*corev1.Namespace).Spec.Finalizers {
			if f == "" {
				return nil, apierrors.NewInvalid(st.gk(), name, fieldErrorList("spec.finalizers", i, string(f)))
			}
		}
		return obj, nil
	}
	released := func(obj runtime.Object) bool {
		ns := obj.(*corev1.Namespace)
		return ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) == 0 && len(ns.Finalizers) == 0
	}
	return st.rawUpdate(ctx, "", name, check, released, dryRun)
}

// EnsureNamespaces creates the system namespaces that are missing.
func (s *Server) EnsureNamespaces(ctx context.Context) error {
	if s.namespace == nil {
		return nil
	}
	for _, name := range SystemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := s.namespace.Create(ctx, "", ns, createOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}
