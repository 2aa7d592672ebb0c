// Package namespace empties namespaces that are being deleted and then
// releases them.
//
// A deleted namespace stays in phase Terminating while it holds anything.
// Each Sync deletes the contents of every terminating namespace (through the
// API, so pods get their graceful deletion) and, once nothing is left,
// clears the "kubernetes" finalizer with the finalize subresource, which
// lets the API server remove the namespace.
//
// It does not report progress conditions on the namespace, as upstream
// does; a namespace that cannot be emptied just stays Terminating.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// Config builds a Controller.
type Config struct {
	// Rest is the client configuration, with rights to delete anything.
	Rest *rest.Config
	// Clock paces Run; zero value means the real clock.
	Clock clock.WithTicker
	// Period between passes of Run; 0 means DefaultPeriod.
	Period time.Duration
	Logger *slog.Logger
}

// DefaultPeriod is how often Run looks for terminating namespaces.
const DefaultPeriod = time.Second

// Controller empties and finalizes terminating namespaces.
type Controller struct {
	cfg       Config
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
}

// New builds a Controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Rest == nil {
		return nil, errors.New("namespace controller: Config.Rest is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dyn, err := dynamic.NewForConfig(cfg.Rest)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg.Rest)
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, dynamic: dyn, discovery: disc}, nil
}

// Run calls Sync every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	ticker := c.cfg.Clock.NewTicker(c.cfg.Period)
	defer ticker.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("namespace controller pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Sync makes one pass over the terminating namespaces.
func (c *Controller) Sync(ctx context.Context) error {
	list, err := c.dynamic.Resource(namespacesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var terminating []string
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() != nil {
			terminating = append(terminating, item.GetName())
		}
	}
	if len(terminating) == 0 {
		return nil
	}
	resources, err := c.namespacedResources()
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range terminating {
		if err := c.drain(ctx, ns, resources); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// namespacedResources lists the namespaced resources that can be deleted
// by collection.
func (c *Controller) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := c.discovery.ServerPreferredNamespacedResources()
	if err != nil {
		return nil, err
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if canDeleteCollection(r) {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out, nil
}

func canDeleteCollection(r metav1.APIResource) bool {
	for _, v := range r.Verbs {
		if v == "deletecollection" {
			return true
		}
	}
	return false
}

// drain deletes what namespace ns holds, and finalizes it once empty.
func (c *Controller) drain(ctx context.Context, ns string, resources []schema.GroupVersionResource) error {
	remaining := 0
	for _, gvr := range resources {
		client := c.dynamic.Resource(gvr).Namespace(ns)
		if err := client.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		left, err := client.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		remaining += len(left.Items)
	}
	if remaining > 0 {
		return nil
	}
	return c.finalize(ctx, ns)
}

// finalize removes the "kubernetes" finalizer from namespace ns.
func (c *Controller) finalize(ctx context.Context, ns string) error {
	obj, err := c.dynamic.Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	finalizers, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "finalizers")
	var keep []interface{}
	for _, f := range finalizers {
		if f != string(corev1.FinalizerKubernetes) {
			keep = append(keep, f)
		}
	}
	spec, _ := obj.Object["spec"].(map[string]interface{})
	if spec == nil {
		spec = map[string]interface{}{}
		obj.Object["spec"] = spec
	}
	spec["finalizers"] = keep
	_, err = c.dynamic.Resource(namespacesGVR).Update(ctx, obj, metav1.UpdateOptions{}, "finalize")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
