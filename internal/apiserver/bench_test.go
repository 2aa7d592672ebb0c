package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
)

// The write benchmarks drive Server.ServeHTTP directly, as the simulator's
// in-process transport does, on a server wired as the simulator wires it
// (node authorizer, NodeRestriction, strict reads) that holds benchNodes
// Nodes and their Leases. Each request acts as the node whose object it
// writes. Request bodies are built before the timer starts, so the numbers
// are the server's alone.

// benchNodes is the size of the fleet in storage.
const benchNodes = 2000

var benchEpoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func benchNodeName(i int) string { return fmt.Sprintf("zone-a-%d", i) }
func benchToken(i int) string    { return fmt.Sprintf("node-token-%d", i) }

// benchServer starts the server and stores benchNodes Nodes and Leases; it
// returns the server and each node's Lease as stored.
func benchServer(b *testing.B) (s *apitest.Server, leases []*coordinationv1.Lease) {
	b.Helper()
	tokens := make([]string, benchNodes)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("%s,system:node:%s,uid-%d,system:nodes", benchToken(i), benchNodeName(i), i)
	}
	s = apitest.Start(b, apitest.Options{NodeRules: true, Tokens: tokens, StrictReads: true})
	ctx := context.Background()
	leases = make([]*coordinationv1.Lease, benchNodes)
	for i := 0; i < benchNodes; i++ {
		if _, err := s.API.Create(ctx, corev1.SchemeGroupVersion.WithResource("nodes"), benchNode(i)); err != nil {
			b.Fatal(err)
		}
		l, err := s.API.Create(ctx, coordinationv1.SchemeGroupVersion.WithResource("leases"), benchLease(i, benchEpoch))
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l.(*coordinationv1.Lease)
	}
	return s, leases
}

func rvOf(b *testing.B, rv string) int64 {
	b.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func benchLease(i int, renew time.Time) *coordinationv1.Lease {
	name := benchNodeName(i)
	t := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: "node-uid"}},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &t},
	}
}

// benchNode is a Node as an agent registers it, with the status it posts.
func benchNode(i int) *corev1.Node {
	name := benchNodeName(i)
	q := resource.MustParse
	resources := corev1.ResourceList{
		corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi"), corev1.ResourcePods: q("110"),
		corev1.ResourceEphemeralStorage: q("100Gi"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0"),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		at := metav1.NewTime(benchEpoch)
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: at, LastTransitionTime: at, Reason: reason, Message: msg}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "zone-a",
			},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: "machine-" + name, SystemUUID: "system-" + name, BootID: "boot-" + name,
				KernelVersion: "6.1.0-knode", OSImage: "knode simulated Linux", ContainerRuntimeVersion: "fake://0.1.0",
				KubeletVersion: "v1.33.0", KubeProxyVersion: "", OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
}

// heartbeatPatch is the strategic-merge patch an agent posts when only the
// conditions' heartbeat times moved, made as the agent makes it.
func heartbeatPatch(b *testing.B, i int, from, to time.Time) []byte {
	b.Helper()
	was, now := benchNode(i), benchNode(i)
	for c := range was.Status.Conditions {
		was.Status.Conditions[c].LastHeartbeatTime = metav1.NewTime(from)
		now.Status.Conditions[c].LastHeartbeatTime = metav1.NewTime(to)
	}
	wasJSON, err := json.Marshal(was)
	if err != nil {
		b.Fatal(err)
	}
	nowJSON, err := json.Marshal(now)
	if err != nil {
		b.Fatal(err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(wasJSON, nowJSON, corev1.Node{})
	if err != nil {
		b.Fatal(err)
	}
	return patch
}

// benchRequest is one request ready to serve; its body reader is made
// before the timer starts.
func benchRequest(b *testing.B, method, path, token, contentType string, body []byte) *http.Request {
	b.Helper()
	r, err := http.NewRequest(method, "http://inproc"+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("Content-Type", contentType)
	r.Header.Set("Accept", "application/vnd.kubernetes.protobuf, */*")
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("User-Agent", "knode/v0.0.0 (linux/amd64) kubernetes/bench")
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "inproc"
	return r
}

// benchWriter keeps only the status code and the size of the body, so the
// benchmark's own allocations stay small and fixed.
type benchWriter struct {
	header http.Header
	code   int
	n      int
	last   []byte
}

func (w *benchWriter) Header() http.Header { return w.header }
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(p)
	w.last = p
	return len(p), nil
}

func (w *benchWriter) reset() {
	clear(w.header)
	w.code, w.n, w.last = 0, 0, nil
}

// serveAll serves reqs in order, failing on any answer but 200.
func serveAll(b *testing.B, s *apitest.Server, reqs []*http.Request) {
	w := &benchWriter{header: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i, r := range reqs {
		w.reset()
		s.API.ServeHTTP(w, r)
		if w.code != http.StatusOK {
			b.Fatalf("request %d: %d %s", i, w.code, w.last)
		}
	}
}

// BenchmarkLeaseUpdate is a node's Lease renewal: a PUT of the Lease in
// protobuf, naming the resourceVersion the node last saw, as client-go's
// typed client sends it.
func BenchmarkLeaseUpdate(b *testing.B) {
	s, leases := benchServer(b)
	// Every write advances the store's revision by one, so the
	// resourceVersion each renewal sees is known in advance.
	rev := rvOf(b, leases[benchNodes-1].ResourceVersion) + 1
	enc := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		n := i % benchNodes
		l := leases[n]
		renew := metav1.NewMicroTime(benchEpoch.Add(time.Duration(i+1) * time.Second))
		l.Spec.RenewTime = &renew
		var body bytes.Buffer
		if err := enc.Encode(l, &body); err != nil {
			b.Fatal(err)
		}
		reqs[i] = benchRequest(b, http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"+benchNodeName(n), benchToken(n), "application/vnd.kubernetes.protobuf", body.Bytes())
		l.ResourceVersion = strconv.FormatInt(rev, 10)
		rev++
	}
	serveAll(b, s, reqs)
}

// BenchmarkNodeStatusPatch is a node's status heartbeat: a strategic-merge
// PATCH of nodes/NAME/status that moves the conditions' lastHeartbeatTime.
func BenchmarkNodeStatusPatch(b *testing.B) {
	s, _ := benchServer(b)
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		n := i % benchNodes
		round := i / benchNodes
		from := benchEpoch.Add(time.Duration(round) * 10 * time.Second)
		patch := heartbeatPatch(b, n, from, from.Add(10*time.Second))
		reqs[i] = benchRequest(b, http.MethodPatch, "/api/v1/nodes/"+benchNodeName(n)+"/status", benchToken(n), "application/strategic-merge-patch+json", patch)
	}
	serveAll(b, s, reqs)
}
