package endpoints_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"knode/internal/apitest"
	"knode/internal/openapi"
	"knode/internal/registry"
	"knode/internal/registry/endpoints"
	"knode/internal/server"
	"knode/internal/version"
)

// These tests serve the kind through knode's real API server (apitest,
// with Kind() added beside server.Kinds()) and drive it with client-go,
// the way an agent reads default/kubernetes.

func start(t *testing.T) *apitest.Server {
	return apitest.Start(t, apitest.Options{Kinds: []registry.Kind{endpoints.Kind()}})
}

func controlPlane(ips ...string) *corev1.Endpoints {
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"},
		Subsets:    []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "https", Port: 6443}}}},
	}
	for _, ip := range ips {
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, corev1.EndpointAddress{IP: ip})
	}
	return ep
}

func TestDiscovery(t *testing.T) {
	s := start(t)
	list, err := s.Admin.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	var found *metav1.APIResource
	for i, r := range list.APIResources {
		if r.Name == "endpoints/status" {
			t.Errorf("endpoints/status is served; Endpoints have no status")
		}
		if r.Name == "endpoints" {
			found = &list.APIResources[i]
		}
	}
	if found == nil {
		t.Fatal("v1 does not list endpoints")
	}
	got := metav1.APIResource{Name: found.Name, SingularName: found.SingularName, Namespaced: found.Namespaced, Kind: found.Kind, ShortNames: found.ShortNames}
	want := metav1.APIResource{Name: "endpoints", SingularName: "endpoints", Namespaced: true, Kind: "Endpoints", ShortNames: []string{"ep"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints resource (-want +got):\n%s", diff)
	}
}

// TestOpenAPI: the generated core/v1 schemas already hold Endpoints, so
// serving the kind needs no regeneration; the documents describe its paths
// once the kind is served (added here until internal/server serves it).
func TestOpenAPI(t *testing.T) {
	kinds := server.Kinds()
	if !slices.ContainsFunc(kinds, func(k registry.Kind) bool { return k.GroupVersion.Group == "" && k.Resource == "endpoints" }) {
		kinds = append(kinds, endpoints.Kind())
	}
	oapi, err := openapi.NewHandler(kinds, version.GitVersion())
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(path string) string {
		rec := httptest.NewRecorder()
		oapi.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	for _, doc := range []string{"/openapi/v2", "/openapi/v3/api/v1"} {
		body := fetch(doc)
		for _, want := range []string{`"/api/v1/namespaces/{namespace}/endpoints/{name}"`, `"io.k8s.api.core.v1.Endpoints"`, `"io.k8s.api.core.v1.EndpointSubset"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %s", doc, want)
			}
		}
		if strings.Contains(body, `/endpoints/{name}/status"`) {
			t.Errorf("%s describes an endpoints/status path", doc)
		}
	}
}

func TestCreateReadUpdate(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	eps := s.Admin.CoreV1().Endpoints("default")

	created, err := eps.Create(ctx, controlPlane("10.0.0.1", "10.0.0.2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := created.Subsets[0].Ports[0].Protocol; p != corev1.ProtocolTCP {
		t.Errorf("created port protocol = %q, want TCP (defaulted)", p)
	}
	got, err := eps.Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created.Subsets, got.Subsets); diff != "" {
		t.Errorf("read back (-created +read):\n%s", diff)
	}

	_, err = eps.Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "local"},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}},
			Ports:     []corev1.EndpointPort{{Name: "a", Port: 1}, {Port: 0}},
		}},
	}, metav1.CreateOptions{})
	for _, want := range []string{
		`subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`,
		`subsets[0].ports[1].name: Required value: must be specified when the subset has more than one port`,
		`subsets[0].ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive`,
	} {
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid create: error = %v, want Invalid with %q", err, want)
		}
	}

	// The server set changes: a third server joins, by update and by patch.
	got.Subsets[0].Addresses = append(got.Subsets[0].Addresses, corev1.EndpointAddress{IP: "10.0.0.3"})
	updated, err := eps.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(updated.Subsets[0].Addresses); n != 3 {
		t.Errorf("after update: %d addresses, want 3", n)
	}
	patch := `{"subsets":[{"addresses":[{"ip":"10.0.0.2"}],"ports":[{"name":"https","port":6443}]}]}`
	patched, err := eps.Patch(ctx, "kubernetes", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}},
		Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}},
	}}, patched.Subsets); diff != "" {
		t.Errorf("after patch (-want +got):\n%s", diff)
	}

	patched.Subsets[0].Addresses[0].IP = "169.254.0.1"
	if _, err := eps.Update(ctx, patched, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "may not be in the link-local range") {
		t.Errorf("invalid update: error = %v, want Invalid naming the link-local range", err)
	}
}

func TestTableAndFieldSelector(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	eps := s.Admin.CoreV1().Endpoints("default")
	if _, err := eps.Create(ctx, controlPlane("10.0.0.1", "10.0.0.2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := controlPlane("10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4")
	other.Name = "etcd"
	if _, err := eps.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "pending"}}
	if _, err := eps.Create(ctx, empty, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequest("GET", s.URL+"/api/v1/namespaces/default/endpoints", nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("table: %d %s", resp.StatusCode, body)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatal(err)
	}
	var columns []string
	for _, c := range tbl.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Endpoints", "Age"}, columns); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	cells := map[string]interface{}{}
	for _, r := range tbl.Rows {
		if len(r.Cells) != 3 {
			t.Fatalf("row %v: %d cells", r.Cells, len(r.Cells))
		}
		cells[r.Cells[0].(string)] = r.Cells[1]
	}
	want := map[string]interface{}{
		"kubernetes": "10.0.0.1:6443,10.0.0.2:6443",
		"etcd":       "10.0.1.1:6443,10.0.1.2:6443,10.0.1.3:6443 + 1 more...",
		"pending":    "<none>",
	}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("ENDPOINTS cells (-want +got):\n%s", diff)
	}

	list, err := eps.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubernetes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "kubernetes" {
		t.Errorf("field selector metadata.name=kubernetes listed %d items", len(list.Items))
	}
}

// TestWatchKubernetes watches default/kubernetes as an agent would and
// sees a change of the server set.
func TestWatchKubernetes(t *testing.T) {
	ctx := context.Background()
	s := start(t)
	eps := s.Admin.CoreV1().Endpoints("default")
	created, err := eps.Create(ctx, controlPlane("10.0.0.1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := eps.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kubernetes", ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	created.Subsets[0].Addresses = append(created.Subsets[0].Addresses, corev1.EndpointAddress{IP: "10.0.0.2"})
	if _, err := eps.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		ep, _ := ev.Object.(*corev1.Endpoints)
		if ev.Type != watch.Modified || ep == nil || len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 2 {
			t.Errorf("event = %s %+v, want Modified with two addresses", ev.Type, ev.Object)
		}
	case <-deadline.C:
		t.Fatal("no watch event within 30s")
	}
}
