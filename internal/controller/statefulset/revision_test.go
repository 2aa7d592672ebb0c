package statefulset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// compatSet is upstream's TestStatefulSetCompatibility set, with the
// defaults the API server gives its template.
func compatSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "test", UID: "ssuid", Labels: map[string]string{"sslabel": "value"}},
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"test": "value"}, Labels: map[string]string{"app": "foo"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "test", Image: "test", ImagePullPolicy: corev1.PullAlways,
						TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					RestartPolicy:                 corev1.RestartPolicyAlways,
					DNSPolicy:                     corev1.DNSClusterFirst,
					SchedulerName:                 "default-scheduler",
					SecurityContext:               &corev1.PodSecurityContext{},
					TerminationGracePeriodSeconds: ptr.To[int64](30),
				},
			},
		},
	}
}

// The revision of upstream's compatibility test, as 1.33 wrote it: its
// data byte for byte and its name test-c77f6d978.
func TestNewRevisionMatchesUpstream133(t *testing.T) {
	const wantData = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"test":"value"},"creationTimestamp":null,"labels":{"app":"foo"}},"spec":{"containers":[{"image":"test","imagePullPolicy":"Always","name":"test","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
	set := compatSet()
	set.Annotations = map[string]string{"note": "x"}
	cr, err := NewRevision(set, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cr.Data.Raw); got != wantData {
		t.Errorf("data:\n got %s\nwant %s", got, wantData)
	}
	want := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "test-c77f6d978",
			Namespace:   "test",
			Labels:      map[string]string{"app": "foo", HashLabel: "c77f6d978"},
			Annotations: map[string]string{"note": "x"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: "test", UID: "ssuid",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: []byte(wantData)},
		Revision: 1,
	}
	if diff := cmp.Diff(want, cr); diff != "" {
		t.Errorf("revision (-want +got):\n%s", diff)
	}
}

func TestHash(t *testing.T) {
	cr := &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(`{"a":1}`)}}
	h0, h1, none := Hash(cr, ptr.To[int32](0)), Hash(cr, ptr.To[int32](1)), Hash(cr, nil)
	if h0 == h1 || h0 == none || h1 == none {
		t.Errorf("hashes with probe 0, 1 and none = %s, %s, %s; want three different", h0, h1, none)
	}
	if again := Hash(cr, ptr.To[int32](0)); again != h0 {
		t.Errorf("hash not stable: %s then %s", h0, again)
	}
	if got := RevisionName(string(make([]byte, 300)), "h"); len(got) != 225 {
		t.Errorf("long prefix gives a name of %d bytes, want 223+2", len(got))
	}
}

// A set changed to another template, then restored from the first
// revision, has the first template back and nothing else changed.
func TestApplyRevision(t *testing.T) {
	set := compatSet()
	first, err := NewRevision(set, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	changed := set.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "other"
	changed.Spec.Replicas = ptr.To[int32](7)
	got, err := ApplyRevision(changed, first)
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got.Spec.Template, set.Spec.Template) {
		t.Errorf("template not restored: %s", cmp.Diff(set.Spec.Template, got.Spec.Template))
	}
	if *got.Spec.Replicas != 7 || changed.Spec.Template.Spec.Containers[0].Image != "other" {
		t.Errorf("ApplyRevision changed more than the template, or its input")
	}
	if _, err := ApplyRevision(set, &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: []byte("[")}}); err == nil {
		t.Error("bad data accepted")
	}
}

func revAt(name string, revision int64, data string, created time.Duration) *appsv1.ControllerRevision {
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "test", CreationTimestamp: metav1.NewTime(epoch.Add(created))},
		Data:       runtime.RawExtension{Raw: []byte(data)},
		Revision:   revision,
	}
}

