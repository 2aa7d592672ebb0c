// Package fence decides whether a node may be marked out of service and
// marks it: it adds the node.kubernetes.io/out-of-service taint that makes
// PodGC force-delete the node's terminating pods and the attach/detach
// controller force-detach its volumes (non-graceful node shutdown). It is
// what `knode node fence` runs.
//
// The taint is only safe on a node whose machine is really off: a machine
// that still runs may keep writing to volumes that are then attached
// elsewhere. So Check asks a cloud provider first, and refuses unless the
// provider reports the instance shut down or gone, or the caller forces it
// (having confirmed the machine is off some other way).
//
// What the caller must do: give Check the Node as the API has it and a
// provider (nil when none is configured), and call Apply only when Check
// allowed it. Apply needs a client that may get and patch the node.
//
// What it does not do: power the machine off (fencing in the STONITH
// sense is the provider's or the operator's), remove the taint when the
// node is back (the out-of-service controller says when it can go), or
// wait for the pods and volumes to be released.
package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"knode/internal/cloudprovider"
	"knode/internal/volume"
)

// TaintValue and TaintEffect are what Apply puts on the taint, as the
// Kubernetes documentation's example (the consumers read only the key).
const (
	TaintValue  = "nodeshutdown"
	TaintEffect = corev1.TaintEffectNoExecute
)

// Reason says why a node may be fenced.
type Reason string

const (
	// ReasonShutdown: the provider reports the instance shut down.
	ReasonShutdown Reason = "instance is shut down"
	// ReasonGone: the provider reports the instance no longer exists.
	ReasonGone Reason = "instance no longer exists"
	// ReasonForced: the caller forced it without asking.
	ReasonForced Reason = "--force"
)

// ErrRefused is matched (errors.Is) by every refusal of Check.
var ErrRefused = errors.New("refusing to fence")

// writeAttempts bounds Apply's read-modify-write retries on conflict.
const writeAttempts = 5

// Check decides whether node may be fenced. With force it is allowed
// without asking. Otherwise it asks cloud InstanceShutdown and, unless the
// answer is true, InstanceExists; false (or cloudprovider.ErrInstanceNotFound)
// allows it. Anything else is refused with an error that matches
// ErrRefused, says why, and wraps the provider's errors. A nil cloud is
// refused: nothing can confirm the machine is off. Check blocks for as
// long as the provider's answers take.
func Check(ctx context.Context, cloud cloudprovider.Interface, node *corev1.Node, force bool) (Reason, error) {
	if force {
		return ReasonForced, nil
	}
	name := node.Name
	if cloud == nil {
		return "", fmt.Errorf("%w %s: no cloud provider is configured to confirm that its machine is off; "+
			"use --cloud-provider and --cloud-config, or --force once you have confirmed it yourself", ErrRefused, name)
	}
	shutdown, shutdownErr := cloud.InstanceShutdown(ctx, node)
	if shutdownErr == nil && shutdown {
		return ReasonShutdown, nil
	}
	exists, existsErr := cloud.InstanceExists(ctx, node)
	if errors.Is(existsErr, cloudprovider.ErrInstanceNotFound) || existsErr == nil && !exists {
		return ReasonGone, nil
	}
	var why error
	switch {
	case existsErr == nil && shutdownErr == nil:
		why = errors.New("the cloud provider reports its instance exists and is not shut down")
	case existsErr == nil && errors.Is(shutdownErr, cloudprovider.ErrNotImplemented):
		why = errors.New("the cloud provider reports its instance exists and cannot tell whether it is shut down")
	case existsErr == nil:
		why = fmt.Errorf("the cloud provider reports its instance exists and could not tell whether it is shut down: %w", shutdownErr)
	case shutdownErr == nil:
		why = fmt.Errorf("the cloud provider reports its instance is not shut down and could not tell whether it exists: %w", existsErr)
	default:
		why = fmt.Errorf("the cloud provider could not tell whether its instance is off: %w; %w", shutdownErr, existsErr)
	}
	return "", fmt.Errorf("%w %s: %w; confirm the machine is off, or use --force", ErrRefused, name, why)
}

// Taint is the out-of-service taint Apply adds, stamped at now.
func Taint(now time.Time) corev1.Taint {
	added := metav1.NewTime(now)
	return corev1.Taint{Key: volume.TaintOutOfService, Value: TaintValue, Effect: TaintEffect, TimeAdded: &added}
}

// Apply adds Taint(now) to the named node, keeping its other taints, and
// returns the node as written. If the node already carries the taint key
// (any value or effect) it writes nothing and reports already. The patch
// names the resourceVersion it read, so a concurrent change of the node is
// a conflict, after which Apply reads the node again (a few times, without
// waiting).
func Apply(ctx context.Context, nodes corev1client.NodeInterface, name string, now time.Time) (node *corev1.Node, already bool, err error) {
	for attempt := 1; ; attempt++ {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false, err
		}
		if volume.OutOfService(n) {
			return n, true, nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
			"spec":     map[string]any{"taints": append(append([]corev1.Taint(nil), n.Spec.Taints...), Taint(now))},
		})
		if err != nil {
			return nil, false, err
		}
		updated, err := nodes.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsConflict(err) && attempt < writeAttempts {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("adding the %s taint to node %s: %w", volume.TaintOutOfService, name, err)
		}
		return updated, false, nil
	}
}
