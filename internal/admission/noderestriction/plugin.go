// Package noderestriction is upstream's NodeRestriction admission plugin
// (section 13 of the reference): it confines what a node identity
// (auth.NodeName) may write to the node's own objects. Requests from any
// other user pass untouched.
//
// For a node it enforces:
//   - nodes: only its own Node (by name), on every operation. On create,
//     no spec.configSource and no forbidden label (ForbiddenNodeLabel). On
//     update, no new configSource, no change to spec.taints or to
//     metadata.ownerReferences, and no forbidden label added, changed or
//     removed. Status updates of its own Node are otherwise free.
//   - leases: only kube-node-lease/<its name>.
//   - pods: create only mirror pods bound to itself, owned by its own Node
//     and referring to no secret, configmap, service account, cluster
//     trust bundle, claim or resource claim; delete only pods bound to
//     itself; no update of the pod object. pods/status only for pods bound
//     to itself, without changing labels or resource claim statuses.
//     pods/eviction only for pods bound to itself. No other subresource.
//   - persistentvolumeclaims: only updates of the status subresource, and
//     those may change nothing but status.capacity, status.conditions,
//     status.allocatedResources and status.allocatedResourceStatuses
//     (what the kubelet records when it expands a filesystem); every other
//     write is refused. Which claims: the node authorizer allows only those
//     its pods use.
//   - csinodes: create, update and delete only the CSINode named after
//     itself.
//
// Every refusal is a 403 Forbidden Status whose message is upstream's.
//
// What the caller must do: run it after defaulting and before validation,
// with the typed k8s.io/api object in Object and, on updates, the stored
// one in Old; wire Config.Pods (deletes and evictions look pods up unless
// Old carries the pod) and Config.Nodes (mirror pods are checked against
// the Node's UID). It relies on the node authorizer
// (auth.NodeAuthorizer) to have refused what a node may not do at all,
// such as deleting nodes; it does not repeat those checks.
//
// The kubelet label allow-list lives here too (labels.go), for the agent's
// --node-labels check.
package noderestriction

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/storage"
)

// NodeGetter reads one stored Node, with the not-found contract of
// auth.PodGetter.
type NodeGetter func(ctx context.Context, name string) (*corev1.Node, error)

// Config builds a Plugin.
type Config struct {
	// Pods looks up the pod a node deletes or evicts, when the admission
	// attributes do not carry it in Old. nil refuses those requests.
	Pods auth.PodGetter
	// Nodes looks up the node's own Node to check the UID of a mirror
	// pod's owner reference. nil refuses mirror pods.
	Nodes NodeGetter
}

// Plugin is the admission plugin. It keeps no state and is safe for
// concurrent use.
type Plugin struct {
	pods  auth.PodGetter
	nodes NodeGetter
}

var _ apiserver.Admitter = (*Plugin)(nil)

// New returns the plugin; the zero Config is valid.
func New(cfg Config) *Plugin {
	return &Plugin{pods: cfg.Pods, nodes: cfg.Nodes}
}

// Operations as apiserver.AdmissionAttributes names them.
const (
	opCreate = "CREATE"
	opUpdate = "UPDATE"
	opDelete = "DELETE"
)

var (
	podsResource     = schema.GroupResource{Resource: "pods"}
	nodesResource    = schema.GroupResource{Resource: "nodes"}
	leasesResource   = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	claimsResource   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	csiNodesResource = schema.GroupResource{Group: "storage.k8s.io", Resource: "csinodes"}
)

// errNoGetter is wrapped when a lookup the decision needs was not wired.
var errNoGetter = errors.New("noderestriction: no getter configured")

