package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	msgSubdomain     = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

var now = time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

// recorderEvent is what client-go's record package writes for a pod.
func recorderEvent() *v1.Event {
	return &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.17f3a", Namespace: "default"},
		InvolvedObject: v1.ObjectReference{
			Kind: "Pod", Namespace: "default", Name: "web-0", UID: "u-1", APIVersion: "v1", ResourceVersion: "42",
			FieldPath: "spec.containers{web}",
		},
		Reason:         "Pulled",
		Message:        "Container image \"nginx\" already present on machine\n",
		Source:         v1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(now.Add(-10 * time.Minute)),
		LastTimestamp:  metav1.NewTime(now.Add(-2 * time.Minute)),
		Count:          3,
		Type:           v1.EventTypeNormal,
	}
}

// newShapeEvent carries eventTime and the reporting fields.
func newShapeEvent() *v1.Event {
	return &v1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "node-1.abc", Namespace: "default"},
		InvolvedObject:      v1.ObjectReference{Kind: "Node", Name: "node-1", UID: "node-1"},
		Reason:              "NodeNotReady",
		Action:              "NodeNotReady",
		Message:             "Node node-1 status is now: NodeNotReady",
		EventTime:           metav1.NewMicroTime(now.Add(-30 * time.Second)),
		ReportingController: "node-controller",
		ReportingInstance:   "knode-server-1",
		Type:                v1.EventTypeNormal,
	}
}

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	tests := []struct {
		name string
		ev   func() *v1.Event
		want []string
	}{
		{name: "recorder event", ev: recorderEvent},
		{name: "new shape event", ev: newShapeEvent},
		{
			name: "namespace differs from involved object's",
			ev:   func() *v1.Event { e := recorderEvent(); e.InvolvedObject.Namespace = "other"; return e },
			want: []string{"involvedObject.namespace|Invalid value|does not match event.namespace"},
		},
		{
			name: "cluster-scoped object, event in default",
			ev: func() *v1.Event {
				e := recorderEvent()
				e.InvolvedObject = v1.ObjectReference{Kind: "Node", Name: "node-1"}
				return e
			},
		},
		{
			name: "cluster-scoped object, event elsewhere",
			ev: func() *v1.Event {
				e := recorderEvent()
				e.Namespace = "kube-system"
				e.InvolvedObject = v1.ObjectReference{Kind: "Node", Name: "node-1"}
				return e
			},
			want: []string{"involvedObject.namespace|Invalid value|does not match event.namespace"},
		},
		{
			name: "new shape, cluster-scoped object, event in kube-system",
			ev:   func() *v1.Event { e := newShapeEvent(); e.Namespace = "kube-system"; return e },
		},
		{
			name: "new shape, cluster-scoped object, event elsewhere",
			ev:   func() *v1.Event { e := newShapeEvent(); e.Namespace = "team-a"; return e },
			want: []string{"involvedObject.namespace|Invalid value|does not match event.namespace"},
		},
		{
			name: "new shape, namespaced object in another namespace is accepted",
			ev:   func() *v1.Event { e := newShapeEvent(); e.InvolvedObject.Namespace = "team-a"; return e },
		},
		{
			name: "new shape without reporting fields",
			ev: func() *v1.Event {
				e := newShapeEvent()
				e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", "", ""
				return e
			},
			want: []string{
				"reportingController|Required value|",
				"reportingController|Invalid value|name part must be non-empty",
				"reportingController|Invalid value|" + msgQualifiedName,
				"reportingInstance|Required value|",
				"action|Required value|",
				"reason|Required value|",
			},
		},
		{
			name: "new shape with a controller that is not a qualified name",
			ev:   func() *v1.Event { e := newShapeEvent(); e.ReportingController = "node controller"; return e },
			want: []string{"reportingController|Invalid value|" + msgQualifiedName},
		},
		{
			name: "new shape at the length limits",
			ev: func() *v1.Event {
				e := newShapeEvent()
				e.ReportingInstance, e.Action, e.Reason, e.Message = long(128), long(128), long(128), long(1024)
				return e
			},
		},
		{
			name: "new shape over the length limits",
			ev: func() *v1.Event {
				e := newShapeEvent()
				e.ReportingInstance, e.Action, e.Reason, e.Message = long(129), long(129), long(129), long(1025)
				return e
			},
			want: []string{
				"reportingInstance|Invalid value|can have at most 128 characters",
				"action|Invalid value|can have at most 128 characters",
				"reason|Invalid value|can have at most 128 characters",
				"message|Invalid value|can have at most 1024 characters",
			},
		},
		{
			name: "classic shape has no length limits or required fields",
			ev: func() *v1.Event {
				e := recorderEvent()
				e.Reason, e.Message = "", long(5000)
				return e
			},
		},
		{
			name: "namespace that is not a DNS subdomain",
			ev: func() *v1.Event {
				e := recorderEvent()
				e.Namespace, e.InvolvedObject.Namespace = "Bad_NS", "Bad_NS"
				return e
			},
			want: []string{"namespace|Invalid value|" + msgSubdomain},
		},
	}
	k := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, flat(k.Validate(tc.ev()))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, flat(k.ValidateUpdate(tc.ev(), recorderEvent()))); diff != "" {
				t.Errorf("ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRow(t *testing.T) {
	tests := []struct {
		name string
		ev   func() *v1.Event
		want []interface{}
	}{
		{
			name: "recorder event",
			ev:   recorderEvent,
			want: []interface{}{"2m", "Normal", "Pulled", "pod/web-0", "spec.containers{web}", "kubelet, node-1",
				`Container image "nginx" already present on machine`, "10m", int64(3), "web-0.17f3a"},
		},
		{
			name: "new shape singleton",
			ev:   newShapeEvent,
			want: []interface{}{"30s", "Normal", "NodeNotReady", "node/node-1", "", "node-controller, knode-server-1",
				"Node node-1 status is now: NodeNotReady", "30s", int64(1), "node-1.abc"},
		},
		{
			name: "series",
			ev: func() *v1.Event {
				e := newShapeEvent()
				e.Series = &v1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(now.Add(-5 * time.Second))}
				return e
			},
			want: []interface{}{"5s", "Normal", "NodeNotReady", "node/node-1", "", "node-controller, knode-server-1",
				"Node node-1 status is now: NodeNotReady", "30s", int64(7), "node-1.abc"},
		},
		{
			name: "no timestamps, no host, no name",
			ev: func() *v1.Event {
				return &v1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: "e"},
					InvolvedObject: v1.ObjectReference{Kind: "ReplicaSet"},
					Source:         v1.EventSource{Component: "replicaset-controller"},
					Type:           v1.EventTypeWarning,
					Reason:         "FailedCreate",
					Message:        "  boom  ",
				}
			},
			want: []interface{}{"<unknown>", "Warning", "FailedCreate", "replicaset", "", "replicaset-controller", "boom", "<unknown>", int64(1), "e"},
		},
		{
			name: "first seen only",
			ev: func() *v1.Event {
				e := recorderEvent()
				e.LastTimestamp = metav1.Time{}
				e.Source = v1.EventSource{Host: "node-1"}
				e.ReportingController = "kubelet"
				return e
			},
			want: []interface{}{"10m", "Normal", "Pulled", "pod/web-0", "spec.containers{web}", "kubelet, node-1",
				`Container image "nginx" already present on machine`, "10m", int64(3), "web-0.17f3a"},
		},
	}
	k := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := k.Row(tc.ev(), now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Row (-want +got):\n%s", diff)
			}
			if len(got) != len(k.Columns) {
				t.Errorf("%d cells for %d columns", len(got), len(k.Columns))
			}
		})
	}
}

