package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/scheduler"
)

const benchSize = 1000

// benchNode is one of benchSize nodes: 4 cpu, 16Gi, 110 pods, in one of
// three zones, every tenth tainted for a dedicated workload.
func benchNode(i int) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("node-%04d", i),
			Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprint("zone-", i%3), corev1.LabelOSStable: "linux"},
		},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}},
	}
	if i%10 == 0 {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// benchPod is a pod as a ReplicaSet makes it after admission: requests,
// a linux node selector and the default NoExecute tolerations.
func benchPod(prefix string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%04d", prefix, i), UID: types.UID(fmt.Sprint("uid-", prefix, i))},
		Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName,
			NodeSelector:  map[string]string{corev1.LabelOSStable: "linux"},
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("128Mi"),
			}}}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
	}
}

// BenchmarkSchedule1000x1000 places 1,000 pods over 1,000 nodes:
//   - core: Schedule and Assume on a Snapshot, no I/O;
//   - shell: Sync against the real API server over the memory store
//     (listing, events), binding into a recording Binder;
//   - end-to-end: the same with the real pods/binding.
//
// It reports pods/s; the target is 500 pods/s end to end.
func BenchmarkSchedule1000x1000(b *testing.B) {
	b.Run("core", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			snap := scheduler.NewSnapshot()
			for i := range benchSize {
				snap.SetNode(benchNode(i))
			}
			pods := make([]*corev1.Pod, benchSize)
			for i := range pods {
				pods[i] = benchPod("p", i)
			}
			b.StartTimer()
			for _, p := range pods {
				pi := scheduler.NewPodInfo(p)
				node, err := scheduler.Schedule(pi, snap)
				if err != nil {
					b.Fatal(err)
				}
				snap.Assume(pi, node)
			}
		}
		b.ReportMetric(float64(benchSize*b.N)/b.Elapsed().Seconds(), "pods/s")
	})

	b.Run("shell", func(b *testing.B) {
		client := benchServer(b)
		createAll(b, client, "p")
		rec := newRecorder()
		s, err := scheduler.New(scheduler.Config{Client: client, Binder: rec, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			// The recorder binds nothing: every pass places all the pods.
			if err := s.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchSize*b.N)/b.Elapsed().Seconds(), "pods/s")
		if got := len(rec.sorted()); got != benchSize*b.N {
			b.Fatalf("%d bindings, want %d", got, benchSize*b.N)
		}
	})

	b.Run("end-to-end", func(b *testing.B) {
		client := benchServer(b)
		probe := benchPod("probe", 0)
		probe.UID = ""
		if _, err := client.CoreV1().Pods("default").Create(context.Background(), probe, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		err := client.CoreV1().Pods("default").Bind(context.Background(), &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: probe.Name},
			Target:     corev1.ObjectReference{Kind: "Node", Name: benchNode(1).Name},
		}, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			b.Skipf("the API server does not serve pods/binding yet: %v", err)
		}
		if err != nil {
			b.Fatal(err)
		}
		s, err := scheduler.New(scheduler.Config{Client: client, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			b.StopTimer()
			createAll(b, client, fmt.Sprint("r", i))
			b.StartTimer()
			if err := s.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchSize*b.N)/b.Elapsed().Seconds(), "pods/s")
		b.StopTimer()
		pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				b.Fatalf("pod %s left unbound", p.Name)
			}
		}
	})
}

// benchServer is a real API server holding benchSize nodes.
func benchServer(b *testing.B) kubernetes.Interface {
	client := apitest.Start(b, apitest.Options{}).Admin
	parallel(b, benchSize, func(i int) error {
		_, err := client.CoreV1().Nodes().Create(context.Background(), benchNode(i), metav1.CreateOptions{})
		return err
	})
	return client
}

// createAll creates benchSize pending pods named prefix-NNNN.
func createAll(b *testing.B, client kubernetes.Interface, prefix string) {
	parallel(b, benchSize, func(i int) error {
		p := benchPod(prefix, i)
		p.UID = ""
		_, err := client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{})
		return err
	})
}

// parallel runs f for 0..n-1 on 16 goroutines; any error ends b.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}