// Admit implements apiserver.Admitter.
func (p *Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	nodeName, isNode := auth.NodeName(a.User)
	if !isNode || a.Kind == nil {
		return nil
	}
	if nodeName == "" {
		return forbidden(a, fmt.Sprintf("could not determine node from user %q", a.User.Name))
	}
	switch groupResource(a) {
	case podsResource:
		switch a.Subresource {
		case "":
			return p.admitPod(ctx, nodeName, a)
		case "status":
			return admitPodStatus(nodeName, a)
		case "eviction":
			return p.admitPodEviction(ctx, nodeName, a)
		default:
			return forbidden(a, fmt.Sprintf("unexpected pod subresource %q, only 'status' and 'eviction' are allowed", a.Subresource))
		}
	case nodesResource:
		return admitNode(nodeName, a)
	case leasesResource:
		return admitLease(nodeName, a)
	case claimsResource:
		return admitClaim(nodeName, a)
	case csiNodesResource:
		return admitCSINode(nodeName, a)
	}
	return nil
}

// admitNode lets a node write only its own Node, and only as the package
// comment says.
func admitNode(nodeName string, a apiserver.AdmissionAttributes) error {
	if a.Name != nodeName {
		return forbidden(a, fmt.Sprintf("node %q is not allowed to modify node %q", nodeName, a.Name))
	}
	switch a.Operation {
	case opCreate:
		node, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
		}
		if node.Spec.ConfigSource != nil {
			return forbidden(a, fmt.Sprintf("node %q is not allowed to create pods with a non-nil configSource", nodeName))
		}
		if bad := ForbiddenNodeLabels(node.Labels); len(bad) > 0 {
			return forbidden(a, fmt.Sprintf("node %q is not allowed to set the following labels: %s", nodeName, strings.Join(bad, ", ")))
		}
	case opUpdate:
		node, ok := a.Object.(*corev1.Node)
		if !ok {
			return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
		}
		old, ok := a.Old.(*corev1.Node)
		if !ok {
			return forbidden(a, fmt.Sprintf("unexpected type %T", a.Old))
		}
		// Old agents may drop configSource on a status write; only a new
		// non-nil value is refused.
		if node.Spec.ConfigSource != nil && !apiequality.Semantic.DeepEqual(node.Spec.ConfigSource, old.Spec.ConfigSource) {
			return forbidden(a, fmt.Sprintf("node %q is not allowed to update configSource to a new non-nil configSource", nodeName))
		}
		// Taints are the node's only at registration: a node that could
		// remove them could attract workloads meant to stay away.
		if !apiequality.Semantic.DeepEqual(node.Spec.Taints, old.Spec.Taints) {
			return forbidden(a, fmt.Sprintf("node %q is not allowed to modify taints", nodeName))
		}
		// An owner that does not exist would let the garbage collector
		// delete the Node (CVE-2025-5187).
		if !apiequality.Semantic.DeepEqual(node.OwnerReferences, old.OwnerReferences) {
			return forbidden(a, fmt.Sprintf("node %q is not allowed to modify ownerReferences", nodeName))
		}
		if bad := ForbiddenNodeLabels(modifiedLabels(node.Labels, old.Labels)); len(bad) > 0 {
			return forbidden(a, fmt.Sprintf("is not allowed to modify labels: %s", strings.Join(bad, ", ")))
		}
	}
	return nil
}

