package persistentvolume_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/openapi"
	"knode/internal/server"
	"knode/internal/version"
	"knode/internal/volume"
)

// These tests drive the storage kinds through knode's real API server
// (server.Kinds()) with client-go: discovery, OpenAPI, defaults, status
// subresources, update rules, tables and finalizers.

var ctx = context.Background()

func TestDiscoveryAndOpenAPI(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	type res struct {
		namespaced bool
		short      string
	}
	want := map[string]map[string]res{
		"storage.k8s.io/v1": {
			"storageclasses": {short: "sc"}, "csidrivers": {}, "csinodes": {},
			"volumeattachments": {}, "volumeattachments/status": {},
		},
		"v1": {
			"persistentvolumes": {short: "pv"}, "persistentvolumes/status": {},
			"persistentvolumeclaims": {namespaced: true, short: "pvc"}, "persistentvolumeclaims/status": {namespaced: true},
		},
	}
	for gv, resources := range want {
		list, err := s.Admin.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery of %s: %v", gv, err)
		}
		got := map[string]res{}
		for _, r := range list.APIResources {
			if _, ok := resources[r.Name]; ok {
				short := ""
				if len(r.ShortNames) > 0 {
					short = r.ShortNames[0]
				}
				got[r.Name] = res{namespaced: r.Namespaced, short: short}
			}
		}
		if diff := cmp.Diff(resources, got, cmp.AllowUnexported(res{})); diff != "" {
			t.Errorf("%s resources (-want +got):\n%s", gv, diff)
		}
	}

	// apitest serves no OpenAPI; build the handler knode server builds.
	oapi, err := openapi.NewHandler(server.Kinds(), version.GitVersion())
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(path string) []byte {
		rec := httptest.NewRecorder()
		oapi.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	for doc, paths := range map[string][]string{
		"apis/storage.k8s.io/v1": {
			"/apis/storage.k8s.io/v1/storageclasses/{name}", "/apis/storage.k8s.io/v1/csidrivers/{name}",
			"/apis/storage.k8s.io/v1/csinodes/{name}", "/apis/storage.k8s.io/v1/volumeattachments/{name}/status",
		},
		"api/v1": {"/api/v1/persistentvolumes/{name}/status", "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}/status"},
	} {
		var d struct {
			Paths map[string]json.RawMessage `json:"paths"`
		}
		if err := json.Unmarshal(fetch("/openapi/v3/"+doc), &d); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		for _, p := range paths {
			if _, ok := d.Paths[p]; !ok {
				t.Errorf("OpenAPI v3 %s lacks %s", doc, p)
			}
		}
	}
	if v2 := string(fetch("/openapi/v2")); !strings.Contains(v2, `"/api/v1/persistentvolumes"`) ||
		!strings.Contains(v2, `"io.k8s.api.storage.v1.StorageClass"`) {
		t.Error("OpenAPI v2 lacks persistentvolumes or the StorageClass definition")
	}
}

func get(t *testing.T, s *apitest.Server, path, accept string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return body
}

// table fetches path as kubectl does and returns the cells of each row.
func table(t *testing.T, s *apitest.Server, path string) (columns []string, rows [][]interface{}) {
	t.Helper()
	var tbl metav1.Table
	body := get(t, s, path, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatal(err)
	}
	for _, c := range tbl.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	for _, r := range tbl.Rows {
		rows = append(rows, r.Cells)
	}
	return columns, rows
}

// invalid fails t unless err is a 422 whose message contains want.
func invalid(t *testing.T, err error, want string) {
	t.Helper()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v, want Invalid with %q", err, want)
	}
}

