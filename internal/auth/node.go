package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"knode/internal/storage"
)

// PodGetter reads one stored pod. When there is none it returns an error
// for which apierrors.IsNotFound is true or that wraps storage.ErrNotFound.
// It must not go through authorization (it is the server reading its own
// store).
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// PodLister returns the stored pods of one namespace, with the contract of
// PodGetter. It may return every pod of the namespace: the authorizer
// keeps only those bound to the node that asks. The pods are read-only.
type PodLister func(ctx context.Context, namespace string) ([]*corev1.Pod, error)

// PersistentVolumeGetter reads one stored PersistentVolume, with the
// not-found contract of PodGetter.
type PersistentVolumeGetter func(ctx context.Context, name string) (*corev1.PersistentVolume, error)

// VolumeAttachmentGetter reads one stored VolumeAttachment, with the
// not-found contract of PodGetter.
type VolumeAttachmentGetter func(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)

// NodeAuthorizerConfig builds a NodeAuthorizer. Each lookup stands in for
// a part of upstream's graph of the objects reachable from a node; a nil
// lookup refuses every read that needs it, as if nothing were reachable.
type NodeAuthorizerConfig struct {
	// Pods looks up a pod a node asks for by name, to see whether it is
	// bound to that node.
	Pods PodGetter
	// NamespacePods lists the pods of the namespace of a
	// PersistentVolumeClaim a node asks for (directly, or through a
	// PersistentVolume's claimRef), to see whether a pod bound to that node
	// uses the claim. It is called once per such request.
	NamespacePods PodLister
	// PersistentVolumes looks up a PersistentVolume a node asks for, to
	// follow its spec.claimRef.
	PersistentVolumes PersistentVolumeGetter
	// VolumeAttachments looks up a VolumeAttachment a node asks for, to
	// compare its spec.nodeName.
	VolumeAttachments VolumeAttachmentGetter
}

// NodeAuthorizer is upstream's Node authorization mode together with the
// system:node rules it evaluates (section 13 of the reference), with the
// AuthorizeNodeWithSelectors behaviour that is the default since 1.32.
// It speaks only for node identities (NodeName): every other user gets
// NoOpinion. For nodes it answers Allow or NoOpinion, never Deny, so a
// later authorizer could still allow; at the end of the chain NoOpinion is
// a 403 that carries the reason.
//
// It decides from the request alone, except for the reads that upstream
// answers from its graph, which look objects up instead (see
// NodeAuthorizerConfig):
//   - get of a pod bound to the node;
//   - get of a PersistentVolumeClaim that a pod bound to the node uses,
//     through a persistentVolumeClaim volume or as the claim of an
//     ephemeral volume (<pod>-<volume>); mirror pods lend no claims;
//   - update and patch of such a claim's status (the kubelet records
//     filesystem expansion there; NodeRestriction limits what changes);
//   - get of a PersistentVolume whose spec.claimRef names such a claim
//     (upstream follows the PV's claimRef, not the claim's volumeName);
//   - get of a VolumeAttachment whose spec.nodeName is the node.
//
// A node may not list or watch claims, volumes or attachments, as
// upstream. It may get, create, update, patch and delete the CSINode named
// after itself (the name of a create is checked by NodeRestriction), and
// read CSIDrivers. StorageClasses are not granted: upstream's system:node
// role has no rule for them.
//
// Writes it allows to a whole resource (create and update of nodes, create
// and delete of pods, pod status, create of leases and CSINodes, claim
// status) are narrowed to the node's own objects by NodeRestriction
// admission, which must run; see internal/admission/noderestriction.
//
// Not covered, because knode has no graph of what a node's pods reference:
// secrets, configmaps, service account tokens, resource claims and slices
// are refused to nodes (NoOpinion).
type NodeAuthorizer struct {
	cfg NodeAuthorizerConfig
}

// NewNodeAuthorizer returns the authorizer; the zero Config is valid.
func NewNodeAuthorizer(cfg NodeAuthorizerConfig) *NodeAuthorizer {
	return &NodeAuthorizer{cfg: cfg}
}

