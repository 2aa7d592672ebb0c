//go:build linux

package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultPath is the PATH a container gets when neither it nor Config sets
// one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// command is what to exec for one container.
type command struct {
	argv []string
	env  []string
	// path is PATH as the container sees it, for finding argv[0].
	path string
}

// buildCommand works out container c's argv and environment, or says why
// the container cannot be run as specified (a config error, never retried).
// fldPath is the container's path in the pod, for messages.
//
// The environment is PATH (basePath unless the container sets it), HOSTNAME
// (the pod's hostname), then the container's env in order. $(VAR) in
// command, args and env values expands to a variable defined before it.
func buildCommand(pod *corev1.Pod, c *corev1.Container, fldPath *field.Path, basePath string) (command, error) {
	if len(c.Command) == 0 {
		return command{}, field.Required(fldPath.Child("command"), fmt.Sprintf("the process runtime does not run images (%q): give the command to run", c.Image))
	}
	if len(c.EnvFrom) > 0 {
		return command{}, field.Forbidden(fldPath.Child("envFrom"), "not supported by the process runtime")
	}
	hostname := pod.Spec.Hostname
	if hostname == "" {
		hostname = pod.Name
	}
	vars := newEnv()
	vars.set("PATH", basePath)
	vars.set("HOSTNAME", hostname)
	for i, e := range c.Env {
		p := fldPath.Child("env").Index(i)
		if e.ValueFrom == nil {
			vars.set(e.Name, expand(e.Value, vars.lookup))
			continue
		}
		value, ok, err := envFrom(pod, e.ValueFrom, p.Child("valueFrom"))
		if err != nil {
			return command{}, err
		}
		if ok {
			vars.set(e.Name, value)
		}
	}
	var argv []string
	for _, list := range [][]string{c.Command, c.Args} {
		for _, a := range list {
			argv = append(argv, expand(a, vars.lookup))
		}
	}
	path, _ := vars.lookup("PATH")
	return command{argv: argv, env: vars.list(), path: path}, nil
}

// envFrom resolves a valueFrom source; ok is false for an optional source
// that is absent.
func envFrom(pod *corev1.Pod, src *corev1.EnvVarSource, p *field.Path) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := podField(pod, src.FieldRef.FieldPath, p.Child("fieldRef", "fieldPath"))
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		if src.ConfigMapKeyRef.Optional != nil && *src.ConfigMapKeyRef.Optional {
			return "", false, nil
		}
		return "", false, field.Forbidden(p.Child("configMapKeyRef"), "not supported by the process runtime")
	case src.SecretKeyRef != nil:
		if src.SecretKeyRef.Optional != nil && *src.SecretKeyRef.Optional {
			return "", false, nil
		}
		return "", false, field.Forbidden(p.Child("secretKeyRef"), "not supported by the process runtime")
	case src.ResourceFieldRef != nil:
		return "", false, field.Forbidden(p.Child("resourceFieldRef"), "not supported by the process runtime")
	}
	return "", false, field.Required(p, "must name a source")
}

// supportedFieldPaths are the downward API fields the process runtime fills.
var supportedFieldPaths = []string{
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
	return "", field.NotSupported(p, path, supportedFieldPaths)
}

// subscript parses "<prefix>['<key>']".
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// env is an ordered set of variables; a later set replaces the value in
// place.
type env struct {
	names  []string
	values map[string]string
}

func newEnv() *env { return &env{values: map[string]string{}} }

func (e *env) set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *env) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

func (e *env) list() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// expand replaces $(NAME) in s with lookup's value for NAME, as Kubernetes
// does: "$$" is a literal "$", and a reference to an undefined name, or one
// never closed, stays as written.
func expand(s string, lookup func(string) (string, bool)) string {
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

// errNotFound is exec's message for a command not on PATH.
var errNotFound = errors.New("executable file not found in $PATH")

// lookPath finds name as the container would: a name with a slash is a
// path (relative to dir); otherwise each directory of path is tried.
func lookPath(name, path, dir string) (string, error) {
	if strings.Contains(name, "/") {
		full := name
		if !filepath.IsAbs(full) {
			full = filepath.Join(dir, full)
		}
		if err := executable(full); err != nil {
			return "", fmt.Errorf("exec: %q: %w", name, err)
		}
		return full, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		full := filepath.Join(d, name)
		if executable(full) == nil {
			return full, nil
		}
	}
	return "", fmt.Errorf("exec: %q: %w", name, errNotFound)
}

func executable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: permission denied", path)
	}
	return nil
}