func TestStorageClassAndCSIDriver(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	scs := s.Admin.StorageV1().StorageClasses()
	sc, err := scs.Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{volume.AnnDefaultStorageClass: "true"}},
		Provisioner: volume.BuiltinDriver,
		Parameters:  map[string]string{"a": "b"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("class not defaulted: %+v", sc)
	}
	sc.Parameters["a"] = "c"
	_, err = scs.Update(ctx, sc, metav1.UpdateOptions{})
	invalid(t, err, "parameters: Forbidden: updates to parameters are forbidden.")
	cols, rows := table(t, s, "/apis/storage.k8s.io/v1/storageclasses")
	if diff := cmp.Diff([]string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(rows) != 1 || rows[0][0] != "standard (default)" || rows[0][4] != false {
		t.Errorf("rows = %v", rows)
	}

	d, err := s.Admin.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: volume.BuiltinDriver}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !*d.Spec.AttachRequired || *d.Spec.PodInfoOnMount || *d.Spec.SELinuxMount || d.Spec.VolumeLifecycleModes[0] != storagev1.VolumeLifecyclePersistent {
		t.Errorf("driver not defaulted: %+v", d.Spec)
	}
	d.Spec.AttachRequired = ptr.To(false)
	_, err = s.Admin.StorageV1().CSIDrivers().Update(ctx, d, metav1.UpdateOptions{})
	invalid(t, err, "spec.attachedRequired: Invalid value: false: field is immutable")
}

func TestCSINode(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	nodes := s.Admin.StorageV1().CSINodes()
	n, err := nodes.Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: volume.BuiltinDriver, NodeID: "node-1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Drivers[0].NodeID = "node-2"
	_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
	invalid(t, err, "spec.drivers: Invalid value")
	_, err = nodes.Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "node-2"},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "a"}, {Name: "a", NodeID: "x"}}},
	}, metav1.CreateOptions{})
	invalid(t, err, "spec.drivers[1].name: Duplicate value")
	_, rows := table(t, s, "/apis/storage.k8s.io/v1/csinodes")
	if len(rows) != 1 || rows[0][1] != float64(1) {
		t.Errorf("rows = %v", rows)
	}
}

