package apiserver

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/auth"
	"knode/internal/storage"
)

// StoragePrefix is the storage key prefix under which the server keeps the
// objects of gvr ("/registry/<resource>/"), for in-process readers that
// follow the store itself (the simulator); ok is false for a resource the
// server does not serve.
func (s *Server) StoragePrefix(gvr schema.GroupVersionResource) (prefix string, ok bool) {
	st, ok := s.stores[gvr]
	if !ok {
		return "", false
	}
	return st.prefix, true
}

// DecodeStored turns the stored version kv of an object of gvr into its
// typed object, with kv's revision as resourceVersion, as the server itself
// reads it. The object may be the one the server keeps from writing it: it
// is shared, and must be treated as read-only, as informers' objects are.
func (s *Server) DecodeStored(gvr schema.GroupVersionResource, kv storage.KV) (runtime.Object, error) {
	st, ok := s.stores[gvr]
	if !ok {
		return nil, notFound()
	}
	return st.decodeShared(kv)
}

// UpdateAs and PatchAs are a PUT and a PATCH by user of the named object
// of gvr (or of its subresource), made in process without HTTP. The
// request is authorized as its HTTP twin would be, and then runs the same
// admission, rules, validation and storage. Only the wire is skipped:
// authentication (user is given), the body's encoding, content
// negotiation, request metrics and warnings. They are for the simulator,
// whose agents renew millions of Leases in an hour of virtual time.
//
// The result is the caller's own copy, without apiVersion and kind, as
// client-go decodes a typed response. Errors are the *StatusError a client
// would decode from the HTTP response; a context that has ended gives its
// own error, as the transport would.

// UpdateAs is the PUT of obj. obj is copied, never changed, as if it had
// been encoded.
func (s *Server) UpdateAs(ctx context.Context, user *auth.User, gvr schema.GroupVersionResource, namespace, name, subresource string, obj runtime.Object) (runtime.Object, error) {
	return s.writeAs(ctx, user, "update", gvr, namespace, name, subresource, func(st *objectStore) (updateFunc, string, error) {
		fn := func(runtime.Object) (runtime.Object, error) {
			c := obj.DeepCopyObject()
			setTypeMeta(st.kind, c)
			return c, nil
		}
		return fn, bodyRV(obj), nil
	})
}

// PatchAs is the PATCH with body, a patch of patchType.
func (s *Server) PatchAs(ctx context.Context, user *auth.User, gvr schema.GroupVersionResource, namespace, name, subresource string, patchType types.PatchType, body []byte) (runtime.Object, error) {
	return s.writeAs(ctx, user, "patch", gvr, namespace, name, subresource, func(st *objectStore) (updateFunc, string, error) {
		if err := checkPatchType(patchType); err != nil {
			return nil, "", err
		}
		var warnings []string
		return st.patchFunc(patchType, body, validationWarn, &warnings), "", nil
	})
}

// writeAs authorizes verb and runs the update that prepare builds, which
// names the resourceVersion it expects ("" for none).
func (s *Server) writeAs(ctx context.Context, user *auth.User, verb string, gvr schema.GroupVersionResource, namespace, name, subresource string, prepare func(*objectStore) (updateFunc, string, error)) (runtime.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := s.writeAsStatus(ctx, user, verb, gvr, namespace, name, subresource, prepare)
	if err != nil {
		status := *toStatus(err)
		status.TypeMeta = metav1.TypeMeta{} // as client-go decodes it
		return nil, &apierrors.StatusError{ErrStatus: status}
	}
	return out, nil
}

func (s *Server) writeAsStatus(ctx context.Context, user *auth.User, verb string, gvr schema.GroupVersionResource, namespace, name, subresource string, prepare func(*objectStore) (updateFunc, string, error)) (runtime.Object, error) {
	if user == nil {
		return nil, apierrors.NewUnauthorized("Unauthorized")
	}
	st, ok := s.stores[gvr]
	if !ok || name == "" || (subresource != "" && (subresource != "status" || st.kind.Status == nil)) {
		return nil, notFound()
	}
	if !st.kind.Namespaced {
		namespace = ""
	}
	// Path is left out: authorizers read it only for requests outside
	// the API groups.
	a := auth.Attributes{User: user, Verb: verb, Namespace: namespace, APIGroup: gvr.Group, APIVersion: gvr.Version, Resource: gvr.Resource, Subresource: subresource, Name: name, ResourceRequest: true}
	ctx = auth.WithUser(ctx, user)
	decision, reason, err := s.cfg.Authorizer.Authorize(ctx, a)
	if err != nil {
		s.log.Warn("authorizer error", "err", err)
	}
	if decision != auth.Allow {
		return nil, forbidden(a, reason)
	}
	fn, expectedRV, err := prepare(st)
	if err != nil {
		return nil, err
	}
	uo := s.updateOptions(ctx, st, namespace, a, writeOptions{})
	uo.expectedRV = expectedRV
	updated, err := st.Update(ctx, namespace, name, fn, uo)
	if err != nil {
		return nil, err
	}
	out := updated.DeepCopyObject()
	out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return out, nil
}
