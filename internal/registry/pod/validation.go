package pod

// Pod validation on k8s.io/api/core/v1 types, re-implemented from upstream's
// pkg/apis/core/validation (ValidatePodCreate, ValidatePodSpec and the helpers
// they call). Paths, error types and detail strings are upstream's, including
// a few upstream spelling quirks that clients already see (each is marked).
// Feature-gated behaviour follows the defaults of a v1.33+ server.
//
// Covered:
//   - pod annotations: mirror-pod annotation needs spec.nodeName; the
//     pod-deletion-cost annotation must be a 32-bit integer
//   - containers, initContainers: at least one container; names are DNS
//     labels, unique across init and regular containers; image required and
//     free of surrounding whitespace; terminationMessagePolicy; imagePullPolicy;
//     ports (number, hostPort, protocol, IANA name, duplicate names, host-port
//     conflicts, hostPort == containerPort with hostNetwork); env (relaxed
//     names, valueFrom with exactly one source, downward API paths, resource
//     selectors and divisors, key selectors); envFrom; volumeMounts (volume
//     exists, mountPath required and unique, subPath, propagation, recursive
//     read-only); volumeDevices; resources (names, non-negative and integer
//     quantities, requests <= limits, non-overcommittable resources);
//     resizePolicy values; probes and lifecycle handlers; init-container
//     restartPolicy (sidecars) and the fields only sidecars may set; container
//     securityContext (ids, procMount, seccomp, privilege-escalation conflicts)
//   - volumes: names (DNS label, unique), at most one source, and the shape of
//     emptyDir, hostPath, secret, configMap, persistentVolumeClaim, downwardAPI
//     and projected sources; other sources are counted but not inspected
//   - restartPolicy, dnsPolicy, dnsConfig, nodeSelector, nodeName,
//     serviceAccountName, activeDeadlineSeconds, hostname, subdomain,
//     tolerations, hostAliases, priorityClassName, runtimeClassName,
//     preemptionPolicy, overhead, os.name, readinessGates, schedulingGates
//     (and no nodeName while gated), node affinity (required
//     and preferred), pod affinity and anti-affinity terms, pod
//     securityContext (ids, sysctls, fsGroupChangePolicy, seccomp,
//     shareProcessNamespace with hostPID), hostUsers=false with host
//     namespaces, ephemeral containers refused on create.
//
// Added here, not upstream: any quantity in the spec of 1e40 or more is
// refused (see maxQuantityDigits), because exact arithmetic on it would hold
// the request for minutes.
//
// Deliberately not covered:
//   - ephemeral container contents (the ephemeralcontainers subresource is
//     not served, so they can never be set) and in-place resize (no resize
//     subresource; resizePolicy values are still checked)
//   - user-namespace details beyond the host-namespace conflict, AppArmor,
//     Windows options, SELinux change policy, supplementalGroupsPolicy, the
//     namespaced-sysctl/host-namespace conflict, seccomp and AppArmor
//     annotations and their agreement with fields
//   - topologySpreadConstraints, pod affinity matchLabelKeys and
//     mismatchLabelKeys, pod-level spec.resources (beyond the size bound),
//     resourceClaims and claim references, hugepage size divisibility,
//     OS-specific field restrictions, container restartPolicyRules
//   - the inner shape of volume sources other than the seven listed above
//
// Like upstream, terminationGracePeriodSeconds may be negative (deletion then
// treats it as 1), and container status entries are not checked against the
// spec.

