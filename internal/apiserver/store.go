package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"knode/internal/registry"
	"knode/internal/storage"
)

// objectStore keeps the objects of one Kind in storage. It applies the
// Kind's rules and owns the metadata every object has. It does no HTTP and
// no authorization; admission runs before it is called.
type objectStore struct {
	kind    *registry.Kind
	storage storage.Interface
	clock   clock.PassiveClock
	gr      schema.GroupResource
	prefix  string // "/registry/<resource>/"
	// recent remembers the last version of each object this server read or
	// wrote, so an update can skip reading storage first. The storage
	// compare-and-swap stays the arbiter: a stale entry costs a retry.
	recent *recentObjects
	// cache serves unpaginated lists and watches (cache.go).
	cache *watchCache
	// patchMeta tells strategic merge how the kind's lists merge; nil when
	// the kind has no Go struct to read it from.
	patchMeta *strategicpatch.PatchMetaFromStruct
}

func newObjectStore(k *registry.Kind, s storage.Interface, c clock.PassiveClock) *objectStore {
	st := &objectStore{
		kind:    k,
		storage: s,
		clock:   c,
		gr:      schema.GroupResource{Group: k.GroupVersion.Group, Resource: k.Resource},
		prefix:  "/registry/" + k.Resource + "/",
		recent:  newRecentObjects(),
	}
	if pm, err := strategicpatch.NewPatchMetaFromStruct(k.New()); err == nil {
		st.patchMeta = &pm
	}
	return st
}

// key is the storage key of one object.
func (s *objectStore) key(namespace, name string) string {
	if s.kind.Namespaced {
		return s.prefix + namespace + "/" + name
	}
	return s.prefix + name
}

// listPrefix is the storage prefix of a collection; namespace "" means all.
func (s *objectStore) listPrefix(namespace string) string {
	if s.kind.Namespaced && namespace != "" {
		return s.prefix + namespace + "/"
	}
	return s.prefix
}

// decode turns a stored value, in either storage form (storagecodec.go),
// into a typed object carrying revision rev as its resourceVersion.
func (s *objectStore) decode(value []byte, rev int64) (runtime.Object, error) {
	obj, err := decodeStored(s.kind, value)
	if err != nil {
		return nil, fmt.Errorf("decoding stored %s: %w", s.kind.Kind, err)
	}
	setTypeMeta(s.kind, obj)
	if rev > 0 {
		accessor, _ := meta.Accessor(obj)
		accessor.SetResourceVersion(strconv.FormatInt(rev, 10))
	}
	return obj, nil
}

// encode serializes obj for storage, in protobuf when its type has a
// protobuf form and JSON otherwise (storagecodec.go), without its
// resourceVersion. obj is left as it was apart from its apiVersion and
// kind, which are set to the kind's.
func (s *objectStore) encode(obj runtime.Object) ([]byte, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := accessor.GetResourceVersion()
	accessor.SetResourceVersion("")
	setTypeMeta(s.kind, obj)
	data, err := encodeStored(obj)
	accessor.SetResourceVersion(rv)
	return data, err
}

func setRevision(obj runtime.Object, rev int64) {
	accessor, _ := meta.Accessor(obj)
	accessor.SetResourceVersion(strconv.FormatInt(rev, 10))
}

// Get reads one object.
func (s *objectStore) Get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	obj, shared, err := s.getShared(ctx, namespace, name)
	if shared {
		obj = obj.DeepCopyObject()
	}
	return obj, err
}

// getShared reads one object; shared reports that it is the one the server
// remembers, which the caller must not change.
func (s *objectStore) getShared(ctx context.Context, namespace, name string) (runtime.Object, bool, error) {
	kv, err := s.storage.Get(ctx, s.key(namespace, name))
	if err != nil {
		return nil, false, storageError(err, s.gr, name)
	}
	if cached, ok := s.recent.peek(kv.Key, kv.ModRevision); ok {
		return cached, true, nil
	}
	obj, err := s.decode(kv.Value, kv.ModRevision)
	if err == nil {
		s.recent.remember(kv.Key, kv.ModRevision, obj, kv.Value)
	}
	return obj, false, err
}