// Authorize implements Authorizer. The error is only ever that of a
// lookup, other than not found; the decision is then NoOpinion.
func (n *NodeAuthorizer) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	nodeName, ok := NodeName(a.User)
	if !ok {
		return NoOpinion, "", nil
	}
	v := nodeVerdict(nodeName, a)
	switch v.lookup {
	case lookupPod:
		return n.podBound(ctx, nodeName, a.Namespace, a.Name)
	case lookupClaim:
		return n.claimUsed(ctx, nodeName, a.Namespace, a.Name)
	case lookupVolume:
		return n.volumeOfClaimUsed(ctx, nodeName, a.Name)
	case lookupAttachment:
		return n.attachmentOnNode(ctx, nodeName, a.Name)
	}
	return v.decision, v.reason, nil
}

// podBound allows when the pod exists and is bound to nodeName.
func (n *NodeAuthorizer) podBound(ctx context.Context, nodeName, namespace, name string) (Decision, string, error) {
	if n.cfg.Pods == nil {
		return related(nodeName, false, nil, "")
	}
	pod, err := n.cfg.Pods(ctx, namespace, name)
	if err != nil {
		return related(nodeName, false, err, "pod "+namespace+"/"+name)
	}
	return related(nodeName, pod.Spec.NodeName == nodeName, nil, "")
}

// claimUsed allows when a pod bound to nodeName uses claim namespace/name.
// The claim itself need not exist, as in upstream's graph.
func (n *NodeAuthorizer) claimUsed(ctx context.Context, nodeName, namespace, name string) (Decision, string, error) {
	if n.cfg.NamespacePods == nil {
		return related(nodeName, false, nil, "")
	}
	pods, err := n.cfg.NamespacePods(ctx, namespace)
	if err != nil {
		return related(nodeName, false, err, "pods of namespace "+namespace)
	}
	return related(nodeName, claimUsedOnNode(pods, nodeName, namespace, name), nil, "")
}

// volumeOfClaimUsed allows when PersistentVolume name exists and its
// claimRef names a claim that a pod bound to nodeName uses.
func (n *NodeAuthorizer) volumeOfClaimUsed(ctx context.Context, nodeName, name string) (Decision, string, error) {
	if n.cfg.PersistentVolumes == nil {
		return related(nodeName, false, nil, "")
	}
	pv, err := n.cfg.PersistentVolumes(ctx, name)
	if err != nil {
		return related(nodeName, false, err, "persistentvolume "+name)
	}
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Namespace == "" || ref.Name == "" {
		return related(nodeName, false, nil, "")
	}
	return n.claimUsed(ctx, nodeName, ref.Namespace, ref.Name)
}

// attachmentOnNode allows when VolumeAttachment name exists and attaches
// to nodeName.
func (n *NodeAuthorizer) attachmentOnNode(ctx context.Context, nodeName, name string) (Decision, string, error) {
	if n.cfg.VolumeAttachments == nil {
		return related(nodeName, false, nil, "")
	}
	va, err := n.cfg.VolumeAttachments(ctx, name)
	if err != nil {
		return related(nodeName, false, err, "volumeattachment "+name)
	}
	return related(nodeName, va.Spec.NodeName == nodeName, nil, "")
}

// related turns the outcome of a relationship lookup into the answer:
// Allow when ok, else NoOpinion with upstream's no-relationship reason. A
// lookup error other than not found is returned, wrapped with what, so
// that the caller can log it.
func related(nodeName string, ok bool, err error, what string) (Decision, string, error) {
	if err != nil {
		if apierrors.IsNotFound(err) || errors.Is(err, storage.ErrNotFound) {
			return NoOpinion, noRelationship(nodeName), nil
		}
		return NoOpinion, noRelationship(nodeName), fmt.Errorf("node authorizer: looking up %s: %w", what, err)
	}
	if !ok {
		return NoOpinion, noRelationship(nodeName), nil
	}
	return Allow, "", nil
}

// claimUsedOnNode reports whether one of pods that is in namespace and
// bound to nodeName uses the PersistentVolumeClaim claim (see
// podClaimNames): the node authorizer's test that a claim is reachable
// from a node.
func claimUsedOnNode(pods []*corev1.Pod, nodeName, namespace, claim string) bool {
	for _, pod := range pods {
		if pod.Spec.NodeName != nodeName || pod.Namespace != namespace {
			continue
		}
		if slices.Contains(podClaimNames(pod), claim) {
			return true
		}
	}
	return false
}