import (
	"fmt"
	"math"
	"math/big"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Detail strings shared by several rules.
const (
	fileModeErrorMsg   = "must be a number between 0 and 0777 (octal), both inclusive"
	moreThanOneVolType = "may not specify more than 1 volume type"
	moreThanOneHandler = "may not specify more than 1 handler type"
	notIntegerErrorMsg = "must be an integer"
	initNeedsSidecar   = "may not be set for init containers without restartPolicy=Always"
)

// validateOptions carries the few relaxations an update may need so that an
// object stored under older rules can still be updated.
type validateOptions struct {
	// allowInvalidDeletionCost: the old object already had an unparsable
	// pod-deletion-cost annotation.
	allowInvalidDeletionCost bool
}

// validateCreate is Kind.Validate.
func validateCreate(obj runtime.Object) field.ErrorList {
	pod := obj.(*v1.Pod)
	allErrs := validatePodMetaAndSpec(pod, validateOptions{})
	specPath := field.NewPath("spec")
	if len(pod.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return allErrs
}

// validatePodMetaAndSpec holds the rules create and update share.
func validatePodMetaAndSpec(pod *v1.Pod, opts validateOptions) field.ErrorList {
	specPath := field.NewPath("spec")
	allErrs := validatePodAnnotations(pod.Annotations, &pod.Spec, field.NewPath("metadata", "annotations"), opts)
	allErrs = append(allErrs, validatePodSpec(&pod.Spec, specPath)...)

	if pod.Spec.ServiceAccountName == "" {
		for vi, vol := range pod.Spec.Volumes {
			if vol.Projected == nil {
				continue
			}
			for si, src := range vol.Projected.Sources {
				if src.ServiceAccountToken != nil {
					p := specPath.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken")
					allErrs = append(allErrs, field.Forbidden(p, "must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	allErrs = append(allErrs, validateImageWhitespace(pod.Spec.Containers, specPath.Child("containers"))...)
	allErrs = append(allErrs, validateImageWhitespace(pod.Spec.InitContainers, specPath.Child("initContainers"))...)
	return allErrs
}

func validateImageWhitespace(containers []v1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range containers {
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			allErrs = append(allErrs, field.Invalid(fldPath.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return allErrs
}

func validatePodAnnotations(annotations map[string]string, spec *v1.PodSpec, fldPath *field.Path, opts validateOptions) field.ErrorList {
	var allErrs field.ErrorList
	if value, ok := annotations[v1.MirrorPodAnnotationKey]; ok && spec.NodeName == "" {
		allErrs = append(allErrs, field.Invalid(fldPath.Key(v1.MirrorPodAnnotationKey), value, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if !opts.allowInvalidDeletionCost && !validDeletionCost(annotations) {
		allErrs = append(allErrs, field.Invalid(fldPath.Key(v1.PodDeletionCost), annotations[v1.PodDeletionCost], "must be a 32bit integer"))
	}
	return allErrs
}

// validDeletionCost reports whether the pod-deletion-cost annotation is absent
// or an int32 written without a plus sign or leading zeros.
func validDeletionCost(annotations map[string]string) bool {
	value, ok := annotations[v1.PodDeletionCost]
	if !ok {
		return true
	}
	if value == "" || !(value[0] == '-' || value == "0" || (value[0] >= '1' && value[0] <= '9')) {
		return false
	}
	_, err := strconv.ParseInt(value, 10, 32)
	return err == nil
}

func validatePodSpec(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("terminationGracePeriodSeconds"), ""))
	}
	gracePeriod := spec.TerminationGracePeriodSeconds
	hostUsers := spec.HostUsers == nil || *spec.HostUsers

	vols, volErrs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	allErrs = append(allErrs, volErrs...)
	allErrs = append(allErrs, validateContainers(spec.Containers, vols, gracePeriod, fldPath.Child("containers"), spec.RestartPolicy, hostUsers)...)
	allErrs = append(allErrs, validateInitContainers(spec.InitContainers, spec.Containers, vols, gracePeriod, fldPath.Child("initContainers"), spec.RestartPolicy, hostUsers)...)
	allErrs = append(allErrs, validateHostNetworkPorts(spec, fldPath)...)
	allErrs = append(allErrs, validateRestartPolicy(spec.RestartPolicy, fldPath.Child("restartPolicy"))...)
	allErrs = append(allErrs, validateDNSPolicy(spec.DNSPolicy, fldPath.Child("dnsPolicy"))...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	allErrs = append(allErrs, validatePodSecurityContext(spec, fldPath.Child("securityContext"))...)
	allErrs = append(allErrs, validateAffinity(spec.Affinity, fldPath.Child("affinity"))...)
	allErrs = append(allErrs, validateDNSConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	for i, gate := range spec.ReadinessGates {
		allErrs = append(allErrs, validateQualifiedName(string(gate.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	allErrs = append(allErrs, validateSchedulingGates(spec.SchedulingGates, fldPath.Child("schedulingGates"))...)
	allErrs = append(allErrs, validateHostUsers(spec, fldPath)...)
	allErrs = append(allErrs, specTooLargeQuantities(spec, fldPath)...)

	if spec.ServiceAccountName != "" {
		for _, msg := range apivalidation.ValidateServiceAccountName(spec.ServiceAccountName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.NodeName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.Hostname != "" {
		allErrs = append(allErrs, validateDNS1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		allErrs = append(allErrs, validateDNS1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	allErrs = append(allErrs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	for i, alias := range spec.HostAliases {
		allErrs = append(allErrs, validation.IsValidIP(fldPath.Child("hostAliases").Index(i).Child("ip"), alias.IP)...)
		for j, hostname := range alias.Hostnames {
			allErrs = append(allErrs, validateDNS1123Subdomain(hostname, fldPath.Child("hostAliases").Index(i).Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.PriorityClassName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("priorityClassName"), spec.PriorityClassName, msg))
		}
	}
	if spec.RuntimeClassName != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*spec.RuntimeClassName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runtimeClassName"), *spec.RuntimeClassName, msg))
		}
	}
	if spec.PreemptionPolicy != nil {
		allErrs = append(allErrs, validatePreemptionPolicy(spec.PreemptionPolicy, fldPath.Child("preemptionPolicy"))...)
	}
	if spec.Overhead != nil {
		allErrs = append(allErrs, validateResourceRequirements(&v1.ResourceRequirements{Limits: spec.Overhead}, fldPath.Child("overhead"))...)
	}
	if spec.OS != nil {
		if spec.OS.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("os", "name"), ""))
		} else if spec.OS.Name != v1.Linux && spec.OS.Name != v1.Windows {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("os", "name"), spec.OS.Name, []v1.OSName{v1.Linux, v1.Windows}))
		}
	}
	return allErrs
}

// --- small shared checks ----------------------------------------------------

func validateDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateDNS1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

// validatePathNoBacksteps refuses any ".." element.
func validatePathNoBacksteps(target string, fldPath *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(target), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fldPath, target, "must not contain '..'")}
		}
	}
	return nil
}

// validateLocalDescendingPath requires a relative path without "..".
func validateLocalDescendingPath(target string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if path.IsAbs(target) {
		allErrs = append(allErrs, field.Invalid(fldPath, target, "must be a relative path"))
	}
	return append(allErrs, validatePathNoBacksteps(target, fldPath)...)
}

func validateLocalNonReservedPath(target string, fldPath *field.Path) field.ErrorList {
	allErrs := validateLocalDescendingPath(target, fldPath)
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		allErrs = append(allErrs, field.Invalid(fldPath, target, "must not start with '..'"))
	}
	return allErrs
}

func validatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return allErrs
}

// --- volumes ----------------------------------------------------------------

// volumeSources lists a volume's sources in upstream's checking order, with
// the path segment upstream names when a second source is refused.
func volumeSources(src *v1.VolumeSource) []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
		{"emptyDir", src.EmptyDir != nil},
		{"hostPath", src.HostPath != nil},
		{"gitRepo", src.GitRepo != nil},
		{"gcePersistentDisk", src.GCEPersistentDisk != nil},
		{"awsElasticBlockStore", src.AWSElasticBlockStore != nil},
		{"secret", src.Secret != nil},
		{"nfs", src.NFS != nil},
		{"iscsi", src.ISCSI != nil},
		{"glusterfs", src.Glusterfs != nil},
		{"flocker", src.Flocker != nil},
		{"persistentVolumeClaim", src.PersistentVolumeClaim != nil},
		{"rbd", src.RBD != nil},
		{"cinder", src.Cinder != nil},
		{"cephFS", src.CephFS != nil},
		{"quobyte", src.Quobyte != nil},
		{"downwarAPI", src.DownwardAPI != nil}, // upstream's spelling in this one message
		{"fc", src.FC != nil},
		{"flexVolume", src.FlexVolume != nil},
		{"configMap", src.ConfigMap != nil},
		{"azureFile", src.AzureFile != nil},
		{"vsphereVolume", src.VsphereVolume != nil},
		{"photonPersistentDisk", src.PhotonPersistentDisk != nil},
		{"portworxVolume", src.PortworxVolume != nil},
		{"azureDisk", src.AzureDisk != nil},
		{"storageos", src.StorageOS != nil},
		{"projected", src.Projected != nil},
		{"scaleIO", src.ScaleIO != nil},
		{"csi", src.CSI != nil},
		{"ephemeral", src.Ephemeral != nil},
		{"image", src.Image != nil},
	}
}

func volumeSourceCount(src *v1.VolumeSource) int {
	n := 0
	for _, s := range volumeSources(src) {
		if s.set {
			n++
		}
	}
	return n
}

// validateVolumes returns the valid volumes by name (for mount checks) and
// the errors found.
func validateVolumes(volumes []v1.Volume, fldPath *field.Path) (map[string]v1.VolumeSource, field.ErrorList) {
	var allErrs field.ErrorList
	names := sets.New[string]()
	vols := make(map[string]v1.VolumeSource)
	for i, vol := range volumes {
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		el := validateVolumeSource(&vol.VolumeSource, idxPath)
		if vol.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, validateDNS1123Label(vol.Name, namePath)...)
		}
		if names.Has(vol.Name) {
			el = append(el, field.Duplicate(namePath, vol.Name))
		}
		if len(el) == 0 {
			names.Insert(vol.Name)
			vols[vol.Name] = vol.VolumeSource
		} else {
			allErrs = append(allErrs, el...)
		}
	}
	return vols, allErrs
}

func validateVolumeSource(src *v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := 0
	for _, s := range volumeSources(src) {
		if !s.set {
			continue
		}
		if seen > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(s.name), moreThanOneVolType))
			continue
		}
		seen++
		allErrs = append(allErrs, validateVolumeSourceShape(src, s.name, fldPath)...)
	}
	if seen == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must specify a volume type"))
	}
	return allErrs
}

var supportedHostPathTypes = sets.New(
	v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory,
	v1.HostPathFileOrCreate, v1.HostPathFile, v1.HostPathSocket,
	v1.HostPathCharDev, v1.HostPathBlockDev)

// validateVolumeSourceShape checks the one source named by which.
func validateVolumeSourceShape(src *v1.VolumeSource, which string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch which {
	case "emptyDir":
		if src.EmptyDir.SizeLimit != nil && src.EmptyDir.SizeLimit.Sign() < 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("emptyDir").Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	case "hostPath":
		p := fldPath.Child("hostPath")
		if src.HostPath.Path == "" {
			return field.ErrorList{field.Required(p.Child("path"), "")}
		}
		allErrs = append(allErrs, validatePathNoBacksteps(src.HostPath.Path, p.Child("path"))...)
		if t := src.HostPath.Type; t != nil && !supportedHostPathTypes.Has(*t) {
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), *t, sets.List(supportedHostPathTypes)))
		}
	case "secret":
		p := fldPath.Child("secret")
		if src.Secret.SecretName == "" {
			allErrs = append(allErrs, field.Required(p.Child("secretName"), ""))
		}
		allErrs = append(allErrs, validateFileMode(src.Secret.DefaultMode, p.Child("defaultMode"))...)
		for i := range src.Secret.Items {
			allErrs = append(allErrs, validateKeyToPath(&src.Secret.Items[i], p.Child("items").Index(i))...)
		}
	case "configMap":
		p := fldPath.Child("configMap")
		if src.ConfigMap.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		allErrs = append(allErrs, validateFileMode(src.ConfigMap.DefaultMode, p.Child("defaultMode"))...)
		for i := range src.ConfigMap.Items {
			allErrs = append(allErrs, validateKeyToPath(&src.ConfigMap.Items[i], p.Child("items").Index(i))...)
		}
	case "persistentVolumeClaim":
		if src.PersistentVolumeClaim.ClaimName == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("persistentVolumeClaim").Child("claimName"), ""))
		}
	case "downwarAPI":
		p := fldPath.Child("downwardAPI")
		allErrs = append(allErrs, validateFileMode(src.DownwardAPI.DefaultMode, p.Child("defaultMode"))...)
		for i := range src.DownwardAPI.Items {
			// Upstream reports item errors at the source path, not the item's.
			allErrs = append(allErrs, validateDownwardAPIFile(&src.DownwardAPI.Items[i], p)...)
		}
	case "projected":
		p := fldPath.Child("projected")
		allErrs = append(allErrs, validateFileMode(src.Projected.DefaultMode, p.Child("defaultMode"))...)
		allErrs = append(allErrs, validateProjectionSources(src.Projected, p)...)
	}
	return allErrs
}

