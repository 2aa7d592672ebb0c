package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/storage"
)

// aliceToken is a user outside system:masters.
const aliceToken = "alicetoken"

type fixture struct {
	url    string
	client kubernetes.Interface
	store  storage.Interface
}

// newFixture serves the real kinds from a memory store over plain HTTP
// (TLS is covered end to end), with admin and non-admin tokens.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := apitest.Start(t, apitest.Options{Tokens: []string{aliceToken + `,alice,2,"developers"`}})
	return &fixture{url: s.URL, client: s.Admin, store: s.Store}
}

// do sends a raw request as the admin and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	return f.doAs(t, apitest.AdminToken, method, path, contentType, body)
}

func (f *fixture) doAs(t *testing.T, token, method, path, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func decodeStatus(t *testing.T, data []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatalf("not a Status: %v: %s", err, data)
	}
	return st
}

const docNode = `{"kind":"Node","apiVersion":"v1","metadata":{"name":"10.240.79.157","labels":{"name":"my-first-k8s-node"}}}`

func TestCreateDocumentedNodeAndUniqueness(t *testing.T) {
	f := newFixture(t)
	code, body := f.do(t, "POST", "/api/v1/nodes", "application/json", []byte(docNode))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	var node corev1.Node
	if err := json.Unmarshal(body, &node); err != nil {
		t.Fatal(err)
	}
	if node.UID == "" || node.ResourceVersion == "" || node.CreationTimestamp.IsZero() {
		t.Errorf("server-owned metadata not set: %+v", node.ObjectMeta)
	}
	if node.Labels["name"] != "my-first-k8s-node" {
		t.Errorf("labels = %v", node.Labels)
	}
	code, body = f.do(t, "POST", "/api/v1/nodes", "application/json", []byte(docNode))
	st := decodeStatus(t, body)
	if code != http.StatusConflict || st.Reason != metav1.StatusReasonAlreadyExists {
		t.Errorf("second create: %d %s", code, body)
	}
	// A PUT to a missing node is 404: nodes are not created on update.
	missing := strings.Replace(docNode, "10.240.79.157", "missing", 1)
	code, _ = f.do(t, "PUT", "/api/v1/nodes/missing", "application/json", []byte(missing))
	if code != http.StatusNotFound {
		t.Errorf("PUT missing node: %d, want 404", code)
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	big := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"big","annotations":{"a":"` + strings.Repeat("x", 3*1024*1024) + `"}}}`
	cases := []struct {
		name, method, path, ctype, body string
		code                            int
		reason                          metav1.StatusReason
		contains                        string
	}{
		{"malformed JSON", "POST", "/api/v1/nodes", "application/json", `{"kind":`, 400, metav1.StatusReasonBadRequest, "json"},
		{"wrong kind", "POST", "/api/v1/nodes", "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "Pod"},
		{"wrong apiVersion", "POST", "/api/v1/nodes", "application/json", `{"kind":"Node","apiVersion":"v2","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "v2"},
		{"invalid name", "POST", "/api/v1/nodes", "application/json", `{"kind":"Node","apiVersion":"v1","metadata":{"name":"Bad_Name"}}`, 422, metav1.StatusReasonInvalid, "a lowercase RFC 1123 subdomain"},
		{"unknown field strict", "POST", "/api/v1/nodes?fieldValidation=Strict", "application/json", `{"kind":"Node","apiVersion":"v1","metadata":{"name":"x"},"spec":{"bogus":1}}`, 400, metav1.StatusReasonBadRequest, `unknown field "spec.bogus"`},
		{"bad fieldValidation", "POST", "/api/v1/nodes?fieldValidation=Loud", "application/json", docNode, 400, metav1.StatusReasonBadRequest, "fieldValidation"},
		{"body too large", "POST", "/api/v1/nodes", "application/json", big, 413, metav1.StatusReasonRequestEntityTooLarge, "limit"},
		{"unknown resource", "GET", "/api/v1/widgets", "", "", 404, metav1.StatusReasonNotFound, "could not find"},
		{"wrong method", "POST", "/api/v1/nodes/x", "application/json", docNode, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"server-side apply", "PATCH", "/api/v1/nodes/x", "application/apply-patch+yaml", "{}", 415, metav1.StatusReasonUnsupportedMediaType, "not supported yet"},
		{"unknown patch type", "PATCH", "/api/v1/nodes/x", "text/plain", "{}", 415, metav1.StatusReasonUnsupportedMediaType, "application/merge-patch+json"},
		{"missing namespace", "POST", "/api/v1/namespaces/nope/pods", "application/json", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 404, metav1.StatusReasonNotFound, `namespaces "nope" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(t, tc.method, tc.path, tc.ctype, []byte(tc.body))
			st := decodeStatus(t, body)
			if code != tc.code || st.Reason != tc.reason || int(st.Code) != tc.code || !strings.Contains(st.Message, tc.contains) {
				t.Errorf("got %d %s %q, want %d %s containing %q", code, st.Reason, st.Message, tc.code, tc.reason, tc.contains)
			}
		})
	}
}

func TestValidationCausesNameFields(t *testing.T) {
	f := newFixture(t)
	body := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"},"spec":{"taints":[{"key":"a","effect":"Sometimes"},{"key":"b!","effect":"NoSchedule"}]}}`
	code, data := f.do(t, "POST", "/api/v1/nodes", "application/json", []byte(body))
	st := decodeStatus(t, data)
	if code != 422 || st.Details == nil {
		t.Fatalf("got %d %s", code, data)
	}
	var fields []string
	for _, c := range st.Details.Causes {
		fields = append(fields, c.Field)
	}
	want := []string{"metadata.taints[0].effect", "metadata.taints[1].key"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("cause fields (-want +got):\n%s", diff)
	}
}

func TestUnknownFieldWarnsByDefault(t *testing.T) {
	f := newFixture(t)
	req, _ := http.NewRequest("POST", f.url+"/api/v1/nodes", strings.NewReader(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"w"},"spec":{"bogus":1}}`))
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.Contains(resp.Header.Get("Warning"), `unknown field \"spec.bogus\"`) {
		t.Errorf("got %d, Warning %q", resp.StatusCode, resp.Header.Get("Warning"))
	}
}

func TestAuthentication(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		if code, body := f.doAs(t, "", "GET", path, "", nil); code != 200 {
			t.Errorf("%s without credentials: %d %s", path, code, body)
		}
	}
	for _, path := range []string{"/api/v1/nodes", "/api", "/openapi/v2"} {
		if code, _ := f.doAs(t, "", "GET", path, "", nil); code != 401 {
			t.Errorf("%s without credentials: %d, want 401", path, code)
		}
	}
	if code, _ := f.doAs(t, "wrong", "GET", "/api/v1/nodes", "", nil); code != 401 {
		t.Errorf("bad token: %d, want 401", code)
	}
	code, body := f.doAs(t, aliceToken, "GET", "/api/v1/nodes", "", nil)
	if st := decodeStatus(t, body); code != 403 || !strings.Contains(st.Message, `User "alice" cannot list resource "nodes"`) {
		t.Errorf("non-admin: %d %s", code, body)
	}
}

