package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"knode/internal/storage"
)

// PodGetter reads one stored pod. When there is none it returns an error
// for which apierrors.IsNotFound is true or that wraps storage.ErrNotFound.
// It must not go through authorization (it is the server reading its own
// store).
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// NodeAuthorizerConfig builds a NodeAuthorizer.
type NodeAuthorizerConfig struct {
	// Pods looks up a pod a node asks for by name, to see whether it is
	// bound to that node; this stands in for upstream's graph of objects
	// reachable from a node. nil refuses every such read, as if no pod were
	// bound to any node.
	Pods PodGetter
}

// NodeAuthorizer is upstream's Node authorization mode together with the
// system:node rules it evaluates (section 13 of the reference), with the
// AuthorizeNodeWithSelectors behaviour that is the default since 1.32.
// It speaks only for node identities (NodeName): every other user gets
// NoOpinion. For nodes it answers Allow or NoOpinion, never Deny, so a
// later authorizer could still allow; at the end of the chain NoOpinion is
// a 403 that carries the reason.
//
// It decides from the request alone, except for reads of one pod by name,
// which look the pod up. Writes it allows to a whole resource (create and
// update of nodes, create and delete of pods, pod status, create of
// leases) are narrowed to the node's own objects by NodeRestriction
// admission, which must run; see internal/admission/noderestriction.
//
// Not covered, because knode has no graph of what a node's pods reference:
// secrets, configmaps, persistent volumes and claims, volume attachments,
// service account tokens, resource claims and slices, and CSINodes are
// refused to nodes (NoOpinion).
type NodeAuthorizer struct {
	pods PodGetter
}

// NewNodeAuthorizer returns the authorizer; the zero Config is valid.
func NewNodeAuthorizer(cfg NodeAuthorizerConfig) *NodeAuthorizer {
	return &NodeAuthorizer{pods: cfg.Pods}
}

// Authorize implements Authorizer. The error is only ever that of the pod
// lookup, other than not found; the decision is then NoOpinion.
func (n *NodeAuthorizer) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	nodeName, ok := NodeName(a.User)
	if !ok {
		return NoOpinion, "", nil
	}
	v := nodeVerdict(nodeName, a)
	if !v.podLookup {
		return v.decision, v.reason, nil
	}
	return n.podBound(ctx, nodeName, a.Namespace, a.Name)
}

// podBound allows when the pod exists and is bound to nodeName.
func (n *NodeAuthorizer) podBound(ctx context.Context, nodeName, namespace, name string) (Decision, string, error) {
	refused := noRelationship(nodeName)
	if n.pods == nil {
		return NoOpinion, refused, nil
	}
	pod, err := n.pods(ctx, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) || errors.Is(err, storage.ErrNotFound) {
			return NoOpinion, refused, nil
		}
		return NoOpinion, refused, fmt.Errorf("node authorizer: looking up pod %s/%s: %w", namespace, name, err)
	}
	if pod.Spec.NodeName != nodeName {
		return NoOpinion, refused, nil
	}
	return Allow, "", nil
}

// verdict is what nodeVerdict decides without I/O. When podLookup is set
// the answer depends on whether pod a.Namespace/a.Name is bound to the
// node, and decision and reason are unset.
type verdict struct {
	decision  Decision
	reason    string
	podLookup bool
}

func allow() verdict               { return verdict{decision: Allow} }
func refuse(reason string) verdict { return verdict{decision: NoOpinion, reason: reason} }
func lookupPod() verdict           { return verdict{podLookup: true} }

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
			return lookupPod()
		case "list", "watch":
			if v, ok := a.FieldValue("spec.nodeName"); ok && v == nodeName {
				return allow()
			}
			if a.Name != "" {
				return lookupPod()
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

// nodeRule grants verbs on resources of one API group. A resource is
// matched together with its subresource ("pods/status"), as in RBAC.
type nodeRule struct {
	group     string
	resources []string
	verbs     []string
}

var readVerbs = []string{"get", "list", "watch"}

// nodeRules are the parts of upstream's system:node rules that need no
// relationship to the node; nodes, pods and leases are decided above.
var nodeRules = []nodeRule{
	{group: "authentication.k8s.io", resources: []string{"tokenreviews"}, verbs: []string{"create"}},
	{group: "authorization.k8s.io", resources: []string{"subjectaccessreviews", "localsubjectaccessreviews"}, verbs: []string{"create"}},
	// Service environment variables of the pods it runs.
	{group: "", resources: []string{"services"}, verbs: readVerbs},
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