// admitLease lets a node write only kube-node-lease/<its name>.
func admitLease(nodeName string, a apiserver.AdmissionAttributes) error {
	if a.Namespace != corev1.NamespaceNodeLease {
		return forbidden(a, fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
	}
	name := a.Name
	if a.Operation == opCreate {
		accessor, err := meta.Accessor(a.Object)
		if err != nil {
			return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
		}
		name = accessor.GetName()
	}
	if name != nodeName {
		return forbidden(a, "can only access node lease with the same name as the requesting node")
	}
	return nil
}

// admitPod lets a node create mirror pods of its own and delete pods bound
// to it, nothing else.
func (p *Plugin) admitPod(ctx context.Context, nodeName string, a apiserver.AdmissionAttributes) error {
	switch a.Operation {
	case opCreate:
		return p.admitMirrorPod(ctx, nodeName, a)
	case opDelete:
		pod, err := p.storedPod(ctx, a, a.Name)
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != nodeName {
			return forbidden(a, fmt.Sprintf("node %q can only delete pods with spec.nodeName set to itself", nodeName))
		}
		return nil
	}
	return forbidden(a, fmt.Sprintf("unexpected operation %q, node %q can only create and delete mirror pods", a.Operation, nodeName))
}

func (p *Plugin) admitMirrorPod(ctx context.Context, nodeName string, a apiserver.AdmissionAttributes) error {
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
	}
	if msg := mirrorPodOwnership(nodeName, pod); msg != "" {
		return forbidden(a, msg)
	}
	owner := pod.OwnerReferences[0]
	if p.nodes == nil {
		return forbidden(a, fmt.Sprintf("error looking up node %s to verify uid: %v", nodeName, errNoGetter))
	}
	node, err := p.nodes(ctx, nodeName)
	if isNotFound(err) {
		return apierrors.NewNotFound(nodesResource, nodeName)
	}
	if err != nil {
		return forbidden(a, fmt.Sprintf("error looking up node %s to verify uid: %v", nodeName, err))
	}
	if owner.UID != node.UID {
		return forbidden(a, fmt.Sprintf("node %s UID mismatch: expected %s got %s", nodeName, owner.UID, node.UID))
	}
	if ref := forbiddenReference(pod); ref != "" {
		return forbidden(a, fmt.Sprintf("node %q can not create pods that reference %s", nodeName, ref))
	}
	return nil
}

// mirrorPodOwnership returns why pod is not a mirror pod nodeName may
// create, as far as that can be told without looking anything up: it must
// carry the mirror annotation, be bound to nodeName and have exactly one
// owner reference, a controller reference to Node nodeName (apiVersion v1)
// that does not block owner deletion. "" means it passes.
func mirrorPodOwnership(nodeName string, pod *corev1.Pod) string {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; !ok {
		return fmt.Sprintf("pod does not have %q annotation, node %q can only create mirror pods", corev1.MirrorPodAnnotationKey, nodeName)
	}
	if pod.Spec.NodeName != nodeName {
		return fmt.Sprintf("node %q can only create pods with spec.nodeName set to itself", nodeName)
	}
	switch len(pod.OwnerReferences) {
	case 0:
		return fmt.Sprintf("node %q can only create pods with an owner reference set to itself", nodeName)
	case 1:
	default:
		return fmt.Sprintf("node %q can only create pods with a single owner reference set to itself", nodeName)
	}
	owner := pod.OwnerReferences[0]
	if owner.APIVersion != corev1.SchemeGroupVersion.String() || owner.Kind != "Node" || owner.Name != nodeName {
		return fmt.Sprintf("node %q can only create pods with an owner reference set to itself", nodeName)
	}
	if owner.Controller == nil || !*owner.Controller {
		return fmt.Sprintf("node %q can only create pods with a controller owner reference set to itself", nodeName)
	}
	if owner.BlockOwnerDeletion != nil && *owner.BlockOwnerDeletion {
		return fmt.Sprintf("node %q must not set blockOwnerDeletion on an owner reference", nodeName)
	}
	return ""
}

// admitPodStatus lets a node update the status of pods bound to it,
// without touching their labels or resource claim statuses.
func admitPodStatus(nodeName string, a apiserver.AdmissionAttributes) error {
	if a.Operation != opUpdate {
		return forbidden(a, fmt.Sprintf("unexpected operation %q", a.Operation))
	}
	old, ok := a.Old.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Sprintf("unexpected type %T", a.Old))
	}
	if old.Spec.NodeName != nodeName {
		return forbidden(a, fmt.Sprintf("node %q can only update pod status for pods with spec.nodeName set to itself", nodeName))
	}
	pod, ok := a.Object.(*corev1.Pod)
	if !ok {
		return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
	}
	if !labels.Equals(old.Labels, pod.Labels) {
		return forbidden(a, fmt.Sprintf("node %q cannot update labels through pod status", nodeName))
	}
	if !sameClaimStatuses(old.Status.ResourceClaimStatuses, pod.Status.ResourceClaimStatuses) {
		// Upstream's spelling.
		return forbidden(a, fmt.Sprintf("node %q cannot update resource claim statues", nodeName))
	}
	return nil
}

