package node

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
)

// Messages clients see; they are upstream's literal strings.
const (
	msgTaintNotUnique      = "taints must be unique by key and effect pair"
	msgInvalidCIDR         = "must be valid CIDR"
	msgOneCIDRPerFamily    = "may specify no more than one CIDR for each IP family"
	msgPodCIDRImmutable    = `node updates may not change podCIDR except from "" to valid`
	msgProviderIDImmutable = `node updates may not change providerID except from "" to valid`
	msgExternalIDImmutable = "may not be updated"
	msgNotInteger          = "must be an integer"
	msgNotStandardResource = "must be a standard resource type or fully qualified"
	msgExactlyOneSource    = "exactly one reference subfield must be non-nil"
	msgNotController       = "must point to a controller"
)

// supportedTaintEffects is the order upstream lists them in its
// NotSupported error.
var supportedTaintEffects = []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}

// Validate checks a node on create (upstream ValidateNode without the
// metadata part, which the REST layer owns).
func Validate(n *v1.Node) field.ErrorList {
	errs := validateShared(n)
	errs = append(errs, validatePodCIDRs(n.Spec.PodCIDRs)...)
	return errs
}

// ValidateUpdate checks an update of the main resource: every create rule
// plus the update-only rules (immutable podCIDRs and providerID, unique
// addresses, configSource shape, externalID).
func ValidateUpdate(n, old *v1.Node) field.ErrorList {
	errs := Validate(n)
	errs = append(errs, validateUpdateOnly(n, old)...)
	return errs
}

// ValidateStatusUpdate checks an update through nodes/<name>/status: the
// shared rules plus the update-only rules (upstream ValidateNodeUpdate).
// Spec has already been reset to old's, so podCIDRs format is not rechecked.
func ValidateStatusUpdate(n, old *v1.Node) field.ErrorList {
	errs := validateShared(n)
	errs = append(errs, validateUpdateOnly(n, old)...)
	return errs
}

// validateShared holds the rules upstream runs both on create and on
// every update: node annotations, taints, capacity and allocatable.
func validateShared(n *v1.Node) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNodeAnnotations(n.Annotations, field.NewPath("metadata", "annotations"))...)
	// Upstream roots the taints path at metadata ("metadata.taints[0].key"),
	// and that is what clients see in error messages.
	errs = append(errs, validateTaints(n.Spec.Taints, field.NewPath("metadata", "taints"))...)
	errs = append(errs, validateResources(n.Status.Capacity, field.NewPath("status", "capacity"))...)
	errs = append(errs, validateResources(n.Status.Allocatable, field.NewPath("status", "allocatable"))...)
	return errs
}

// validateUpdateOnly holds the rules upstream applies only on update.
func validateUpdateOnly(n, old *v1.Node) field.ErrorList {
	var errs field.ErrorList

	addrPath := field.NewPath("status", "addresses")
	seen := make(map[v1.NodeAddress]bool, len(n.Status.Addresses))
	for i, addr := range n.Status.Addresses {
		if seen[addr] {
			errs = append(errs, field.Duplicate(addrPath.Index(i), addr))
		}
		seen[addr] = true
	}

	// Only the change from no CIDRs to some (the IPAM controller's
	// assignment) is allowed. Upstream reports one error per differing
	// entry when the lengths match.
	cidrPath := field.NewPath("spec", "podCIDRs")
	if len(old.Spec.PodCIDRs) > 0 {
		if len(old.Spec.PodCIDRs) != len(n.Spec.PodCIDRs) {
			errs = append(errs, field.Forbidden(cidrPath, msgPodCIDRImmutable))
		} else {
			for i, cidr := range old.Spec.PodCIDRs {
				if cidr != n.Spec.PodCIDRs[i] {
					errs = append(errs, field.Forbidden(cidrPath, msgPodCIDRImmutable))
				}
			}
		}
	}

	if old.Spec.ProviderID != "" && old.Spec.ProviderID != n.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), msgProviderIDImmutable))
	}

	if n.Spec.ConfigSource != nil {
		errs = append(errs, validateConfigSourceSpec(n.Spec.ConfigSource, field.NewPath("spec", "configSource"))...)
	}
	if n.Status.Config != nil {
		errs = append(errs, validateConfigStatus(n.Status.Config, field.NewPath("status", "config"))...)
	}

	if n.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), msgExternalIDImmutable))
	}
	return errs
}