func validateKeyToPath(kp *v1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if kp.Key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	}
	if kp.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, validateLocalNonReservedPath(kp.Path, fldPath.Child("path"))...)
	allErrs = append(allErrs, validateFileMode(kp.Mode, fldPath.Child("mode"))...)
	return allErrs
}

var volumeDownwardAPIFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations", "metadata.uid")

func validateDownwardAPIFile(file *v1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if file.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, validateLocalNonReservedPath(file.Path, fldPath.Child("path"))...)
	switch {
	case file.FieldRef != nil:
		allErrs = append(allErrs, validateObjectFieldSelector(file.FieldRef, volumeDownwardAPIFieldPaths, fldPath.Child("fieldRef"))...)
		if file.ResourceFieldRef != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case file.ResourceFieldRef != nil:
		allErrs = append(allErrs, validateResourceFieldSelector(file.ResourceFieldRef, fldPath.Child("resourceFieldRef"), true)...)
	default:
		allErrs = append(allErrs, field.Required(fldPath, "one of fieldRef and resourceFieldRef is required"))
	}
	allErrs = append(allErrs, validateFileMode(file.Mode, fldPath.Child("mode"))...)
	return allErrs
}

func validateProjectionSources(projection *v1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths := sets.New[string]()
	addPath := func(p string, badValue string) {
		if paths.Has(p) {
			allErrs = append(allErrs, field.Invalid(fldPath, badValue, "conflicting duplicate paths"))
			return
		}
		paths.Insert(p)
	}
	for i, src := range projection.Sources {
		n := 0
		srcPath := fldPath.Child("sources").Index(i)
		if src.Secret != nil {
			n++
			p := srcPath.Child("secret")
			if src.Secret.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("name"), ""))
			}
			for j := range src.Secret.Items {
				allErrs = append(allErrs, validateKeyToPath(&src.Secret.Items[j], p.Child("items").Index(j))...)
				if src.Secret.Items[j].Path != "" {
					addPath(src.Secret.Items[j].Path, src.Secret.Name)
				}
			}
		}
		if src.ConfigMap != nil {
			n++
			p := srcPath.Child("configMap")
			if src.ConfigMap.Name == "" {
				allErrs = append(allErrs, field.Required(p.Child("name"), ""))
			}
			for j := range src.ConfigMap.Items {
				allErrs = append(allErrs, validateKeyToPath(&src.ConfigMap.Items[j], p.Child("items").Index(j))...)
				if src.ConfigMap.Items[j].Path != "" {
					addPath(src.ConfigMap.Items[j].Path, src.ConfigMap.Name)
				}
			}
		}
		if src.DownwardAPI != nil {
			n++
			p := srcPath.Child("downwardAPI")
			for j := range src.DownwardAPI.Items {
				allErrs = append(allErrs, validateDownwardAPIFile(&src.DownwardAPI.Items[j], p)...)
				if src.DownwardAPI.Items[j].Path != "" {
					addPath(src.DownwardAPI.Items[j].Path, src.DownwardAPI.Items[j].Path)
				}
			}
		}
		if sat := src.ServiceAccountToken; sat != nil {
			n++
			p := srcPath.Child("serviceAccountToken")
			exp := int64(0)
			if sat.ExpirationSeconds != nil {
				exp = *sat.ExpirationSeconds
			}
			if exp < 10*60 {
				allErrs = append(allErrs, field.Invalid(p.Child("expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
			}
			if exp > 1<<32 {
				allErrs = append(allErrs, field.Invalid(p.Child("expirationSeconds"), exp, "may not specify a duration larger than 2^32 seconds"))
			}
			// Upstream reports the token path at the projection, not the source.
			if sat.Path == "" {
				allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
			} else {
				allErrs = append(allErrs, validateLocalNonReservedPath(sat.Path, fldPath.Child("path"))...)
			}
		}
		if src.ClusterTrustBundle != nil {
			n++
			p := srcPath.Child("clusterTrustBundle")
			if src.ClusterTrustBundle.Path == "" {
				allErrs = append(allErrs, field.Required(p.Child("path"), ""))
			}
			allErrs = append(allErrs, validateLocalNonReservedPath(src.ClusterTrustBundle.Path, p.Child("path"))...)
			addPath(src.ClusterTrustBundle.Path, src.ClusterTrustBundle.Path)
		}
		if src.PodCertificate != nil {
			n++
		}
		if n > 1 {
			allErrs = append(allErrs, field.Forbidden(srcPath, "may not specify more than 1 volume type per source"))
		}
	}
	return allErrs
}

// --- containers -------------------------------------------------------------

func validateContainers(containers []v1.Container, vols map[string]v1.VolumeSource, gracePeriod *int64, fldPath *field.Path, podRestart v1.RestartPolicy, hostUsers bool) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i := range containers {
		c := &containers[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateContainerCommon(c, vols, p, podRestart, hostUsers)...)
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		if c.Lifecycle != nil {
			allErrs = append(allErrs, validateLifecycle(c.Lifecycle, gracePeriod, p.Child("lifecycle"))...)
		}
		allErrs = append(allErrs, validateLivenessProbe(c.LivenessProbe, p.Child("livenessProbe"))...)
		allErrs = append(allErrs, validateReadinessProbe(c.ReadinessProbe, p.Child("readinessProbe"))...)
		allErrs = append(allErrs, validateStartupProbe(c.StartupProbe, p.Child("startupProbe"))...)
		if c.RestartPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(allErrs, checkHostPortConflicts(containers, fldPath)...)
}

func validateInitContainers(inits, regular []v1.Container, vols map[string]v1.VolumeSource, gracePeriod *int64, fldPath *field.Path, podRestart v1.RestartPolicy, hostUsers bool) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range inits {
		c := &inits[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, validateContainerCommon(c, vols, p, podRestart, hostUsers)...)
		sidecar := false
		if c.RestartPolicy != nil {
			if *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
				allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways}))
			}
			sidecar = *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		}
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		// Init containers run one at a time, so each is checked alone.
		allErrs = append(allErrs, checkHostPortConflicts([]v1.Container{*c}, fldPath)...)
		if sidecar {
			if c.Lifecycle != nil {
				allErrs = append(allErrs, validateLifecycle(c.Lifecycle, gracePeriod, p.Child("lifecycle"))...)
			}
			allErrs = append(allErrs, validateLivenessProbe(c.LivenessProbe, p.Child("livenessProbe"))...)
			allErrs = append(allErrs, validateReadinessProbe(c.ReadinessProbe, p.Child("readinessProbe"))...)
			allErrs = append(allErrs, validateStartupProbe(c.StartupProbe, p.Child("startupProbe"))...)
			continue
		}
		if c.Lifecycle != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("lifecycle"), initNeedsSidecar))
		}
		if c.LivenessProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("livenessProbe"), initNeedsSidecar))
		}
		if c.ReadinessProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("readinessProbe"), initNeedsSidecar))
		}
		if c.StartupProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("startupProbe"), initNeedsSidecar))
		}
	}
	return allErrs
}

