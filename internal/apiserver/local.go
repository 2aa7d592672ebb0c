package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
