// Package fake is an in-memory cloud for tests and the simulator: a set of
// instances by node name that a test can add, remove, power off and make
// fail.
//
// It stands for the world, not for logic: it answers exactly what it was
// told. It is safe for concurrent use.
package fake

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/cloudprovider"
)

// Question names, for SetError and Calls.
const (
	Exists   = "exists"
	Shutdown = "shutdown"
	Metadata = "metadata"
)

// Instance is one machine.
type Instance struct {
	// Shutdown reports the machine as powered off.
	Shutdown bool
	// Metadata is what InstanceMetadata answers.
	Metadata cloudprovider.InstanceMetadata
}

// Cloud is a fake cloudprovider.Interface. The zero value is not usable;
// call New.
type Cloud struct {
	mu        sync.Mutex
	instances map[string]Instance
	errs      map[string]error
	calls     []string
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// New returns a cloud with no instances.
func New() *Cloud {
	return &Cloud{instances: map[string]Instance{}, errs: map[string]error{}}
}

// Set adds or replaces the instance behind a node.
func (c *Cloud) Set(node string, inst Instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.instances[node] = inst
}

// Remove deletes the instance behind a node.
func (c *Cloud) Remove(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.instances, node)
}

// SetShutdown powers a node's instance off (true) or on; it does nothing
// for a node without an instance.
func (c *Cloud) SetShutdown(node string, off bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if inst, ok := c.instances[node]; ok {
		inst.Shutdown = off
		c.instances[node] = inst
	}
}

// SetError makes every call of one question (Exists, Shutdown or Metadata)
// fail with err until it is set back to nil.
func (c *Cloud) SetError(question string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs[question] = err
}

// Calls returns the calls made so far as "<question> <node>", in order.
func (c *Cloud) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func (c *Cloud) lookup(question string, node *corev1.Node) (Instance, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, question+" "+node.Name)
	if err := c.errs[question]; err != nil {
		return Instance{}, false, err
	}
	inst, ok := c.instances[node.Name]
	return inst, ok, nil
}

// InstanceExists reports whether the node has an instance.
func (c *Cloud) InstanceExists(_ context.Context, node *corev1.Node) (bool, error) {
	_, ok, err := c.lookup(Exists, node)
	return ok, err
}

// InstanceShutdown reports whether the node's instance is powered off.
func (c *Cloud) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	inst, ok, err := c.lookup(Shutdown, node)
	if err == nil && !ok {
		err = fmt.Errorf("node %s: %w", node.Name, cloudprovider.ErrInstanceNotFound)
	}
	return inst.Shutdown, err
}

// InstanceMetadata returns a copy of the node's instance metadata.
func (c *Cloud) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, ok, err := c.lookup(Metadata, node)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("node %s: %w", node.Name, cloudprovider.ErrInstanceNotFound)
	}
	md := inst.Metadata
	md.NodeAddresses = append([]corev1.NodeAddress(nil), md.NodeAddresses...)
	if md.AdditionalLabels != nil {
		labels := make(map[string]string, len(md.AdditionalLabels))
		for k, v := range md.AdditionalLabels {
			labels[k] = v
		}
		md.AdditionalLabels = labels
	}
	return &md, nil
}
