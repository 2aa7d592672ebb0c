// Package registrytest holds what the registries' tests share: the body of
// a FuzzValidate that drives a Kind's functions the way the REST layer
// calls them.
//
// It is only for tests; nothing outside _test.go files imports it.
package registrytest

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/registry"
)

// longExponent finds quantities like "1e-99999999", which take minutes to
// decode inside apimachinery before any code of a registry runs.
var longExponent = regexp.MustCompile(`[eE]-[0-9]{5,}`)

// FuzzOptions adjust Fuzz to a kind.
type FuzzOptions struct {
	// Equal compares the stored object before and after an update; nil
	// means apiequality.Semantic.DeepEqual.
	Equal func(a, b any) bool
	// NoOpForbidden are details no error of a no-op update may contain
	// (an update rule broken by a change that is not there), whether or
	// not the object was valid.
	NoOpForbidden []string
	// Extra runs further checks on the created object.
	Extra func(t *testing.T, obj runtime.Object)
}

// Fuzz feeds each seed (as the new object, with seeds[1] as the stored
// one) and then arbitrary JSON pairs through k, in the order the REST
// layer calls its functions: a create (Default, PrepareForCreate,
// Validate), an update of the main resource and one of /status over the
// stored object, and a no-op update of the created object. Nothing may
// panic, the stored object is never changed, a no-op update of a valid
// object is accepted, and a table row has one cell per column.
func Fuzz(f *testing.F, k registry.Kind, seeds []string, opts FuzzOptions) {
	for _, s := range seeds {
		f.Add([]byte(s), []byte(seeds[1]))
	}
	equal := opts.Equal
	if equal == nil {
		equal = apiequality.Semantic.DeepEqual
	}
	call := func(fn func(runtime.Object), obj runtime.Object) {
		if fn != nil {
			fn(obj)
		}
	}
	prepareUpdate := func(fn func(obj, old runtime.Object), obj, old runtime.Object) {
		if fn != nil {
			fn(obj, old)
		}
	}
	decode := func(data []byte) (runtime.Object, bool) {
		if longExponent.Match(data) {
			return nil, false
		}
		obj := k.New()
		return obj, json.Unmarshal(data, obj) == nil
	}
	now := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data, oldData []byte) {
		obj, ok := decode(data)
		if !ok {
			return
		}
		stored, ok := decode(oldData)
		if !ok {
			return
		}
		raw := obj.DeepCopyObject()

		call(k.Default, obj)
		call(k.PrepareForCreate, obj)
		createErrs := k.Validate(obj)

		call(k.Default, stored)
		before := stored.DeepCopyObject()
		upd := raw.DeepCopyObject()
		call(k.Default, upd)
		prepareUpdate(k.PrepareForUpdate, upd, stored)
		_ = k.ValidateUpdate(upd, stored)
		if k.Status != nil {
			st := raw.DeepCopyObject()
			call(k.Default, st)
			prepareUpdate(k.Status.PrepareForUpdate, st, stored)
			_ = k.Status.ValidateUpdate(st, stored)
		}
		if !equal(stored, before) {
			t.Fatal("an update changed the stored object")
		}

		same := obj.DeepCopyObject()
		call(k.Default, same)
		prepareUpdate(k.PrepareForUpdate, same, obj)
		errs := k.ValidateUpdate(same, obj)
		for _, e := range errs {
			for _, s := range opts.NoOpForbidden {
				if strings.Contains(e.Detail, s) {
					t.Fatalf("a no-op update broke an update rule: %v", e)
				}
			}
		}
		if len(createErrs) == 0 && len(errs) != 0 {
			t.Fatalf("a no-op update of a valid object was refused: %v", errs)
		}

		if cells := k.Row(obj, now); len(cells) != len(k.Columns) {
			t.Fatalf("row has %d cells for %d columns", len(cells), len(k.Columns))
		}
		_ = k.Fields(obj)
		if opts.Extra != nil {
			opts.Extra(t, obj)
		}
	})
}