func TestVolumeAttachmentStatus(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	vas := s.Admin.StorageV1().VolumeAttachments()
	name := volume.AttachmentName("vol-1", volume.BuiltinDriver, "node-1")
	va, err := vas.Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: volume.BuiltinDriver, NodeName: "node-1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-1")},
		},
		Status: storagev1.VolumeAttachmentStatus{Attached: true},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if va.Status.Attached {
		t.Error("create kept the status")
	}

	// The attacher's flow: finalizer and annotation by merge patch on the
	// main resource, then status through /status.
	va, err = vas.Patch(ctx, name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["`+volume.AttacherFinalizer(volume.BuiltinDriver)+`"],"annotations":{"`+volume.AnnAttacherNodeID+`":"node-1"}},"status":{"attached":true}}`),
		metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if va.Status.Attached || len(va.Finalizers) != 1 {
		t.Errorf("main-resource patch: status %+v finalizers %v; want status unchanged, finalizer added", va.Status, va.Finalizers)
	}
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/x"}}
	va.Spec.NodeName = "node-2"
	va.Labels = map[string]string{"a": "b"}
	va, err = vas.UpdateStatus(ctx, va, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !va.Status.Attached || va.Spec.NodeName != "node-1" || va.Labels != nil {
		t.Errorf("status update: spec %+v labels %v status %+v", va.Spec, va.Labels, va.Status)
	}
	va.Spec.NodeName = "node-2"
	_, err = vas.Update(ctx, va, metav1.UpdateOptions{})
	invalid(t, err, "spec: Invalid value")

	_, rows := table(t, s, "/apis/storage.k8s.io/v1/volumeattachments")
	if len(rows) != 1 || rows[0][2] != "pv-1" || rows[0][3] != "node-1" || rows[0][4] != true {
		t.Errorf("rows = %v", rows)
	}

	// Deleting waits for the attacher's finalizer.
	if err := vas.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if va, err = vas.Get(ctx, name, metav1.GetOptions{}); err != nil || va.DeletionTimestamp == nil {
		t.Fatalf("after delete: %v %v, want it terminating", va, err)
	}
	if _, err := vas.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vas.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the finalizer went: %v, want NotFound", err)
	}
}

func TestPersistentVolumeAndClaim(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	pvs := s.Admin.CoreV1().PersistentVolumes()
	pv, err := pvs.Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Finalizers: []string{volume.PVProtectionFinalizer}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: volume.BuiltinDriver, VolumeHandle: "vol-1"}},
			StorageClassName:       "standard",
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumePending || pv.Status.LastPhaseTransitionTime == nil ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("created volume: spec %+v status %+v", pv.Spec, pv.Status)
	}
	_, err = pvs.Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-bad"}}, metav1.CreateOptions{})
	invalid(t, err, "spec: Required value: must specify a volume type")

	pvcs := s.Admin.CoreV1().PersistentVolumeClaims("default")
	pvc, err := pvcs.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Finalizers: []string{volume.PVCProtectionFinalizer}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("created claim: %+v", pvc)
	}

	// Bind as the PV controller does: volume first, then the claim.
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "data", UID: pvc.UID}
	if pv, err = pvs.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	pv.Spec.StorageClassName = "changed-through-status"
	if pv, err = pvs.UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || pv.Spec.StorageClassName != "standard" {
		t.Errorf("volume status update: spec %+v status %+v", pv.Spec, pv.Status)
	}
	pvc.Spec.VolumeName = "pv-1"
	pvc.Spec.StorageClassName = ptr.To("standard")
	if pvc, err = pvcs.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Status = corev1.PersistentVolumeClaimStatus{
		Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity,
	}
	if pvc, err = pvcs.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimLost
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if pvc, err = pvcs.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("growing a bound claim: %v", err)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("main-resource update changed the status to %s", pvc.Status.Phase)
	}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	_, err = pvcs.Update(ctx, pvc, metav1.UpdateOptions{})
	invalid(t, err, "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims")

	pv.Spec.CSI.VolumeHandle = "vol-2"
	_, err = pvs.Update(ctx, pv, metav1.UpdateOptions{})
	invalid(t, err, "spec.persistentvolumesource is immutable after creation")

	cols, rows := table(t, s, "/api/v1/persistentvolumes")
	if len(cols) != 11 || len(rows) != 1 {
		t.Fatalf("volume table: %v %v", cols, rows)
	}
	if diff := cmp.Diff([]interface{}{"pv-1", "1Gi", "RWO", "Retain", "Bound", "default/data", "standard", "<unset>", ""}, rows[0][:9]); diff != "" {
		t.Errorf("volume row (-want +got):\n%s", diff)
	}
	_, rows = table(t, s, "/api/v1/namespaces/default/persistentvolumeclaims")
	if diff := cmp.Diff([]interface{}{"data", "Bound", "pv-1", "1Gi", "RWO", "standard", "<unset>"}, rows[0][:7]); diff != "" {
		t.Errorf("claim row (-want +got):\n%s", diff)
	}

	// The protection finalizers hold both objects until removed; then
	// they go at once (neither kind has a grace period).
	if err := pvcs.Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pvs.Delete(ctx, "pv-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, rows = table(t, s, "/api/v1/namespaces/default/persistentvolumeclaims"); rows[0][1] != "Terminating" {
		t.Errorf("terminating claim shows %v", rows[0][1])
	}
	for _, f := range []func() (metav1.Object, error){
		func() (metav1.Object, error) { return pvcs.Get(ctx, "data", metav1.GetOptions{}) },
		func() (metav1.Object, error) { return pvs.Get(ctx, "pv-1", metav1.GetOptions{}) },
	} {
		if o, err := f(); err != nil || o.GetDeletionTimestamp() == nil {
			t.Fatalf("after delete: %v, want it terminating", err)
		}
	}
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := pvcs.Patch(ctx, "data", types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pvs.Patch(ctx, "pv-1", types.MergePatchType, unfinalize, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pvcs.Get(ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim after its finalizer went: %v, want NotFound", err)
	}
	if _, err := pvs.Get(ctx, "pv-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("volume after its finalizer went: %v, want NotFound", err)
	}
}
