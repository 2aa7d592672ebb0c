package statefulset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
)

// HashLabel is the label on a ControllerRevision that holds the hash in
// its name (upstream's history.ControllerRevisionHashLabel).
const HashLabel = "controller.kubernetes.io/hash"

// DefaultRevisionHistoryLimit is spec.revisionHistoryLimit when it is
// unset (the API server defaults it to the same value).
const DefaultRevisionHistoryLimit = 10

// Patch is the data of set's ControllerRevision: its pod template as a
// strategic merge patch that replaces a StatefulSet's template,
// {"spec":{"template":{"$patch":"replace",...}}}, byte for byte what
// upstream's getPatch writes in 1.33. The template is written with sorted
// keys, and its metadata carries "creationTimestamp":null as 1.33's
// encoder wrote it (later API types omit the zero time, which changes
// every hash; see issue kubernetes#134773).
func Patch(set *appsv1.StatefulSet) ([]byte, error) {
	b, err := json.Marshal(&set.Spec.Template)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod template: %w", err)
	}
	var template map[string]any
	if err := json.Unmarshal(b, &template); err != nil {
		return nil, fmt.Errorf("decoding the pod template: %w", err)
	}
	meta, _ := template["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		template["metadata"] = meta
	}
	if _, ok := meta["creationTimestamp"]; !ok {
		meta["creationTimestamp"] = nil
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// Hash is upstream's HashControllerRevision: FNV-1 (32 bit) over the
// revision's data and, when probe is not nil, the decimal probe (the
// collision count), rendered by rand.SafeEncodeString.
func Hash(cr *appsv1.ControllerRevision, probe *int32) string {
	h := fnv.New32()
	h.Write(cr.Data.Raw)
	if probe != nil {
		h.Write([]byte(strconv.FormatInt(int64(*probe), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// RevisionName is <prefix>-<hash>, the prefix cut to 223 bytes so the
// name stays within 253.
func RevisionName(prefix, hash string) string {
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + hash
}

// NewRevision is the ControllerRevision that records set's current
// template, numbered revision: named <set>-<hash> with collisionCount as
// the hash's probe, labelled with the template's labels and HashLabel,
// annotated with the set's annotations, and controlled by the set.
func NewRevision(set *appsv1.StatefulSet, revision int64, collisionCount int32) (*appsv1.ControllerRevision, error) {
	patch, err := Patch(set)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(set.Spec.Template.Labels)+1)
	for k, v := range set.Spec.Template.Labels {
		labels[k] = v
	}
	annotations := make(map[string]string, len(set.Annotations))
	for k, v := range set.Annotations {
		annotations[k] = v
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       set.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: patch},
		Revision: revision,
	}
	hash := Hash(cr, &collisionCount)
	cr.Name = RevisionName(set.Name, hash)
	cr.Labels[HashLabel] = hash
	return cr, nil
}

// ApplyRevision is set with its template restored from cr, as upstream's
// ApplyRevision. Only the template is restored: the data a revision holds
// replaces the template wholesale ("$patch":"replace"), and nothing else.
// A revision without a template leaves set's own.
func ApplyRevision(set *appsv1.StatefulSet, cr *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	out := set.DeepCopy()
	var data struct {
		Spec struct {
			Template *corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("controllerrevision %s: decoding its data: %w", cr.Name, err)
	}
	if data.Spec.Template != nil {
		out.Spec.Template = *data.Spec.Template
	}
	return out, nil
}

// EqualRevision is upstream's: both nil, or hash labels that do not
// disagree (when both parse as decimal numbers) and byte-equal data.
func EqualRevision(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	ha, errA := strconv.ParseInt(a.Labels[HashLabel], 10, 32)
	hb, errB := strconv.ParseInt(b.Labels[HashLabel], 10, 32)
	if errA == nil && errB == nil && uint32(ha) != uint32(hb) {
		return false
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// SortRevisions orders revisions by revision number, ties by creation
// time and then name, as upstream's SortControllerRevisions (stable).
func SortRevisions(revisions []*appsv1.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// RevisionStep is how a pass finds set's update revision.
type RevisionStep struct {
	// New is the revision of set's template as it would be created, named
	// with the current collision count and numbered one past the newest.
	New *appsv1.ControllerRevision
	// Existing, when not nil, is a stored revision with New's data: the
	// update revision. Otherwise New must be created.
	Existing *appsv1.ControllerRevision
	// Renumber: Existing is not the newest revision (a rollback to an
	// older template), so its revision number must become New.Revision.
	Renumber bool
	// CollisionCount is status.collisionCount as the pass starts.
	CollisionCount int32
}

// ChooseRevision decides set's update revision from its revisions, which
// must be sorted (SortRevisions), as upstream's getStatefulSetRevisions:
// the newest revision when its data equals the template's, else the
// newest equal older one renumbered, else a new one.
func ChooseRevision(set *appsv1.StatefulSet, revisions []*appsv1.ControllerRevision) (RevisionStep, error) {
	var step RevisionStep
	if set.Status.CollisionCount != nil {
		step.CollisionCount = *set.Status.CollisionCount
	}
	next := int64(1)
	if n := len(revisions); n > 0 {
		next = revisions[n-1].Revision + 1
	}
	cr, err := NewRevision(set, next, step.CollisionCount)
	if err != nil {
		return step, err
	}
	step.New = cr
	var equal *appsv1.ControllerRevision
	for _, r := range revisions {
		if EqualRevision(r, cr) {
			equal = r
		}
	}
	switch {
	case equal == nil:
	case EqualRevision(revisions[len(revisions)-1], equal):
		step.Existing = revisions[len(revisions)-1]
	default:
		step.Existing = equal
		step.Renumber = true
	}
	return step, nil
}

// CurrentRevision is the revision named by set's status.currentRevision
// among revisions, or update when there is none (a new set's history
// starts at its update revision).
func CurrentRevision(set *appsv1.StatefulSet, revisions []*appsv1.ControllerRevision, update *appsv1.ControllerRevision) *appsv1.ControllerRevision {
	for _, r := range revisions {
		if r.Name == set.Status.CurrentRevision {
			return r
		}
	}
	return update
}

// Truncate returns the revisions to delete so that at most
// spec.revisionHistoryLimit non-live ones remain, oldest first, as
// upstream's truncateHistory. Live are current, update and every revision
// a pod of pods is labelled with. revisions must be sorted. A negative
// limit keeps everything.
func Truncate(set *appsv1.StatefulSet, pods []*corev1.Pod, revisions []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	live := map[string]bool{}
	if current != nil {
		live[current.Name] = true
	}
	if update != nil {
		live[update.Name] = true
	}
	for _, p := range pods {
		live[p.Labels[appsv1.StatefulSetRevisionLabel]] = true
	}
	var history []*appsv1.ControllerRevision
	for _, r := range revisions {
		if !live[r.Name] {
			history = append(history, r)
		}
	}
	limit := DefaultRevisionHistoryLimit
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	if limit < 0 || len(history) <= limit {
		return nil
	}
	return history[:len(history)-limit]
}

// ClaimRevisions are the revisions of set's namespace that its selector
// matches and that it controls (mine) or nobody controls (orphans, which
// it adopts), as upstream's ListControllerRevisions. Revisions it
// controls that no longer match are left alone, as upstream leaves them.
func ClaimRevisions(set *appsv1.StatefulSet, revisions []*appsv1.ControllerRevision) (mine, orphans []*appsv1.ControllerRevision) {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, nil
	}
	for _, r := range revisions {
		if r.Namespace != set.Namespace || !sel.Matches(labels.Set(r.Labels)) {
			continue
		}
		switch ref := metav1.GetControllerOfNoCopy(r); {
		case ref == nil:
			orphans = append(orphans, r)
		case ref.UID == set.UID:
			mine = append(mine, r)
		}
	}
	return mine, orphans
}