func validateContainerCommon(c *v1.Container, vols map[string]v1.VolumeSource, p *field.Path, podRestart v1.RestartPolicy, hostUsers bool) field.ErrorList {
	var allErrs field.ErrorList
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateDNS1123Label(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	}
	switch c.TerminationMessagePolicy {
	case v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	case "":
		allErrs = append(allErrs, field.Required(p.Child("terminationMessagePolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]v1.TerminationMessagePolicy{v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError}))
	}
	mounts := make(map[string]string, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	devices := make(map[string]string, len(c.VolumeDevices))
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	allErrs = append(allErrs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	allErrs = append(allErrs, validateEnv(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, validateVolumeMounts(c.VolumeMounts, devices, vols, c, p.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateVolumeDevices(c.VolumeDevices, mounts, vols, p.Child("volumeDevices"))...)
	allErrs = append(allErrs, validatePullPolicy(c.ImagePullPolicy, p.Child("imagePullPolicy"))...)
	allErrs = append(allErrs, validateResourceRequirements(&c.Resources, p.Child("resources"))...)
	allErrs = append(allErrs, validateResizePolicy(c.ResizePolicy, p.Child("resizePolicy"), podRestart)...)
	allErrs = append(allErrs, validateSecurityContext(c.SecurityContext, p.Child("securityContext"), hostUsers)...)
	return allErrs
}

var supportedPortProtocols = sets.New(v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)

func validateContainerPorts(ports []v1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					allErrs = append(allErrs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Protocol == "" {
			allErrs = append(allErrs, field.Required(p.Child("protocol"), ""))
		} else if !supportedPortProtocols.Has(port.Protocol) {
			allErrs = append(allErrs, field.NotSupported(p.Child("protocol"), port.Protocol, sets.List(supportedPortProtocols)))
		}
	}
	return allErrs
}

// checkHostPortConflicts refuses two ports that would bind the same
// protocol/hostIP/hostPort on the node.
func checkHostPortConflicts(containers []v1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			} else {
				seen.Insert(key)
			}
		}
	}
	return allErrs
}

// validateHostNetworkPorts: with host networking a pod's hostPort must equal
// its containerPort (defaulting already copies one into the other).
func validateHostNetworkPorts(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	if !spec.HostNetwork {
		return nil
	}
	var allErrs field.ErrorList
	for i, c := range spec.Containers {
		for j, port := range c.Ports {
			if port.HostPort != port.ContainerPort {
				p := fldPath.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort")
				allErrs = append(allErrs, field.Invalid(p, port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
			}
		}
	}
	return allErrs
}

var envDownwardAPIFieldPaths = sets.New(
	"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")

func validateEnv(vars []v1.EnvVar, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			// RelaxedEnvironmentVariableValidation is on by default from v1.32.
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		allErrs = append(allErrs, validateEnvValueFrom(ev, p.Child("valueFrom"))...)
	}
	return allErrs
}

func validateEnvValueFrom(ev v1.EnvVar, fldPath *field.Path) field.ErrorList {
	if ev.ValueFrom == nil {
		return nil
	}
	var allErrs field.ErrorList
	n := 0
	if ev.ValueFrom.FieldRef != nil {
		n++
		allErrs = append(allErrs, validateObjectFieldSelector(ev.ValueFrom.FieldRef, envDownwardAPIFieldPaths, fldPath.Child("fieldRef"))...)
	}
	if ev.ValueFrom.ResourceFieldRef != nil {
		n++
		allErrs = append(allErrs, validateResourceFieldSelector(ev.ValueFrom.ResourceFieldRef, fldPath.Child("resourceFieldRef"), false)...)
	}
	if ev.ValueFrom.ConfigMapKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeySelector(ev.ValueFrom.ConfigMapKeyRef.Name, ev.ValueFrom.ConfigMapKeyRef.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if ev.ValueFrom.SecretKeyRef != nil {
		n++
		allErrs = append(allErrs, validateKeySelector(ev.ValueFrom.SecretKeyRef.Name, ev.ValueFrom.SecretKeyRef.Key, fldPath.Child("secretKeyRef"))...)
	}
	switch {
	case n == 0:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case n > 1:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return allErrs
}

func validateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	if key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return allErrs
}

// downwardAPILabels are the field paths upstream's v1 conversion accepts for
// a downward API reference, before the per-use allow list is applied.
var downwardAPILabels = sets.New(
	"metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
	"metadata.uid", "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName",
	"spec.schedulerName", "status.phase", "status.hostIP", "status.hostIPs",
	"status.podIP", "status.podIPs")

// splitSubscriptedPath splits `metadata.labels['key']` into its path and key.
func splitSubscriptedPath(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return "", "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

func validateObjectFieldSelector(fs *v1.ObjectFieldSelector, allowed sets.Set[string], fldPath *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	internal, convErr := convertDownwardAPIFieldLabel(fs.APIVersion, fs.FieldPath)
	if convErr != "" {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), fs.FieldPath, "error converting fieldPath: "+convErr)}
	}
	if p, key, ok := splitSubscriptedPath(internal); ok {
		switch p {
		case "metadata.annotations":
			return validateQualifiedName(strings.ToLower(key), fldPath)
		case "metadata.labels":
			return validateQualifiedName(key, fldPath)
		default:
			return field.ErrorList{field.Invalid(fldPath, p, "does not support subscript")}
		}
	}
	if !allowed.Has(internal) {
		return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), internal, sets.List(allowed))}
	}
	return nil
}

// convertDownwardAPIFieldLabel mirrors upstream's field-label conversion for
// pods; the second result is the error text, empty when the label is known.
func convertDownwardAPIFieldLabel(version, label string) (string, string) {
	if version != "v1" {
		return "", "unsupported pod version: " + version
	}
	if p, _, ok := splitSubscriptedPath(label); ok {
		if p == "metadata.annotations" || p == "metadata.labels" {
			return label, ""
		}
		return "", "field label does not support subscript: " + label
	}
	if label == "spec.host" {
		return "spec.nodeName", ""
	}
	if !downwardAPILabels.Has(label) {
		return "", "field label not supported: " + label
	}
	return label, ""
}

var containerResourceFieldPaths = sets.New(
	"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage")

func validateResourceFieldSelector(fs *v1.ResourceFieldSelector, fldPath *field.Path, volume bool) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case volume && fs.ContainerName == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("containerName"), ""))
	case fs.Resource == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("resource"), ""))
	case !containerResourceFieldPaths.Has(fs.Resource) &&
		!strings.HasPrefix(fs.Resource, "requests.hugepages-") && !strings.HasPrefix(fs.Resource, "limits.hugepages-"):
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("resource"), fs.Resource, sets.List(containerResourceFieldPaths)))
	}
	return append(allErrs, validateResourceDivisor(fs.Resource, fs.Divisor, fldPath)...)
}

