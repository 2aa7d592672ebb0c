package runtime

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Env is an ordered set of environment variables: setting a name that is
// already set replaces its value where it stands. The zero value is empty
// and ready to use.
type Env struct {
	names  []string
	values map[string]string
}

// Set sets name to value.
func (e *Env) Set(name, value string) {
	if e.values == nil {
		e.values = map[string]string{}
	}
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

// Lookup is name's value, if set.
func (e *Env) Lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

// Len is the number of variables.
func (e *Env) Len() int { return len(e.names) }

// Each calls f for every variable, in order.
func (e *Env) Each(f func(name, value string)) {
	for _, n := range e.names {
		f(n, e.values[n])
	}
}

// List is the variables as "NAME=value", in order.
func (e *Env) List() []string {
	out := make([]string, 0, len(e.names))
	e.Each(func(n, v string) { out = append(out, n+"="+v) })
	return out
}

// Expand replaces $(NAME) in s with NAME's value in e, as Kubernetes does
// for env values, command and args.
func (e *Env) Expand(s string) string { return Expand(s, e.Lookup) }

// ContainerEnv is container c's environment: base first, in order, then
// c.Env in order. Each env value has its $(VAR) references expanded against
// the variables before it; valueFrom.fieldRef reads pod (FieldPaths lists
// the fields). configMapKeyRef, secretKeyRef and resourceFieldRef are
// errors naming runtimeName ("not supported by the <runtimeName> runtime"),
// except that an optional configMap or secret key is skipped. envFrom is
// not read: a runtime that cannot honour it says so itself. fldPath is c's
// path in the pod, for the errors, which are field errors: the container's
// CreateContainerConfigError.
func ContainerEnv(pod *corev1.Pod, c *corev1.Container, fldPath *field.Path, runtimeName string, base ...corev1.EnvVar) (*Env, error) {
	vars := &Env{}
	for _, b := range base {
		vars.Set(b.Name, b.Value)
	}
	for i, e := range c.Env {
		p := fldPath.Child("env").Index(i)
		if e.ValueFrom == nil {
			vars.Set(e.Name, vars.Expand(e.Value))
			continue
		}
		value, ok, err := envSource(pod, e.ValueFrom, p.Child("valueFrom"), runtimeName)
		if err != nil {
			return nil, err
		}
		if ok {
			vars.Set(e.Name, value)
		}
	}
	return vars, nil
}

// envSource resolves a valueFrom source; ok is false for an optional source
// that is absent.
func envSource(pod *corev1.Pod, src *corev1.EnvVarSource, p *field.Path, runtimeName string) (string, bool, error) {
	unsupported := "not supported by the " + runtimeName + " runtime"
	switch {
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef.FieldPath, p.Child("fieldRef", "fieldPath"))
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		if src.ConfigMapKeyRef.Optional != nil && *src.ConfigMapKeyRef.Optional {
			return "", false, nil
		}
		return "", false, field.Forbidden(p.Child("configMapKeyRef"), unsupported)
	case src.SecretKeyRef != nil:
		if src.SecretKeyRef.Optional != nil && *src.SecretKeyRef.Optional {
			return "", false, nil
		}
		return "", false, field.Forbidden(p.Child("secretKeyRef"), unsupported)
	case src.ResourceFieldRef != nil:
		return "", false, field.Forbidden(p.Child("resourceFieldRef"), unsupported)
	}
	return "", false, field.Required(p, "must name a source")
}

// FieldPaths are the downward API fields ContainerEnv fills.
var FieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid",
	"metadata.labels['<KEY>']", "metadata.annotations['<KEY>']",
	"spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
}

// podField reads one downward API field of pod.
func podField(pod *corev1.Pod, path string, p *field.Path) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIPs":
		ips := make([]string, 0, len(pod.Status.HostIPs))
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	return "", field.NotSupported(p, path, FieldPaths)
}

// subscript parses "<prefix>['<key>']".
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// Expand replaces $(NAME) in s with lookup's value for NAME, as Kubernetes
// does: "$$" is a literal "$", and a reference to an undefined name, or one
// never closed, stays as written.
func Expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
