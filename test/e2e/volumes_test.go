package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knode/internal/volume"
)

// volumePod is a pod pinned to node that mounts the claim at /data and runs
// script.
func volumePod(name, node, claim, script string, policy corev1.RestartPolicy) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"restartPolicy":                 policy,
			"terminationGracePeriodSeconds": 2,
			"nodeSelector":                  map[string]string{"kubernetes.io/hostname": node},
			"containers": []any{map[string]any{
				"name": "main", "image": "busybox",
				"command":      []string{"sh", "-c", script},
				"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/data"}},
			}},
			"volumes": []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": claim}}},
		},
	}
}

// TestVolumesEndToEnd follows a claim of the default StorageClass through
// the built-in CSI driver on two agents, with real kubectl: provisioning
// and binding, attach, stage and publish on node-1 (the pod writes a file
// at its mountPath), the volume in node-1's volumesInUse and
// volumesAttached, then unpublish, unstage and detach after the pod is
// deleted, a second pod on node-2 reading the file, and the volume's
// deletion with its claim.
func TestVolumesEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime mounts volumes as root")
	}
	version := newestKubectl(t)
	s := startServer(t, serverOptions{})
	client := s.Clientset(t)
	ctx := context.Background()
	mustKubectl := func(args ...string) kubectlResult {
		t.Helper()
		res := kubectlWith(t, version, s.Home, s.Kubeconfig, args...)
		if res.ExitCode != 0 {
			t.Fatalf("want exit code 0:\n%s", res)
		}
		return res
	}
	roots := map[string]string{"node-1": t.TempDir(), "node-2": t.TempDir()}
	for _, name := range []string{"node-1", "node-2"} {
		startAgent(t, s, name, roots[name])
	}
	for _, name := range []string{"node-1", "node-2"} {
		waitDriverRegistered(t, client, name)
	}

	// 0. The baseline: a pod without volumes, from creation to Running.
	plain := volumePod("plain", "node-1", "", "sleep 3600", corev1.RestartPolicyNever)
	spec := plain["spec"].(map[string]any)
	delete(spec, "volumes")
	delete(spec["containers"].([]any)[0].(map[string]any), "volumeMounts")
	start := time.Now()
	mustKubectl("apply", "-f", writeObjects(t, "plain.json", plain))
	eventually(t, "pod plain Running", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, describePods([]corev1.Pod{*p})
	})
	t.Logf("baseline: a pod without volumes created -> Running in %v", time.Since(start).Round(time.Millisecond))
	mustKubectl("delete", "pod", "plain", "--wait=false", "--grace-period=0", "--force")

	// 1. The claim is provisioned by the built-in driver and bound; the pod
	// starts on node-1 and writes a file.
	start = time.Now()
	mustKubectl("apply", "-f", writeObjects(t, "writer.json",
		map[string]any{
			"apiVersion": "v1", "kind": "PersistentVolumeClaim",
			"metadata": map[string]any{"name": "data"},
			"spec": map[string]any{
				"accessModes": []string{"ReadWriteOnce"},
				"resources":   map[string]any{"requests": map[string]string{"storage": "1Gi"}},
			},
		},
		volumePod("writer", "node-1", "data", "echo hello-from-node-1 > /data/greeting && sleep 3600", corev1.RestartPolicyNever),
	))
	var pvc *corev1.PersistentVolumeClaim
	eventually(t, "claim data Bound", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
		c, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pvc = c
		return c.Status.Phase == corev1.ClaimBound, string(c.Status.Phase)
	})
	bound := time.Since(start)
	if got := volume.ClaimClass(pvc); got != "standard" {
		t.Errorf("claim class = %q, want the default class standard", got)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != volume.BuiltinDriver || pv.Annotations[volume.AnnDynamicallyProvisioned] != volume.BuiltinDriver {
		t.Fatalf("PV %s was not provisioned by the built-in driver: %+v %v", pv.Name, pv.Spec.CSI, pv.Annotations)
	}
	handle := pv.Spec.CSI.VolumeHandle
	unique := volume.UniqueName(volume.BuiltinDriver, handle)
	var writer *corev1.Pod
	// Well under the scheduler's 30 s flush: the claim's binding must move
	// the pod, not the periodic retry.
	eventually(t, "pod writer Running", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		writer = p
		return p.Status.Phase == corev1.PodRunning, describePods([]corev1.Pod{*p})
	})
	running := time.Since(start)
	t.Logf("claim created -> Bound in %v, -> pod Running in %v", bound.Round(time.Millisecond), running.Round(time.Millisecond))

	greeting := filepath.Join(s.StorageDir, "volumes", handle, "greeting")
	eventually(t, "the pod's file in the volume", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		data, err := os.ReadFile(greeting)
		return err == nil && string(data) == "hello-from-node-1\n", string(data)
	})
	attachment := volume.AttachmentName(handle, volume.BuiltinDriver, "node-1")
	va, err := client.StorageV1().VolumeAttachments().Get(ctx, attachment, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("VolumeAttachment %s: %v", attachment, err)
	}
	if !va.Status.Attached || va.Spec.NodeName != "node-1" || va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv.Name {
		t.Errorf("VolumeAttachment = %+v, want attached, node-1, PV %s", va, pv.Name)
	}
	eventually(t, "node-1 lists the volume in use and attached", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		inUse := len(n.Status.VolumesInUse) == 1 && n.Status.VolumesInUse[0] == unique
		attached := len(n.Status.VolumesAttached) == 1 && n.Status.VolumesAttached[0].Name == unique
		return inUse && attached, "volumesInUse=" + volumeNames(n.Status.VolumesInUse) + " volumesAttached=" + attachedNames(n.Status.VolumesAttached)
	})
	publish := volume.PublishPath(roots["node-1"], writer.UID, pv.Name)
	staging := volume.StagingPath(roots["node-1"], volume.BuiltinDriver, handle)
	mounts := mountsUnder(t, roots["node-1"])
	for _, want := range []string{publish, staging} {
		if !slices.Contains(mounts, want) {
			t.Errorf("%s is not mounted; mounts under node-1's root: %v", want, mounts)
		}
	}
	get := mustKubectl("get", "pvc,volumeattachments")
	t.Logf("kubectl get pvc,volumeattachments:\n%s", get.Stdout)

	// 2. Deleting the pod unpublishes, unstages and detaches the volume.
	deleted := time.Now()
	mustKubectl("delete", "pod", "writer", "--wait=false")
	eventually(t, "VolumeAttachment gone and node-1's volume lists empty", 60*time.Second, 50*time.Millisecond, func() (bool, string) {
		_, err := client.StorageV1().VolumeAttachments().Get(ctx, attachment, metav1.GetOptions{})
		if err == nil || !apierrors.IsNotFound(err) {
			return false, "VolumeAttachment still there"
		}
		n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(n.Status.VolumesInUse) == 0 && len(n.Status.VolumesAttached) == 0,
			"volumesInUse=" + volumeNames(n.Status.VolumesInUse) + " volumesAttached=" + attachedNames(n.Status.VolumesAttached)
	})
	t.Logf("pod deleted -> detached in %v", time.Since(deleted).Round(time.Millisecond))
	if _, err := client.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod writer still exists after its volume was detached: %v", err)
	}
	if m := mountsUnder(t, roots["node-1"]); len(m) > 0 {
		t.Errorf("node-1 still has mounts after the pod left: %v", m)
	}

	// 3. A pod on node-2 reads what node-1's pod wrote.
	mustKubectl("apply", "-f", writeObjects(t, "reader.json",
		volumePod("reader", "node-2", "data", `test "$(cat /data/greeting)" = hello-from-node-1 && cp /data/greeting /data/seen-on-node-2`, corev1.RestartPolicyNever),
	))
	eventually(t, "pod reader Succeeded", 60*time.Second, 50*time.Millisecond, func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "reader", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("reader failed: %s", describePods([]corev1.Pod{*p}))
		}
		return p.Status.Phase == corev1.PodSucceeded, describePods([]corev1.Pod{*p})
	})
	if data, err := os.ReadFile(filepath.Join(s.StorageDir, "volumes", handle, "seen-on-node-2")); err != nil || string(data) != "hello-from-node-1\n" {
		t.Errorf("node-2's copy = %q, %v", data, err)
	}

	// 4. The claim's deletion deletes the volume (reclaim policy Delete).
	mustKubectl("delete", "pod", "reader", "--wait=false")
	mustKubectl("delete", "pvc", "data", "--wait=false")
	eventually(t, "PV and volume directory gone", 60*time.Second, 50*time.Millisecond, func() (bool, string) {
		_, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, "PV still there"
		}
		_, err = os.Stat(filepath.Join(s.StorageDir, "volumes", handle))
		return os.IsNotExist(err), "volume directory still there"
	})
	for _, root := range roots {
		if m := mountsUnder(t, root); len(m) > 0 {
			t.Errorf("mounts left under %s: %v", root, m)
		}
	}
}

// waitDriverRegistered waits until node's CSINode lists the built-in driver
// and the Node carries its node ID.
func waitDriverRegistered(t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, node+" registers the built-in driver", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
		cn, err := client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == volume.BuiltinDriver && d.NodeID == node {
				return strings.Contains(n.Annotations[volume.AnnCSINodeID], volume.BuiltinDriver), "annotation " + n.Annotations[volume.AnnCSINodeID]
			}
		}
		return false, "CSINode drivers: " + csiNodeDrivers(cn.Spec.Drivers)
	})
}

func volumeNames(names []corev1.UniqueVolumeName) string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, string(n))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func attachedNames(vols []corev1.AttachedVolume) string {
	out := make([]string, 0, len(vols))
	for _, v := range vols {
		out = append(out, string(v.Name))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func csiNodeDrivers(drivers []storagev1.CSINodeDriver) string {
	out := make([]string, 0, len(drivers))
	for _, d := range drivers {
		out = append(out, d.Name+"="+d.NodeID)
	}
	return "[" + strings.Join(out, " ") + "]"
}