// createOptions are the parts of a create request the store needs.
type createOptions struct {
	dryRun bool
	// user is the requester the kind's RecordRequester is given.
	user registry.User
	// admit runs after defaulting and before validation; nil admits all.
	admit func(obj, old runtime.Object) error
}

// Create validates and stores a new object. namespace is the request's.
func (s *objectStore) Create(ctx context.Context, namespace string, obj runtime.Object, opts createOptions) (runtime.Object, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := s.checkNamespace(accessor, namespace); err != nil {
		return nil, err
	}
	if accessor.GetName() == "" && accessor.GetGenerateName() != "" {
		accessor.SetName(accessor.GetGenerateName() + utilrand.String(5))
	}
	accessor.SetUID(uuid.NewUUID())
	accessor.SetCreationTimestamp(metav1.NewTime(s.clock.Now().Truncate(1e9)))
	accessor.SetResourceVersion("")
	accessor.SetDeletionTimestamp(nil)
	accessor.SetDeletionGracePeriodSeconds(nil)
	accessor.SetManagedFields(nil)
	accessor.SetSelfLink("")
	if s.kind.Default != nil {
		s.kind.Default(obj)
	}
	if s.kind.PrepareForCreate != nil {
		s.kind.PrepareForCreate(obj)
	}
	if s.kind.RecordRequester != nil {
		s.kind.RecordRequester(obj, opts.user)
	}
	if opts.admit != nil {
		if err := opts.admit(obj, nil); err != nil {
			return nil, err
		}
	}
	errs := validateMeta(accessor, s.kind.Namespaced, s.namesAreLabels())
	if s.kind.Validate != nil {
		errs = append(errs, s.kind.Validate(obj)...)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(s.gk(), accessor.GetName(), errs)
	}
	if opts.dryRun {
		if _, err := s.storage.Get(ctx, s.key(namespace, accessor.GetName())); err == nil {
			return nil, apierrors.NewAlreadyExists(s.gr, accessor.GetName())
		}
		return obj, nil
	}
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	key := s.key(namespace, accessor.GetName())
	rev, err := s.storage.Create(ctx, key, data)
	if err != nil {
		return nil, storageError(err, s.gr, accessor.GetName())
	}
	setRevision(obj, rev)
	s.recent.remember(key, rev, obj, data)
	return obj, nil
}

