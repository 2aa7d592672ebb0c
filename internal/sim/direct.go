package sim

import (
	"context"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"knode/internal/apiserver"
	"knode/internal/auth"
)

// An agent's clientset sends its requests over the in-process HTTP
// transport except the two it makes all hour long: the Lease update that
// renews its heartbeat and the Node status patch. A 5,000-node cluster
// renews 1.8 million times an hour, and client-go's request building and
// the protobuf round trip cost about three times what the server does with
// a renewal. So these two go to apiserver.Server.UpdateAs and PatchAs,
// which authorize the node's identity and run the same admission, rules
// and storage as the PUT and PATCH, and answer with the object and the
// errors those would. Every other Node patch (registration's reconcile)
// takes the same way; creates, reads and pod writes stay on the wire.

// direct is a clientset whose Leases' Update and Nodes' Patch are made in
// process.
type direct struct {
	kubernetes.Interface
	api  *apiserver.Server
	user *auth.User
	// calls counts the requests made in process.
	calls *atomic.Int64
}

// wireOnly is true for options the in-process path does not model (dry
// run, field validation, a field manager): such calls go over the wire.
func wireOnly(dryRun []string, fieldValidation, fieldManager string) bool {
	return len(dryRun) > 0 || fieldValidation != "" || fieldManager != ""
}

func (c direct) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return directCoordination{CoordinationV1Interface: c.Interface.CoordinationV1(), c: c}
}

type directCoordination struct {
	coordinationv1client.CoordinationV1Interface
	c direct
}

func (g directCoordination) Leases(namespace string) coordinationv1client.LeaseInterface {
	return directLeases{LeaseInterface: g.CoordinationV1Interface.Leases(namespace), c: g.c, namespace: namespace}
}

type directLeases struct {
	coordinationv1client.LeaseInterface
	c         direct
	namespace string
}

func (l directLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if wireOnly(opts.DryRun, opts.FieldValidation, opts.FieldManager) {
		return l.LeaseInterface.Update(ctx, lease, opts)
	}
	l.c.calls.Add(1)
	out, err := l.c.api.UpdateAs(ctx, l.c.user, leasesGVR, l.namespace, lease.Name, "", lease)
	if err != nil {
		return nil, err
	}
	return out.(*coordinationv1.Lease), nil
}

func (c direct) CoreV1() corev1client.CoreV1Interface {
	return directCore{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

type directCore struct {
	corev1client.CoreV1Interface
	c direct
}

func (g directCore) Nodes() corev1client.NodeInterface {
	return directNodes{NodeInterface: g.CoreV1Interface.Nodes(), c: g.c}
}

type directNodes struct {
	corev1client.NodeInterface
	c direct
}

func (n directNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error) {
	if wireOnly(opts.DryRun, opts.FieldValidation, opts.FieldManager) || opts.Force != nil || len(subresources) > 1 {
		return n.NodeInterface.Patch(ctx, name, pt, data, opts, subresources...)
	}
	subresource := ""
	if len(subresources) == 1 {
		subresource = subresources[0]
	}
	n.c.calls.Add(1)
	out, err := n.c.api.PatchAs(ctx, n.c.user, nodesGVR, "", name, subresource, pt, data)
	if err != nil {
		return nil, err
	}
	return out.(*corev1.Node), nil
}