// podClaimNames returns the names of the PersistentVolumeClaims a pod
// grants its node access to, in volume order: the claim of each
// persistentVolumeClaim volume and, for each ephemeral volume, the claim
// named <pod name>-<volume name> that the ephemeral volume controller
// creates. A mirror pod grants none, as upstream: a node must not be able
// to reach objects by creating a pod.
func podClaimNames(pod *corev1.Pod) []string {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			names = append(names, pod.Name+"-"+v.Name)
		}
	}
	return names
}

// lookup names the relationship a verdict still depends on.
type lookup int

const (
	// lookupNone: the verdict is final.
	lookupNone lookup = iota
	// lookupPod: pod a.Namespace/a.Name is bound to the node.
	lookupPod
	// lookupClaim: a pod bound to the node uses claim a.Namespace/a.Name.
	lookupClaim
	// lookupVolume: PersistentVolume a.Name's claimRef is such a claim.
	lookupVolume
	// lookupAttachment: VolumeAttachment a.Name attaches to the node.
	lookupAttachment
)

// verdict is what nodeVerdict decides without I/O. When lookup is not
// lookupNone the answer depends on that relationship, and decision and
// reason are unset.
type verdict struct {
	decision Decision
	reason   string
	lookup   lookup
}

func allow() verdict               { return verdict{decision: Allow} }
func refuse(reason string) verdict { return verdict{decision: NoOpinion, reason: reason} }
func needs(l lookup) verdict       { return verdict{lookup: l} }

// noRelationship is upstream's reason for refusing an object not bound to
// the node.
func noRelationship(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

// nodeVerdict is the node authorizer's pure decision for a request made by
// the node nodeName. The reasons are upstream's words.
func nodeVerdict(nodeName string, a Attributes) verdict {
	if nodeName == "" {
		return refuse(fmt.Sprintf("unknown node for user %q", a.User.Name))
	}
	if !a.ResourceRequest {
		return refuse("")
	}
	switch {
	case a.APIGroup == "" && a.Resource == "nodes":
		return nodeObjectVerdict(nodeName, a)
	case a.APIGroup == "" && a.Resource == "pods":
		return podVerdict(nodeName, a)
	case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
		return leaseVerdict(nodeName, a)
	case a.APIGroup == "" && a.Resource == "persistentvolumeclaims":
		return claimVerdict(a)
	case a.APIGroup == "" && a.Resource == "persistentvolumes":
		return getVerdict(a, lookupVolume)
	case a.APIGroup == storagev1.GroupName && a.Resource == "volumeattachments":
		return getVerdict(a, lookupAttachment)
	case a.APIGroup == storagev1.GroupName && a.Resource == "csinodes":
		return csiNodeVerdict(nodeName, a)
	}
	if nodeRulesAllow(a) {
		return allow()
	}
	return refuse("")
}

// nodeObjectVerdict: a node reads only its own Node (a list or watch must
// pin metadata.name, which RequestAttributes turns into Name); it may
// create, update and patch nodes and their status, which NodeRestriction
// narrows to its own; it may not delete nodes.
func nodeObjectVerdict(nodeName string, a Attributes) verdict {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return allow()
		case "get", "list", "watch":
			switch a.Name {
			case nodeName:
				return allow()
			case "":
				return refuse(fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", nodeName))
			default:
				return refuse(fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", nodeName, a.Name))
			}
		}
	case "status":
		switch a.Verb {
		case "update", "patch":
			return allow()
		}
	}
	return refuse("")
}

// podVerdict: a node gets the pods bound to it, lists and watches only
// with spec.nodeName=<itself>, creates and deletes pods and writes pod
// status and evictions (NodeRestriction narrows all four to its own).
func podVerdict(nodeName string, a Attributes) verdict {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			if a.Name == "" {
				return refuse("No Object name found")
			}
			return needs(lookupPod)
		case "list", "watch":
			if v, ok := a.FieldValue("spec.nodeName"); ok && v == nodeName {
				return allow()
			}
			if a.Name != "" {
				return needs(lookupPod)
			}
			return refuse("can only list/watch pods with spec.nodeName field selector")
		case "create", "delete":
			return allow()
		}
	case "status":
		switch a.Verb {
		case "update", "patch":
			return allow()
		}
	case "eviction":
		if a.Verb == "create" {
			return allow()
		}
	}
	return refuse("")
}

