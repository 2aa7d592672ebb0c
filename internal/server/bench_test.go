package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"knode/internal/server"
	"knode/internal/storage/etcd"
)

// startServer runs a whole knode server (embedded etcd, HTTPS) for a test
// or benchmark and returns a client config that authenticates with the
// admin's client certificate, as kubectl would. Each of opts may change
// the server's Config first.
func startServer(tb testing.TB, opts ...func(*server.Config)) *rest.Config {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *server.Server, 1)
	done := make(chan error, 1)
	dir := tb.TempDir()
	go func() {
		// The built-in driver's volumes stay in the test's directory.
		storage := server.StorageConfig{DataDir: filepath.Join(dir, "storage")}
		cfg := server.Config{DataDir: dir, SecurePort: 0, Storage: storage, OnReady: func(s *server.Server) { ready <- s }}
		for _, o := range opts {
			o(&cfg)
		}
		done <- server.Run(ctx, cfg)
	}()
	var srv *server.Server
	select {
	case srv = <-ready:
	case err := <-done:
		cancel()
		tb.Fatalf("server stopped: %v", err)
	}
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.KubeconfigPath)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// ownConnection returns a client with a transport of its own, as each
// agent has; client-go would otherwise share one connection between all
// clients built from equal configs.
func ownConnection(tb testing.TB, cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = (&net.Dialer{}).DialContext
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return client
}

func benchLease(i int) *coordinationv1.Lease {
	name := fmt.Sprintf("bench-node-%04d", i)
	now := metav1.NewMicroTime(time.Unix(1700000000, 0))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now},
	}
}

var concurrencies = []int{1, 16, 256}

// BenchmarkLeaseUpdateHTTPS renews node Leases through the whole stack:
// client-go over HTTPS with client certificates, authentication,
// authorization, decoding, validation, a compare-and-swap in embedded etcd,
// and the response. Each client has its own connection and renews its own
// Lease, as agents do.
func BenchmarkLeaseUpdateHTTPS(b *testing.B) {
	cfg := startServer(b)
	ctx := context.Background()
	leases := make([]*coordinationv1.Lease, concurrencies[len(concurrencies)-1])
	clients := make([]kubernetes.Interface, len(leases))
	for i := range leases {
		clients[i] = ownConnection(b, cfg)
		l, err := clients[i].CoordinationV1().Leases("kube-node-lease").Create(ctx, benchLease(i), metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	for _, n := range concurrencies {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			runConcurrent(b, n, func(worker int, op int) error {
				l := leases[worker].DeepCopy()
				t := metav1.NewMicroTime(time.Unix(1700000000+int64(op), 0))
				l.Spec.RenewTime = &t
				updated, err := clients[worker].CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{})
				if err != nil {
					return err
				}
				leases[worker] = updated
				return nil
			})
		})
	}
}

// BenchmarkRawEtcdPut is the baseline for BenchmarkLeaseUpdateHTTPS: puts
// of a stored Lease's size straight into embedded etcd through its
// in-process client.
func BenchmarkRawEtcdPut(b *testing.B) {
	store, err := etcd.NewEmbedded(context.Background(), etcd.EmbeddedConfig{DataDir: filepath.Join(b.TempDir(), "etcd")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	value, _ := json.Marshal(benchLease(0))
	b.Logf("value size %d bytes", len(value))
	ctx := context.Background()
	for _, writers := range concurrencies {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			runConcurrent(b, writers, func(worker int, op int) error {
				_, err := store.Client().Put(ctx, fmt.Sprintf("/registry/leases/kube-node-lease/bench-%d", worker), string(value))
				return err
			})
		})
	}
}

// runConcurrent shares b.N operations among n workers and reports
// throughput and latency percentiles.
func runConcurrent(b *testing.B, n int, op func(worker, op int) error) {
	var next atomic.Int64
	latencies := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := op(w, int(i)); err != nil {
					failed.Store(err)
					return
				}
				latencies[w] = append(latencies[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99_ms")
	}
}

// BenchmarkStorageCAS is the storage layer's share of a lease update: the
// compare-and-swap transaction the API server sends to embedded etcd, with
// no HTTP, decoding or validation.
func BenchmarkStorageCAS(b *testing.B) {
	store, err := etcd.NewEmbedded(context.Background(), etcd.EmbeddedConfig{DataDir: filepath.Join(b.TempDir(), "etcd")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	value, _ := json.Marshal(benchLease(0))
	ctx := context.Background()
	revs := make([]int64, concurrencies[len(concurrencies)-1])
	for i := range revs {
		if revs[i], err = store.Create(ctx, fmt.Sprintf("/registry/leases/kube-node-lease/bench-%d", i), value); err != nil {
			b.Fatal(err)
		}
	}
	for _, writers := range concurrencies {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			runConcurrent(b, writers, func(worker int, op int) error {
				rev, err := store.Update(ctx, fmt.Sprintf("/registry/leases/kube-node-lease/bench-%d", worker), value, revs[worker])
				revs[worker] = rev
				return err
			})
		})
	}
}
