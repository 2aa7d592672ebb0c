package pods

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestPodCache(t *testing.T) {
	bound := func(ns, name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	names := func(c *podCache) []string {
		t.Helper()
		pods, ok := c.PodsOn("n1")
		if !ok {
			t.Fatal("PodsOn says the filled cache is not filled")
		}
		var out []string
		for _, p := range pods {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		slices.Sort(out)
		return out
	}
	c := &podCache{}
	if _, ok := c.PodsOn("n1"); ok {
		t.Fatal("an empty cache claims to be filled")
	}
	c.replace([]corev1.Pod{*bound("a", "web", "n1"), *bound("b", "web", "n1"), *bound("a", "db", "n2")})
	if got, want := names(c), []string{"a/web", "b/web"}; !slices.Equal(got, want) {
		t.Errorf("after the list: %v, want %v", got, want)
	}
	steps := []struct {
		ev          watch.Event
		wantChanged bool
		want        []string
	}{
		{watch.Event{Type: watch.Added, Object: bound("a", "api", "n1")}, true, []string{"a/api", "a/web", "b/web"}},
		{watch.Event{Type: watch.Deleted, Object: bound("b", "web", "n1")}, true, []string{"a/api", "a/web"}},
		{watch.Event{Type: watch.Modified, Object: bound("a", "web", "n1")}, true, []string{"a/api", "a/web"}},
		{watch.Event{Type: watch.Bookmark, Object: bound("", "", "")}, false, []string{"a/api", "a/web"}},
		{watch.Event{Type: watch.Added, Object: &corev1.Node{}}, false, []string{"a/api", "a/web"}},
	}
	for i, s := range steps {
		if got := c.apply(s.ev); got != s.wantChanged {
			t.Errorf("step %d (%s): changed = %v, want %v", i, s.ev.Type, got, s.wantChanged)
		}
		if got := names(c); !slices.Equal(got, s.want) {
			t.Errorf("step %d (%s): %v, want %v", i, s.ev.Type, got, s.want)
		}
	}
}