func TestColumns(t *testing.T) {
	type col struct {
		Name, Format string
		Priority     int32
	}
	var got []col
	for _, c := range Kind().Columns {
		if c.Type != "string" || c.Description == "" {
			t.Errorf("column %s: type %q, description %q", c.Name, c.Type, c.Description)
		}
		got = append(got, col{c.Name, c.Format, c.Priority})
	}
	want := []col{
		{"Last Seen", "", 0}, {"Type", "", 0}, {"Reason", "", 0}, {"Object", "", 0},
		{"Subobject", "", 1}, {"Source", "", 1}, {"Message", "", 0},
		{"First Seen", "", 1}, {"Count", "", 1}, {"Name", "name", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}

func TestFields(t *testing.T) {
	want := fields.Set{
		"metadata.name":                  "web-0.17f3a",
		"metadata.namespace":             "default",
		"involvedObject.kind":            "Pod",
		"involvedObject.namespace":       "default",
		"involvedObject.name":            "web-0",
		"involvedObject.uid":             "u-1",
		"involvedObject.apiVersion":      "v1",
		"involvedObject.resourceVersion": "42",
		"involvedObject.fieldPath":       "spec.containers{web}",
		"reason":                         "Pulled",
		"reportingComponent":             "",
		"source":                         "kubelet",
		"type":                           "Normal",
	}
	if diff := cmp.Diff(want, Kind().Fields(recorderEvent())); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	got := Kind().Fields(newShapeEvent())
	if got["source"] != "node-controller" || got["reportingComponent"] != "node-controller" {
		t.Errorf("source falls back to reportingController: got %q / %q", got["source"], got["reportingComponent"])
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.GroupVersion.String() != "v1" || k.Resource != "events" || k.Kind != "Event" || k.ListKind != "EventList" ||
		!k.Namespaced || k.HasStatus || k.Status != nil {
		t.Errorf("unexpected kind data: %+v", k)
	}
	if diff := cmp.Diff([]string{"ev"}, k.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	if _, ok := k.New().(*v1.Event); !ok {
		t.Errorf("New() = %T", k.New())
	}
}

// FuzzValidateEvent: no input may make a Kind function panic.
func FuzzValidateEvent(f *testing.F) {
	for _, e := range []*v1.Event{recorderEvent(), newShapeEvent()} {
		seed, _ := json.Marshal(e)
		f.Add(seed)
	}
	f.Add([]byte(`{"series":{"count":-1},"eventTime":"2025-01-01T00:00:00.000000Z","involvedObject":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := &v1.Event{}
		if err := json.Unmarshal(data, e); err != nil {
			return
		}
		k := Kind()
		_ = k.Validate(e)
		_ = k.ValidateUpdate(e, e.DeepCopy())
		_ = k.Row(e, now)
		_ = k.Fields(e)
	})
}
