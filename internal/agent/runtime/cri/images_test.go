package cri

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestBackoffs(t *testing.T) {
	b := newBackoffs(10*time.Second, 40*time.Second)
	type check struct {
		at   time.Duration // after t0
		want bool
	}
	steps := []struct {
		name     string
		failAt   time.Duration
		in, out  []check
		wantLast time.Duration
	}{
		{name: "first failure: 10 s", failAt: 0, in: []check{{0, true}, {9 * time.Second, true}}, out: []check{{10 * time.Second, false}}},
		{name: "second: 20 s", failAt: 10 * time.Second, in: []check{{29 * time.Second, true}}, out: []check{{30 * time.Second, false}}},
		{name: "third: 40 s", failAt: 30 * time.Second, in: []check{{69 * time.Second, true}}, out: []check{{70 * time.Second, false}}},
		{name: "capped at 40 s", failAt: 70 * time.Second, in: []check{{109 * time.Second, true}}, out: []check{{110 * time.Second, false}}},
		{name: "exactly twice the maximum later: still doubling (capped)", failAt: 150 * time.Second, in: []check{{189 * time.Second, true}}, out: []check{{190 * time.Second, false}}},
		{name: "more than twice the maximum later: starts over", failAt: 231 * time.Second, in: []check{{240 * time.Second, true}}, out: []check{{241 * time.Second, false}}},
	}
	for _, s := range steps {
		b.failed("k", t0.Add(s.failAt))
		if got := b.last("k"); !got.Equal(t0.Add(s.failAt)) {
			t.Errorf("%s: last = %v", s.name, got)
		}
		for _, c := range s.in {
			if !b.inBackoff("k", t0.Add(c.at)) {
				t.Errorf("%s: not in back-off at +%v", s.name, c.at)
			}
		}
		for _, c := range s.out {
			if b.inBackoff("k", t0.Add(c.at)) {
				t.Errorf("%s: still in back-off at +%v", s.name, c.at)
			}
		}
	}
	if b.inBackoff("other", t0) || !b.last("other").IsZero() {
		t.Error("a key that never failed is in back-off")
	}
	b.failed("u1_a", t0)
	b.failed("u2_a", t0)
	b.forget("u1_")
	if b.inBackoff("u1_a", t0) || !b.inBackoff("u2_a", t0) {
		t.Error("forget dropped the wrong keys")
	}
}

func TestNodeImages(t *testing.T) {
	var list []*runtimeapi.Image
	for i := range MaxImages + 5 {
		list = append(list, &runtimeapi.Image{Id: fmt.Sprint(i), RepoTags: []string{fmt.Sprintf("img:%d", i)}, Size: uint64(i)})
	}
	list = append(list,
		&runtimeapi.Image{Id: "noname", Size: 1 << 40},
		&runtimeapi.Image{Id: "many", Size: 1 << 30, RepoDigests: []string{"d1", "d2"}, RepoTags: []string{"t1", "t2", "t3", "t4"}},
	)
	got := nodeImages(list)
	if len(got) != MaxImages {
		t.Fatalf("%d images, want %d", len(got), MaxImages)
	}
	if diff := cmp.Diff(corev1.ContainerImage{Names: []string{"d1", "d2", "t1", "t2", "t3"}, SizeBytes: 1 << 30}, got[0]); diff != "" {
		t.Errorf("largest image (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].SizeBytes > got[i-1].SizeBytes {
			t.Fatalf("not sorted largest first at %d: %v", i, got)
		}
	}
	if got[1].Names[0] != fmt.Sprintf("img:%d", MaxImages+4) {
		t.Errorf("second image %v", got[1])
	}
}
