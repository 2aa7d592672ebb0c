package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"

	"knode/internal/registry"
	"knode/internal/storage"
)

// fieldValidation is the server-side treatment of unknown and duplicate
// fields in a request body (the fieldValidation query parameter).
type fieldValidation string

const (
	validationStrict fieldValidation = "Strict"
	validationWarn   fieldValidation = "Warn"
	validationIgnore fieldValidation = "Ignore"
)

// parseFieldValidation reads the fieldValidation parameter of a query.
// Upstream defaults to Warn when the parameter is absent.
func parseFieldValidation(q url.Values) (fieldValidation, error) {
	switch v := q.Get("fieldValidation"); v {
	case "":
		return validationWarn, nil
	case string(validationStrict), string(validationWarn), string(validationIgnore):
		return fieldValidation(v), nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation parameter unsupported: %s. Supported values: Ignore, Strict, Warn", v))
	}
}

// decodeBody turns a JSON request body into a new object of kind k.
//
// It checks apiVersion and kind when the body names them (an empty one is
// filled from the endpoint, as upstream does), and applies fieldValidation:
// Strict turns unknown or duplicate fields into 400, Warn returns them as
// warnings, Ignore drops them.
func decodeBody(k *registry.Kind, data []byte, fv fieldValidation) (runtime.Object, []string, error) {
	return decodeBodyAs(k, "application/json", data, fv)
}

// protobufMediaType is the Kubernetes protobuf encoding, which client-go's
// typed clients send by default.
const protobufMediaType = "application/vnd.kubernetes.protobuf"

var protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

// decodeBodyAs decodes a body sent with the given Content-Type: JSON, or
// Kubernetes protobuf (where unknown fields cannot be detected, as
// upstream).
func decodeBodyAs(k *registry.Kind, contentType string, data []byte, fv fieldValidation) (runtime.Object, []string, error) {
	obj, warnings, err := decodeObject(k.New(), k.GroupVersion.WithKind(k.Kind), contentType, data, fv)
	if err != nil {
		return nil, nil, err
	}
	setTypeMeta(k, obj)
	return obj, warnings, nil
}

// decodeObject decodes a body sent with the given Content-Type into into,
// a new object of kind gvk.
func decodeObject(into runtime.Object, gvk schema.GroupVersionKind, contentType string, data []byte, fv fieldValidation) (runtime.Object, []string, error) {
	kind, version := gvk.Kind, gvk.Version
	cannot := func(err error) error {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind, version, kind, err))
	}
	if mediaType(contentType) == protobufMediaType {
		if out, ok, err := decodeProtobufBody(into, gvk, data); ok {
			if err != nil {
				return nil, nil, cannot(err)
			}
			return out, nil, nil
		}
		out, got, err := protobufSerializer.Decode(data, nil, into)
		if err != nil {
			return nil, nil, cannot(err)
		}
		if got != nil && (got.Kind != kind || got.GroupVersion() != gvk.GroupVersion()) {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s", got.Kind, got.Version, kind))
		}
		setKind(out, gvk)
		return out, nil, nil
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("couldn't get version/kind; json parse error: %v", err))
	}
	return decodeJSON(into, gvk, data, tm, fv)
}

// decodeJSON decodes a JSON body into into, a new object of kind gvk; tm
// is what the body's apiVersion and kind read as.
func decodeJSON(into runtime.Object, gvk schema.GroupVersionKind, data []byte, tm metav1.TypeMeta, fv fieldValidation) (runtime.Object, []string, error) {
	kind, version := gvk.Kind, gvk.Version
	cannot := func(err error) error {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind, version, kind, err))
	}
	if tm.APIVersion != "" && !isAPIVersion(tm.APIVersion, gvk.GroupVersion()) {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", tm.APIVersion, gvk.GroupVersion()))
	}
	if tm.Kind != "" && tm.Kind != kind {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: no kind %q is registered for version %q", tm.Kind, version, kind, tm.Kind, gvk.GroupVersion()))
	}
	strictErrs, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return nil, nil, cannot(err)
	}
	var warnings []string
	if len(strictErrs) > 0 {
		switch fv {
		case validationStrict:
			return nil, nil, cannot(runtime.NewStrictDecodingError(strictErrs))
		case validationWarn:
			for _, e := range strictErrs {
				warnings = append(warnings, e.Error())
			}
		}
	}
	setKind(into, gvk)
	return into, warnings, nil
}

