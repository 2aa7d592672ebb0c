package apiserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// How a patch is applied.
//
// Every patch applies to the JSON of the current object without its
// resourceVersion (so that only a patch that names one is conditional),
// and the result is decoded as a request body is, with fieldValidation.
// That is applyPatch then decodeBody, for all three patch types.
//
// A strategic-merge patch, which every agent sends each time it reports
// its Node's status, takes a shorter way to the same result
// (strategicMerge): the current object becomes the map strategic merge
// works on without going through its JSON, the patch is parsed once, the
// merged map is written as JSON without reflection, and its apiVersion and
// kind are read from the map rather than from that JSON. Tests check each
// step against the general way.

// applyPatch applies one patch document to the JSON of an object; schema is
// an empty object of the kind, used by strategic merge.
func applyPatch(pt types.PatchType, current, patch []byte, schemaObj runtime.Object) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		out, err := p.Apply(current)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	case types.MergePatchType:
		out, err := jsonpatch.MergePatch(current, patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	default:
		var patchMap map[string]interface{}
		if err := json.Unmarshal(patch, &patchMap); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
		}
		out, err := strategicpatch.StrategicMergePatch(current, patch, schemaObj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	}
}

// strategicMerge applies a strategic-merge patch to current and decodes
// the result, giving exactly what patchTargetJSON, applyPatch and
// decodeBody together give. ok is false, with nothing done, when the patch
// is not a JSON object or current cannot be read as one: the caller then
// takes the general way, which words the error.
func (st *objectStore) strategicMerge(current runtime.Object, patch []byte, fv fieldValidation) (obj runtime.Object, warnings []string, ok bool, err error) {
	if st.patchMeta == nil {
		return nil, nil, false, nil
	}
	// As strategicpatch reads documents: case-sensitive keys, integers
	// kept as int64. Whatever it accepts, encoding/json (which applyPatch
	// uses to word a malformed patch) accepts too.
	patchMap := map[string]interface{}{}
	if err := utiljson.Unmarshal(patch, &patchMap); err != nil {
		return nil, nil, false, nil
	}
	currentMap, err := patchTarget(current)
	if err != nil {
		return nil, nil, false, nil
	}
	merged, err := strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(currentMap, patchMap, *st.patchMeta)
	if err != nil {
		return nil, nil, true, apierrors.NewBadRequest(err.Error())
	}
	patched, err := marshalJSONMap(merged)
	if err != nil {
		return nil, nil, true, apierrors.NewBadRequest(err.Error())
	}
	tm, plain := typeMetaOf(merged)
	if !plain {
		obj, warnings, err = decodeBody(st.kind, patched, fv)
		return obj, warnings, true, err
	}
	obj, warnings, err = decodeJSON(st.kind.New(), st.kind.GroupVersion.WithKind(st.kind.Kind), patched, tm, fv)
	if err != nil {
		return nil, nil, true, err
	}
	setTypeMeta(st.kind, obj)
	return obj, warnings, true, nil
}

// patchTargetJSON is the JSON every patch applies to: current without its
// resourceVersion. current, which may be shared, does not change.
func patchTargetJSON(current runtime.Object) ([]byte, error) {
	target := current.DeepCopyObject()
	accessor, err := meta.Accessor(target)
	if err != nil {
		return nil, err
	}
	accessor.SetResourceVersion("")
	return json.Marshal(target)
}

// patchTarget is patchTargetJSON(current) as strategicpatch reads it: a map
// of JSON values. The unstructured converter makes the same map without the
// JSON, for every kind knode serves (patch_internal_test.go checks this),
// except from strings that are not valid UTF-8, which JSON replaces, and
// from managed fields, whose fieldsV1 it reads with json.Number: the JSON
// makes those.
func patchTarget(current runtime.Object) (map[string]interface{}, error) {
	if accessor, err := meta.Accessor(current); err == nil && len(accessor.GetManagedFields()) == 0 {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
		if err == nil && validUTF8(m) {
			if md, ok := m["metadata"].(map[string]interface{}); ok {
				delete(md, "resourceVersion")
			}
			return m, nil
		}
	}
	data, err := patchTargetJSON(current)
	if err != nil {
		return nil, err
	}
	m := map[string]interface{}{}
	return m, utiljson.Unmarshal(data, &m)
}

// validUTF8 reports whether every string and key in v is valid UTF-8.
func validUTF8(v interface{}) bool {
	switch v := v.(type) {
	case string:
		return utf8.ValidString(v)
	case map[string]interface{}:
		for k, e := range v {
			if !utf8.ValidString(k) || !validUTF8(e) {
				return false
			}
		}
	case []interface{}:
		for _, e := range v {
			if !validUTF8(e) {
				return false
			}
		}
	}
	return true
}

// typeMetaOf is what the JSON of doc decodes to as a metav1.TypeMeta.
// plain is false when that is not plain to see: when apiVersion or kind is
// not a string, or when another key matches either but for case (which
// encoding/json would also match).
func typeMetaOf(doc map[string]interface{}) (tm metav1.TypeMeta, plain bool) {
	for k, v := range doc {
		switch {
		case k == "apiVersion" || k == "kind":
			s, isString := v.(string)
			if !isString {
				return tm, false
			}
			if k == "kind" {
				tm.Kind = s
			} else {
				tm.APIVersion = s
			}
		case strings.EqualFold(k, "apiVersion") || strings.EqualFold(k, "kind"):
			return tm, false
		}
	}
	return tm, true
}