var (
	cpuDivisors    = sets.New("1m", "1")
	memoryDivisors = sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
)

const byteDivisorList = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"

func validateResourceDivisor(rName string, divisor resource.Quantity, fldPath *field.Path) field.ErrorList {
	if divisor.IsZero() {
		return nil
	}
	var allErrs field.ErrorList
	d := divisor.String()
	switch rName {
	case "limits.cpu", "requests.cpu":
		if !cpuDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), rName, "only divisor's values 1m and 1 are supported with the cpu resource"))
		}
	case "limits.memory", "requests.memory":
		if !memoryDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), rName, "only divisor's values "+byteDivisorList+" are supported with the memory resource"))
		}
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		if !memoryDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), rName, "only divisor's values "+byteDivisorList+" are supported with the local ephemeral storage resource"))
		}
	}
	if strings.HasPrefix(rName, "requests.hugepages-") || strings.HasPrefix(rName, "limits.hugepages-") {
		if !memoryDivisors.Has(d) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("divisor"), rName, "only divisor's values "+byteDivisorList+" are supported with the hugepages resource"))
		}
	}
	return allErrs
}

func validateEnvFrom(sources []v1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, ev := range sources {
		p := fldPath.Index(i)
		if ev.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Prefix) {
				allErrs = append(allErrs, field.Invalid(p.Child("prefix"), ev.Prefix, msg))
			}
		}
		n := 0
		if ev.ConfigMapRef != nil {
			n++
			allErrs = append(allErrs, validateEnvSourceName(ev.ConfigMapRef.Name, p.Child("configMapRef"))...)
		}
		if ev.SecretRef != nil {
			n++
			allErrs = append(allErrs, validateEnvSourceName(ev.SecretRef.Name, p.Child("secretRef"))...)
		}
		// Upstream reports these two at the list path, not the entry's.
		if n == 0 {
			allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return allErrs
}

func validateEnvSourceName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "")}
	}
	var allErrs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, true) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	return allErrs
}

func validateVolumeMounts(mounts []v1.VolumeMount, devices map[string]string, vols map[string]v1.VolumeSource, c *v1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	mountPoints := sets.New[string]()
	for i, m := range mounts {
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		}
		if mountPoints.Has(m.MountPath) {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPoints.Insert(m.MountPath)
		if _, ok := devices[m.Name]; ok {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, devPath := range devices {
			if devPath == m.MountPath {
				allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
				break
			}
		}
		if v, ok := vols[m.Name]; ok && v.Image != nil {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPath"), m.SubPath, "not allowed in image volume sources"))
			}
			if m.SubPathExpr != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "not allowed in image volume sources"))
			}
		}
		// Upstream reports subPath problems at the list path.
		if m.SubPath != "" {
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			allErrs = append(allErrs, validateLocalDescendingPath(m.SubPathExpr, fldPath.Child("subPathExpr"))...)
		}
		if m.MountPropagation != nil {
			allErrs = append(allErrs, validateMountPropagation(*m.MountPropagation, c, fldPath.Child("mountPropagation"))...)
		}
		allErrs = append(allErrs, validateRecursiveReadOnly(m, fldPath.Child("recursiveReadOnly"))...)
	}
	return allErrs
}

var supportedMountPropagations = sets.New(v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone)

