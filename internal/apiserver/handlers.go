package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"knode/internal/auth"
	"knode/internal/registry"
	"knode/internal/storage"
)

// serveResource handles a request on a resource endpoint.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, a auth.Attributes) {
	gvr := schema.GroupVersionResource{Group: a.APIGroup, Version: a.APIVersion, Resource: a.Resource}
	st, ok := s.stores[gvr]
	if !ok {
		writeError(w, notFound())
		return
	}
	namespace := a.Namespace
	if !st.kind.Namespaced {
		namespace = ""
	}
	if s.isPodPost(st, a) {
		if err := s.servePodPost(r.Context(), w, r, st, namespace, a); err != nil {
			writeError(w, err)
		}
		return
	}
	if isPodLog(st, a) {
		if err := s.servePodLog(w, r, st, namespace, a); err != nil {
			writeError(w, err)
		}
		return
	}
	if isPodConnect(st, a) {
		if err := s.servePodConnect(w, r, st, namespace, a); err != nil {
			writeError(w, err)
		}
		return
	}
	if isNodeProxy(st, a) {
		if err := s.serveNodeProxy(w, r, a); err != nil {
			writeError(w, err)
		}
		return
	}
	switch a.Subresource {
	case "":
	case "status":
		if st.kind.Status == nil {
			writeError(w, notFound())
			return
		}
	case "finalize":
		if st != s.namespace {
			writeError(w, notFound())
			return
		}
	case subScale:
		if st.kind.Scale == nil {
			writeError(w, notFound())
			return
		}
	case subApproval:
		if st.kind.Approval == nil {
			writeError(w, notFound())
			return
		}
	default:
		writeError(w, notFound())
		return
	}
	if a.Subresource != "" && a.Name == "" {
		writeError(w, notFound())
		return
	}
	if a.Subresource != "" {
		switch a.Verb {
		case "get", "update", "patch":
		default:
			writeError(w, apierrors.NewMethodNotSupported(st.gr, r.Method))
			return
		}
	}
	if a.Verb == "create" && a.Name != "" {
		// POST names a collection, never an item.
		writeError(w, apierrors.NewMethodNotSupported(st.gr, r.Method))
		return
	}
	ctx := r.Context()
	var err error
	switch a.Verb {
	case "get":
		err = s.get(ctx, w, r, st, namespace, a)
	case "list":
		err = s.list(ctx, w, r, st, namespace)
	case "watch":
		err = s.watch(ctx, w, r, st, namespace, a.Name)
	case "create":
		err = s.create(ctx, w, r, st, namespace)
	case "update":
		err = s.update(ctx, w, r, st, namespace, a)
	case "patch":
		err = s.patch(ctx, w, r, st, namespace, a)
	case "delete":
		err = s.delete(ctx, w, r, st, namespace, a.Name)
	case "deletecollection":
		err = s.deleteCollection(ctx, w, r, st, namespace)
	default:
		err = apierrors.NewMethodNotSupported(st.gr, r.Method)
	}
	if err != nil {
		writeError(w, err)
	}
}

// respond writes one object, as a Table when the client asked for one.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, st *objectStore, code int, obj runtime.Object) {
	s.write(w, r, code, obj, func() runtime.Object {
		return s.table(st.kind, []runtime.Object{obj}, metav1.ListMeta{}, r)
	})
}

// write sends obj in the encoding the client asked for; table builds its
// Table form when one is asked for.
func (s *Server) write(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object, table func() runtime.Object) {
	switch m := negotiate(r); {
	case m.table:
		writeJSON(w, code, table())
	case m.protobuf:
		writeProtobuf(w, code, obj)
	default:
		writeJSON(w, code, obj)
	}
}

func (s *Server) get(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes) error {
	// The object is only encoded, so the shared one will do.
	var obj runtime.Object
	var err error
	if r.URL.Query().Get("resourceVersion") == "0" && !s.cfg.StrictReads {
		// Any revision will do: the watch cache answers, as upstream.
		obj, err = st.cache.get(ctx, st.key(namespace, a.Name))
	} else {
		obj, _, err = st.getShared(ctx, namespace, a.Name)
	}
	if err != nil {
		return storageError(err, st.gr, a.Name)
	}
	s.respondOn(w, r, st, a.Subresource, http.StatusOK, obj)
	return nil
}

