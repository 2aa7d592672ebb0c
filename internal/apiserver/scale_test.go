package apiserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/utils/ptr"

	"knode/internal/apiserver"
	"knode/internal/apitest"
)

// newReplicaSet is a valid ReplicaSet "web" of replicas, selecting app=web.
func newReplicaSet(replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": "web"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

// startWithReplicaSet serves the real kinds, as opts asks, holding
// ReplicaSet "web" of 2 replicas with 1 in its status.
func startWithReplicaSet(t *testing.T, opts apitest.Options) (*apitest.Server, *appsv1.ReplicaSet) {
	t.Helper()
	s := apitest.Start(t, opts)
	ctx := context.Background()
	rss := s.Admin.AppsV1().ReplicaSets("default")
	rs, err := rss.Create(ctx, newReplicaSet(2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs.Status.Replicas = 1
	if rs, err = rss.UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s, rs
}

// wantScale is the Scale of rs as upstream words it.
func wantScale(rs *appsv1.ReplicaSet) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name: rs.Name, Namespace: rs.Namespace, UID: rs.UID,
			ResourceVersion: rs.ResourceVersion, CreationTimestamp: rs.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: *rs.Spec.Replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: rs.Status.Replicas, Selector: "app=web"},
	}
}

const rsScalePath = "/apis/apps/v1/namespaces/default/replicasets/web/scale"

// getScale reads rsScalePath as the admin, accepting accept.
func getScale(t *testing.T, s *apitest.Server, accept string) (contentType string, body []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+rsScalePath, nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", rsScalePath, resp.StatusCode, body)
	}
	return resp.Header.Get("Content-Type"), body
}

func TestScaleGet(t *testing.T) {
	s, rs := startWithReplicaSet(t, apitest.Options{})
	_, body := getScale(t, s, "application/json")
	var got autoscalingv1.Scale
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := wantScale(rs)
	want.TypeMeta = metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("GET scale as JSON (-want +got):\n%s", diff)
	}

	// client-go asks for protobuf.
	if ct, _ := getScale(t, s, "application/vnd.kubernetes.protobuf, application/json"); ct != "application/vnd.kubernetes.protobuf" {
		t.Errorf("GET scale preferring protobuf gave %s", ct)
	}
	pb, err := s.Admin.AppsV1().ReplicaSets("default").GetScale(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantScale(rs), pb); diff != "" {
		t.Errorf("GetScale (-want +got):\n%s", diff)
	}

	_, body = getScale(t, s, "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	var columns []string
	for _, c := range table.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Desired", "Available", "Age"}, columns); diff != "" || len(table.Rows) != 1 {
		t.Fatalf("scale table columns (-want +got):\n%s\nrows: %v", diff, table.Rows)
	}
	if cells := table.Rows[0].Cells[:3]; !cmp.Equal(cells, []interface{}{"web", float64(2), float64(1)}) {
		t.Errorf("scale table cells %v, want web, 2, 1", cells)
	}
}

func TestScaleNotFound(t *testing.T) {
	s, _ := startWithReplicaSet(t, apitest.Options{})
	f := &fixture{url: s.URL}
	if _, err := s.Admin.CoreV1().Pods("default").Create(context.Background(), newPod("p", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path string
		details            *metav1.StatusDetails
	}{
		{"kind without scale", "GET", "/api/v1/namespaces/default/pods/p/scale", nil},
		{"missing replica set", "GET", "/apis/apps/v1/namespaces/default/replicasets/gone/scale", &metav1.StatusDetails{Name: "gone", Group: "apps", Kind: "replicasets"}},
		{"patch of a missing replica set", "PATCH", "/apis/apps/v1/namespaces/default/replicasets/gone/scale", &metav1.StatusDetails{Name: "gone", Group: "apps", Kind: "replicasets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, data := f.do(t, tc.method, tc.path, "application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))
			st := decodeStatus(t, data)
			if code != http.StatusNotFound || st.Reason != metav1.StatusReasonNotFound {
				t.Fatalf("%s %s: %d %s", tc.method, tc.path, code, data)
			}
			if tc.details != nil && !cmp.Equal(tc.details, st.Details) {
				t.Errorf("details %+v, want %+v", st.Details, tc.details)
			}
		})
	}
	if code, data := f.do(t, "POST", rsScalePath, "application/json", []byte(`{}`)); code != http.StatusMethodNotAllowed {
		t.Errorf("POST scale: %d %s, want 405", code, data)
	}
}

