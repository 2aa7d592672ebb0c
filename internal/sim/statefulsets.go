package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/controller/statefulset"
	"knode/internal/sim/script"
)

// StatefulSets: a statefulset statement makes an apps/v1 StatefulSet in
// namespace default, OrderedReady, whose pods (<name>-0 …) are like a
// pods statement's without options: the same container, requests and
// image, and the tolerations DefaultTolerationSeconds admission gives
// them. The real StatefulSet controller (controller/statefulset) creates
// them one at a time, each once the one before is Running and Ready, and
// recreates one that is gone, under the same name, with the same claim.
//
// With volume the StatefulSet has a volumeClaimTemplate, data, mounted at
// /data, and the controller creates each ordinal's claim, data-<name>-<i>,
// before its pod. The World makes for each ordinal, beforehand, a
// PersistentVolume pv-<name>-<i> (as it makes a pods statement's volumes,
// see volumes.go) pre-bound by namespace and name to that claim, so the
// real PV binder binds the claim as soon as it exists. The volumes have no
// node affinity: a pod may start again in any zone, as with a volume that
// can be attached anywhere (a zonal disk would keep it in its zone).
//
// The controller is built with the first StatefulSet, so a scenario
// without one never runs it. It lists through the API on each pass, and
// passes when a StatefulSet, a ControllerRevision or a claim changes, when
// a pod changes that a StatefulSet controls or whose labels one selects,
// and when its NextDue falls due; a failed pass is retried after
// setRetryPeriod. A server's controller would also pass every 30 s; those
// passes, with nothing changed, change nothing.
//
// The World follows each StatefulSet's readiness as it changes (see
// setMarks): the summary says when it was first fully Ready, when it last
// lost readiness and whether, and when, it was fully Ready again.

// setLabel is the label that a StatefulSet's selector matches, on its pods.
const setLabel = "app"

// setRetryPeriod is how long after a failed pass the StatefulSet
// controller passes again.
const setRetryPeriod = 10 * time.Second

// AddStatefulSet creates the StatefulSet s describes (and its volumes, see
// above), for the StatefulSet controller to run.
func (w *World) AddStatefulSet(s script.StatefulSet) error {
	if err := w.start(); err != nil {
		return err
	}
	if w.sets == nil {
		ctl, err := statefulset.New(statefulset.Config{Client: w.admin, Clock: w.clk, Logger: w.log})
		if err != nil {
			return err
		}
		w.sets = ctl
	}
	spec := podSpec(script.Pods{}, "")
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: metav1.NamespaceDefault},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(s.Replicas)),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{setLabel: s.Name}},
			ServiceName:         s.Name,
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{setLabel: s.Name}},
				Spec:       spec,
			},
		},
	}
	if s.Volume {
		mount(&set.Spec.Template.Spec)
		set.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: volumeName},
			Spec:       claimSpec(""),
		}}
		for i := range s.Replicas {
			pod := s.Name + "-" + strconv.Itoa(i)
			if err := w.createVolume(pod, set.Namespace, volumeName+"-"+pod, ""); err != nil {
				return err
			}
		}
	}
	if _, err := w.admin.AppsV1().StatefulSets(set.Namespace).Create(w.ctx, set, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating StatefulSet %s: %w", set.Name, err)
	}
	w.settle()
	return w.err
}

// setChanged implements observer: the StatefulSet controller passes, and
// the set's readiness is followed.
func (w *World) setChanged(old, cur *appsv1.StatefulSet) {
	if cur != nil {
		w.markSet(cur)
	}
	w.kickSets()
}

// revisionChanged implements observer.
func (w *World) revisionChanged() { w.kickSets() }

// kickSets runs the StatefulSet controller as soon as the current
// callback ends, once it exists.
func (w *World) kickSets() {
	if w.sets != nil {
		w.kick("StatefulSet controller", w.syncSets)
	}
}

