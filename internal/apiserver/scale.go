package apiserver

import (
	"fmt"
	"net/http"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// The /scale subresource: an autoscaling/v1 Scale view of the
// spec.replicas of a kind with registry.Kind.Scale, as upstream serves it
// for ReplicaSets and StatefulSets.
//
// A read is the Scale of the stored object. A write (a PUT of a Scale, or a
// patch applied to the current Scale) turns into an update of the object
// itself through objectStore.Update, with the main resource's rules: its
// PrepareForUpdate (status kept, generation bumped) and ValidateUpdate,
// admission (subresource "scale", shown the object rather than the Scale),
// retries on conflict, and no write when nothing changes. A Scale that
// names a resourceVersion makes the update conditional on it.

const subScale = "scale"

var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

func newScale() runtime.Object { return &autoscalingv1.Scale{} }

// scaleOf is the Scale of obj, a new object.
func scaleOf(rules *registry.ScaleRules, obj runtime.Object) *autoscalingv1.Scale {
	accessor, _ := meta.Accessor(obj)
	spec, status, selector := rules.Get(obj)
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: scaleGVK.GroupVersion().String(), Kind: scaleGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:              accessor.GetName(),
			Namespace:         accessor.GetNamespace(),
			UID:               accessor.GetUID(),
			ResourceVersion:   accessor.GetResourceVersion(),
			CreationTimestamp: accessor.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: spec},
		Status: autoscalingv1.ScaleStatus{Replicas: status, Selector: selector},
	}
}

// viaScale turns fn, an update of the current object's Scale, into an
// update of the object itself (namespace/name): its spec.replicas becomes
// the new Scale's, and the Scale's resourceVersion, when it names one, the
// object's, which the store then holds to the stored one. fn's Scale is
// checked as upstream's ValidateScale does.
func (st *objectStore) viaScale(namespace, name string, fn updateFunc) updateFunc {
	return func(current runtime.Object) (runtime.Object, error) {
		obj, err := fn(scaleOf(st.kind.Scale, current))
		if err != nil {
			return nil, err
		}
		scale := obj.(*autoscalingv1.Scale)
		if scale.Name != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", scale.Name, name))
		}
		if err := st.checkNamespace(scale, namespace); err != nil {
			return nil, err
		}
		errs := validateMeta(scale, st.kind.Namespaced, false)
		if scale.Spec.Replicas < 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0"))
		}
		if len(errs) > 0 {
			return nil, apierrors.NewInvalid(scaleGVK.GroupKind(), name, errs)
		}
		if uid := objectUID(current); scale.UID != "" && scale.UID != uid {
			return nil, apierrors.NewConflict(st.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", scale.UID, uid))
		}
		updated := current.DeepCopyObject()
		st.kind.Scale.Set(updated, scale.Spec.Replicas)
		accessor, _ := meta.Accessor(updated)
		accessor.SetResourceVersion(scale.ResourceVersion)
		return updated, nil
	}
}

// scalePatchFunc is the update that applies body, a patch of patchType, to
// the current Scale; the decoding's warnings go to *warnings.
func scalePatchFunc(patchType types.PatchType, body []byte, fv fieldValidation, warnings *[]string) updateFunc {
	return func(current runtime.Object) (runtime.Object, error) {
		obj, warns, err := patchObject(current, patchType, body, newScale, scaleGVK, fv)
		*warnings = warns
		return obj, err
	}
}

// respondScale writes a Scale, as the Table upstream prints for one when
// the client asks for a Table.
func (s *Server) respondScale(w http.ResponseWriter, r *http.Request, code int, scale *autoscalingv1.Scale) {
	s.write(w, r, code, scale, func() runtime.Object {
		return s.table(scaleTable, []runtime.Object{scale}, metav1.ListMeta{}, r)
	})
}

// scaleTable is upstream's printer for a Scale.
var scaleTable = &registry.Kind{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Desired", Type: "integer", Description: autoscalingv1.ScaleSpec{}.SwaggerDoc()["replicas"]},
		{Name: "Available", Type: "integer", Description: autoscalingv1.ScaleStatus{}.SwaggerDoc()["replicas"]},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	},
	Row: func(obj runtime.Object, now time.Time) []interface{} {
		scale := obj.(*autoscalingv1.Scale)
		age := "<unknown>"
		if !scale.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(now.Sub(scale.CreationTimestamp.Time))
		}
		return []interface{}{scale.Name, int64(scale.Spec.Replicas), int64(scale.Status.Replicas), age}
	},
}
