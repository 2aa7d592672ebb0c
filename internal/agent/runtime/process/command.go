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

	"knode/internal/agent/runtime"
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
// (the pod's hostname), then the container's env in order
// (runtime.ContainerEnv). $(VAR) in command, args and env values expands to
// a variable defined before it.
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
	vars, err := runtime.ContainerEnv(pod, c, fldPath, "process",
		corev1.EnvVar{Name: "PATH", Value: basePath}, corev1.EnvVar{Name: "HOSTNAME", Value: hostname})
	if err != nil {
		return command{}, err
	}
	var argv []string
	for _, list := range [][]string{c.Command, c.Args} {
		for _, a := range list {
			argv = append(argv, vars.Expand(a))
		}
	}
	path, _ := vars.Lookup("PATH")
	return command{argv: argv, env: vars.List(), path: path}, nil
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