// decodeProtobufBody decodes a protobuf body whose envelope names gvk
// exactly into into, a new object of that kind, as the protobuf serializer
// would, without its lookups of into's kind. ok is false, and nothing is
// decoded, for any other body: the serializer then decodes it, or words
// what is wrong with it. err is the object's own decoding error.
func decodeProtobufBody(into runtime.Object, gvk schema.GroupVersionKind, data []byte) (obj runtime.Object, ok bool, err error) {
	pb, isProto := into.(protoObject)
	tm, typed := into.GetObjectKind().(*metav1.TypeMeta)
	if !isProto || !typed || !bytes.HasPrefix(data, storageProtobufPrefix) {
		return nil, false, nil
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(data[len(storageProtobufPrefix):]); err != nil {
		return nil, false, nil
	}
	if unk.Kind != gvk.Kind || !isAPIVersion(unk.APIVersion, gvk.GroupVersion()) {
		return nil, false, nil
	}
	if err := pb.Unmarshal(unk.Raw); err != nil {
		return nil, true, err
	}
	tm.APIVersion, tm.Kind = unk.APIVersion, unk.Kind
	return into, true, nil
}

// isAPIVersion reports whether apiVersion is gv.String(), without making
// that string.
func isAPIVersion(apiVersion string, gv schema.GroupVersion) bool {
	if gv.Group == "" {
		return apiVersion == gv.Version
	}
	g := len(gv.Group)
	return len(apiVersion) == g+1+len(gv.Version) && apiVersion[:g] == gv.Group &&
		apiVersion[g] == '/' && apiVersion[g+1:] == gv.Version
}

// setKind stamps apiVersion and kind gvk on obj, unless it has them.
func setKind(obj runtime.Object, gvk schema.GroupVersionKind) {
	if kind := obj.GetObjectKind(); kind.GroupVersionKind() != gvk {
		kind.SetGroupVersionKind(gvk)
	}
}

// setTypeMeta stamps apiVersion and kind on an object of kind k.
func setTypeMeta(k *registry.Kind, obj runtime.Object) {
	setKind(obj, k.GroupVersion.WithKind(k.Kind))
}

// mediaRequest is what the Accept header asks the response to be.
type mediaRequest struct {
	// protobuf: the client prefers Kubernetes protobuf (client-go does).
	protobuf bool
	table    bool
	// discoveryV2: aggregated discovery (apidiscovery.k8s.io/v2).
	discoveryV2 bool
}

// negotiate reads the Accept header. Only JSON is produced; a Table is
// returned when the first acceptable clause asks for one.
func negotiate(r *http.Request) mediaRequest {
	var m mediaRequest
	for clauses, more := r.Header.Get("Accept"), true; more; {
		var clause string
		clause, clauses, more = strings.Cut(clauses, ",")
		as, g, v := mediaParam(clause, "as"), mediaParam(clause, "g"), mediaParam(clause, "v")
		if as == "Table" && g == "meta.k8s.io" && (v == "v1" || v == "v1beta1") {
			m.table = true
			return m
		}
		if as == "APIGroupDiscoveryList" && g == "apidiscovery.k8s.io" && v == "v2" {
			m.discoveryV2 = true
			return m
		}
		mt := mediaType(clause)
		if mt == protobufMediaType && as == "" {
			m.protobuf = true
			return m
		}
		if mt == "application/json" && as == "" || mt == "*/*" || mt == "application/*" {
			return m
		}
	}
	return m
}

// mediaType is the type/subtype of a Content-Type or Accept clause.
func mediaType(clause string) string {
	mt, _, _ := strings.Cut(clause, ";")
	return strings.TrimSpace(mt)
}

// mediaParam is the value of parameter key in "type/sub;k=v;k2=v2" (the
// last one when it is repeated), or "".
func mediaParam(clause, key string) string {
	_, params, more := strings.Cut(clause, ";")
	value := ""
	for more {
		var p string
		p, params, more = strings.Cut(params, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.TrimSpace(k) == key {
			value = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return value
}

// writeProtobuf writes a registered API object in Kubernetes protobuf,
// falling back to JSON for a type protobuf cannot carry.
func writeProtobuf(w http.ResponseWriter, code int, obj runtime.Object) {
	var out oneWrite
	if err := protobufSerializer.EncodeWithAllocator(obj, &out, &runtime.SimpleAllocator{}); err != nil {
		writeJSON(w, code, obj)
		return
	}
	w.Header().Set("Content-Type", protobufMediaType)
	w.WriteHeader(code)
	_, _ = w.Write(out.data)
}

// writeJSON writes obj with the given HTTP status.
func writeJSON(w http.ResponseWriter, code int, obj interface{}) {
	writeJSONTyped(w, code, "application/json", obj)
}

// writeJSONTyped writes obj as JSON under the given media type.
func writeJSONTyped(w http.ResponseWriter, code int, mediaType string, obj interface{}) {
	data, err := json.Marshal(obj)
	if err != nil {
		status := apierrors.NewInternalError(err).Status()
		data, _ = json.Marshal(&status)
		code = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeError writes err as a metav1.Status. Errors that are not API status
// errors become 500s.
func writeError(w http.ResponseWriter, err error) {
	status := toStatus(err)
	writeJSON(w, int(status.Code), status)
}

func toStatus(err error) *metav1.Status {
	var st apierrors.APIStatus
	switch {
	case errors.As(err, &st):
	case errors.Is(err, storage.ErrUnavailable):
		// Whatever the request, a store that cannot serve (etcd without a
		// quorum) is the server being unavailable, not a bug.
		st = apierrors.NewServiceUnavailable(err.Error())
	default:
		st = apierrors.NewInternalError(err)
	}
	status := st.Status()
	status.Kind = "Status"
	status.APIVersion = "v1"
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	return &status
}
