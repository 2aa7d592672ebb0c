package e2e

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The names upstream's sidecars and kubelet use for the driver, spelled out
// here rather than taken from knode, so that the test checks knode against
// them.
const (
	sidecarDriver = "hostpath.csi.knode.io"
	// sidecarAttacherFinalizer is csi-attacher's finalizer on the
	// VolumeAttachments and PVs it handles: external-attacher/<driver with
	// '.' and '/' as '-'>.
	sidecarAttacherFinalizer = "external-attacher/hostpath-csi-knode-io"
	// sidecarProvisionerFinalizer is csi-provisioner's finalizer on the PVs
	// it made.
	sidecarProvisionerFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	// sidecarKubectl is the kubectl version the test drives the flow with.
	sidecarKubectl = "1.33"
)

// sidecarBinaries are the upstream csi-attacher and csi-provisioner,
// built from the wrapper modules under test/sidecars.
type sidecarBinaries struct {
	Attacher    string
	Provisioner string
}

// sidecarBuild is the one build of the sidecars per test binary.
var sidecarBuild struct {
	once sync.Once
	bins sidecarBinaries
	took time.Duration
	err  error
}

// sidecars builds csi-attacher and csi-provisioner once per test binary,
// both at once (the first build takes minutes; later ones hit the build
// cache), and fails the test when either build fails. Only a missing go
// command skips it.
func sidecars(t *testing.T) sidecarBinaries {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("building the upstream CSI sidecars needs the go command: %v", err)
	}
	sidecarBuild.once.Do(func() {
		start := time.Now()
		sidecarBuild.bins, sidecarBuild.err = buildSidecars()
		sidecarBuild.took = time.Since(start)
	})
	if sidecarBuild.err != nil {
		t.Fatalf("building the CSI sidecars: %v", sidecarBuild.err)
	}
	t.Logf("building the CSI sidecars (once per test binary) took %s", sidecarBuild.took.Round(time.Millisecond))
	return sidecarBuild.bins
}

// sidecarBinDir is where the sidecars are built: beside the knode binary
// TestMain built (its directory goes when the test binary exits), or a
// directory of their own, left behind, when KNODE_E2E_BINARY names a
// binary that is not ours to write beside.
func sidecarBinDir() (string, error) {
	if os.Getenv("KNODE_E2E_BINARY") == "" {
		return filepath.Dir(knodeBinary), nil
	}
	return os.MkdirTemp("", "knode-e2e-sidecars-")
}

func buildSidecars() (sidecarBinaries, error) {
	root, err := repoRoot()
	if err != nil {
		return sidecarBinaries{}, err
	}
	dir, err := sidecarBinDir()
	if err != nil {
		return sidecarBinaries{}, err
	}
	bins := sidecarBinaries{
		Attacher:    filepath.Join(dir, "csi-attacher"),
		Provisioner: filepath.Join(dir, "csi-provisioner"),
	}
	builds := []struct {
		module, pkg, out string
	}{
		{"attacher", "github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher", bins.Attacher},
		{"provisioner", "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner", bins.Provisioner},
	}
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Go(func() {
			cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
			cmd.Dir = filepath.Join(root, "test", "sidecars", b.module)
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("go build -o %s %s in %s: %v\n%s", b.out, b.pkg, cmd.Dir, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return sidecarBinaries{}, err
		}
	}
	return bins, nil
}

// startSidecar runs a sidecar binary, stops it when the test ends, and logs
// the tail of its stderr if the test failed.
func startSidecar(t *testing.T, name, path string, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:    exec.Command(path, args...),
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s %s: %v", path, strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s %s\n--- %s log (tail) ---\n%s", name, strings.Join(args, " "), name, tail(p.stderr.String()+p.stdout.String(), 60))
		}
	})
	return p
}

