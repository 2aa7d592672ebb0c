package inproc_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/sim/inproc"
)

const (
	leaseNS = "kube-node-lease"
	// guard bounds every wait on a channel; tests never wait on time.
	guard = 30 * time.Second
	// protobuf is client-go's Kubernetes protobuf media type.
	protobuf = "application/vnd.kubernetes.protobuf"
)

// world is an API server reached only through an inproc.Transport.
type world struct {
	t   *testing.T
	ctx context.Context
	// handler serves every request the transport carries: the API
	// server, wrapped to report when a watch's handler returns.
	handler http.Handler
	// watchesEnded receives once per watch request whose handler
	// returned.
	watchesEnded chan struct{}

	mu sync.Mutex
	// answered counts the Content-Types of the responses to requests
	// that are not watches.
	answered map[string]int
}

// answeredIn reports how many responses so far had Content-Type ct.
func (w *world) answeredIn(ct string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answered[ct]
}

func newWorld(t *testing.T) *world {
	t.Helper()
	s := apitest.Start(t, apitest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &world{t: t, ctx: ctx, watchesEnded: make(chan struct{}, 16), answered: map[string]int{}}
	w.handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		s.API.ServeHTTP(rw, r)
		if v := r.URL.Query().Get("watch"); v == "true" || v == "1" {
			w.watchesEnded <- struct{}{}
			return
		}
		w.mu.Lock()
		w.answered[rw.Header().Get("Content-Type")]++
		w.mu.Unlock()
	})
	return w
}

// client is a clientset acting as token over the in-process transport,
// speaking protobuf when protobufWire is set and JSON otherwise.
func (w *world) client(token string, protobufWire bool) kubernetes.Interface {
	w.t.Helper()
	cfg := &rest.Config{Host: "http://inproc", BearerToken: token, QPS: -1, Transport: &inproc.Transport{Handler: w.handler}}
	if protobufWire {
		cfg.ContentConfig = rest.ContentConfig{ContentType: protobuf, AcceptContentTypes: protobuf + ",application/json"}
	} else {
		cfg.ContentConfig = rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return cs
}

func lease(name string, renew time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &t},
	}
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// A clientset over the transport creates, reads, updates and deletes, and
// each call's effect is visible as soon as the call returns.
func TestLeaseLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protobuf bool
	}{{name: "json"}, {name: "protobuf", protobuf: true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			leases := w.client(apitest.AdminToken, tc.protobuf).CoordinationV1().Leases(leaseNS)

			created, err := leases.Create(w.ctx, lease("n1", epoch), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if created.UID == "" || created.ResourceVersion == "" {
				t.Errorf("created lease lacks server fields: uid %q resourceVersion %q", created.UID, created.ResourceVersion)
			}

			got, err := leases.Get(w.ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if diff := cmp.Diff(created, got); diff != "" {
				t.Errorf("get returned another lease (-created +got):\n%s", diff)
			}

			later := metav1.NewMicroTime(epoch.Add(10 * time.Second))
			got.Spec.RenewTime = &later
			updated, err := leases.Update(w.ctx, got, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if updated.ResourceVersion == created.ResourceVersion {
				t.Errorf("update kept resourceVersion %s", updated.ResourceVersion)
			}
			again, err := leases.Get(w.ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get after update: %v", err)
			}
			if !again.Spec.RenewTime.Equal(&later) || again.ResourceVersion != updated.ResourceVersion {
				t.Errorf("after update: renewTime %v resourceVersion %s, want %v %s", again.Spec.RenewTime, again.ResourceVersion, later, updated.ResourceVersion)
			}

			// A stale write comes back as the server's Conflict.
			if _, err := leases.Update(w.ctx, got, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("stale update error %v, want Conflict", err)
			}

			if err := leases.Delete(w.ctx, "n1", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := leases.Get(w.ctx, "n1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after delete: error %v, want NotFound", err)
			}
			// The server really answered in the negotiated encoding.
			if n := w.answeredIn(protobuf); tc.protobuf != (n > 0) {
				t.Errorf("%d responses in %s, want them only when asked for", n, protobuf)
			}
		})
	}
}

// The server's status codes and Status bodies reach the client as typed
// errors.
func TestStatusErrors(t *testing.T) {
	w := newWorld(t)
	admin := w.client(apitest.AdminToken, false).CoordinationV1().Leases(leaseNS)

	_, err := admin.Get(w.ctx, "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("get missing: error %v, want NotFound", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("get missing: error %T is not a Status", err)
	}
	st := status.Status()
	if st.Code != http.StatusNotFound || st.Details == nil || st.Details.Name != "missing" || st.Details.Kind != "leases" {
		t.Errorf("Status %+v, want code 404 naming leases \"missing\"", st)
	}

	if _, err := admin.Create(w.ctx, lease("n1", epoch), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := admin.Create(w.ctx, lease("n1", epoch), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: error %v, want AlreadyExists", err)
	}

	stranger := w.client("no-such-token", false).CoordinationV1().Leases(leaseNS)
	if _, err := stranger.Get(w.ctx, "n1", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("get with an unknown token: error %v, want Unauthorized", err)
	}
	if _, err := stranger.Watch(w.ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("watch with an unknown token: error %v, want Unauthorized", err)
	}
}

// A request whose context has ended is not served.
func TestCancelledContext(t *testing.T) {
	w := newWorld(t)
	leases := w.client(apitest.AdminToken, false).CoordinationV1().Leases(leaseNS)
	ctx, cancel := context.WithCancel(w.ctx)
	cancel()

	if _, err := leases.Create(ctx, lease("n1", epoch), metav1.CreateOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("create with a cancelled context: error %v, want context.Canceled", err)
	}
	if _, err := leases.Get(w.ctx, "n1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cancelled create was served: get error %v, want NotFound", err)
	}
	if _, err := leases.Watch(ctx, metav1.ListOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("watch with a cancelled context: error %v, want context.Canceled", err)
	}
}

// RoundTrip itself refuses a request whose context has ended (client-go
// checks first, so the test above may never reach it): the handler does
// not run and the request body is closed.
func TestRoundTripCancelled(t *testing.T) {
	for _, tc := range []struct {
		name, query string
	}{{name: "get"}, {name: "watch", query: "?watch=true"}} {
		t.Run(tc.name, func(t *testing.T) {
			served := 0
			tr := &inproc.Transport{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ })}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			body := &closeTracker{Reader: strings.NewReader("{}")}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://inproc/api/v1/namespaces"+tc.query, body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("RoundTrip error %v, want context.Canceled", err)
			}
			if resp != nil {
				resp.Body.Close()
				t.Errorf("RoundTrip returned a response, status %d", resp.StatusCode)
			}
			if served != 0 {
				t.Errorf("handler ran %d times, want 0", served)
			}
			if !body.closed {
				t.Error("request body not closed")
			}
		})
	}
}

