// Package cloudprovider is the contract between knode's cloud controllers
// and whatever knows about the machines behind the nodes: a cloud API, an
// IPMI controller, a script.
//
// It owns the Interface, the instance metadata type and the sentinel
// errors; providers live in sub-packages (exec runs a user command per
// question, fake serves tests and the simulator). The questions are the
// ones upstream's cloud-provider InstancesV2 asks, with the same meaning,
// so a provider written against that contract fits.
//
// Callers pass the Node as the API has it and must not assume a provider
// is fast: each question may be a network call or a process. Providers
// must not change the Node they are given.
package cloudprovider

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
)

// Interface answers questions about the instance (machine) behind a node.
// Implementations must be safe for concurrent use.
type Interface interface {
	// InstanceExists reports whether the node's instance still exists.
	// false means it is gone for good, and the node may be deleted. An
	// error means "do not know"; callers then do nothing.
	InstanceExists(ctx context.Context, node *corev1.Node) (bool, error)
	// InstanceShutdown reports whether the node's instance exists but is
	// powered off. ErrNotImplemented means the provider cannot tell;
	// callers take it as "not shut down".
	InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error)
	// InstanceMetadata describes the node's instance, to initialize the
	// node: provider ID, instance type, addresses, zone and region.
	InstanceMetadata(ctx context.Context, node *corev1.Node) (*InstanceMetadata, error)
}

// InstanceMetadata describes an instance, as upstream's
// cloudprovider.InstanceMetadata. Empty fields are unknown and left alone.
type InstanceMetadata struct {
	// ProviderID is the instance's unique ID, "<provider>://<id>" by
	// convention; it becomes spec.providerID, which never changes after.
	ProviderID string
	// InstanceType becomes the node.kubernetes.io/instance-type label
	// (and its beta twin).
	InstanceType string
	// NodeAddresses become status.addresses, in order.
	NodeAddresses []corev1.NodeAddress
	// Zone and Region become the topology.kubernetes.io/zone and /region
	// labels (and their failure-domain.beta twins).
	Zone   string
	Region string
	// AdditionalLabels are set on the node if it does not have them yet.
	// Keys in the kubernetes.io and k8s.io namespaces are refused.
	AdditionalLabels map[string]string
}

var (
	// ErrNotImplemented means the provider cannot answer this question.
	// The text is upstream's.
	ErrNotImplemented = errors.New("unimplemented")
	// ErrInstanceNotFound means the provider knows of no such instance.
	// The text is upstream's.
	ErrInstanceNotFound = errors.New("instance not found")
)

// Well-known keys of the cloud controllers (upstream k8s.io/cloud-provider
// api package; k8s.io/api does not define them).
const (
	// TaintUninitialized marks a node the cloud-node controller has not
	// initialized yet; a kubelet with --cloud-provider=external registers
	// with it (NoSchedule).
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	// TaintShutdown marks a node whose instance is shut down (NoSchedule).
	TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// AnnotationProvidedNodeIP is the --node-ip a kubelet with an external
	// cloud provider was given; initialization keeps that address.
	AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"
)