// respondOn writes obj as a request on subresource sees it: its Scale on
// /scale, else obj itself.
func (s *Server) respondOn(w http.ResponseWriter, r *http.Request, st *objectStore, subresource string, code int, obj runtime.Object) {
	if subresource == subScale {
		s.respondScale(w, r, code, scaleOf(st.kind.Scale, obj))
		return
	}
	s.respond(w, r, st, code, obj)
}

// listOptions decodes list and watch query parameters.
func listOptions(r *http.Request) (metav1.ListOptions, error) {
	var opts metav1.ListOptions
	if err := queryCodec.DecodeParameters(r.URL.Query(), corev1.SchemeGroupVersion, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	return opts, nil
}

// selector is the label and field filter of a list or watch.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

func parseSelector(st *objectStore, opts metav1.ListOptions) (selector, error) {
	sel := selector{labels: labels.Everything(), fields: fields.Everything()}
	var err error
	if opts.LabelSelector != "" {
		if sel.labels, err = labels.Parse(opts.LabelSelector); err != nil {
			return sel, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
	}
	if opts.FieldSelector != "" {
		if sel.fields, err = fields.ParseSelector(opts.FieldSelector); err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
		known := st.fieldSet(st.kind.New())
		for _, req := range sel.fields.Requirements() {
			if _, ok := known[req.Field]; !ok {
				return sel, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
			}
		}
	}
	return sel, nil
}

// fieldSet is what field selectors match on for obj.
func (st *objectStore) fieldSet(obj runtime.Object) fields.Set {
	if st.kind.Fields != nil {
		return st.kind.Fields(obj)
	}
	accessor, _ := meta.Accessor(obj)
	set := fields.Set{"metadata.name": accessor.GetName()}
	if st.kind.Namespaced {
		set["metadata.namespace"] = accessor.GetNamespace()
	}
	return set
}

func (sel selector) empty() bool { return sel.labels.Empty() && sel.fields.Empty() }

func (sel selector) matches(st *objectStore, obj runtime.Object) bool {
	if sel.empty() {
		return true
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	return sel.labels.Matches(labels.Set(accessor.GetLabels())) && sel.fields.Matches(st.fieldSet(obj))
}

func (s *Server) list(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string) error {
	opts, err := listOptions(r)
	if err != nil {
		return err
	}
	sel, err := parseSelector(st, opts)
	if err != nil {
		return err
	}
	sopts := storage.ListOptions{Limit: opts.Limit, Continue: opts.Continue}
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && opts.Continue == "" {
		rev, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", opts.ResourceVersion))
		}
		sopts.Revision = rev
	}
	var res listResult
	if fromCache(opts) {
		// Unpaginated lists, and lists at any revision ("0", where upstream
		// ignores the limit), are served by the watch cache.
		// A consistent list whose cache lags more than freshWait reads
		// storage instead. Strict reads (the simulator's) wait without a
		// limit, so that no timer enters its virtual clock.
		limit := freshWait
		if s.cfg.StrictReads {
			limit = 0
		}
		res.items, res.revision, err = st.cache.list(ctx, st.listPrefix(namespace), sel, opts.ResourceVersion == "" || s.cfg.StrictReads, limit)
	}
	if !fromCache(opts) || errors.Is(err, errNotFresh) {
		if err != nil {
			s.log.Debug("watch cache is not fresh enough; listing from storage", "resource", st.gr.String())
		}
		res, err = st.List(ctx, namespace, sopts, func(obj runtime.Object) bool { return sel.matches(st, obj) })
	}
	if err != nil {
		return storageError(err, st.gr, "")
	}
	lm := metav1.ListMeta{ResourceVersion: strconv.FormatInt(res.revision, 10), Continue: res.continueToken, RemainingItemCount: res.remainingItemCount}
	if negotiate(r).table {
		writeJSON(w, http.StatusOK, s.table(st.kind, res.items, lm, r))
		return nil
	}
	list := st.kind.NewList()
	if err := meta.SetList(list, res.items); err != nil {
		return err
	}
	listAccessor, _ := meta.ListAccessor(list)
	listAccessor.SetResourceVersion(lm.ResourceVersion)
	listAccessor.SetContinue(lm.Continue)
	listAccessor.SetRemainingItemCount(lm.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(st.kind.GroupVersion.WithKind(st.kind.ListKind))
	s.write(w, r, http.StatusOK, list, nil)
	return nil
}

// fromCache reports whether a list is served by the watch cache: one
// without a continue token or an exact revision, that is either
// unpaginated or reads at any revision.
func fromCache(opts metav1.ListOptions) bool {
	if opts.Continue != "" || opts.ResourceVersionMatch != "" {
		return false
	}
	return opts.ResourceVersion == "0" || (opts.ResourceVersion == "" && opts.Limit == 0)
}

// readBody reads a request body, mapping an oversize body to 413.
func readBody(r *http.Request) ([]byte, error) {
	data, err := readAll(r.Body, r.ContentLength)
	if err != nil {
		var maxErr *http.MaxBytesError
		if asMaxBytes(err, &maxErr) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxErr.Limit))
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return data, nil
}

// readAll reads r to its end, as io.ReadAll does, into a buffer sized for
// a body of length bytes (unknown when not positive), so that a small body
// of the declared length is read without growing the buffer. Only up to
// maxPresized bytes are allocated before they arrive.
func readAll(r io.Reader, length int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(r)
	}
	// One byte more than declared, to see the end without a second buffer.
	data := make([]byte, 0, min(length, maxPresized)+1)
	for {
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

const maxPresized = 64 << 10

// writeOptions are the query parameters every write takes.
type writeOptions struct {
	dryRun bool
	fv     fieldValidation
}

func parseWriteOptions(r *http.Request) (writeOptions, error) {
	o := writeOptions{fv: validationWarn}
	if r.URL.RawQuery == "" {
		return o, nil // the usual write, parsed without parsing
	}
	q := r.URL.Query()
	for _, v := range q["dryRun"] {
		if v != metav1.DryRunAll {
			return o, apierrors.NewBadRequest(fmt.Sprintf("dryRun: Unsupported value: %q: supported values: %q", v, metav1.DryRunAll))
		}
		o.dryRun = true
	}
	fv, err := parseFieldValidation(q)
	o.fv = fv
	return o, err
}

func (s *Server) create(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string) error {
	wo, err := parseWriteOptions(r)
	if err != nil {
		return err
	}
	data, err := readBody(r)
	if err != nil {
		return err
	}
	obj, warnings, err := decodeBodyAs(st.kind, r.Header.Get("Content-Type"), data, wo.fv)
	if err != nil {
		return err
	}
	if st.kind.Namespaced {
		if err := s.checkNamespaceOpen(ctx, namespace); err != nil {
			return err
		}
	}
	user, _ := auth.UserFrom(ctx)
	admit := func(obj, old runtime.Object) error {
		return s.admit(ctx, AdmissionAttributes{Operation: "CREATE", Kind: st.kind, Namespace: namespace, Name: nameOf(obj), Object: obj, User: user, DryRun: wo.dryRun})
	}
	created, err := st.Create(ctx, namespace, obj, createOptions{dryRun: wo.dryRun, admit: admit, user: requester(user)})
	if err != nil {
		return err
	}
	addWarnings(w, warnings)
	s.respond(w, r, st, http.StatusCreated, created)
	return nil
}

// subApproval is the subresource of a kind with Approval rules.
const subApproval = "approval"

// requester is the user a kind's RecordRequester records; nil (no
// authenticated user) is the zero User.
func requester(u *auth.User) registry.User {
	if u == nil {
		return registry.User{}
	}
	return registry.User{Name: u.Name, UID: u.UID, Groups: slices.Clone(u.Groups)}
}

func (s *Server) admit(ctx context.Context, a AdmissionAttributes) error {
	for _, adm := range s.cfg.Admission {
		if err := adm.Admit(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// bodyRV is the resourceVersion an update body names ("" for none).
func bodyRV(obj runtime.Object) string {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return accessor.GetResourceVersion()
}

func nameOf(obj runtime.Object) string {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return accessor.GetName()
}

// checkNamespaceOpen refuses writes into a namespace that is missing or
// being deleted, as upstream's NamespaceLifecycle admission does.
func (s *Server) checkNamespaceOpen(ctx context.Context, namespace string) error {
	if s.namespace == nil || namespace == "" {
		return nil
	}
	obj, err := s.namespace.Get(ctx, "", namespace)
	if err != nil {
		return err
	}
	ns := obj.(*corev1.Namespace)
	if ns.Status.Phase == corev1.NamespaceTerminating || ns.DeletionTimestamp != nil {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, namespace, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
		err.ErrStatus.Message = fmt.Sprintf("unable to create new content in namespace %s because it is being terminated", namespace)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: err.ErrStatus.Message, Field: "metadata.namespace"}}
		return err
	}
	return nil
}

func addWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
	}
}

func (s *Server) update(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes) error {
	wo, err := parseWriteOptions(r)
	if err != nil {
		return err
	}
	data, err := readBody(r)
	if err != nil {
		return err
	}
	contentType := r.Header.Get("Content-Type")
	decode := func() (runtime.Object, []string, error) {
		if a.Subresource == subScale {
			return decodeObject(newScale(), scaleGVK, contentType, data, wo.fv)
		}
		return decodeBodyAs(st.kind, contentType, data, wo.fv)
	}
	obj, warnings, err := decode()
	if err != nil {
		return err
	}
	if a.Subresource == "finalize" {
		return s.finalizeNamespace(ctx, w, r, st, a.Name, obj, wo)
	}
	expectedRV := bodyRV(obj)
	fn := func(current runtime.Object) (runtime.Object, error) {
		if obj != nil {
			first := obj
			obj = nil
			return first, nil
		}
		// A retry: the store changed the first object; the body decodes
		// to the same one again.
		again, _, err := decode()
		return again, err
	}
	uo := s.updateOptions(ctx, st, namespace, a, wo)
	uo.expectedRV = expectedRV
	return s.runUpdate(ctx, w, r, st, namespace, a, fn, uo, &warnings)
}

// runUpdate runs the update fn of the request a and answers with the
// result, adding the warnings left in *warnings. On /scale, fn updates the
// object's Scale (viaScale) and the answer is the new Scale.
func (s *Server) runUpdate(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes, fn updateFunc, uo updateOptions, warnings *[]string) error {
	if a.Subresource == subScale {
		fn = st.viaScale(namespace, a.Name, fn)
	}
	updated, err := st.Update(ctx, namespace, a.Name, fn, uo)
	if err != nil {
		return err
	}
	addWarnings(w, *warnings)
	s.respondOn(w, r, st, a.Subresource, http.StatusOK, updated)
	return nil
}

func (s *Server) updateOptions(ctx context.Context, st *objectStore, namespace string, a auth.Attributes, wo writeOptions) updateOptions {
	opts := updateOptions{status: a.Subresource == "status", approval: a.Subresource == subApproval, dryRun: wo.dryRun}
	if len(s.cfg.Admission) == 0 {
		return opts
	}
	user, _ := auth.UserFrom(ctx)
	name, subresource, dryRun := a.Name, a.Subresource, wo.dryRun
	opts.admit = func(obj, old runtime.Object) error {
		return s.admit(ctx, AdmissionAttributes{Operation: "UPDATE", Kind: st.kind, Namespace: namespace, Name: name, Subresource: subresource, Object: obj, Old: old, User: user, DryRun: dryRun})
	}
	return opts
}

// patch applies a JSON patch, merge patch or strategic-merge patch to the
// stored object (on /scale, to its Scale) and updates it, retrying on
// conflict unless the patch names a resourceVersion.
func (s *Server) patch(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes) error {
	wo, err := parseWriteOptions(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	patchType := types.PatchType(mediaType(r.Header.Get("Content-Type")))
	if err := checkPatchType(patchType); err != nil {
		return err
	}
	var warnings []string
	fn := st.patchFunc(patchType, body, wo.fv, &warnings)
	if a.Subresource == subScale {
		fn = scalePatchFunc(patchType, body, wo.fv, &warnings)
	}
	return s.runUpdate(ctx, w, r, st, namespace, a, fn, s.updateOptions(ctx, st, namespace, a, wo), &warnings)
}

// checkPatchType accepts the patch types the server applies.
func checkPatchType(patchType types.PatchType) error {
	switch patchType {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
		return nil
	case types.ApplyYAMLPatchType, types.ApplyCBORPatchType:
		return unsupportedMediaType("server-side apply is not supported yet by knode; use client-side apply (kubectl apply without --server-side)")
	default:
		return unsupportedMediaType(fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s", types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType))
	}
}

// patchFunc is the update that applies body, a patch of patchType, to the
// current object; the decoding's warnings go to *warnings.
func (st *objectStore) patchFunc(patchType types.PatchType, body []byte, fv fieldValidation, warnings *[]string) updateFunc {
	return func(current runtime.Object) (runtime.Object, error) {
		if patchType == types.StrategicMergePatchType {
			obj, warns, ok, err := st.strategicMerge(current, body, fv)
			if ok {
				*warnings = warns
				return obj, err
			}
		}
		obj, warns, err := patchObject(current, patchType, body, st.kind.New, st.kind.GroupVersion.WithKind(st.kind.Kind), fv)
		*warnings = warns
		return obj, err
	}
}

// patchObject applies body, a patch of patchType, to current and decodes
// the result, as a request body is decoded, into a new object of kind gvk
// made by newObj.
func patchObject(current runtime.Object, patchType types.PatchType, body []byte, newObj func() runtime.Object, gvk schema.GroupVersionKind, fv fieldValidation) (runtime.Object, []string, error) {
	currentJSON, err := patchTargetJSON(current)
	if err != nil {
		return nil, nil, err
	}
	patched, err := applyPatch(patchType, currentJSON, body, newObj())
	if err != nil {
		return nil, nil, err
	}
	return decodeObject(newObj(), gvk, "application/json", patched, fv)
}

// deleteRequestOptions reads DeleteOptions from the body and the query.
func deleteRequestOptions(r *http.Request) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	data, err := readBody(r)
	if err != nil {
		return opts, err
	}
	if mediaType(r.Header.Get("Content-Type")) == protobufMediaType && len(data) > 0 {
		if _, _, err := protobufSerializer.Decode(data, nil, &opts); err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("couldn't decode DeleteOptions: %v", err))
		}
	} else if len(strings.TrimSpace(string(data))) > 0 {
		if err := json.Unmarshal(data, &opts); err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("couldn't decode DeleteOptions: %v", err))
		}
	}
	if err := queryCodec.DecodeParameters(r.URL.Query(), corev1.SchemeGroupVersion, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	for _, v := range opts.DryRun {
		if v != metav1.DryRunAll {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("dryRun: Unsupported value: %q: supported values: %q", v, metav1.DryRunAll))
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	return opts, nil
}

func (s *Server) delete(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace, name string) error {
	opts, err := deleteRequestOptions(r)
	if err != nil {
		return err
	}
	if st == s.namespace {
		if err := protectNamespace(name); err != nil {
			return err
		}
	}
	user, _ := auth.UserFrom(ctx)
	if len(s.cfg.Admission) > 0 {
		old, err := st.Get(ctx, namespace, name)
		if err != nil {
			return err
		}
		if err := s.admit(ctx, AdmissionAttributes{Operation: "DELETE", Kind: st.kind, Namespace: namespace, Name: name, Old: old, User: user, DryRun: len(opts.DryRun) > 0}); err != nil {
			return err
		}
	}
	obj, gone, err := st.Delete(ctx, namespace, name, deleteOptions{gracePeriod: opts.GracePeriodSeconds, preconditions: opts.Preconditions, dryRun: len(opts.DryRun) > 0})
	if err != nil {
		return err
	}
	if !gone {
		s.respond(w, r, st, http.StatusOK, obj)
		return nil
	}
	writeJSON(w, http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: name, Group: st.gr.Group, Kind: st.kind.Resource, UID: objectUID(obj)},
	})
	return nil
}

