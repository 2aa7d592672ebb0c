// Package defaultstorageclass is upstream's DefaultStorageClass admission
// plugin: a PersistentVolumeClaim created without a class gets the
// cluster's default StorageClass, so that it is provisioned like any
// other.
//
// On create of a persistentvolumeclaims object (not a subresource) that
// names no class, that is with spec.storageClassName unset and without
// the volume.beta.kubernetes.io/storage-class annotation (present even
// with an empty value counts as naming a class, as upstream), it sets
// spec.storageClassName to the default class (Pick). When no class is the
// default, the claim is left alone. A claim that sets storageClassName to
// "" asks for no class and is left alone too.
//
// What the caller must do: give it Config.List over StorageClasses
// (FromClient builds it from a clientset) and run it after defaulting and
// before validation, with the typed *corev1.PersistentVolumeClaim in
// Object; it changes that object in place. A failure to list the classes
// refuses the claim with 403, as upstream.
//
// It does not give classes to claims that already exist: upstream's PV
// controller does that (retroactive default StorageClass assignment), and
// it does not check that the class a claim names exists.
package defaultstorageclass

import (
	"cmp"
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"knode/internal/apiserver"
	"knode/internal/volume"
)

// Name is the plugin's name, as upstream's.
const Name = "DefaultStorageClass"

// Config builds a Plugin.
type Config struct {
	// List returns every StorageClass. Required. The plugin does not
	// change what it returns.
	List func(ctx context.Context) ([]storagev1.StorageClass, error)
}

// FromClient is a Config that reads StorageClasses through cs.
func FromClient(cs kubernetes.Interface) Config {
	return Config{
		List: func(ctx context.Context) ([]storagev1.StorageClass, error) {
			l, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		},
	}
}

// Plugin is the admission plugin; it keeps no state and is safe for
// concurrent use.
type Plugin struct {
	list func(ctx context.Context) ([]storagev1.StorageClass, error)
}

var _ apiserver.Admitter = (*Plugin)(nil)

// New checks cfg and returns the plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.List == nil {
		return nil, errors.New("default storage class admission: Config.List is required")
	}
	return &Plugin{list: cfg.List}, nil
}

var claimsResource = schema.GroupResource{Resource: "persistentvolumeclaims"}

// Admit implements apiserver.Admitter.
func (p *Plugin) Admit(ctx context.Context, a apiserver.AdmissionAttributes) error {
	if a.Kind == nil || a.Operation != "CREATE" || a.Subresource != "" {
		return nil
	}
	if (schema.GroupResource{Group: a.Kind.GroupVersion.Group, Resource: a.Kind.Resource}) != claimsResource {
		return nil
	}
	claim, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok || namesClass(claim) {
		return nil
	}
	classes, err := p.list(ctx)
	if err != nil {
		return forbidden(a, claim, err)
	}
	def := Pick(classes)
	if def == nil {
		return nil
	}
	name := def.Name
	claim.Spec.StorageClassName = &name
	return nil
}

// namesClass reports whether a claim asks for a class itself: it sets
// spec.storageClassName (even to "") or carries the beta annotation (even
// empty).
func namesClass(claim *corev1.PersistentVolumeClaim) bool {
	if _, ok := claim.Annotations[volume.AnnBetaStorageClass]; ok {
		return true
	}
	return claim.Spec.StorageClassName != nil
}

// Pick returns the default class among classes: of those marked default
// (volume.IsDefaultClass), the newest by creationTimestamp, and among
// equally new ones the first by name, as upstream since 1.26. It returns
// nil when none is marked. The result points into classes.
func Pick(classes []storagev1.StorageClass) *storagev1.StorageClass {
	var defaults []*storagev1.StorageClass
	for i := range classes {
		if volume.IsDefaultClass(&classes[i]) {
			defaults = append(defaults, &classes[i])
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	slices.SortFunc(defaults, func(x, y *storagev1.StorageClass) int {
		// Newest first, then by name.
		return cmp.Or(
			y.CreationTimestamp.Compare(x.CreationTimestamp.Time),
			cmp.Compare(x.Name, y.Name),
		)
	})
	return defaults[0]
}

// forbidden is upstream's admission refusal for a claim: the name is the
// request's, else the object's name or generateName.
func forbidden(a apiserver.AdmissionAttributes, claim *corev1.PersistentVolumeClaim, err error) error {
	name := a.Name
	if name == "" {
		name = claim.Name
	}
	if name == "" {
		name = claim.GenerateName
	}
	return apierrors.NewForbidden(claimsResource, name, err)
}
