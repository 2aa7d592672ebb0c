package apiserver

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/registry"
)

// defaultColumns are used for kinds without their own printer, as
// upstream's default table convertor does.
var defaultColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// table renders objects as a meta.k8s.io/v1 Table. The includeObject query
// parameter chooses what each row carries: None, Metadata (the default) or
// Object.
func (s *Server) table(k *registry.Kind, objs []runtime.Object, lm metav1.ListMeta, r *http.Request) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "Table"},
		ListMeta: lm,
	}
	q := r.URL.Query()
	if q.Get("noHeaders") != "true" {
		t.ColumnDefinitions = k.Columns
		if len(k.Columns) == 0 {
			t.ColumnDefinitions = defaultColumns
		}
	}
	include := metav1.IncludeObjectPolicy(q.Get("includeObject"))
	if include == "" {
		include = metav1.IncludeMetadata
	}
	now := s.clock.Now()
	t.Rows = make([]metav1.TableRow, 0, len(objs))
	for _, obj := range objs {
		t.Rows = append(t.Rows, tableRow(k, obj, include, now))
	}
	return t
}

func tableRow(k *registry.Kind, obj runtime.Object, include metav1.IncludeObjectPolicy, now time.Time) metav1.TableRow {
	row := metav1.TableRow{}
	accessor, _ := meta.Accessor(obj)
	if k.Row != nil {
		row.Cells = k.Row(obj, now)
	} else {
		row.Cells = []interface{}{accessor.GetName(), accessor.GetCreationTimestamp().Time.UTC().Format("2006-01-02T15:04:05Z")}
	}
	switch include {
	case metav1.IncludeObject:
		row.Object = runtime.RawExtension{Object: obj}
	case metav1.IncludeMetadata:
		partial := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}}
		if oma, ok := obj.(metav1.ObjectMetaAccessor); ok {
			if om, ok := oma.GetObjectMeta().(*metav1.ObjectMeta); ok {
				partial.ObjectMeta = *om.DeepCopy()
			}
		}
		row.Object = runtime.RawExtension{Object: partial}
	}
	return row
}