// validateTaints: key is a qualified name, value a label value, effect
// one of the three known ones, and (key, effect) pairs are unique.
func validateTaints(taints []v1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[v1.TaintEffect]sets.Set[string])
	for i, taint := range taints {
		p := path.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(taint.Key, p.Child("key"))...)
		if msgs := validation.IsValidLabelValue(taint.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(p.Child("value"), taint.Value, strings.Join(msgs, ";")))
		}
		errs = append(errs, validateTaintEffect(taint.Effect, p.Child("effect"))...)

		if seen[taint.Effect].Has(taint.Key) {
			dup := field.Duplicate(p, taint)
			dup.Detail = msgTaintNotUnique
			errs = append(errs, dup)
			continue
		}
		if seen[taint.Effect] == nil {
			seen[taint.Effect] = sets.New[string]()
		}
		seen[taint.Effect].Insert(taint.Key)
	}
	return errs
}

func validateTaintEffect(effect v1.TaintEffect, path *field.Path) field.ErrorList {
	if effect == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	for _, known := range supportedTaintEffects {
		if effect == known {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, effect, supportedTaintEffects)}
}

// validateResources checks every entry of a capacity or allocatable list,
// in name order so the errors come out stable. The path of an entry is
// "<list>.<name>", as upstream builds it.
func validateResources(list v1.ResourceList, path *field.Path) field.ErrorList {
	names := make([]string, 0, len(list))
	for name := range list {
		names = append(names, string(name))
	}
	sort.Strings(names)

	var errs field.ErrorList
	for _, name := range names {
		p := path.Child(name)
		errs = append(errs, validateResourceName(v1.ResourceName(name), p)...)
		errs = append(errs, validateQuantity(v1.ResourceName(name), list[v1.ResourceName(name)], p)...)
	}
	return errs
}

// validateResourceName: a qualified name, and an unprefixed name must be a
// standard resource.
func validateResourceName(name v1.ResourceName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) != 0 {
		return errs
	}
	if !strings.Contains(string(name), "/") && !isStandardResourceName(name) {
		errs = append(errs, field.Invalid(path, name, msgNotStandardResource))
	}
	return errs
}

// validateQuantity: never negative, and whole for resources counted in
// units (pods, object counts, extended resources).
func validateQuantity(name v1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(path, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if isIntegerResourceName(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q, msgNotInteger))
	}
	return errs
}

// validatePodCIDRs: every entry parses as a CIDR; more than one entry must
// be one IPv4 and one IPv6 CIDR, without repeats.
func validatePodCIDRs(cidrs []string) field.ErrorList {
	if len(cidrs) == 0 {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "podCIDRs")
	for i, cidr := range cidrs {
		if _, _, err := netutils.ParseCIDRSloppy(cidr); err != nil {
			errs = append(errs, field.Invalid(path.Index(i), cidrs, msgInvalidCIDR))
		}
	}
	if len(cidrs) > 1 {
		dualStack, err := netutils.IsDualStackCIDRStrings(cidrs)
		if err != nil {
			errs = append(errs, field.InternalError(path, fmt.Errorf("invalid PodCIDRs. failed to check with dual stack with error:%v", err)))
		}
		if !dualStack || len(cidrs) > 2 {
			errs = append(errs, field.Invalid(path, cidrs, msgOneCIDRPerFamily))
		}
		seen := sets.New[string]()
		for i, cidr := range cidrs {
			if seen.Has(cidr) {
				errs = append(errs, field.Duplicate(path.Index(i), cidr))
			}
			seen.Insert(cidr)
		}
	}
	return errs
}

// validateNodeAnnotations parses and checks the two deprecated scheduler
// annotations when they are present and non-empty.
func validateNodeAnnotations(annotations map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if raw := annotations[v1.TaintsAnnotationKey]; raw != "" {
		var taints []v1.Taint
		if err := json.Unmarshal([]byte(raw), &taints); err != nil {
			errs = append(errs, field.Invalid(path, v1.TaintsAnnotationKey, err.Error()))
		} else {
			errs = append(errs, validateTaints(taints, path.Child(v1.TaintsAnnotationKey))...)
		}
	}
	if raw := annotations[v1.PreferAvoidPodsAnnotationKey]; raw != "" {
		var avoid v1.AvoidPods
		if err := json.Unmarshal([]byte(raw), &avoid); err != nil {
			errs = append(errs, field.Invalid(path.Child("AvoidPods"), v1.PreferAvoidPodsAnnotationKey, err.Error()))
		} else {
			for i, entry := range avoid.PreferAvoidPods {
				errs = append(errs, validateAvoidPodsEntry(entry, path.Child(v1.PreferAvoidPodsAnnotationKey).Index(i))...)
			}
		}
	}
	return errs
}

// validateAvoidPodsEntry: the signature must name a controller. A missing
// controller flag counts as false (upstream would dereference nil).
func validateAvoidPodsEntry(entry v1.PreferAvoidPodsEntry, path *field.Path) field.ErrorList {
	ref := entry.PodSignature.PodController
	if ref == nil {
		return field.ErrorList{field.Required(path.Child("PodSignature"), "")}
	}
	if ref.Controller == nil || !*ref.Controller {
		return field.ErrorList{field.Invalid(path.Child("PodSignature", "PodController", "Controller"), false, msgNotController)}
	}
	return nil
}

