package events_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"knode/internal/controller/events"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRecord(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	created := map[string][]corev1.Event{} // by the namespace written to
	cs.PrependReactor("create", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ev := a.(k8stesting.CreateAction).GetObject().(*corev1.Event)
		created[a.GetNamespace()] = append(created[a.GetNamespace()], *ev)
		return true, ev, nil
	})
	r := &events.Recorder{Client: cs.CoreV1(), Source: "test-controller"}
	rs := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: "ns", Name: "web", UID: "u1"}
	node := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: "n1"}
	r.Record(ctx, rs, "ns", corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: web-a", now)
	r.Record(ctx, rs, "ns", corev1.EventTypeWarning, "FailedCreate", "Error creating: x", now)
	r.Record(ctx, node, metav1.NamespaceDefault, corev1.EventTypeNormal, "Ready", "ready", now)

	base := now.UnixNano()
	ts := metav1.NewTime(now)
	ev := func(name, ns string, ref corev1.ObjectReference, typ, reason, msg string) corev1.Event {
		return corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns},
			InvolvedObject: ref, Type: typ, Reason: reason, Message: msg,
			Source:         corev1.EventSource{Component: "test-controller"},
			FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
		}
	}
	cases := []struct {
		name string
		ns   string
		want []corev1.Event
	}{
		{name: "namespaced object, unique names in one instant", ns: "ns", want: []corev1.Event{
			ev(name("web", base+1), "ns", rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: web-a"),
			ev(name("web", base+2), "ns", rs, corev1.EventTypeWarning, "FailedCreate", "Error creating: x"),
		}},
		{name: "cluster object in the namespace given", ns: metav1.NamespaceDefault, want: []corev1.Event{
			ev(name("n1", base+3), metav1.NamespaceDefault, node, corev1.EventTypeNormal, "Ready", "ready"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, created[tc.ns]); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func name(obj string, n int64) string {
	const digits = "0123456789abcdef"
	var b []byte
	for ; n > 0; n /= 16 {
		b = append([]byte{digits[n%16]}, b...)
	}
	return obj + "." + string(b)
}

func TestRecordFailureIsLogged(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	var buf bytes.Buffer
	r := &events.Recorder{Client: cs.CoreV1(), Source: "c", Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	r.Record(context.Background(), corev1.ObjectReference{Kind: "Pod", Name: "p"}, "ns", corev1.EventTypeWarning, "X", "m", now)
	got := buf.String()
	got = got[strings.Index(got, "msg="):]
	want := `msg="recording event failed" kind=Pod object=p reason=X err=boom` + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// Two recorders naming an event about one object in one instant: the
// second takes the next name instead of losing its event.
func TestRecordersShareAnInstant(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	pod := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "web-0"}
	a := &events.Recorder{Client: cs.CoreV1(), Source: "a"}
	b := &events.Recorder{Client: cs.CoreV1(), Source: "b"}
	a.Record(ctx, pod, "ns", corev1.EventTypeNormal, "One", "from a", now)
	b.Record(ctx, pod, "ns", corev1.EventTypeNormal, "Two", "from b", now)
	l, err := cs.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range l.Items {
		got = append(got, e.Source.Component+" "+e.Name)
	}
	want := []string{"a " + name("web-0", now.UnixNano()+1), "b " + name("web-0", now.UnixNano()+2)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
