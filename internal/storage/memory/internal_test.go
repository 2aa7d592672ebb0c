package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompactFreesMemory checks what the interface cannot see: compaction
// drops deleted keys from the index and old events from the history.
func TestCompactFreesMemory(t *testing.T) {
	ctx := context.Background()
	s := New(Config{})
	for i := range 100 {
		key := fmt.Sprintf("/k/%03d", i)
		if _, err := s.Create(ctx, key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, key, []byte("v2"), 0); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := s.Delete(ctx, key, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	rev, _ := s.Revision(ctx)
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for n := s.keys.first(); n != nil; n = n.next[0] {
		keys = append(keys, n.key)
		if len(n.rec.versions) != 1 {
			t.Errorf("%s keeps %d versions after compaction, want 1", n.key, len(n.rec.versions))
		}
	}
	if len(keys) != 50 {
		t.Errorf("index holds %d keys after compaction, want the 50 live ones", len(keys))
	}
	if len(s.keys.nodes) != 50 {
		t.Errorf("hash index holds %d keys after compaction, want the 50 live ones", len(s.keys.nodes))
	}
	if len(s.history) != 1 {
		t.Errorf("history holds %d events after compacting at the store revision, want 1", len(s.history))
	}
}

// TestSkiplist checks the index against a sorted slice under random inserts
// and removals.
func TestSkiplist(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := newSkiplist()
	present := map[string]bool{}
	for range 5000 {
		key := fmt.Sprintf("k%03d", rng.IntN(400))
		if present[key] {
			l.remove(key)
			delete(present, key)
		} else {
			l.insert(key, &record{})
			present[key] = true
		}
	}
	var want []string
	for k := range present {
		want = append(want, k)
	}
	slices.Sort(want)
	var got []string
	for n := l.first(); n != nil; n = n.next[0] {
		got = append(got, n.key)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("skiplist order (-want +got):\n%s", diff)
	}
	for i, k := range want {
		if l.get(k) == nil {
			t.Errorf("get(%q) = nil", k)
		}
		// seek to just past k, and seekAfter k, find the next key.
		for name, n := range map[string]*skipNode{"seek": l.seek(k + "\x00"), "seekAfter": l.seekAfter(k)} {
			switch {
			case i+1 < len(want) && (n == nil || n.key != want[i+1]):
				t.Errorf("%s after %q did not find %q", name, k, want[i+1])
			case i+1 == len(want) && n != nil:
				t.Errorf("%s after the last key found %q", name, n.key)
			}
		}
	}
	// The hash index holds exactly the listed keys.
	if len(l.nodes) != len(want) {
		t.Errorf("hash index holds %d keys, list holds %d", len(l.nodes), len(want))
	}
	for i := range 400 {
		k := fmt.Sprintf("k%03d", i)
		if got := l.get(k) != nil; got != present[k] {
			t.Errorf("get(%q) found = %v, want %v", k, got, present[k])
		}
		// seekAfter a key that is not indexed finds the next one that is.
		if present[k] {
			continue
		}
		j, _ := slices.BinarySearch(want, k)
		n := l.seekAfter(k)
		switch {
		case j < len(want) && (n == nil || n.key != want[j]):
			t.Errorf("seekAfter absent %q did not find %q", k, want[j])
		case j == len(want) && n != nil:
			t.Errorf("seekAfter absent %q past the end found %q", k, n.key)
		}
	}
}