// sameClaimStatuses compares names and claim names, in order.
func sameClaimStatuses(a, b []corev1.PodResourceClaimStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
		x, y := a[i].ResourceClaimName, b[i].ResourceClaimName
		if (x == nil) != (y == nil) || (x != nil && *x != *y) {
			return false
		}
	}
	return true
}

// admitPodEviction lets a node evict only pods bound to it. The pod is the
// one the URL names, or else the one the Eviction names.
func (p *Plugin) admitPodEviction(ctx context.Context, nodeName string, a apiserver.AdmissionAttributes) error {
	if a.Operation != opCreate {
		return forbidden(a, fmt.Sprintf("unexpected operation %s", a.Operation))
	}
	name := a.Name
	if name == "" {
		accessor, err := meta.Accessor(a.Object)
		if err != nil {
			return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
		}
		name = accessor.GetName()
	}
	if name == "" {
		return forbidden(a, "could not determine pod from request data")
	}
	pod, err := p.lookupPod(ctx, a, name)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != nodeName {
		return forbidden(a, fmt.Sprintf("node %s can only evict pods with spec.nodeName set to itself", nodeName))
	}
	return nil
}

// storedPod is the pod a request on the main resource acts on: Old when
// the API server supplied it, otherwise looked up.
func (p *Plugin) storedPod(ctx context.Context, a apiserver.AdmissionAttributes, name string) (*corev1.Pod, error) {
	if pod, ok := a.Old.(*corev1.Pod); ok && pod != nil {
		return pod, nil
	}
	return p.lookupPod(ctx, a, name)
}

// lookupPod reads pod a.Namespace/name. Not found is a 404, as upstream
// answers; any other failure refuses the request.
func (p *Plugin) lookupPod(ctx context.Context, a apiserver.AdmissionAttributes, name string) (*corev1.Pod, error) {
	if p.pods == nil {
		return nil, forbidden(a, errNoGetter.Error())
	}
	pod, err := p.pods(ctx, a.Namespace, name)
	if isNotFound(err) {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	if err != nil {
		return nil, forbidden(a, err.Error())
	}
	return pod, nil
}

func isNotFound(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || errors.Is(err, storage.ErrNotFound))
}

func groupResource(a apiserver.AdmissionAttributes) schema.GroupResource {
	return schema.GroupResource{Group: a.Kind.GroupVersion.Group, Resource: a.Kind.Resource}
}

// forbidden is the 403 upstream's admission layer sends: the resource
// without subresource, the object's name, and msg as the reason, giving
// e.g. `nodes "node-1" is forbidden: node "node-2" is not allowed to
// modify node "node-1"`.
func forbidden(a apiserver.AdmissionAttributes, msg string) error {
	return apierrors.NewForbidden(groupResource(a), objectName(a), errors.New(msg))
}

// objectName is the name in the request, else the object's name or
// generateName, else "Unknown", as upstream names refused objects.
func objectName(a apiserver.AdmissionAttributes) string {
	if a.Name != "" {
		return a.Name
	}
	if a.Object == nil {
		return "Unknown"
	}
	accessor, err := meta.Accessor(a.Object)
	if err != nil {
		return "Unknown/errorGettingName"
	}
	if accessor.GetName() != "" {
		return accessor.GetName()
	}
	if accessor.GetGenerateName() != "" {
		return accessor.GetGenerateName()
	}
	return "Unknown"
}