// admissions records what admission saw.
type admissions struct {
	mu   sync.Mutex
	seen []apiserver.AdmissionAttributes
}

func (a *admissions) Admit(_ context.Context, attrs apiserver.AdmissionAttributes) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, attrs)
	return nil
}

func (a *admissions) last() apiserver.AdmissionAttributes {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[len(a.seen)-1]
}

func TestScaleUpdate(t *testing.T) {
	adm := &admissions{}
	s, rs := startWithReplicaSet(t, apitest.Options{Admission: []apiserver.Admitter{adm}})
	ctx := context.Background()
	rss := s.Admin.AppsV1().ReplicaSets("default")

	// A Scale that names the current resourceVersion.
	sc, err := rss.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := sc.DeepCopy()
	sc.Spec.Replicas = 5
	got, err := rss.UpdateScale(ctx, "web", sc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, err := rss.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *after.Spec.Replicas != 5 || after.Generation != rs.Generation+1 || after.Status.Replicas != 1 {
		t.Errorf("after scaling to 5: replicas %d, generation %d (was %d), status.replicas %d", *after.Spec.Replicas, after.Generation, rs.Generation, after.Status.Replicas)
	}
	if diff := cmp.Diff(wantScale(after), got); diff != "" {
		t.Errorf("UpdateScale returned (-want +got):\n%s", diff)
	}
	a := adm.last()
	if obj, ok := a.Object.(*appsv1.ReplicaSet); a.Operation != "UPDATE" || a.Subresource != "scale" || a.Name != "web" || !ok || *obj.Spec.Replicas != 5 {
		t.Errorf("admission saw %s of %s/%s with %T", a.Operation, a.Name, a.Subresource, a.Object)
	}

	// A stale resourceVersion is a conflict, and changes nothing.
	stale.Spec.Replicas = 7
	if _, err := rss.UpdateScale(ctx, "web", stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("UpdateScale with a stale resourceVersion: %v, want a conflict", err)
	}
	// Without one, the update is unconditional.
	stale.ResourceVersion = ""
	if got, err = rss.UpdateScale(ctx, "web", stale, metav1.UpdateOptions{}); err != nil || got.Spec.Replicas != 7 {
		t.Errorf("UpdateScale without a resourceVersion: %v, %+v", err, got)
	}
	// The same replicas again write nothing.
	again, err := rss.UpdateScale(ctx, "web", stale, metav1.UpdateOptions{})
	if err != nil || again.ResourceVersion != got.ResourceVersion {
		t.Errorf("UpdateScale to the same replicas: %v, resourceVersion %s then %s", err, got.ResourceVersion, again.ResourceVersion)
	}
}

func TestScaleUpdateRefused(t *testing.T) {
	s, _ := startWithReplicaSet(t, apitest.Options{})
	f := &fixture{url: s.URL}
	body := func(name string, replicas int) []byte {
		data, _ := json.Marshal(map[string]interface{}{
			"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]string{"name": name}, "spec": map[string]int{"replicas": replicas},
		})
		return data
	}
	tests := []struct {
		name, method, ctype string
		body                []byte
		code                int
		reason              metav1.StatusReason
		message             string
		causes              []string
	}{
		{"negative replicas", "PUT", "application/json", body("web", -1), 422, metav1.StatusReasonInvalid,
			`Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`, []string{"spec.replicas"}},
		{"negative replicas by patch", "PATCH", "application/merge-patch+json", []byte(`{"spec":{"replicas":-3}}`), 422, metav1.StatusReasonInvalid,
			`Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -3: must be greater than or equal to 0`, []string{"spec.replicas"}},
		{"another name", "PUT", "application/json", body("other", 1), 400, metav1.StatusReasonBadRequest,
			"the name of the object (other) does not match the name on the URL (web)", nil},
		{"another kind", "PUT", "application/json", []byte(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web"}}`), 400, metav1.StatusReasonBadRequest,
			"the API version in the data (apps/v1) does not match the expected API version (autoscaling/v1)", nil},
		{"unknown field, strict", "PATCH", "application/merge-patch+json", []byte(`{"spec":{"replicas":1,"bogus":1}}`), 400, metav1.StatusReasonBadRequest,
			`unknown field "spec.bogus"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, data := f.do(t, tc.method, rsScalePath+"?fieldValidation=Strict", tc.ctype, tc.body)
			st := decodeStatus(t, data)
			if code != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Fatalf("got %d %s %q, want %d %s %q", code, st.Reason, st.Message, tc.code, tc.reason, tc.message)
			}
			var causes []string
			if st.Details != nil {
				for _, c := range st.Details.Causes {
					causes = append(causes, c.Field)
				}
			}
			if diff := cmp.Diff(tc.causes, causes); tc.code == 422 && diff != "" {
				t.Errorf("cause fields (-want +got):\n%s", diff)
			}
		})
	}
	rs, err := s.Admin.AppsV1().ReplicaSets("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || *rs.Spec.Replicas != 2 || rs.Generation != 1 {
		t.Errorf("after refused writes: %v, replicas %d, generation %d; want 2 and 1", err, *rs.Spec.Replicas, rs.Generation)
	}
}

// scalesClient is client-go's scale client, as kubectl builds it: the
// scale subresource's kind comes from discovery.
func scalesClient(t *testing.T, s *apitest.Server) scale.ScalesGetter {
	t.Helper()
	disco := s.Admin.Discovery()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
	c, err := scale.NewForConfig(s.AdminConfig, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disco))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestScalePatch(t *testing.T) {
	s, rs := startWithReplicaSet(t, apitest.Options{})
	ctx := context.Background()
	gvr := appsv1.SchemeGroupVersion.WithResource("replicasets")
	scales := scalesClient(t, s).Scales("default")
	// kubectl scale's patch.
	got, err := scales.Patch(ctx, gvr, "web", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Replicas != 3 || got.Status.Replicas != 1 || got.Status.Selector != "app=web" || got.UID != rs.UID {
		t.Errorf("merge patch to 3 returned %+v", got)
	}
	for _, tc := range []struct {
		name  string
		pt    types.PatchType
		patch string
		want  int32
	}{
		{"strategic merge", types.StrategicMergePatchType, `{"spec":{"replicas":4}}`, 4},
		{"JSON patch", types.JSONPatchType, `[{"op":"test","path":"/spec/replicas","value":4},{"op":"replace","path":"/spec/replicas","value":0}]`, 0},
		{"JSON patch of the status", types.JSONPatchType, `[{"op":"replace","path":"/status/replicas","value":9}]`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := scales.Patch(ctx, gvr, "web", tc.pt, []byte(tc.patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			after, err := s.Admin.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Spec.Replicas != tc.want || *after.Spec.Replicas != tc.want || after.Status.Replicas != 1 {
				t.Errorf("scale %d, replica set %d (status %d); want %d (1)", got.Spec.Replicas, *after.Spec.Replicas, after.Status.Replicas, tc.want)
			}
		})
	}

	// A patch that names a stale resourceVersion is a conflict.
	stale := `{"metadata":{"resourceVersion":"` + rs.ResourceVersion + `"},"spec":{"replicas":6}}`
	if _, err := scales.Patch(ctx, gvr, "web", types.MergePatchType, []byte(stale), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("patch with a stale resourceVersion: %v, want a conflict", err)
	}
	// GET and PUT, as kubectl scale does with preconditions.
	sc, err := scales.Get(ctx, gvr.GroupResource(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 8
	if got, err = scales.Update(ctx, gvr.GroupResource(), sc, metav1.UpdateOptions{}); err != nil || got.Spec.Replicas != 8 {
		t.Errorf("update to 8: %v, %+v", err, got)
	}
}

func TestScaleDiscovery(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	list, err := s.Admin.Discovery().ServerResourcesForGroupVersion("apps/v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		found[r.Name] = r
	}
	want := metav1.APIResource{Name: "replicasets/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: []string{"get", "patch", "update"}}
	if diff := cmp.Diff(want, found["replicasets/scale"]); diff != "" {
		t.Errorf("legacy discovery of replicasets/scale (-want +got):\n%s", diff)
	}
	if status := found["replicasets/status"]; status.Group != "" || status.Version != "" || status.Kind != "ReplicaSet" {
		t.Errorf("replicasets/status names %s/%s %s; want only its kind, ReplicaSet", status.Group, status.Version, status.Kind)
	}
	if _, ok := found["daemonsets/scale"]; ok {
		t.Error("daemonsets, which have no scale, list daemonsets/scale")
	}

	req, _ := http.NewRequest("GET", s.URL+"/apis", nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.NewDecoder(resp.Body).Decode(&agg); err != nil {
		t.Fatal(err)
	}
	var got *apidiscoveryv2.APISubresourceDiscovery
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for i, sub := range r.Subresources {
					if g.Name == "apps" && r.Resource == "replicasets" && sub.Subresource == "scale" {
						got = &r.Subresources[i]
					}
				}
			}
		}
	}
	wantV2 := &apidiscoveryv2.APISubresourceDiscovery{
		Subresource:  "scale",
		ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
		Verbs:        []string{"get", "patch", "update"},
	}
	if diff := cmp.Diff(wantV2, got); diff != "" {
		t.Errorf("aggregated discovery of replicasets/scale (-want +got):\n%s", diff)
	}
}

// The kubectl releases knode supports, as installed on the build machines.
const kubectlDir = "/usr/lib/google-cloud-sdk/bin"

var kubectlVersions = []string{"1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"}

// eachKubectl runs f, as a subtest, with every installed kubectl release
// (-short: the oldest and the newest) and its binary.
func eachKubectl(t *testing.T, f func(t *testing.T, release, bin string)) {
	for _, release := range kubectlVersions {
		t.Run(release, func(t *testing.T) {
			if testing.Short() && release != kubectlVersions[0] && release != kubectlVersions[len(kubectlVersions)-1] {
				t.Skip("-short runs only the oldest and the newest kubectl")
			}
			bin := filepath.Join(kubectlDir, "kubectl."+release)
			if _, err := os.Stat(bin); err != nil {
				t.Skipf("kubectl %s not installed: %v", release, err)
			}
			f(t, release, bin)
		})
	}
}

// TestKubectlScale runs each kubectl's scale: a merge patch of the scale
// subresource, and with --current-replicas a GET and a PUT of it; and its
// get --subresource=scale, which prints the server's Table.
func TestKubectlScale(t *testing.T) {
	eachKubectl(t, func(t *testing.T, release, bin string) {
		// kubectl sends no credentials over plain HTTP: the server
		// sees the admin's.
		s, _ := startWithReplicaSet(t, apitest.Options{Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
				h.ServeHTTP(w, r)
			})
		}})
		home := t.TempDir()
		kubectl := func(args ...string) (string, error) {
			cmd := exec.Command(bin, append([]string{"--server", s.URL, "--cache-dir", filepath.Join(home, "cache"), "-n", "default"}, args...)...)
			cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "kubeconfig"), "PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		replicas := func() int32 {
			rs, err := s.Admin.AppsV1().ReplicaSets("default").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return *rs.Spec.Replicas
		}
		if out, err := kubectl("scale", "rs/web", "--replicas=3"); err != nil || !strings.Contains(out, "replicaset.apps/web scaled") {
			t.Fatalf("kubectl scale --replicas=3: %v\n%s", err, out)
		}
		if got := replicas(); got != 3 {
			t.Errorf("after kubectl scale --replicas=3, spec.replicas = %d", got)
		}
		if out, err := kubectl("scale", "rs/web", "--current-replicas=3", "--replicas=1"); err != nil {
			t.Fatalf("kubectl scale --current-replicas=3 --replicas=1: %v\n%s", err, out)
		}
		if got := replicas(); got != 1 {
			t.Errorf("after kubectl scale --current-replicas=3 --replicas=1, spec.replicas = %d", got)
		}
		if out, err := kubectl("scale", "rs/web", "--current-replicas=3", "--replicas=4"); err == nil {
			t.Errorf("kubectl scale with a wrong --current-replicas succeeded:\n%s", out)
		}
		if got := replicas(); got != 1 {
			t.Errorf("after a refused kubectl scale, spec.replicas = %d", got)
		}
		out, err := kubectl("get", "rs/web", "--subresource=scale", "--no-headers")
		lines := strings.Split(strings.TrimSpace(out), "\n") // kubectl 1.27 warns first that it has no kubeconfig
		if fields := strings.Fields(lines[len(lines)-1]); err != nil || len(fields) != 4 || fields[0] != "web" || fields[1] != "1" || fields[2] != "1" {
			t.Errorf("kubectl get --subresource=scale: %v\n%s", err, out)
		}
	})
}