func validateMountPropagation(mode v1.MountPropagationMode, c *v1.Container, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if !supportedMountPropagations.Has(mode) {
		allErrs = append(allErrs, field.NotSupported(fldPath, mode, sets.List(supportedMountPropagations)))
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	if mode == v1.MountPropagationBidirectional && !privileged {
		allErrs = append(allErrs, field.Forbidden(fldPath, "Bidirectional mount propagation is available only to privileged containers"))
	}
	return allErrs
}

func validateRecursiveReadOnly(m v1.VolumeMount, fldPath *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyDisabled:
	case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			allErrs = append(allErrs, field.Forbidden(fldPath, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
			allErrs = append(allErrs, field.Forbidden(fldPath, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath, *m.RecursiveReadOnly,
			sets.List(sets.New(v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyIfPossible, v1.RecursiveReadOnlyEnabled))))
	}
	return allErrs
}

func validateVolumeDevices(devices []v1.VolumeDevice, mounts map[string]string, vols map[string]v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	paths := sets.New[string]()
	names := sets.New[string]()
	for i, d := range devices {
		p := fldPath.Index(i)
		src, matched := vols[d.Name]
		isPVC := matched && (src.PersistentVolumeClaim != nil || src.Ephemeral != nil)
		if d.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if names.Has(d.Name) {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must be unique"))
		}
		if matched && !isPVC {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !matched {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			allErrs = append(allErrs, field.Required(p.Child("devicePath"), ""))
		}
		if paths.Has(d.DevicePath) {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(validatePathNoBacksteps(d.DevicePath, p)) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths.Insert(d.DevicePath)
		}
		if _, ok := mounts[d.Name]; ok {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		for _, mp := range mounts {
			if mp == d.DevicePath {
				allErrs = append(allErrs, field.Invalid(p.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
				break
			}
		}
		if d.Name != "" {
			names.Insert(d.Name)
		}
	}
	return allErrs
}

var supportedPullPolicies = sets.New(v1.PullAlways, v1.PullIfNotPresent, v1.PullNever)

func validatePullPolicy(policy v1.PullPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, policy, sets.List(supportedPullPolicies))}
	}
}

// --- resources --------------------------------------------------------------

var (
	standardContainerResources = sets.New("cpu", "memory", "ephemeral-storage")
	standardResources          = sets.New(
		"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
		"requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
		"persistentvolumeclaims", "storage", "requests.storage", "services.nodeports",
		"services.loadbalancers")
	integerResources = sets.New(
		"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
		"persistentvolumeclaims", "services.nodeports", "services.loadbalancers")
)

func isHugePages(name string) bool { return strings.HasPrefix(name, v1.ResourceHugePagesPrefix) }

// isNativeResource: unprefixed names and names under kubernetes.io/.
func isNativeResource(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix)
}

func isExtendedResource(name string) bool {
	if isNativeResource(name) || strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}

func isOvercommitAllowed(name string) bool { return isNativeResource(name) && !isHugePages(name) }

func isIntegerResource(name string) bool {
	return integerResources.Has(name) || isExtendedResource(name)
}

func validateResourceName(name string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	if len(allErrs) != 0 {
		return allErrs
	}
	if !strings.Contains(name, "/") && !standardResources.Has(name) &&
		!isHugePages(name) && !strings.HasPrefix(name, "requests.hugepages-") {
		return field.ErrorList{field.Invalid(fldPath, name, "must be a standard resource type or fully qualified")}
	}
	return nil
}

func validateContainerResourceName(name string, fldPath *field.Path) field.ErrorList {
	allErrs := validateResourceName(name, fldPath)
	if !strings.Contains(name, "/") {
		if !standardContainerResources.Has(name) && !isHugePages(name) {
			return append(allErrs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && !isExtendedResource(name) {
		return append(allErrs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return allErrs
}

func validateResourceQuantity(name string, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	if quantityTooLarge(q) {
		return field.ErrorList{tooLargeError(fldPath)}
	}
	var allErrs field.ErrorList
	if q.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if isIntegerResource(name) && q.MilliValue()%1000 != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), notIntegerErrorMsg))
	}
	return allErrs
}

func validateResourceRequirements(r *v1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	limCPUOrMem, reqCPUOrMem, limHuge, reqHuge := false, false, false, false
	for _, name := range sortedNames(r.Limits) {
		q := r.Limits[v1.ResourceName(name)]
		p := limPath.Key(name)
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateResourceQuantity(name, q, p)...)
		limHuge = limHuge || isHugePages(name)
		limCPUOrMem = limCPUOrMem || name == "cpu" || name == "memory"
	}
	for _, name := range sortedNames(r.Requests) {
		q := r.Requests[v1.ResourceName(name)]
		p := reqPath.Key(name)
		allErrs = append(allErrs, validateContainerResourceName(name, p)...)
		allErrs = append(allErrs, validateResourceQuantity(name, q, p)...)
		if limit, ok := r.Limits[v1.ResourceName(name)]; ok {
			if quantityTooLarge(q) || quantityTooLarge(limit) {
				// Already reported; comparing would take too long.
			} else if q.Cmp(limit) != 0 && !isOvercommitAllowed(name) {
				allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if q.Cmp(limit) > 0 {
				allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !isOvercommitAllowed(name) {
			allErrs = append(allErrs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		reqHuge = reqHuge || isHugePages(name)
		reqCPUOrMem = reqCPUOrMem || name == "cpu" || name == "memory"
	}
	if !limCPUOrMem && !reqCPUOrMem && (reqHuge || limHuge) {
		allErrs = append(allErrs, field.Forbidden(fldPath, "HugePages require cpu or memory"))
	}
	return allErrs
}

// maxQuantityDigits bounds the magnitude of quantities this package does
// arithmetic on: |q| must be below 10^maxQuantityDigits. apimachinery's exact
// arithmetic costs time in proportion to the gap between two exponents, so
// "cpu: 1e99999999" would hold a request for minutes. Upstream has no such
// bound (and the same cost); the Quantity documentation promises no value
// above 2^63-1, far inside this one, so nothing real is refused.
const maxQuantityDigits = 40

const tooLargeMsg = "must be less than 1e40"

func tooLargeError(fldPath *field.Path) *field.Error {
	// The value is left out: printing it is as costly as using it.
	return field.Invalid(fldPath, field.OmitValueType{}, tooLargeMsg)
}

// quantityTooLarge reports whether |q| >= 10^maxQuantityDigits, without
// doing arithmetic on q.
func quantityTooLarge(q resource.Quantity) bool {
	d := q.AsDec()
	u := d.UnscaledBig()
	if u.Sign() == 0 {
		return false
	}
	var digits int64
	if bits := u.BitLen(); bits <= 4096 {
		digits = int64(len(new(big.Int).Abs(u).String()))
	} else {
		// A lower bound; exact enough this far from the limit.
		digits = int64(float64(bits-1)*math.Log10(2)) + 1
	}
	return digits-int64(d.Scale()) > maxQuantityDigits
}

// specTooLargeQuantities reports every quantity in spec that is too large to
// work with. validatePodSpec calls it for the fields it does not otherwise
// inspect, and an update with such a value skips the spec comparison.
func specTooLargeQuantities(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	check := func(list v1.ResourceList, p *field.Path) {
		for _, name := range sortedNames(list) {
			if quantityTooLarge(list[v1.ResourceName(name)]) {
				allErrs = append(allErrs, tooLargeError(p.Key(name)))
			}
		}
	}
	if spec.Resources != nil {
		check(spec.Resources.Limits, fldPath.Child("resources", "limits"))
		check(spec.Resources.Requests, fldPath.Child("resources", "requests"))
	}
	for i, vol := range spec.Volumes {
		if vol.EmptyDir != nil && vol.EmptyDir.SizeLimit != nil && quantityTooLarge(*vol.EmptyDir.SizeLimit) {
			allErrs = append(allErrs, tooLargeError(fldPath.Child("volumes").Index(i).Child("emptyDir", "sizeLimit")))
		}
	}
	for i := range spec.EphemeralContainers {
		r := &spec.EphemeralContainers[i].Resources
		p := fldPath.Child("ephemeralContainers").Index(i).Child("resources")
		check(r.Limits, p.Child("limits"))
		check(r.Requests, p.Child("requests"))
	}
	return allErrs
}

// hasTooLargeQuantity is true when any quantity in spec is too large,
// including those validateResourceRequirements reports and divisors (a
// too-large divisor is always refused by the divisor rules).
func hasTooLargeQuantity(spec *v1.PodSpec) bool {
	if len(specTooLargeQuantities(spec, field.NewPath("spec"))) > 0 {
		return true
	}
	var quantities []resource.Quantity
	for _, q := range spec.Overhead {
		quantities = append(quantities, q)
	}
	for _, cs := range [][]v1.Container{spec.Containers, spec.InitContainers} {
		for i := range cs {
			for _, q := range cs[i].Resources.Limits {
				quantities = append(quantities, q)
			}
			for _, q := range cs[i].Resources.Requests {
				quantities = append(quantities, q)
			}
			for _, ev := range cs[i].Env {
				if ev.ValueFrom != nil && ev.ValueFrom.ResourceFieldRef != nil {
					quantities = append(quantities, ev.ValueFrom.ResourceFieldRef.Divisor)
				}
			}
		}
	}
	for _, vol := range spec.Volumes {
		var files []v1.DownwardAPIVolumeFile
		if vol.DownwardAPI != nil {
			files = append(files, vol.DownwardAPI.Items...)
		}
		if vol.Projected != nil {
			for _, src := range vol.Projected.Sources {
				if src.DownwardAPI != nil {
					files = append(files, src.DownwardAPI.Items...)
				}
			}
		}
		for _, f := range files {
			if f.ResourceFieldRef != nil {
				quantities = append(quantities, f.ResourceFieldRef.Divisor)
			}
		}
	}
	for _, q := range quantities {
		if quantityTooLarge(q) {
			return true
		}
	}
	return false
}

// sortedNames gives resource lists a stable iteration order so that error
// lists are deterministic (upstream iterates the map directly).
func sortedNames(list v1.ResourceList) []string {
	names := make([]string, 0, len(list))
	for name := range list {
		names = append(names, string(name))
	}
	return sets.List(sets.New(names...))
}

var (
	supportedResizeResources = sets.New(v1.ResourceCPU, v1.ResourceMemory)
	supportedResizePolicies  = sets.New(v1.NotRequired, v1.RestartContainer)
)

func validateResizePolicy(policies []v1.ContainerResizePolicy, fldPath *field.Path, podRestart v1.RestartPolicy) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[v1.ResourceName]()
	for i, p := range policies {
		if seen.Has(p.ResourceName) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), p.ResourceName))
		}
		seen.Insert(p.ResourceName)
		switch p.ResourceName {
		case v1.ResourceCPU, v1.ResourceMemory:
		case "":
			allErrs = append(allErrs, field.Required(fldPath, ""))
		default:
			allErrs = append(allErrs, field.NotSupported(fldPath, p.ResourceName, sets.List(supportedResizeResources)))
		}
		switch p.RestartPolicy {
		case v1.NotRequired, v1.RestartContainer:
		case "":
			allErrs = append(allErrs, field.Required(fldPath, ""))
		default:
			allErrs = append(allErrs, field.NotSupported(fldPath, p.RestartPolicy, sets.List(supportedResizePolicies)))
		}
		if podRestart == v1.RestartPolicyNever && p.RestartPolicy != v1.NotRequired {
			allErrs = append(allErrs, field.Invalid(fldPath, p.RestartPolicy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
		}
	}
	return allErrs
}

// --- probes and lifecycle ---------------------------------------------------

// handler is the union of the actions probes and lifecycle hooks may name.
type handler struct {
	exec      *v1.ExecAction
	httpGet   *v1.HTTPGetAction
	tcpSocket *v1.TCPSocketAction
	grpc      *v1.GRPCAction
	sleep     *v1.SleepAction
}

func validateProbe(probe *v1.Probe, fldPath *field.Path) field.ErrorList {
	h := handler{exec: probe.Exec, httpGet: probe.HTTPGet, tcpSocket: probe.TCPSocket, grpc: probe.GRPC}
	allErrs := validateHandler(h, nil, fldPath)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(probe.InitialDelaySeconds), fldPath.Child("initialDelaySeconds"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(probe.TimeoutSeconds), fldPath.Child("timeoutSeconds"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(probe.PeriodSeconds), fldPath.Child("periodSeconds"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(probe.SuccessThreshold), fldPath.Child("successThreshold"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(probe.FailureThreshold), fldPath.Child("failureThreshold"))...)
	if probe.TerminationGracePeriodSeconds != nil && *probe.TerminationGracePeriodSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *probe.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return allErrs
}

func validateLivenessProbe(probe *v1.Probe, fldPath *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	allErrs := validateProbe(probe, fldPath)
	if probe.SuccessThreshold != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
	}
	return allErrs
}

func validateReadinessProbe(probe *v1.Probe, fldPath *field.Path) field.ErrorList {
	if probe == nil {
		return nil
	}
	allErrs := validateProbe(probe, fldPath)
	if probe.TerminationGracePeriodSeconds != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), probe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
	}
	return allErrs
}

func validateStartupProbe(probe *v1.Probe, fldPath *field.Path) field.ErrorList {
	return validateLivenessProbe(probe, fldPath)
}

func validateLifecycle(lc *v1.Lifecycle, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if h := lc.PostStart; h != nil {
		allErrs = append(allErrs, validateHandler(handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}, gracePeriod, fldPath.Child("postStart"))...)
	}
	if h := lc.PreStop; h != nil {
		allErrs = append(allErrs, validateHandler(handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}, gracePeriod, fldPath.Child("preStop"))...)
	}
	return allErrs
}

var supportedHTTPSchemes = sets.New(v1.URISchemeHTTP, v1.URISchemeHTTPS)

func validateHandler(h handler, gracePeriod *int64, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	n := 0
	take := func(name string, set bool, check func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), moreThanOneHandler))
			return
		}
		n++
		allErrs = append(allErrs, check(fldPath.Child(name))...)
	}
	take("exec", h.exec != nil, func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	take("httpGet", h.httpGet != nil, func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if h.httpGet.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, validatePortNumOrName(h.httpGet.Port, p.Child("port"))...)
		if !supportedHTTPSchemes.Has(h.httpGet.Scheme) {
			errs = append(errs, field.NotSupported(p.Child("scheme"), h.httpGet.Scheme, sets.List(supportedHTTPSchemes)))
		}
		for _, header := range h.httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(header.Name) {
				errs = append(errs, field.Invalid(p.Child("httpHeaders"), header.Name, msg))
			}
		}
		return errs
	})
	take("tcpSocket", h.tcpSocket != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	take("grpc", h.grpc != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(h.grpc.Port), p.Child("port"))
	})
	take("sleep", h.sleep != nil, func(p *field.Path) field.ErrorList {
		// PodLifecycleSleepActionAllowZero is on by default from v1.33.
		if gracePeriod != nil && (h.sleep.Seconds < 0 || h.sleep.Seconds > *gracePeriod) {
			return field.ErrorList{field.Invalid(p, h.sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *gracePeriod))}
		}
		return nil
	})
	if n == 0 {
		allErrs = append(allErrs, field.Required(fldPath, "must specify a handler type"))
	}
	return allErrs
}