// checkNamespace fills an empty metadata.namespace from the request and
// refuses a mismatch, as upstream does.
func (s *objectStore) checkNamespace(accessor metav1.Object, namespace string) error {
	if !s.kind.Namespaced {
		if accessor.GetNamespace() != "" {
			accessor.SetNamespace("")
		}
		return nil
	}
	if accessor.GetNamespace() == "" {
		accessor.SetNamespace(namespace)
	} else if accessor.GetNamespace() != namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

func (s *objectStore) gk() schema.GroupKind {
	return schema.GroupKind{Group: s.kind.GroupVersion.Group, Kind: s.kind.Kind}
}

// namesAreLabels picks the name rule: namespaces are DNS labels, everything
// else served here is a DNS subdomain.
func (s *objectStore) namesAreLabels() bool {
	return s.kind.Resource == "namespaces"
}

// updateFunc computes the new object from the current one. It returns
// the object to store; the store then applies the Kind's rules to it.
// current may be the object the server remembers (recent.go), shared with
// other requests: fn must not change it, so a function that edits the
// current object edits a copy of it. The store owns what fn returns, and
// may call fn again, on a retry.
type updateFunc func(current runtime.Object) (runtime.Object, error)

// updateOptions select the rules of an update.
type updateOptions struct {
	// status: the request is on the /status subresource.
	status bool
	// approval: the request is on the /approval subresource (the kind's
	// Approval rules instead of its Status rules).
	approval bool
	dryRun   bool
	// admit runs after the Kind's preparation and before validation.
	admit func(obj, old runtime.Object) error
	// expectedRV is the resourceVersion the request's object names, when
	// known before fn runs; empty when the update is unconditional.
	expectedRV string
}

// maxUpdateRetries bounds the retries of an update whose new object names
// no resourceVersion and that races another writer.
const maxUpdateRetries = 10

// Update reads the current object, applies fn, checks the result against
// the Kind's rules and writes it with a compare-and-swap. An object whose
// new value carries a resourceVersion must match the stored one (409
// otherwise); one without is retried on conflict. An update that changes
// nothing writes nothing and returns the stored object. The object returned
// after a write is also the one the server remembers (recent.go): the
// caller must not change it. Neither the Kind's rules nor admission may
// change the current object they are shown, which may be shared too.
func (s *objectStore) Update(ctx context.Context, namespace, name string, fn updateFunc, opts updateOptions) (runtime.Object, error) {
	key := s.key(namespace, name)
	useRecent := true
	for attempt := 0; ; attempt++ {
		current, rev, currentData, fromRecent := s.recent.lookup(key, opts.expectedRV)
		if !useRecent || !fromRecent {
			fromRecent = false
			kv, err := s.storage.Get(ctx, key)
			if err != nil {
				s.recent.forget(key)
				return nil, storageError(err, s.gr, name)
			}
			if current, err = s.decode(kv.Value, kv.ModRevision); err != nil {
				return nil, err
			}
			rev, currentData = kv.ModRevision, kv.Value
		}
		obj, err := fn(current)
		var result runtime.Object
		if err == nil {
			result, err = s.applyUpdate(ctx, namespace, name, key, obj, current, currentData, rev, opts)
		}
		if err != nil && fromRecent {
			// Judge every failure, and every no-op, against the stored
			// object rather than a remembered one.
			useRecent = false
			attempt--
			continue
		}
		if err == nil && fromRecent && result == current {
			useRecent = false
			attempt--
			continue
		}
		if errors.Is(err, errRetry) && attempt < maxUpdateRetries {
			useRecent = false
			continue
		}
		if errors.Is(err, errRetry) {
			return nil, apierrors.NewConflict(s.gr, name, errors.New(conflictMessage))
		}
		return result, err
	}
}

var errRetry = errors.New("retry update")

// applyUpdate checks obj against the rules and writes it over current,
// stored under key as currentData at revision rev. It returns current
// itself when obj would store the same bytes, as upstream skips such writes.
func (s *objectStore) applyUpdate(ctx context.Context, namespace, name, key string, obj, current runtime.Object, currentData []byte, rev int64, opts updateOptions) (runtime.Object, error) {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	old, _ := meta.Accessor(current)
	if err := s.checkNamespace(accessor, namespace); err != nil {
		return nil, err
	}
	if accessor.GetName() != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", accessor.GetName(), name))
	}
	explicitRV := accessor.GetResourceVersion()
	if explicitRV != "" && explicitRV != old.GetResourceVersion() {
		return nil, apierrors.NewConflict(s.gr, name, errors.New(conflictMessage))
	}
	// As upstream, a uid in the body must be the stored one: a client
	// that names it (PodGC's status patch does) must not change an
	// object recreated under the same name.
	if uid := accessor.GetUID(); uid != "" && uid != old.GetUID() {
		return nil, apierrors.NewInvalid(s.gk(), name, field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
	}
	// Metadata the server owns never changes through an update.
	accessor.SetUID(old.GetUID())
	accessor.SetCreationTimestamp(old.GetCreationTimestamp())
	accessor.SetDeletionTimestamp(old.GetDeletionTimestamp())
	accessor.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	accessor.SetGeneration(old.GetGeneration())
	accessor.SetManagedFields(nil)
	accessor.SetSelfLink("")
	accessor.SetResourceVersion(old.GetResourceVersion())
	if opts.status || opts.approval {
		// As upstream, a status update may change labels and annotations
		// (the agent reconciles its default labels this way) but not
		// owner references or finalizers; the kind's status rules keep
		// its spec.
		accessor.SetFinalizers(old.GetFinalizers())
		accessor.SetOwnerReferences(old.GetOwnerReferences())
	}
	if s.kind.Default != nil {
		s.kind.Default(obj)
	}
	// Prepare, then admit (which may change the object), then validate,
	// as upstream orders mutation and validation.
	validate := s.kind.ValidateUpdate
	if opts.status || opts.approval {
		rules := s.kind.Status
		if opts.approval {
			rules = s.kind.Approval
		}
		if rules == nil {
			return nil, apierrors.NewNotFound(s.gr, name)
		}
		if rules.PrepareForUpdate != nil {
			rules.PrepareForUpdate(obj, current)
		}
		validate = rules.ValidateUpdate
	} else if s.kind.PrepareForUpdate != nil {
		s.kind.PrepareForUpdate(obj, current)
	}
	if opts.admit != nil {
		if err := opts.admit(obj, current); err != nil {
			return nil, err
		}
	}
	var errs field.ErrorList
	if validate != nil {
		errs = validate(obj, current)
	}
	// The immutable metadata (name, namespace, uid, creation and deletion
	// times) was taken from old above, so only the mutable parts need
	// checking here.
	errs = append(validateMeta(accessor, s.kind.Namespaced, s.namesAreLabels()), errs...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(s.gk(), name, errs)
	}
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(data, currentData) {
		return current, nil
	}
	if opts.dryRun {
		return obj, nil
	}
	// An update that removes the last finalizer of an object whose
	// deletion is otherwise complete (grace period 0) removes it, as
	// upstream. An object still in its grace period stays: its owner (the
	// agent, for a pod) finishes the deletion.
	if deleteDuringUpdate(accessor, old) && s.finalized(obj) {
		kv, err := s.storage.Delete(ctx, key, rev)
		s.recent.forget(key)
		if errors.Is(err, storage.ErrConflict) {
			return nil, s.conflictOrRetry(explicitRV, name)
		}
		if err != nil {
			return nil, storageError(err, s.gr, name)
		}
		setRevision(obj, kv.ModRevision)
		return obj, nil
	}
	newRev, err := s.storage.Update(ctx, key, data, rev)
	if errors.Is(err, storage.ErrConflict) {
		return nil, s.conflictOrRetry(explicitRV, name)
	}
	if err != nil {
		return nil, storageError(err, s.gr, name)
	}
	setRevision(obj, newRev)
	s.recent.keep(key, newRev, obj, data)
	return obj, nil
}

// deleteDuringUpdate reports whether an update of old into obj completes a
// deletion: old was being deleted with grace 0 and held finalizers, and obj
// holds none.
func deleteDuringUpdate(obj, old metav1.Object) bool {
	grace := old.GetDeletionGracePeriodSeconds()
	return old.GetDeletionTimestamp() != nil && grace != nil && *grace == 0 &&
		len(old.GetFinalizers()) > 0 && len(obj.GetFinalizers()) == 0
}

func (s *objectStore) conflictOrRetry(explicitRV, name string) error {
	if explicitRV != "" {
		return apierrors.NewConflict(s.gr, name, errors.New(conflictMessage))
	}
	return errRetry
}

// finalized reports whether nothing but metadata finalizers holds obj; a
// namespace also waits for its spec.finalizers.
func (s *objectStore) finalized(obj runtime.Object) bool {
	if s.kind.Resource == "namespaces" {
		return namespaceFinalized(obj)
	}
	return true
}

// rawUpdate applies fn to the stored object with a compare-and-swap,
// retrying on conflict, without the kind's update rules: it is for the
// subresources that may change what the main resource may not (a
// namespace's finalizers, a pod's nodeName through binding). When remove
// reports true for the new object, the object is deleted instead.
func (st *objectStore) rawUpdate(ctx context.Context, namespace, name string, fn updateFunc, remove func(runtime.Object) bool, dryRun bool) (runtime.Object, error) {
	key := st.key(namespace, name)
	for attempt := 0; attempt <= maxUpdateRetries; attempt++ {
		st.recent.forget(key)
		kv, err := st.storage.Get(ctx, key)
		if err != nil {
			return nil, storageError(err, st.gr, name)
		}
		current, err := st.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		obj, err := fn(current.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		if dryRun {
			return obj, nil
		}
		if remove != nil && remove(obj) {
			del, err := st.storage.Delete(ctx, key, kv.ModRevision)
			if err == nil {
				setRevision(obj, del.ModRevision)
				return obj, nil
			}
			if !isConflict(err) {
				return nil, storageError(err, st.gr, name)
			}
			continue
		}
		data, err := st.encode(obj)
		if err != nil {
			return nil, err
		}
		rev, err := st.storage.Update(ctx, key, data, kv.ModRevision)
		if err == nil {
			setRevision(obj, rev)
			st.recent.remember(key, rev, obj, data)
			return obj, nil
		}
		if !isConflict(err) {
			return nil, storageError(err, st.gr, name)
		}
	}
	return nil, apierrors.NewConflict(st.gr, name, errors.New(conflictMessage))
}

// deleteOptions are the parts of a delete request the store needs.
type deleteOptions struct {
	gracePeriod   *int64
	preconditions *metav1.Preconditions
	dryRun        bool
}

// Delete removes an object, or starts its graceful deletion. It returns the
// object as it now is and whether it is gone from storage.
func (s *objectStore) Delete(ctx context.Context, namespace, name string, opts deleteOptions) (runtime.Object, bool, error) {
	for attempt := 0; ; attempt++ {
		obj, gone, err := s.deleteOnce(ctx, namespace, name, opts)
		if errors.Is(err, errRetry) && attempt < maxUpdateRetries {
			continue
		}
		if errors.Is(err, errRetry) {
			return nil, false, apierrors.NewConflict(s.gr, name, errors.New(conflictMessage))
		}
		return obj, gone, err
	}
}

func (s *objectStore) deleteOnce(ctx context.Context, namespace, name string, opts deleteOptions) (runtime.Object, bool, error) {
	kv, err := s.storage.Get(ctx, s.key(namespace, name))
	if err != nil {
		return nil, false, storageError(err, s.gr, name)
	}
	obj, err := s.decode(kv.Value, kv.ModRevision)
	if err != nil {
		return nil, false, err
	}
	accessor, _ := meta.Accessor(obj)
	if p := opts.preconditions; p != nil {
		if p.UID != nil && *p.UID != accessor.GetUID() {
			return nil, false, apierrors.NewConflict(s.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, accessor.GetUID()))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != accessor.GetResourceVersion() {
			return nil, false, apierrors.NewConflict(s.gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, accessor.GetResourceVersion()))
		}
	}
	grace := int64(0)
	if s.kind.DeleteGracePeriod != nil {
		grace = s.kind.DeleteGracePeriod(obj, opts.gracePeriod)
	}
	pending := len(accessor.GetFinalizers()) > 0 || !s.finalizedOnDelete(obj)
	if grace > 0 || pending {
		if !s.markDeleting(obj, grace) {
			return obj, false, nil
		}
		if opts.dryRun {
			return obj, false, nil
		}
		data, err := s.encode(obj)
		if err != nil {
			return nil, false, err
		}
		rev, err := s.storage.Update(ctx, kv.Key, data, kv.ModRevision)
		if errors.Is(err, storage.ErrConflict) {
			return nil, false, errRetry
		}
		if err != nil {
			return nil, false, storageError(err, s.gr, name)
		}
		setRevision(obj, rev)
		s.recent.remember(kv.Key, rev, obj, data)
		return obj, false, nil
	}
	if opts.dryRun {
		return obj, true, nil
	}
	deleted, err := s.storage.Delete(ctx, kv.Key, kv.ModRevision)
	s.recent.forget(kv.Key)
	if errors.Is(err, storage.ErrConflict) {
		return nil, false, errRetry
	}
	if err != nil {
		return nil, false, storageError(err, s.gr, name)
	}
	setRevision(obj, deleted.ModRevision)
	return obj, true, nil
}

// markDeleting sets the deletion timestamp and grace period of an object
// whose deletion waits for its owner or its finalizers. On an object that is
// already terminating, only a shorter grace period changes anything. It
// reports whether obj changed.
func (s *objectStore) markDeleting(obj runtime.Object, grace int64) bool {
	accessor, _ := meta.Accessor(obj)
	if accessor.GetDeletionTimestamp() != nil {
		cur := accessor.GetDeletionGracePeriodSeconds()
		if cur == nil || grace >= *cur {
			return false
		}
	}
	if s.kind.Resource == "namespaces" {
		markNamespaceTerminating(obj)
	}
	deadline := metav1.NewTime(s.clock.Now().Add(secondsDuration(grace)).Truncate(1e9))
	accessor.SetDeletionTimestamp(&deadline)
	accessor.SetDeletionGracePeriodSeconds(&grace)
	return true
}

// finalizedOnDelete reports whether a delete may remove obj at once as far
// as kind-specific finalizers go (a namespace must first be emptied).
func (s *objectStore) finalizedOnDelete(obj runtime.Object) bool {
	if s.kind.Resource == "namespaces" {
		return namespaceFinalized(obj)
	}
	return true
}

// listResult is one page of objects.
type listResult struct {
	items              []runtime.Object
	revision           int64
	continueToken      string
	remainingItemCount *int64
}

// List reads a collection, keeping the objects match accepts. With a limit,
// it reads pages until limit objects matched or the collection ended.
func (s *objectStore) List(ctx context.Context, namespace string, opts storage.ListOptions, match func(runtime.Object) bool) (listResult, error) {
	var out listResult
	need := opts.Limit
	filtered := false
	for {
		page, err := s.storage.List(ctx, s.listPrefix(namespace), opts)
		if err != nil {
			return listResult{}, storageError(err, s.gr, "")
		}
		out.revision = page.Revision
		for _, kv := range page.Items {
			obj, err := s.decodeListed(kv, match)
			if err != nil {
				return listResult{}, err
			}
			if obj == nil {
				filtered = true
				continue
			}
			out.items = append(out.items, obj)
		}
		out.continueToken = page.Continue
		out.remainingItemCount = page.RemainingItemCount
		if need == 0 || page.Continue == "" {
			break
		}
		need = opts.Limit - int64(len(out.items))
		if need <= 0 {
			break
		}
		opts = storage.ListOptions{Limit: need, Continue: page.Continue}
	}
	if filtered {
		out.remainingItemCount = nil
	}
	return out, nil
}

// decodeListed returns kv's object if match accepts it (nil match accepts
// all), or nil. An object already decoded at that revision is matched
// without decoding it again and copied only when it matches, so a
// selective list (a node's pods) costs a lookup per unchanged object.
func (s *objectStore) decodeListed(kv storage.KV, match func(runtime.Object) bool) (runtime.Object, error) {
	if cached, ok := s.recent.peek(kv.Key, kv.ModRevision); ok {
		if match != nil && !match(cached) {
			return nil, nil
		}
		return cached.DeepCopyObject(), nil
	}
	obj, err := s.decode(kv.Value, kv.ModRevision)
	if err != nil {
		return nil, err
	}
	if match != nil && !match(obj) {
		return nil, nil
	}
	return obj, nil
}

// decodeShared returns kv's object for the watch cache: the one this
// server remembers writing at that revision when there is one, else a new
// decoding. Either way the result is shared and must not change.
func (s *objectStore) decodeShared(kv storage.KV) (runtime.Object, error) {
	if cached, ok := s.recent.peek(kv.Key, kv.ModRevision); ok {
		return cached, nil
	}
	return s.decode(kv.Value, kv.ModRevision)
}

// objectUID is a small helper for Status details.
func objectUID(obj runtime.Object) types.UID {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return accessor.GetUID()
}
