package etcd

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRawPut is the baseline for the API server's write benchmarks:
// plain etcd Puts of 300-byte values on the embedded store through the
// in-process client, with exactly 1, 16 and 256 concurrent writers. Each
// writer cycles over 100 keys of its own, so most Puts replace a value, as
// lease renewals do. It reports throughput (ops/s) and the 99th percentile
// latency of one Put (p99-ms).
//
// Writers are goroutines started here rather than b.RunParallel, whose
// goroutine count is a multiple of GOMAXPROCS and so cannot be exactly 1.
func BenchmarkRawPut(b *testing.B) {
	value := string(make([]byte, 300))
	for _, writers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := newEmbedded(b, b.TempDir())
			defer s.Close()
			c := s.Client()
			ctx := context.Background()

			var next atomic.Int64
			latencies := make([][]time.Duration, writers)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						key := fmt.Sprintf("/bench/%d/%d", w, i%100)
						t0 := time.Now()
						if _, err := c.Put(ctx, key, value); err != nil {
							b.Error(err)
							return
						}
						latencies[w] = append(latencies[w], time.Since(t0))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()

			all := slices.Concat(latencies...)
			slices.Sort(all)
			if len(all) > 0 {
				p99 := all[min(len(all)-1, len(all)*99/100)]
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
		})
	}
}

// BenchmarkEmbeddedStart measures starting an embedded server on an empty
// data directory until it serves a write, and stopping it.
func BenchmarkEmbeddedStart(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		s := newEmbedded(b, filepath.Join(dir, fmt.Sprint(i)))
		if _, err := s.Client().Put(context.Background(), "/start", "x"); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