// csiAttachmentName is the VolumeAttachment name the attach/detach
// controller gives a volume on a node: csi-<sha256(handle+driver+node)>.
func csiAttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// mountsUnder lists the mount points in this process's mount namespace
// (the host's, which the agents share) at or below dir.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// unmountUnder detaches whatever is still mounted below dir, deepest
// first, so that a failed test's temp dirs can be removed.
func unmountUnder(t testing.TB, dir string) {
	mps := mountsUnder(t, dir)
	slices.SortFunc(mps, func(a, b string) int { return len(b) - len(a) })
	for _, mp := range mps {
		t.Logf("unmounting leftover %s", mp)
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting leftover %s: %v", mp, err)
		}
	}
}

// TestSidecars runs the volume flow of the built-in driver with the
// upstream csi-provisioner and csi-attacher in place of knode's own: the
// server runs with --builtin-storage=false, `knode csi-driver` serves the
// driver's controller side to the sidecars, and two agents serve its node
// side. A PVC of a default StorageClass the test installs is provisioned
// by csi-provisioner; a pod on node-a writes a file into it while
// csi-attacher attaches it; after the pod goes the volume is unmounted and
// detached; a pod on node-b reads the file; and deleting the PVC deletes
// the volume.
func TestSidecars(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process runtime needs root: each container runs in its own mount namespace with its volumes bind-mounted")
	}
	if _, err := os.Stat(kubectlPath(sidecarKubectl)); err != nil {
		t.Skipf("kubectl %s is not installed: %v", sidecarKubectl, err)
	}
	bins := sidecars(t)
	tag := fmt.Sprintf("knode-e2e-sidecars-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { killMarked(t, tag) })

	s := startServer(t, serverOptions{Args: []string{"--builtin-storage=false"}})
	client := s.Clientset(t)
	ctx := t.Context()
	kubectl := func(args ...string) kubectlResult {
		t.Helper()
		return s.mustKubectl(t, sidecarKubectl, args...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			res := s.kubectl(t, sidecarKubectl, "get", "csidrivers,storageclasses,csinodes,volumeattachments,pv,pvc,pods,events", "-A", "-o", "wide")
			t.Logf("--- the cluster at the end ---\n%s%s", res.Stdout, res.Stderr)
		}
	})

	// The server installs nothing for the driver: the test does, as a user
	// installing a driver with its sidecars would.
	if out := kubectl("get", "csidrivers,storageclasses", "-o", "name").Stdout; strings.TrimSpace(out) != "" {
		t.Fatalf("knode server --builtin-storage=false installed storage objects:\n%s", out)
	}
	driverObj := &storagev1.CSIDriver{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"},
		ObjectMeta: metav1.ObjectMeta{Name: sidecarDriver},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(true),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
	class := &storagev1.StorageClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "hostpath-sidecars",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       sidecarDriver,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	kubectl("apply", "-f", writeObjects(t, "driver.json", driverObj, class))

	// The driver's controller side and the sidecars on its socket.
	sock := filepath.Join(t.TempDir(), "ctrl.sock")
	driver := startProcess(t, "csi-driver", "--services", "controller", "--endpoint", sock, "--storage-dir", s.StorageDir)
	t.Cleanup(func() {
		if !driver.stop() {
			t.Errorf("knode csi-driver did not stop within %s of SIGTERM", stopTimeout)
		}
		if t.Failed() {
			t.Logf("--- knode csi-driver log (tail) ---\n%s", tail(driver.stderr.String(), 40))
		}
	})
	eventually(t, "the csi-driver socket", 20*time.Second, 20*time.Millisecond, func() (bool, string) {
		if driver.hasExited() {
			t.Fatalf("knode csi-driver exited: %v\n%s", driver.err, tail(driver.stderr.String(), 40))
		}
		fi, err := os.Stat(sock)
		if err != nil {
			return false, err.Error()
		}
		return fi.Mode()&os.ModeSocket != 0, fi.Mode().String()
	})
	attacher := startSidecar(t, "csi-attacher", bins.Attacher,
		"--kubeconfig", s.Kubeconfig, "--csi-address", sock, "--leader-election=false", "--v=4",
		"--timeout=30s", "--retry-interval-max=2s")
	provisioner := startSidecar(t, "csi-provisioner", bins.Provisioner,
		"--kubeconfig", s.Kubeconfig, "--csi-address", sock, "--leader-election=false", "--v=4",
		"--timeout=30s", "--retry-interval-max=2s")

	// Two agents with the process runtime serve the node side and register it.
	roots := map[string]string{"node-a": t.TempDir(), "node-b": t.TempDir()}
	t.Cleanup(func() {
		for _, root := range roots {
			unmountUnder(t, root)
		}
	})
	agents := map[string]*process{}
	for _, name := range []string{"node-a", "node-b"} {
		agents[name] = startAgent(t, s, name, roots[name])
	}
	// alive fails the test as soon as a component exits.
	alive := func() {
		t.Helper()
		for name, p := range map[string]*process{"csi-driver": driver, "csi-attacher": attacher, "csi-provisioner": provisioner, "agent node-a": agents["node-a"], "agent node-b": agents["node-b"]} {
			if p.hasExited() {
				t.Fatalf("%s exited: %v\n%s", name, p.err, tail(p.stderr.String()+p.stdout.String(), 60))
			}
		}
	}
	for _, name := range []string{"node-a", "node-b"} {
		eventually(t, name+" Ready with the driver in its CSINode", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
			alive()
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if status, _ := nodeReady(n); status != corev1.ConditionTrue {
				return false, "Ready=" + string(status)
			}
			cn, err := client.StorageV1().CSINodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, d := range cn.Spec.Drivers {
				if d.Name == sidecarDriver {
					return d.NodeID == name, "nodeID " + d.NodeID
				}
			}
			return false, fmt.Sprintf("CSINode drivers %v", cn.Spec.Drivers)
		})
	}

	// 1. A PVC of the default class and a pod on node-a that writes into it.
	content := "written on node-a by " + tag
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}},
		},
	}
	volumePod := func(name, node string, restart corev1.RestartPolicy, script string) *corev1.Pod {
		p := sleepPod(name, tag, []string{"sh", "-c", script}, corev1.EnvVar{Name: "WANT", Value: content})
		p.Labels = map[string]string{"e2e": "sidecars"}
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
		p.Spec.RestartPolicy = restart
		p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(2))
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
		}}}
		return p
	}
	writer := volumePod("writer", "node-a", corev1.RestartPolicyAlways, `printf %s "$WANT" > /data/hello && exec sleep 3600`)
	start := time.Now()
	kubectl("apply", "-f", writeObjects(t, "writer.json", pvc, writer))

	var pv *corev1.PersistentVolume
	eventually(t, "PVC data Bound", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		c, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
			return false, fmt.Sprintf("phase %s volumeName %q annotations %v", c.Status.Phase, c.Spec.VolumeName, c.Annotations)
		}
		pv, err = client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return pv.Status.Phase == corev1.VolumeBound, "PV phase " + string(pv.Status.Phase)
	})
	bound := time.Since(start)
	// csi-provisioner made the PV: its annotation and finalizer, the
	// class's reclaim policy, and a CSI source of the driver.
	if got := pv.Annotations["pv.kubernetes.io/provisioned-by"]; got != sidecarDriver {
		t.Errorf("PV %s is annotated pv.kubernetes.io/provisioned-by=%q, want %q", pv.Name, got, sidecarDriver)
	}
	if !slices.Contains(pv.Finalizers, sidecarProvisionerFinalizer) {
		t.Errorf("PV %s has finalizers %v, want csi-provisioner's %s", pv.Name, pv.Finalizers, sidecarProvisionerFinalizer)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != class.Name {
		t.Errorf("PV %s: reclaim policy %s, class %q; want Delete, %q", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName, class.Name)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != sidecarDriver || pv.Spec.CSI.VolumeHandle == "" {
		t.Fatalf("PV %s has CSI source %+v, want driver %s and a volume handle", pv.Name, pv.Spec.CSI, sidecarDriver)
	}
	handle := pv.Spec.CSI.VolumeHandle
	volumeDir := filepath.Join(s.StorageDir, "volumes", handle)
	if fi, err := os.Stat(volumeDir); err != nil || !fi.IsDir() {
		t.Fatalf("the provisioned volume's directory %s: %v", volumeDir, err)
	}
	if !strings.Contains(provisioner.stderr.String(), pv.Name) {
		t.Errorf("csi-provisioner's log never mentions PV %s", pv.Name)
	}

	// csi-attacher attached the VolumeAttachment the attach/detach
	// controller made for node-a.
	vaName := csiAttachmentName(handle, sidecarDriver, "node-a")
	var va *storagev1.VolumeAttachment
	eventually(t, "VolumeAttachment "+vaName+" attached by csi-attacher", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		var err error
		va, err = client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return va.Status.Attached && slices.Contains(va.Finalizers, sidecarAttacherFinalizer),
			fmt.Sprintf("attached=%v finalizers=%v attachError=%v", va.Status.Attached, va.Finalizers, va.Status.AttachError)
	})
	attached := time.Since(start)
	if va.Spec.Attacher != sidecarDriver || va.Spec.NodeName != "node-a" || va.Spec.Source.PersistentVolumeName == nil || *va.Spec.Source.PersistentVolumeName != pv.Name {
		t.Errorf("VolumeAttachment %s has spec %+v, want attacher %s, node node-a, PV %s", vaName, va.Spec, sidecarDriver, pv.Name)
	}
	if got := va.Annotations["csi.alpha.kubernetes.io/node-id"]; got != "node-a" {
		t.Errorf("VolumeAttachment %s has the csi-attacher node-id annotation %q, want node-a", vaName, got)
	}
	if !strings.Contains(attacher.stderr.String(), vaName) {
		t.Errorf("csi-attacher's log never mentions VolumeAttachment %s", vaName)
	}

	// The pod runs once the volume is attached, staged and published on
	// node-a, and the node reports it in use and attached.
	eventually(t, "pod writer Running", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		p, err := client.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == "node-a", describePods([]corev1.Pod{*p})
	})
	running := time.Since(start)
	unique := corev1.UniqueVolumeName("kubernetes.io/csi/" + sidecarDriver + "^" + handle)
	nodeVolumes := func(name string) ([]corev1.UniqueVolumeName, []corev1.UniqueVolumeName, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		var att []corev1.UniqueVolumeName
		for _, v := range n.Status.VolumesAttached {
			att = append(att, v.Name)
		}
		return n.Status.VolumesInUse, att, nil
	}
	eventually(t, "the volume in node-a's volumesInUse and volumesAttached", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		inUse, att, err := nodeVolumes("node-a")
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(inUse, unique) && slices.Contains(att, unique), fmt.Sprintf("volumesInUse=%v volumesAttached=%v", inUse, att)
	})
	eventually(t, "the writer's file in the volume", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(volumeDir, "hello"))
		if err != nil {
			return false, err.Error()
		}
		return string(data) == content, fmt.Sprintf("%q", data)
	})
	if len(mountsUnder(t, roots["node-a"])) == 0 {
		t.Errorf("node-a's root dir %s has no mounts while the writer runs", roots["node-a"])
	}

	// 2. The writer goes: the volume is unpublished, unstaged and detached.
	deleted := time.Now()
	kubectl("delete", "pod", "writer", "--wait=false")
	eventually(t, "VolumeAttachment "+vaName+" gone", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		va, err := client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		inUse, att, _ := nodeVolumes("node-a")
		return false, fmt.Sprintf("attached=%v deleting=%v finalizers=%v detachError=%v; node-a volumesInUse=%v volumesAttached=%v",
			va.Status.Attached, va.DeletionTimestamp != nil, va.Finalizers, va.Status.DetachError, inUse, att)
	})
	detached := time.Since(deleted)
	eventually(t, "node-a's volumesInUse and volumesAttached empty", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		inUse, att, err := nodeVolumes("node-a")
		if err != nil {
			return false, err.Error()
		}
		return len(inUse) == 0 && len(att) == 0, fmt.Sprintf("volumesInUse=%v volumesAttached=%v", inUse, att)
	})
	if m := mountsUnder(t, roots["node-a"]); len(m) != 0 {
		t.Errorf("mounts left under node-a's root dir after the detach: %v", m)
	}
	eventually(t, "pod writer gone", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "writer", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describePods([]corev1.Pod{*p})
	})

	// 3. A pod on node-b reads the file and copies it, and succeeds only if
	// it read what the writer wrote.
	reader := volumePod("reader", "node-b", corev1.RestartPolicyNever, `cp /data/hello /data/read-on-node-b && test "$(cat /data/hello)" = "$WANT"`)
	readerStart := time.Now()
	kubectl("apply", "-f", writeObjects(t, "reader.json", reader))
	eventually(t, "pod reader Succeeded", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		p, err := client.CoreV1().Pods("default").Get(ctx, "reader", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod reader failed: it did not read %q from the volume: %s", content, describePods([]corev1.Pod{*p}))
		}
		return p.Status.Phase == corev1.PodSucceeded && p.Spec.NodeName == "node-b", describePods([]corev1.Pod{*p})
	})
	read := time.Since(readerStart)
	if data, err := os.ReadFile(filepath.Join(volumeDir, "read-on-node-b")); err != nil || string(data) != content {
		t.Errorf("what the reader copied on node-b: %q, %v; want %q", data, err, content)
	}
	vaB := csiAttachmentName(handle, sidecarDriver, "node-b")
	if va, err := client.StorageV1().VolumeAttachments().Get(ctx, vaB, metav1.GetOptions{}); err == nil {
		if !slices.Contains(va.Finalizers, sidecarAttacherFinalizer) || va.Annotations["csi.alpha.kubernetes.io/node-id"] != "node-b" {
			t.Errorf("VolumeAttachment %s for node-b: finalizers %v, annotations %v; want csi-attacher's", vaB, va.Finalizers, va.Annotations)
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}

	// 4. The reader and then the PVC go; csi-provisioner deletes the volume.
	kubectl("delete", "pod", "reader", "--wait=false")
	eventually(t, "VolumeAttachment "+vaB+" gone", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		_, err := client.StorageV1().VolumeAttachments().Get(ctx, vaB, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	pvcDeleted := time.Now()
	kubectl("delete", "pvc", "data", "--wait=false")
	eventually(t, "PV "+pv.Name+" deleted", 60*time.Second, 100*time.Millisecond, func() (bool, string) {
		alive()
		got, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s finalizers %v deleting=%v", got.Status.Phase, got.Finalizers, got.DeletionTimestamp != nil)
	})
	reclaimed := time.Since(pvcDeleted)
	if _, err := os.Stat(volumeDir); !os.IsNotExist(err) {
		t.Errorf("the volume's directory %s is still there after its PV was deleted (stat: %v)", volumeDir, err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("PVC data after its deletion: %v, want NotFound", err)
	}

	t.Logf("PVC created to Bound by csi-provisioner: %s", bound.Round(time.Millisecond))
	t.Logf("PVC created to the writer Running on node-a: %s", running.Round(time.Millisecond))
	t.Logf("PVC created to the VolumeAttachment attached by csi-attacher: %s", attached.Round(time.Millisecond))
	t.Logf("writer deleted to its VolumeAttachment gone: %s", detached.Round(time.Millisecond))
	t.Logf("reader created on node-b to Succeeded: %s", read.Round(time.Millisecond))
	t.Logf("PVC deleted to its PV and volume deleted by csi-provisioner: %s", reclaimed.Round(time.Millisecond))
}