func TestStatusSubresourceRules(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nodes := f.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The main resource ignores status.
	n.Status.Phase = corev1.NodeRunning
	n.Spec.Unschedulable = true
	n, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.Phase != "" || !n.Spec.Unschedulable {
		t.Errorf("update: phase %q unschedulable %v; want status ignored and spec kept", n.Status.Phase, n.Spec.Unschedulable)
	}
	// The status subresource ignores spec.
	n.Status.Phase = corev1.NodeRunning
	n.Spec.Unschedulable = false
	n, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Status.Phase != corev1.NodeRunning || !n.Spec.Unschedulable {
		t.Errorf("status update: phase %q unschedulable %v; want status set and spec ignored", n.Status.Phase, n.Spec.Unschedulable)
	}
	// A stale resourceVersion conflicts.
	stale := n.DeepCopy()
	n.Labels = map[string]string{"a": "b"}
	if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Labels = map[string]string{"a": "c"}
	if _, err := nodes.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v, want Conflict", err)
	}
	// An update that changes nothing keeps the resourceVersion.
	cur, _ := nodes.Get(ctx, "n1", metav1.GetOptions{})
	again, err := nodes.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil || again.ResourceVersion != cur.ResourceVersion {
		t.Errorf("no-op update: rv %s -> %s, err %v", cur.ResourceVersion, again.ResourceVersion, err)
	}
}