func (s *Server) deleteCollection(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string) error {
	opts, err := deleteRequestOptions(r)
	if err != nil {
		return err
	}
	lopts, err := listOptions(r)
	if err != nil {
		return err
	}
	sel, err := parseSelector(st, lopts)
	if err != nil {
		return err
	}
	res, err := st.List(ctx, namespace, storage.ListOptions{}, func(obj runtime.Object) bool { return sel.matches(st, obj) })
	if err != nil {
		return err
	}
	user, _ := auth.UserFrom(ctx)
	var deleted []runtime.Object
	for _, item := range res.items {
		accessor, _ := meta.Accessor(item)
		if st == s.namespace && protectNamespace(accessor.GetName()) != nil {
			continue
		}
		if err := s.admit(ctx, AdmissionAttributes{Operation: "DELETE", Kind: st.kind, Namespace: accessor.GetNamespace(), Name: accessor.GetName(), Old: item, User: user, DryRun: len(opts.DryRun) > 0}); err != nil {
			return err
		}
		obj, _, err := st.Delete(ctx, accessor.GetNamespace(), accessor.GetName(), deleteOptions{gracePeriod: opts.GracePeriodSeconds, dryRun: len(opts.DryRun) > 0})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		deleted = append(deleted, obj)
	}
	list := st.kind.NewList()
	if err := meta.SetList(list, deleted); err != nil {
		return err
	}
	list.GetObjectKind().SetGroupVersionKind(st.kind.GroupVersion.WithKind(st.kind.ListKind))
	writeJSON(w, http.StatusOK, list)
	return nil
}

// queryCodec decodes list, watch and delete options from a query string;
// client-go's scheme registers them, with their conversions, under v1.
var queryCodec = scheme.ParameterCodec