// validateConfigSourceSpec checks the shape of the deprecated
// spec.configSource: exactly one reference, and a ConfigMap reference names
// its target but carries no uid or resourceVersion.
func validateConfigSourceSpec(src *v1.NodeConfigSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	count := 0
	if src.ConfigMap != nil {
		count++
		p := path.Child("configMap")
		if src.ConfigMap.UID != "" {
			errs = append(errs, field.Forbidden(p.Child("uid"), "uid must not be set in spec"))
		}
		if src.ConfigMap.ResourceVersion != "" {
			errs = append(errs, field.Forbidden(p.Child("resourceVersion"), "resourceVersion must not be set in spec"))
		}
		errs = append(errs, validateConfigMapSource(src.ConfigMap, p)...)
	}
	if count != 1 {
		errs = append(errs, field.Invalid(path, src, msgExactlyOneSource))
	}
	return errs
}

// validateConfigStatus checks the deprecated status.config: each reported
// source has exactly one reference, with uid and resourceVersion set.
func validateConfigStatus(status *v1.NodeConfigStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, s := range []struct {
		name string
		src  *v1.NodeConfigSource
	}{{"assigned", status.Assigned}, {"active", status.Active}, {"lastKnownGood", status.LastKnownGood}} {
		if s.src == nil {
			continue
		}
		p := path.Child(s.name)
		count := 0
		if cm := s.src.ConfigMap; cm != nil {
			count++
			cp := p.Child("configMap")
			if cm.UID == "" {
				errs = append(errs, field.Required(cp.Child("uid"), "uid must be set in status"))
			}
			if cm.ResourceVersion == "" {
				errs = append(errs, field.Required(cp.Child("resourceVersion"), "resourceVersion must be set in status"))
			}
			errs = append(errs, validateConfigMapSource(cm, cp)...)
		}
		if count != 1 {
			errs = append(errs, field.Invalid(p, s.src, msgExactlyOneSource))
		}
	}
	return errs
}

func validateConfigMapSource(src *v1.ConfigMapNodeConfigSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), "namespace must be set"))
	} else {
		for _, msg := range apivalidation.ValidateNamespaceName(src.Namespace, false) {
			errs = append(errs, field.Invalid(path.Child("namespace"), src.Namespace, msg))
		}
	}
	if src.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "name must be set"))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(src.Name, false) {
			errs = append(errs, field.Invalid(path.Child("name"), src.Name, msg))
		}
	}
	if src.KubeletConfigKey == "" {
		errs = append(errs, field.Required(path.Child("kubeletConfigKey"), "kubeletConfigKey must be set"))
	} else {
		for _, msg := range validation.IsConfigMapKey(src.KubeletConfigKey) {
			errs = append(errs, field.Invalid(path.Child("kubeletConfigKey"), src.KubeletConfigKey, msg))
		}
	}
	return errs
}

// standardResources are the unprefixed resource names upstream knows
// (IsStandardResourceName), hugepages aside.
var standardResources = sets.New[v1.ResourceName](
	v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage,
	v1.ResourceRequestsCPU, v1.ResourceRequestsMemory, v1.ResourceRequestsEphemeralStorage,
	v1.ResourceLimitsCPU, v1.ResourceLimitsMemory, v1.ResourceLimitsEphemeralStorage,
	v1.ResourcePods, v1.ResourceQuotas, v1.ResourceServices, v1.ResourceReplicationControllers,
	v1.ResourceSecrets, v1.ResourceConfigMaps, v1.ResourcePersistentVolumeClaims,
	v1.ResourceStorage, v1.ResourceRequestsStorage,
	v1.ResourceServicesNodePorts, v1.ResourceServicesLoadBalancers,
)

func isStandardResourceName(name v1.ResourceName) bool {
	return standardResources.Has(name) ||
		strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(name), v1.ResourceRequestsHugePagesPrefix)
}

// integerResources are counted in whole units.
var integerResources = sets.New[v1.ResourceName](
	v1.ResourcePods, v1.ResourceQuotas, v1.ResourceServices, v1.ResourceReplicationControllers,
	v1.ResourceSecrets, v1.ResourceConfigMaps, v1.ResourcePersistentVolumeClaims,
	v1.ResourceServicesNodePorts, v1.ResourceServicesLoadBalancers,
)

func isIntegerResourceName(name v1.ResourceName) bool {
	return integerResources.Has(name) || isExtendedResourceName(name)
}

// isExtendedResourceName: a prefixed name outside kubernetes.io that still
// makes a valid qualified name once "requests." is put in front (so it can
// be quota'd).
func isExtendedResourceName(name v1.ResourceName) bool {
	s := string(name)
	native := !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix)
	if native || strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+s)) == 0
}
