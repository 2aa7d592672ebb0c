package apiserver

import (
	"encoding/json"
	"math"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// marshalJSONMap writes what encoding/json writes, for any document.
func TestMarshalJSONMapMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "a", "zone-a-1", "Ready", "<b>", "a<b", "a>b", "a&b", `q"uote`, `back\slash`, "tab\t", "nl\n", "\x00\x1f", "\x7f",
		"é", "日本", "\u2028\u2029", "\xff", "a\xffb", "\ufffd", "2025-03-01T12:00:00Z", "kubernetes.io/hostname", "$setElementOrder/conditions"}
	scalars := []interface{}{nil, true, false, int64(0), int64(-1), int64(math.MaxInt64), int64(math.MinInt64),
		0.0, 1.5, -2.25, 1e21, 1e20, 1e-7, 1e-6, 123456789.125, math.Copysign(0, -1),
		json.Number("12"), map[string]interface{}(nil), []interface{}(nil), []interface{}{}, map[string]interface{}{},
		strategicpatch.JSONMap{"x": int64(1)}, []string{"typed", "<slice>"}}
	rng := rand.New(rand.NewSource(1))
	var value func(depth int) interface{}
	value = func(depth int) interface{} {
		switch n := rng.Intn(6); {
		case depth > 3 || n == 0:
			return scalars[rng.Intn(len(scalars))]
		case n == 1:
			return strs[rng.Intn(len(strs))]
		case n == 2:
			l := make([]interface{}, rng.Intn(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		default:
			m := map[string]interface{}{}
			for i := rng.Intn(6); i > 0; i-- {
				m[strs[rng.Intn(len(strs))]] = value(depth + 1)
			}
			return m
		}
	}
	for i := 0; i < 3000; i++ {
		doc := map[string]interface{}{}
		for j := rng.Intn(5); j > 0; j-- {
			doc[strs[rng.Intn(len(strs))]] = value(0)
		}
		want, wantErr := json.Marshal(doc)
		got, gotErr := marshalJSONMap(doc)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("errors differ: encoding/json %v, marshalJSONMap %v", wantErr, gotErr)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Fatalf("document %d (-encoding/json +marshalJSONMap):\n%s", i, diff)
		}
	}
	if _, err := marshalJSONMap(map[string]interface{}{"x": math.NaN()}); err == nil {
		t.Error("marshalJSONMap wrote NaN, which encoding/json refuses")
	}
}
