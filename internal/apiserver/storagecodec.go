package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/registry"
)

// How objects sit in storage.
//
// A kind whose Go type has generated protobuf code (every k8s.io/api type)
// is stored as kube-apiserver stores it in etcd: the four bytes "k8s\x00",
// then a runtime.Unknown whose apiVersion and kind name the object and whose
// raw bytes are the object in protobuf. Any other kind is stored as JSON.
// Both forms carry no resourceVersion (the storage revision is the
// resourceVersion) and are deterministic: the same object always gives the
// same bytes, which is what lets an update that changes nothing be skipped.
//
// Reading accepts either form for every kind, so a data directory written
// when everything was JSON stays readable; each object moves to protobuf
// the next time it is written.

// storageProtobufPrefix starts every protobuf value, as upstream's.
var storageProtobufPrefix = []byte("k8s\x00")

// errStoredValue marks a stored value that cannot be read as the kind it is
// stored under.
var errStoredValue = errors.New("unreadable stored value")

// protoObject is an API type with generated protobuf code: what upstream's
// protobuf serializer can write and what decodeStoredProtobuf can read.
type protoObject interface {
	runtime.Object
	runtime.ProtobufMarshaller
	Unmarshal(data []byte) error
}

// encodeStored serializes obj, which must already carry its apiVersion and
// kind and no resourceVersion, in the storage form of its type.
func encodeStored(obj runtime.Object) ([]byte, error) {
	if _, ok := obj.(protoObject); !ok {
		return json.Marshal(obj)
	}
	var w oneWrite
	if err := protobufSerializer.EncodeWithAllocator(obj, &w, &runtime.SimpleAllocator{}); err != nil {
		return nil, err
	}
	return w.data, nil
}

// oneWrite keeps what is written to it. The protobuf serializer writes its
// whole output in one Write of a buffer from its allocator, and a
// SimpleAllocator makes a new buffer for every call, so the first write is
// kept without copying it.
type oneWrite struct{ data []byte }

func (w *oneWrite) Write(p []byte) (int, error) {
	if w.data == nil {
		w.data = p
	} else {
		w.data = append(w.data, p...)
	}
	return len(p), nil
}

// decodeStored reads a stored value of kind k, in either storage form,
// into a new object. It sets neither apiVersion/kind nor resourceVersion;
// the caller does. value is not retained.
func decodeStored(k *registry.Kind, value []byte) (runtime.Object, error) {
	obj := k.New()
	if !bytes.HasPrefix(value, storageProtobufPrefix) {
		if err := json.Unmarshal(value, obj); err != nil {
			return nil, err
		}
		return obj, nil
	}
	return obj, decodeStoredProtobuf(k, value[len(storageProtobufPrefix):], obj)
}

// decodeStoredProtobuf reads the runtime.Unknown envelope in data (after
// the prefix) into obj, checking that it holds protobuf of kind k.
func decodeStoredProtobuf(k *registry.Kind, data []byte, obj runtime.Object) error {
	into, ok := obj.(protoObject)
	if !ok {
		return fmt.Errorf("%w: protobuf, but %s has no protobuf form", errStoredValue, k.Kind)
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(data); err != nil {
		return fmt.Errorf("%w: envelope: %w", errStoredValue, err)
	}
	if want := k.GroupVersion.String(); unk.APIVersion != want || unk.Kind != k.Kind {
		return fmt.Errorf("%w: holds apiVersion %q kind %q, want %q %q", errStoredValue, unk.APIVersion, unk.Kind, want, k.Kind)
	}
	if unk.ContentEncoding != "" || (unk.ContentType != "" && unk.ContentType != runtime.ContentTypeProtobuf) {
		return fmt.Errorf("%w: content encoding %q type %q, want plain protobuf", errStoredValue, unk.ContentEncoding, unk.ContentType)
	}
	return into.Unmarshal(unk.Raw)
}