// leaseVerdict: a node reads and writes only its own Lease in
// kube-node-lease. The name of a create is not known here;
// NodeRestriction checks it.
func leaseVerdict(nodeName string, a Attributes) verdict {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return refuse("can only get, create, update, patch, or delete a node lease")
	}
	if a.Namespace != corev1.NamespaceNodeLease {
		return refuse(fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease))
	}
	if a.Verb != "create" && a.Name != nodeName {
		return refuse("can only access node lease with the same name as the requesting node")
	}
	return allow()
}

// claimVerdict: a node gets the claims its pods use and updates or
// patches their status (NodeRestriction keeps that to the fields the
// kubelet's expansion writes); nothing else.
func claimVerdict(a Attributes) verdict {
	if a.Subresource != "status" {
		return getVerdict(a, lookupClaim)
	}
	switch a.Verb {
	case "update", "patch":
	default:
		// Upstream's words, although get is not among them.
		return refuse("can only get/update/patch this type")
	}
	return named(a, lookupClaim)
}

// getVerdict: only get of one object, which then depends on l.
func getVerdict(a Attributes, l lookup) verdict {
	if a.Verb != "get" {
		return refuse("can only get individual resources of this type")
	}
	if a.Subresource != "" {
		return refuse("cannot get subresource")
	}
	return named(a, l)
}

// named depends on l when the request names an object.
func named(a Attributes, l lookup) verdict {
	if a.Name == "" {
		return refuse("No Object name found")
	}
	return needs(l)
}

// csiNodeVerdict: a node gets, creates, updates, patches and deletes only
// the CSINode named after itself. The name of a create is not known here;
// NodeRestriction checks it.
func csiNodeVerdict(nodeName string, a Attributes) verdict {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return refuse("can only get, create, update, patch, or delete a CSINode")
	}
	if a.Subresource != "" {
		return refuse("cannot authorize CSINode subresources")
	}
	if a.Verb != "create" && a.Name != nodeName {
		return refuse("can only access CSINode with the same name as the requesting node")
	}
	return allow()
}

// nodeRule grants verbs on resources of one API group. A resource is
// matched together with its subresource ("pods/status"), as in RBAC.
type nodeRule struct {
	group     string
	resources []string
	verbs     []string
}

var readVerbs = []string{"get", "list", "watch"}

// nodeRules are the parts of upstream's system:node rules that need no
// relationship to the node; nodes, pods, leases, claims, volumes, volume
// attachments and CSINodes are decided above.
var nodeRules = []nodeRule{
	{group: "authentication.k8s.io", resources: []string{"tokenreviews"}, verbs: []string{"create"}},
	{group: "authorization.k8s.io", resources: []string{"subjectaccessreviews", "localsubjectaccessreviews"}, verbs: []string{"create"}},
	// Service environment variables of the pods it runs; the control
	// plane's members, in default/kubernetes, for the agent's balancer.
	{group: "", resources: []string{"services", "endpoints"}, verbs: readVerbs},
	// The node records events about itself and its pods.
	{group: "", resources: []string{"events"}, verbs: []string{"create", "update", "patch"}},
	{group: "certificates.k8s.io", resources: []string{"certificatesigningrequests"}, verbs: []string{"create", "get", "list", "watch"}},
	{group: "storage.k8s.io", resources: []string{"csidrivers"}, verbs: readVerbs},
	{group: "node.k8s.io", resources: []string{"runtimeclasses"}, verbs: readVerbs},
}

func nodeRulesAllow(a Attributes) bool {
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	for _, r := range nodeRules {
		if r.group == a.APIGroup && slices.Contains(r.resources, resource) && slices.Contains(r.verbs, a.Verb) {
			return true
		}
	}
	return false
}