// concernsSets reports whether a change to p may matter to a StatefulSet:
// one controls it, or, having no controller, its labels match the
// selector of one in its namespace (it may be adopted).
func (w *World) concernsSets(p *corev1.Pod) bool {
	if p == nil || w.sets == nil || len(w.mirror.sets) == 0 {
		return false
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.Kind == "StatefulSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String()
	}
	for k, set := range w.mirror.sets {
		if k.Namespace != p.Namespace || set.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}

// syncSets runs one pass of the StatefulSet controller, then sets a timer
// for when it asks to pass again, or for a retry after a failed pass.
func (w *World) syncSets() {
	w.setPasses++
	var next time.Time
	if err := w.sets.Sync(w.ctx); err != nil {
		w.log.Warn("StatefulSet pass failed", "err", err)
		next = w.clk.Now().Add(setRetryPeriod)
	}
	if due := w.sets.NextDue(); !due.IsZero() && (next.IsZero() || due.Before(next)) {
		next = due
	}
	if !next.IsZero() {
		w.setDue.set(w, next, w.syncSets)
	}
}

// setMarks is one StatefulSet's readiness as the World saw it change:
// fully Ready means status.readyReplicas equals spec.replicas.
type setMarks struct {
	replicas, ready int
	// everReady is set once it was fully Ready, first at firstReady.
	everReady  bool
	firstReady time.Duration
	// lost is set once it lost readiness after being fully Ready, last at
	// lostAt; readyAgain is when it was last fully Ready after a loss.
	lost       bool
	lostAt     time.Duration
	readyAgain time.Duration
}

func (m *setMarks) fullyReady() bool { return m.ready == m.replicas }

// markSet follows set's readiness.
func (w *World) markSet(set *appsv1.StatefulSet) {
	k := types.NamespacedName{Namespace: set.Namespace, Name: set.Name}
	m := w.setMarks[k]
	if m == nil {
		m = &setMarks{}
		w.setMarks[k] = m
	}
	was := m.everReady && m.fullyReady()
	m.replicas, m.ready = int(ptr.Deref(set.Spec.Replicas, 1)), int(set.Status.ReadyReplicas)
	is := m.fullyReady()
	switch {
	case is && !m.everReady:
		m.everReady, m.firstReady = true, w.Now()
	case is && !was:
		m.readyAgain = w.Now()
	case was && !is:
		m.lost, m.lostAt = true, w.Now()
	}
}

// StatefulSetSummary is what happened to one StatefulSet's readiness.
// Fully Ready means status.readyReplicas equals spec.replicas.
type StatefulSetSummary struct {
	// Name is the StatefulSet's name, in namespace default.
	Name string
	// Replicas and Ready are spec.replicas and status.readyReplicas at
	// the end.
	Replicas, Ready int
	// EverReady is set when it was fully Ready at some point, first at
	// FirstReady.
	EverReady  bool
	FirstReady time.Duration
	// Lost is set when it lost readiness after being fully Ready, last at
	// LostAt.
	Lost   bool
	LostAt time.Duration
	// ReadyAgain is set when it lost readiness and is fully Ready at the
	// end: the last loss was made good at ReadyAgainAt.
	ReadyAgain   bool
	ReadyAgainAt time.Duration
}

// StatefulSets summarizes every StatefulSet's readiness, by name, as it
// happened (not as sampled).
func (w *World) StatefulSets() []StatefulSetSummary {
	var out []StatefulSetSummary
	for _, k := range sortedNames(w.setMarks) {
		m := w.setMarks[k]
		s := StatefulSetSummary{
			Name: k.Name, Replicas: m.replicas, Ready: m.ready,
			EverReady: m.everReady, FirstReady: m.firstReady,
			Lost: m.lost, LostAt: m.lostAt,
		}
		if m.lost && m.fullyReady() {
			s.ReadyAgain, s.ReadyAgainAt = true, m.readyAgain
		}
		out = append(out, s)
	}
	return out
}

// String is the summary's line, such as "statefulset db: ready 3/3 at
// 1m20s, lost readiness at 1m41s, ready 3/3 again at 3m24s".
func (s StatefulSetSummary) String() string {
	line := "statefulset " + s.Name + ": "
	switch {
	case !s.EverReady:
		return line + fmt.Sprintf("never ready (%d/%d ready at the end)", s.Ready, s.Replicas)
	case !s.Lost:
		return line + fmt.Sprintf("ready %d/%d at %v, never lost readiness", s.Replicas, s.Replicas, s.FirstReady)
	}
	line += fmt.Sprintf("ready %d/%d at %v, lost readiness at %v, ", s.Replicas, s.Replicas, s.FirstReady, s.LostAt)
	if s.ReadyAgain {
		return line + fmt.Sprintf("ready %d/%d again at %v", s.Replicas, s.Replicas, s.ReadyAgainAt)
	}
	return line + fmt.Sprintf("never ready again (%d/%d ready at the end)", s.Ready, s.Replicas)
}

// setsReady is the sum of status.readyReplicas over all StatefulSets.
func (w *World) setsReady() int {
	n := 0
	for _, set := range w.mirror.sets {
		n += int(set.Status.ReadyReplicas)
	}
	return n
}

func sortedNames[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return out
}
