package loadbalancer

import (
	"context"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"knode/internal/server/apiendpoints"
)

// Learn watches the default/kubernetes Endpoints through client (an
// informer on that one object) and, on every version of it, sets b's
// servers to the ones it lists, followed by those b was configured with
// (Config.Servers) that it does not list. It blocks until ctx ends. An
// object that lists no server, or its absence, leaves the list as it is:
// the servers publish themselves (package apiendpoints), and an empty
// list means none is publishing, not that none exists.
//
// The configured servers stay as a last resort, as k3s's agent load
// balancer keeps its default server: when the learned servers are all
// down, or the object names addresses this machine cannot reach, the
// agent can still get to the servers it was told about. They come after
// the learned ones, so a connection reaches them only when the current
// server is one of them or every learned one failed.
//
// client should reach the servers through b (its host being b.Addr()),
// so that learning fails over with everything else; it needs list and
// watch on endpoints in namespace default, which nodes have.
func Learn(ctx context.Context, client kubernetes.Interface, b *Balancer, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "loadbalancer")
	selector := fields.OneTermEqualSelector(metav1.ObjectNameField, apiendpoints.Name).String()
	endpoints := client.CoreV1().Endpoints(apiendpoints.Namespace)
	learn := func(obj any) {
		ep, ok := obj.(*corev1.Endpoints)
		if !ok || ep.Name != apiendpoints.Name {
			return
		}
		learned := apiendpoints.Addresses(ep)
		if len(learned) == 0 {
			log.Debug("the API server endpoints list no server; keeping the list", "servers", b.Servers())
			return
		}
		b.SetServers(withFallback(learned, b.cfg.Servers))
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				opts.FieldSelector = selector
				return endpoints.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.FieldSelector = selector
				return endpoints.Watch(ctx, opts)
			},
		},
		ObjectType: &corev1.Endpoints{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { learn(obj) },
			UpdateFunc: func(_, obj any) { learn(obj) },
			DeleteFunc: func(any) {
				log.Debug("the API server endpoints were deleted; keeping the list", "servers", b.Servers())
			},
		},
	})
	informer.RunWithContext(ctx)
}

// withFallback is learned followed by the configured servers it lacks, in
// their configured order. Pure.
func withFallback(learned, configured []string) []string {
	out := slices.Clone(learned)
	for _, s := range configured {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
