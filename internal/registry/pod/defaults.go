package pod

import (
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// Defaults applied to every pod the server decodes. The values and the order
// follow upstream's SetDefaults_Pod, SetDefaults_PodSpec, SetDefaults_Container
// and the generated defaulters for the nested types a pod carries, plus the two
// pieces of v1<->internal conversion that change what a client reads back
// (serviceAccount mirrors serviceAccountName; podIP and podIPs agree).
//
// Left alone, as upstream leaves them: spec.priority and
// spec.preemptionPolicy (the Priority admission plugin's job), tolerations,
// and container resizePolicy. Not reproduced: upstream's PodLevelResources
// defaulting of pod-level spec.resources (its quantities are only rounded),
// and the defaults of volume sources other than the seven validated here.
// One addition: a zero quantity written with an exponent becomes a plain
// zero (see plainZero).

// defaultPod is Kind.Default.
func defaultPod(obj runtime.Object) {
	pod := obj.(*v1.Pod)
	setPodDefaults(pod)
	normalizeStatusIPs(&pod.Status)
}

func setPodDefaults(pod *v1.Pod) {
	spec := &pod.Spec

	// Pod-only defaults (SetDefaults_Pod).
	for i := range spec.Containers {
		defaultRequestsFromLimits(&spec.Containers[i].Resources)
	}
	for i := range spec.InitContainers {
		defaultRequestsFromLimits(&spec.InitContainers[i].Resources)
	}
	if spec.EnableServiceLinks == nil {
		enable := v1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &enable
	}
	if spec.HostNetwork {
		defaultHostPorts(spec.Containers)
		defaultHostPorts(spec.InitContainers)
	}

	// Spec defaults shared with pod templates (SetDefaults_PodSpec).
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		period := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &period
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}

	// Conversion: the deprecated serviceAccount field is an alias that the
	// server always writes back equal to serviceAccountName; when only the
	// alias was sent, it supplies the name.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName

	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		setContainerDefaults((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	roundUpToMilli(spec.Overhead)
	if spec.Resources != nil {
		roundUpToMilli(spec.Resources.Limits)
		roundUpToMilli(spec.Resources.Requests)
	}
}

// defaultRequestsFromLimits copies each limit into requests when that resource
// has no request, so a container that names only limits gets equal requests.
func defaultRequestsFromLimits(r *v1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = make(v1.ResourceList, len(r.Limits))
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// defaultHostPorts sets hostPort to containerPort where it is unset; with host
// networking the two are the same port.
func defaultHostPorts(containers []v1.Container) {
	for i := range containers {
		for j := range containers[i].Ports {
			p := &containers[i].Ports[j]
			if p.HostPort == 0 {
				p.HostPort = p.ContainerPort
			}
		}
	}
}

// roundUpToMilli rounds every quantity up to a whole number of milli-units,
// as upstream does for every ResourceList it decodes.
func roundUpToMilli(list v1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = plainZero(q)
	}
}

// plainZero replaces a zero written with an exponent ("0e99999999") by a
// plain zero. Clients read "0" either way; kept as written, comparing it to
// another quantity would rescale it by the exponent and take minutes.
func plainZero(q resource.Quantity) resource.Quantity {
	if q.IsZero() {
		return resource.Quantity{Format: q.Format}
	}
	return q
}

func plainZeroPtr(q *resource.Quantity) {
	if q != nil {
		*q = plainZero(*q)
	}
}

func setContainerDefaults(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		vf := c.Env[i].ValueFrom
		if vf == nil {
			continue
		}
		if vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
		if vf.ResourceFieldRef != nil {
			vf.ResourceFieldRef.Divisor = plainZero(vf.ResourceFieldRef.Divisor)
		}
	}
	roundUpToMilli(c.Resources.Limits)
	roundUpToMilli(c.Resources.Requests)
	setProbeDefaults(c.LivenessProbe)
	setProbeDefaults(c.ReadinessProbe)
	setProbeDefaults(c.StartupProbe)
	if c.Lifecycle != nil {
		if c.Lifecycle.PostStart != nil {
			setHTTPGetDefaults(c.Lifecycle.PostStart.HTTPGet)
		}
		if c.Lifecycle.PreStop != nil {
			setHTTPGetDefaults(c.Lifecycle.PreStop.HTTPGet)
		}
	}
}

func setProbeDefaults(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	setHTTPGetDefaults(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		empty := ""
		p.GRPC.Service = &empty
	}
}

func setHTTPGetDefaults(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func setVolumeDefaults(vol *v1.Volume) {
	if volumeSourceCount(&vol.VolumeSource) == 0 {
		vol.VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}
	}
	src := &vol.VolumeSource
	if src.EmptyDir != nil {
		plainZeroPtr(src.EmptyDir.SizeLimit)
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		unset := v1.HostPathUnset
		src.HostPath.Type = &unset
	}
	if src.Secret != nil && src.Secret.DefaultMode == nil {
		mode := v1.SecretVolumeSourceDefaultMode
		src.Secret.DefaultMode = &mode
	}
	if src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil {
		mode := v1.ConfigMapVolumeSourceDefaultMode
		src.ConfigMap.DefaultMode = &mode
	}
	if src.DownwardAPI != nil {
		if src.DownwardAPI.DefaultMode == nil {
			mode := v1.DownwardAPIVolumeSourceDefaultMode
			src.DownwardAPI.DefaultMode = &mode
		}
		defaultDownwardAPIFiles(src.DownwardAPI.Items)
	}
	if src.Projected != nil {
		if src.Projected.DefaultMode == nil {
			mode := v1.ProjectedVolumeSourceDefaultMode
			src.Projected.DefaultMode = &mode
		}
		for i := range src.Projected.Sources {
			s := &src.Projected.Sources[i]
			if s.DownwardAPI != nil {
				defaultDownwardAPIFiles(s.DownwardAPI.Items)
			}
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				hour := int64(3600)
				s.ServiceAccountToken.ExpirationSeconds = &hour
			}
		}
	}
}