// --- pod-level policies -----------------------------------------------------

func validateRestartPolicy(policy v1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, policy,
			[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever})}
	}
}

func validateDNSPolicy(policy v1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	switch policy {
	case v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, policy,
			[]v1.DNSPolicy{v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone})}
	}
}

func validatePreemptionPolicy(policy *v1.PreemptionPolicy, fldPath *field.Path) field.ErrorList {
	switch *policy {
	case v1.PreemptLowerPriority, v1.PreemptNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fldPath, "")}
	default:
		return field.ErrorList{field.NotSupported(fldPath, *policy, []v1.PreemptionPolicy{v1.PreemptLowerPriority, v1.PreemptNever})}
	}
}

// Limits on resolver configuration, from libc.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func validateDNSConfig(cfg *v1.PodDNSConfig, policy v1.DNSPolicy, fldPath *field.Path) field.ErrorList {
	if policy == v1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(fldPath, "must provide `dnsConfig` when `dnsPolicy` is None")}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(fldPath.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None")}
		}
	}
	if cfg == nil {
		return nil
	}
	var allErrs field.ErrorList
	if len(cfg.Nameservers) > maxDNSNameservers {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		allErrs = append(allErrs, validation.IsValidIP(fldPath.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range cfg.Searches {
		// RelaxedDNSSearchValidation is on by default from v1.32: "." and
		// underscores are accepted.
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(search) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("searches").Index(i), search, msg))
		}
	}
	for i, opt := range cfg.Options {
		if opt.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("options").Index(i), "must not be empty"))
		}
	}
	return allErrs
}

func validateSchedulingGates(gates []v1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for i, gate := range gates {
		allErrs = append(allErrs, validateQualifiedName(gate.Name, fldPath.Index(i))...)
		if seen.Has(gate.Name) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Index(i), gate.Name))
		}
		seen.Insert(gate.Name)
	}
	return allErrs
}

// validateHostUsers: a pod in its own user namespace may not share the host's
// other namespaces. Upstream capitalises two of the paths; kept as is.
func validateHostUsers(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	if spec.HostUsers == nil || *spec.HostUsers {
		return nil
	}
	var allErrs field.ErrorList
	const detail = "when `pod.Spec.HostUsers` is false"
	if spec.HostNetwork {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("hostNetwork"), detail))
	}
	if spec.HostPID {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("HostPID"), detail))
	}
	if spec.HostIPC {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("HostIPC"), detail))
	}
	return allErrs
}

// --- tolerations ------------------------------------------------------------