func revNames(rs []*appsv1.ControllerRevision) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestSortRevisions(t *testing.T) {
	rs := []*appsv1.ControllerRevision{
		revAt("c", 2, "{}", 0), revAt("b", 1, "{}", time.Second), revAt("a", 1, "{}", time.Second), revAt("z", 1, "{}", 0),
	}
	SortRevisions(rs)
	if diff := cmp.Diff([]string{"z", "a", "b", "c"}, revNames(rs)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestEqualRevision(t *testing.T) {
	a := revAt("a", 1, `{"x":1}`, 0)
	b := revAt("b", 2, `{"x":1}`, 0)
	c := revAt("c", 1, `{"x":2}`, 0)
	numbered := func(r *appsv1.ControllerRevision, h string) *appsv1.ControllerRevision {
		r = r.DeepCopy()
		r.Labels = map[string]string{HashLabel: h}
		return r
	}
	tests := []struct {
		name string
		a, b *appsv1.ControllerRevision
		want bool
	}{
		{"both nil", nil, nil, true},
		{"one nil", a, nil, false},
		{"same data", a, b, true},
		{"other data", a, c, false},
		{"numeric hashes differ", numbered(a, "1"), numbered(b, "2"), false},
		{"numeric hashes agree", numbered(a, "1"), numbered(b, "1"), true},
		{"encoded hashes are not compared", numbered(a, "abc"), numbered(b, "xyz"), true},
	}
	for _, tt := range tests {
		if got := EqualRevision(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: EqualRevision = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestChooseRevision(t *testing.T) {
	set := compatSet()
	now, err := NewRevision(set, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := string(now.Data.Raw)
	other := `{"spec":{"template":{"$patch":"replace"}}}`
	tests := []struct {
		name      string
		revisions []*appsv1.ControllerRevision
		collision int32
		wantNew   int64
		existing  string
		renumber  bool
	}{
		{name: "no history: create revision 1", wantNew: 1},
		{name: "newest is the template", revisions: []*appsv1.ControllerRevision{revAt("old", 1, other, 0), revAt("cur", 2, data, 0)}, wantNew: 3, existing: "cur"},
		{name: "older one is the template: rollback", revisions: []*appsv1.ControllerRevision{revAt("back", 1, data, 0), revAt("cur", 2, other, 0)}, wantNew: 3, existing: "back", renumber: true},
		{name: "template is new", revisions: []*appsv1.ControllerRevision{revAt("cur", 4, other, 0)}, wantNew: 5},
		{name: "collision count names the new one", collision: 3, wantNew: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set.DeepCopy()
			s.Status.CollisionCount = ptr.To(tt.collision)
			step, err := ChooseRevision(s, tt.revisions)
			if err != nil {
				t.Fatal(err)
			}
			if step.New.Revision != tt.wantNew {
				t.Errorf("new revision number %d, want %d", step.New.Revision, tt.wantNew)
			}
			if wantName := RevisionName("test", Hash(step.New, &tt.collision)); step.New.Name != wantName {
				t.Errorf("new revision named %s, want %s", step.New.Name, wantName)
			}
			got := ""
			if step.Existing != nil {
				got = step.Existing.Name
			}
			if got != tt.existing || step.Renumber != tt.renumber || step.CollisionCount != tt.collision {
				t.Errorf("existing %q renumber %v collisions %d, want %q %v %d", got, step.Renumber, step.CollisionCount, tt.existing, tt.renumber, tt.collision)
			}
		})
	}
}

func TestCurrentRevision(t *testing.T) {
	set := compatSet()
	a, b := revAt("a", 1, "{}", 0), revAt("b", 2, "{}", 0)
	set.Status.CurrentRevision = "a"
	if got := CurrentRevision(set, []*appsv1.ControllerRevision{a, b}, b); got != a {
		t.Errorf("current = %s, want a", got.Name)
	}
	set.Status.CurrentRevision = "gone"
	if got := CurrentRevision(set, []*appsv1.ControllerRevision{a, b}, b); got != b {
		t.Errorf("current = %s, want the update revision b", got.Name)
	}
}

func TestTruncate(t *testing.T) {
	var revs []*appsv1.ControllerRevision
	for i, n := range []string{"r1", "r2", "r3", "r4", "r5", "r6"} {
		revs = append(revs, revAt(n, int64(i+1), "{}", 0))
	}
	podAt := func(rev string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.StatefulSetRevisionLabel: rev}}}
	}
	tests := []struct {
		name  string
		limit *int32
		pods  []*corev1.Pod
		want  []string
	}{
		{name: "limit 2 keeps the two newest non-live", limit: ptr.To[int32](2), want: []string{"r1", "r2"}},
		{name: "a pod's revision is live", limit: ptr.To[int32](2), pods: []*corev1.Pod{podAt("r1")}, want: []string{"r2"}},
		{name: "limit 0 keeps only live", limit: ptr.To[int32](0), pods: []*corev1.Pod{podAt("r3")}, want: []string{"r1", "r2", "r4"}},
		{name: "exactly at the limit", limit: ptr.To[int32](4), want: []string{}},
		{name: "negative keeps all", limit: ptr.To[int32](-1), want: []string{}},
		{name: "unset is 10", want: []string{}},
	}
	for _, tt := range tests {
		set := compatSet()
		set.Spec.RevisionHistoryLimit = tt.limit
		got := Truncate(set, tt.pods, revs, revs[4], revs[5])
		if diff := cmp.Diff(tt.want, revNames(got)); diff != "" {
			t.Errorf("%s: deleted (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestClaimRevisions(t *testing.T) {
	set := compatSet()
	mk := func(name, ns string, labels map[string]string, owner string) *appsv1.ControllerRevision {
		r := revAt(name, 1, "{}", 0)
		r.Namespace, r.Labels = ns, labels
		if owner != "" {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "x", UID: types.UID(owner), Controller: ptr.To(true)}}
		}
		return r
	}
	foo := map[string]string{"app": "foo"}
	revs := []*appsv1.ControllerRevision{
		mk("mine", "test", foo, "ssuid"),
		mk("orphan", "test", foo, ""),
		mk("others", "test", foo, "other"),
		mk("unmatched", "test", map[string]string{"app": "bar"}, ""),
		mk("elsewhere", "prod", foo, ""),
	}
	mine, orphans := ClaimRevisions(set, revs)
	if diff := cmp.Diff([]string{"mine"}, revNames(mine)); diff != "" {
		t.Errorf("mine (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"orphan"}, revNames(orphans)); diff != "" {
		t.Errorf("orphans (-want +got):\n%s", diff)
	}
}