// closeTracker is a request body that notes being closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error {
	c.closed = true
	return nil
}

// A watch streams the writes made after it started, in order, and Stop
// ends both the client's stream and the server's handler, with no further
// write needed to notice.
func TestWatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protobuf bool
	}{{name: "json"}, {name: "protobuf", protobuf: true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			leases := w.client(apitest.AdminToken, tc.protobuf).CoordinationV1().Leases(leaseNS)
			if _, err := leases.Create(w.ctx, lease("before", epoch), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create before: %v", err)
			}
			list, err := leases.List(w.ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			wi, err := leases.Watch(w.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer wi.Stop()

			l, err := leases.Create(w.ctx, lease("n1", epoch), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			later := metav1.NewMicroTime(epoch.Add(10 * time.Second))
			l.Spec.RenewTime = &later
			if _, err := leases.Update(w.ctx, l, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("update: %v", err)
			}

			type seen struct {
				Type  watch.EventType
				Name  string
				Renew time.Time
			}
			var got []seen
			for len(got) < 2 {
				select {
				case ev, ok := <-wi.ResultChan():
					if !ok {
						t.Fatalf("watch closed after %v", got)
					}
					obj, isLease := ev.Object.(*coordinationv1.Lease)
					if !isLease {
						t.Fatalf("event %s carries %T, want a Lease", ev.Type, ev.Object)
					}
					got = append(got, seen{Type: ev.Type, Name: obj.Name, Renew: obj.Spec.RenewTime.UTC()})
				case <-time.After(guard):
					t.Fatalf("no watch event after %v", got)
				}
			}
			want := []seen{{Type: watch.Added, Name: "n1", Renew: epoch}, {Type: watch.Modified, Name: "n1", Renew: epoch.Add(10 * time.Second)}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}

			wi.Stop()
			select {
			case ev, ok := <-wi.ResultChan():
				if ok {
					t.Fatalf("event %s %v after Stop, want the channel closed", ev.Type, ev.Object)
				}
			case <-time.After(guard):
				t.Fatal("result channel still open after Stop")
			}
			select {
			case <-w.watchesEnded:
			case <-time.After(guard):
				t.Fatal("the watch handler still runs after Stop")
			}
		})
	}
}

// Cancelling a watch's context ends its handler and its stream.
func TestWatchContextCancel(t *testing.T) {
	w := newWorld(t)
	leases := w.client(apitest.AdminToken, false).CoordinationV1().Leases(leaseNS)
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	wi, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer wi.Stop()
	cancel()
	select {
	case <-w.watchesEnded:
	case <-time.After(guard):
		t.Fatal("the watch handler still runs after its context ended")
	}
	select {
	case ev, ok := <-wi.ResultChan():
		if ok {
			t.Fatalf("event %s after the context ended, want the channel closed", ev.Type)
		}
	case <-time.After(guard):
		t.Fatal("result channel still open after the context ended")
	}
}
