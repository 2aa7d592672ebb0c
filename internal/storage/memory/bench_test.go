package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"knode/internal/storage"
	"knode/internal/storage/memory"
)

// benchKeys is the number of keys the point-lookup benchmarks hold, about
// what a 5,000-node simulation keeps (nodes, leases, pods).
const benchKeys = 20000

// filledStore returns a store holding benchKeys keys laid out as the API
// server lays them out, and the keys in a fixed shuffled order so that
// successive lookups land far apart.
func filledStore(b *testing.B) (*memory.Store, []string) {
	b.Helper()
	s := memory.New(memory.Config{})
	b.Cleanup(func() { s.Close() })
	value := make([]byte, 512)
	keys := make([]string, 0, benchKeys)
	for i := range benchKeys {
		var key string
		switch i % 4 {
		case 0:
			key = fmt.Sprintf("/registry/minions/node-%05d", i)
		case 1:
			key = fmt.Sprintf("/registry/leases/kube-node-lease/node-%05d", i)
		default:
			key = fmt.Sprintf("/registry/pods/ns-%02d/pod-%05d", i%50, i)
		}
		if _, err := s.Create(context.Background(), key, value); err != nil {
			b.Fatal(err)
		}
		keys = append(keys, key)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return s, keys
}

func BenchmarkUpdate(b *testing.B) {
	s, keys := filledStore(b)
	ctx := context.Background()
	value := make([]byte, 512)
	i := 0
	for b.Loop() {
		if _, err := s.Update(ctx, keys[i%len(keys)], value, 0); err != nil {
			b.Fatal(err)
		}
		i++
		compactEvery(b, s, i)
	}
}

// compactEvery compacts the whole history after every benchKeys writes,
// as the simulator's compactor does, so that it does not grow with b.N.
func compactEvery(b *testing.B, s *memory.Store, writes int) {
	if writes%benchKeys != 0 {
		return
	}
	ctx := context.Background()
	rev, _ := s.Revision(ctx)
	if err := s.Compact(ctx, rev); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkGet(b *testing.B) {
	s, keys := filledStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if _, err := s.Get(ctx, keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCreateDelete measures the write path that changes the index.
func BenchmarkCreateDelete(b *testing.B) {
	s, keys := filledStore(b)
	ctx := context.Background()
	value := make([]byte, 512)
	i := 0
	for b.Loop() {
		key := keys[i%len(keys)]
		if _, err := s.Delete(ctx, key, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Create(ctx, key, value); err != nil {
			b.Fatal(err)
		}
		i++
		compactEvery(b, s, i)
	}
}

// BenchmarkListPage measures a range scan, which the index leaves to the
// skiplist.
func BenchmarkListPage(b *testing.B) {
	s, _ := filledStore(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.List(ctx, "/registry/pods/ns-07/", storage.ListOptions{Limit: 100}); err != nil {
			b.Fatal(err)
		}
	}
}