func validateTolerations(tolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, t := range tolerations {
		p := fldPath.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		if t.Key == "" && t.Operator != v1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			// Upstream reports a bad value at the operator path.
			if errs := validation.IsValidLabelValue(t.Value); len(errs) != 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, strings.Join(errs, ";")))
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("operator"), t.Operator,
				[]v1.TolerationOperator{v1.TolerationOpEqual, v1.TolerationOpExists}))
		}
		if t.Effect != "" {
			switch t.Effect {
			case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			default:
				allErrs = append(allErrs, field.NotSupported(p.Child("effect"), t.Effect,
					[]v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}))
			}
		}
	}
	return allErrs
}

// --- affinity ---------------------------------------------------------------

func validateAffinity(a *v1.Affinity, fldPath *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var allErrs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		p := fldPath.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			allErrs = append(allErrs, validateNodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution, p.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, term := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if term.Weight <= 0 || term.Weight > 100 {
				allErrs = append(allErrs, field.Invalid(tp.Child("weight"), term.Weight, "must be in the range 1-100"))
			}
			// Preferred terms may name label values that no node has yet.
			allErrs = append(allErrs, validateNodeSelectorTerm(term.Preference, true, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		allErrs = append(allErrs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		allErrs = append(allErrs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, fldPath.Child("podAntiAffinity"))...)
	}
	return allErrs
}

func validateNodeSelector(ns *v1.NodeSelector, fldPath *field.Path) field.ErrorList {
	termsPath := fldPath.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var allErrs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		allErrs = append(allErrs, validateNodeSelectorTerm(term, false, termsPath.Index(i))...)
	}
	return allErrs
}

func validateNodeSelectorTerm(term v1.NodeSelectorTerm, allowInvalidValues bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for j, req := range term.MatchExpressions {
		allErrs = append(allErrs, validateNodeSelectorRequirement(req, allowInvalidValues, fldPath.Child("matchExpressions").Index(j))...)
	}
	for j, req := range term.MatchFields {
		allErrs = append(allErrs, validateNodeFieldSelectorRequirement(req, fldPath.Child("matchFields").Index(j))...)
	}
	return allErrs
}

func validateNodeSelectorRequirement(rq v1.NodeSelectorRequirement, allowInvalidValues bool, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch rq.Operator {
	case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
		if len(rq.Values) == 0 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
		if len(rq.Values) > 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
		if len(rq.Values) != 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), rq.Operator, "not a valid selector operator"))
	}
	allErrs = append(allErrs, metav1validation.ValidateLabelName(rq.Key, fldPath.Child("key"))...)
	if !allowInvalidValues {
		for i, value := range rq.Values {
			for _, msg := range validation.IsValidLabelValue(value) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("values").Index(i), value, msg))
			}
		}
	}
	return allErrs
}

func validateNodeFieldSelectorRequirement(req v1.NodeSelectorRequirement, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch req.Operator {
	case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
		if len(req.Values) != 1 {
			allErrs = append(allErrs, field.Required(fldPath.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		allErrs = append(allErrs, field.Invalid(fldPath.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	if req.Key != "metadata.name" {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("key"), req.Key, "not a valid field selector key"))
	} else {
		for i, v := range req.Values {
			for _, msg := range apivalidation.NameIsDNSSubdomain(v, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("values").Index(i), v, msg))
			}
		}
	}
	return allErrs
}

func validatePodAffinityTerms(required []v1.PodAffinityTerm, preferred []v1.WeightedPodAffinityTerm, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, term := range required {
		allErrs = append(allErrs, validatePodAffinityTerm(term, fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, wt := range preferred {
		p := fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if wt.Weight <= 0 || wt.Weight > 100 {
			allErrs = append(allErrs, field.Invalid(p.Child("weight"), wt.Weight, "must be in the range 1-100"))
		}
		allErrs = append(allErrs, validatePodAffinityTerm(wt.PodAffinityTerm, p.Child("podAffinityTerm"))...)
	}
	return allErrs
}

func validatePodAffinityTerm(term v1.PodAffinityTerm, fldPath *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	allErrs := metav1validation.ValidateLabelSelector(term.LabelSelector, opts, fldPath.Child("labelSelector"))
	allErrs = append(allErrs, metav1validation.ValidateLabelSelector(term.NamespaceSelector, opts, fldPath.Child("namespaceSelector"))...)
	for _, name := range term.Namespaces {
		// Upstream names the list "namespace" here.
		for _, msg := range apivalidation.ValidateNamespaceName(name, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("namespace"), name, msg))
		}
	}
	if term.TopologyKey == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("topologyKey"), "can not be empty"))
	}
	return append(allErrs, metav1validation.ValidateLabelName(term.TopologyKey, fldPath.Child("topologyKey"))...)
}

// --- security contexts ------------------------------------------------------

var (
	sysctlPattern              = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)
	validFSGroupChangePolicies = sets.New(v1.FSGroupChangeOnRootMismatch, v1.FSGroupChangeAlways)
)

const sysctlMaxLength = 253

func validatePodSecurityContext(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	sc := spec.SecurityContext
	if sc == nil {
		return nil
	}
	var allErrs field.ErrorList
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	for i, gid := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(gid) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("supplementalGroups").Index(i), gid, msg))
		}
	}
	if spec.ShareProcessNamespace != nil && spec.HostPID && *spec.ShareProcessNamespace {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("shareProcessNamespace"), *spec.ShareProcessNamespace, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	names := sets.New[string]()
	for i, s := range sc.Sysctls {
		p := fldPath.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			allErrs = append(allErrs, field.Required(p, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlPattern.MatchString(s.Name):
			allErrs = append(allErrs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlPattern)))
		case names.Has(s.Name):
			allErrs = append(allErrs, field.Duplicate(p, s.Name))
		}
		names.Insert(s.Name)
	}
	if sc.FSGroupChangePolicy != nil && !validFSGroupChangePolicies.Has(*sc.FSGroupChangePolicy) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy, sets.List(validFSGroupChangePolicies)))
	}
	allErrs = append(allErrs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	return allErrs
}

func validateSeccompProfile(sp *v1.SeccompProfile, fldPath *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var allErrs field.ErrorList
	switch sp.Type {
	case v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("type"), "type is required when seccompProfile is set"))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("type"), sp.Type,
			[]v1.SeccompProfileType{v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined}))
	}
	if sp.Type == v1.SeccompProfileTypeLocalhost {
		if sp.LocalhostProfile == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			allErrs = append(allErrs, validateLocalDescendingPath(*sp.LocalhostProfile, fldPath.Child("localhostProfile"))...)
		}
	} else if sp.LocalhostProfile != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
	}
	return allErrs
}

func validateSecurityContext(sc *v1.SecurityContext, fldPath *field.Path, hostUsers bool) field.ErrorList {
	if sc == nil {
		return nil
	}
	var allErrs field.ErrorList
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	if sc.ProcMount != nil {
		if pm := *sc.ProcMount; pm != v1.DefaultProcMount && pm != v1.UnmaskedProcMount {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("procMount"), pm, []v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
		if hostUsers && *sc.ProcMount == v1.UnmaskedProcMount {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("procMount"), sc.ProcMount, "`hostUsers` must be false to use `Unmasked`"))
		}
	}
	allErrs = append(allErrs, validateSeccompProfile(sc.SeccompProfile, fldPath.Child("seccompProfile"))...)
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if string(c) == "CAP_SYS_ADMIN" {
					allErrs = append(allErrs, field.Invalid(fldPath, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return allErrs
}