func TestPatchForms(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nodes := f.client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"keep": "1"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"labels":{"m":"x"}}}`), metav1.PatchOptions{})
	if err != nil || n.Labels["m"] != "x" || n.Labels["keep"] != "1" {
		t.Fatalf("merge patch: %v %v", n.Labels, err)
	}
	n, err = nodes.Patch(ctx, "n1", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels/j","value":"y"}]`), metav1.PatchOptions{})
	if err != nil || n.Labels["j"] != "y" {
		t.Fatalf("json patch: %v %v", n.Labels, err)
	}
	// Strategic merge patch merges lists that have a merge key (node
	// conditions by type), here through the status subresource.
	for _, typ := range []string{"Ready", "MemoryPressure"} {
		patch := `{"status":{"conditions":[{"type":"` + typ + `","status":"True"}]}}`
		if n, err = nodes.Patch(ctx, "n1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	var conds []string
	for _, c := range n.Status.Conditions {
		conds = append(conds, string(c.Type))
	}
	if diff := cmp.Diff([]string{"MemoryPressure", "Ready"}, conds); diff != "" {
		t.Errorf("strategic conditions (-want +got):\n%s", diff)
	}
	// Taints have no merge key: a strategic patch replaces the list.
	n, err = nodes.Patch(ctx, "n1", types.StrategicMergePatchType, []byte(`{"spec":{"taints":[{"key":"b","effect":"NoExecute"}]}}`), metav1.PatchOptions{})
	if err != nil || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "b" {
		t.Errorf("strategic taints: %v %v", n.Spec.Taints, err)
	}
	// A patch naming a stale resourceVersion conflicts instead of retrying.
	_, err = nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1","labels":{"z":"1"}}}`), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Errorf("patch with stale rv: %v, want Conflict", err)
	}
	// A patch that makes the object invalid is refused with 422.
	_, err = nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"spec":{"taints":[{"key":"c","effect":"Never"}]}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("invalid patch: %v, want Invalid", err)
	}
	// A patch naming the object's uid applies; one naming another uid (an
	// object since recreated under the name) is refused on metadata.uid.
	if _, err = nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"uid":"`+string(n.UID)+`","labels":{"u":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("patch naming the uid: %v", err)
	}
	_, err = nodes.Patch(ctx, "n1", types.MergePatchType, []byte(`{"metadata":{"uid":"not-the-uid","labels":{"u":"2"}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("patch naming another uid: %v, want Invalid on metadata.uid", err)
	}
}

func TestListSelectorsAndPaging(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := 0; i < 7; i++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"parity": []string{"even", "odd"}[i%2]}}}
		if _, err := f.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	opts := metav1.ListOptions{LabelSelector: "parity=even", Limit: 2}
	for {
		list, err := f.client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 2 {
			t.Fatalf("page of %d items with limit 2", len(list.Items))
		}
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if diff := cmp.Diff([]string{"n0", "n2", "n4", "n6"}, names); diff != "" {
		t.Errorf("paged even nodes (-want +got):\n%s", diff)
	}
	list, err := f.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=n3"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "n3" {
		t.Errorf("field selector: %v %v", list, err)
	}
	_, err = f.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "spec.bogus=1"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("unknown field selector: %v, want BadRequest", err)
	}
}

func TestPodFieldSelectors(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pods := f.client.CoreV1().Pods("default")
	for _, p := range []struct{ name, node string }{{"a", "n1"}, {"b", "n2"}, {"c", "n1"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := f.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1,status.phase!=Succeeded"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"a", "c"}, names); diff != "" {
		t.Errorf("pods on n1 (-want +got):\n%s", diff)
	}
}

func TestTableForNodes(t *testing.T) {
	f := newFixture(t)
	if code, body := f.do(t, "POST", "/api/v1/nodes", "application/json", []byte(docNode)); code != 201 {
		t.Fatal(string(body))
	}
	req, _ := http.NewRequest("GET", f.url+"/api/v1/nodes", nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		}
	}
	if diff := cmp.Diff([]string{"Name", "Status", "Roles", "Age", "Version"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "10.240.79.157" || table.Rows[0].Cells[1] != "Unknown" {
		t.Errorf("rows: %+v", table.Rows)
	}
}

func TestInformerSeesChangesInOrder(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(f.client, 0)
	got := make(chan string, 16)
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { got <- "add " + obj.(*corev1.Node).Name },
		UpdateFunc: func(_, obj interface{}) { got <- "update " + obj.(*corev1.Node).Labels["v"] },
		DeleteFunc: func(obj interface{}) { got <- "delete " + obj.(*corev1.Node).Name },
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	nodes := f.client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "i1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2"} {
		if _, err := nodes.Patch(ctx, "i1", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"`+v+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes.Delete(ctx, "i1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add i1", "update 1", "update 2", "delete i1"}
	for i, w := range want {
		select {
		case g := <-got:
			if g != w {
				t.Fatalf("event %d = %q, want %q", i, g, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %q", w)
		}
	}
}

func TestWatchFromCompactedVersionGets410(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	leases := f.client.CoordinationV1().Leases("kube-node-lease")
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("l")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := l.ResourceVersion
	for i := 0; i < 3; i++ {
		l.Spec.LeaseDurationSeconds = ptr.To(int32(40 + i))
		if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rev, _ := f.store.Revision(ctx)
	if err := f.store.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	w, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: first})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
			t.Errorf("got %s %#v, want ERROR 410 Expired", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
}

func TestWatchSelectorTransitions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nodes := f.client.CoreV1().Nodes()
	n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "s1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := nodes.Watch(ctx, metav1.ListOptions{LabelSelector: "zone=a", ResourceVersion: n.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i, zone := range []string{"a", "a", "b"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"zone":%q,"step":"%d"}}}`, zone, i)
		if _, err := nodes.Patch(ctx, "s1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
	for _, typ := range want {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != typ {
				t.Fatalf("got %s, want %s", ev.Type, typ)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", typ)
		}
	}
}

func TestNamespaceRules(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nss, err := f.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	if diff := cmp.Diff([]string{"default", "kube-node-lease", "kube-public", "kube-system"}, names); diff != "" {
		t.Errorf("system namespaces (-want +got):\n%s", diff)
	}
	if err := f.client.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting default: %v, want Forbidden", err)
	}
	if _, err := f.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := f.client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("deleted namespace: %v %v, want Terminating", ns.Status.Phase, err)
	}
	_, err = f.client.CoordinationV1().Leases("team").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "being terminated") {
		t.Errorf("create in terminating namespace: %v", err)
	}
	ns.Spec.Finalizers = nil
	if _, err := f.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("finalized namespace still there: %v", err)
	}
}

func TestPodGracefulDeletion(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pods := f.client.CoreV1().Pods("default")
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := pods.Create(ctx, bound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "bound", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("bound pod after delete: %+v %v; want terminating with 30s grace", p.ObjectMeta, err)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("force-deleted pod still there: %v", err)
	}
}
