package apiserver

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// DecodeStored turns a value the server stored for gvr into its typed
// object, with resourceVersion rev, as the server itself reads it.
func (s *Server) DecodeStored(gvr schema.GroupVersionResource, value []byte, rev int64) (runtime.Object, error) {
	st, ok := s.stores[gvr]
	if !ok {
		return nil, notFound()
	}
	return st.decode(value, rev)
}