func defaultDownwardAPIFiles(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if items[i].FieldRef != nil && items[i].FieldRef.APIVersion == "" {
			items[i].FieldRef.APIVersion = "v1"
		}
		if items[i].ResourceFieldRef != nil {
			items[i].ResourceFieldRef.Divisor = plainZero(items[i].ResourceFieldRef.Divisor)
		}
	}
}

// normalizeStatusIPs keeps the singular and plural IP fields in step the way
// upstream's v1 conversion does: podIP wins when both are set and differ,
// either one fills the other when it is missing. hostIPs is only filled from
// hostIP when empty; a disagreement there is left for validation to report.
func normalizeStatusIPs(st *v1.PodStatus) {
	switch {
	case st.PodIP != "" && len(st.PodIPs) == 0:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	case st.PodIP != "" && st.PodIPs[0].IP != st.PodIP:
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	case st.PodIP == "" && len(st.PodIPs) > 0:
		st.PodIP = st.PodIPs[0].IP
	}
	if st.HostIP != "" && len(st.HostIPs) == 0 {
		st.HostIPs = []v1.HostIP{{IP: st.HostIP}}
	} else if st.HostIP == "" && len(st.HostIPs) > 0 {
		st.HostIP = st.HostIPs[0].IP
	}
}

// defaultPullPolicy is Always for an image whose tag is "latest" or that
// names neither tag nor digest, and IfNotPresent otherwise, including for a
// reference that does not parse (validation or the runtime reports that).
func defaultPullPolicy(image string) v1.PullPolicy {
	if tag, ok := imageTag(image); ok && tag == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// The image reference grammar of the distribution project, which upstream
// parses to find the tag. Only what decides "latest or not" matters here.
var (
	anchoredHexID = regexp.MustCompile(`^[a-f0-9]{64}$`)
	imageRef      = func() *regexp.Regexp {
		const (
			domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
			host            = `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])`
			domain          = host + `(?::[0-9]+)?`
			pathComponent   = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
			name            = `(?:` + domain + `/)?` + pathComponent + `(?:/` + pathComponent + `)*`
			tag             = `[\w][\w.-]{0,127}`
			digest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
		)
		return regexp.MustCompile(`^(` + name + `)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
	}()
	digestHexLen = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}
	lowerHex     = regexp.MustCompile(`^[a-f0-9]+$`)
)

// imageTag returns the tag a runtime would pull for image: the explicit tag,
// "latest" when there is neither tag nor digest, "" for a digest-only
// reference. ok is false when the reference does not parse.
func imageTag(image string) (tag string, ok bool) {
	if anchoredHexID.MatchString(image) {
		return "", false
	}
	full := image
	first, _, hasSlash := strings.Cut(image, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost" && strings.ToLower(first) == first) {
		// Docker Hub short form; the repository name must be lowercase.
		repo := image
		if i := strings.IndexByte(repo, ':'); i >= 0 {
			repo = repo[:i]
		}
		if !hasSlash {
			repo = "library/" + repo
		}
		if strings.ToLower(repo) != repo {
			return "", false
		}
		if !hasSlash {
			full = "docker.io/library/" + image
		} else {
			full = "docker.io/" + image
		}
	}
	m := imageRef.FindStringSubmatch(full)
	if m == nil || len(m[1]) > 255 {
		return "", false
	}
	tag, digest := m[2], m[3]
	if digest != "" {
		alg, hex, _ := strings.Cut(digest, ":")
		if n, known := digestHexLen[alg]; !known || len(hex) != n || !lowerHex.MatchString(hex) {
			return "", false
		}
	}
	if tag == "" && digest == "" {
		tag = "latest"
	}
	return tag, true
}
