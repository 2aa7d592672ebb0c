// Package version says which knode this is and which Kubernetes API level
// it serves. /version reports the Kubernetes level so that clients (and
// kubectl version dispatchers) pick a matching client.
package version

import (
	"fmt"
	"runtime"

	apiversion "k8s.io/apimachinery/pkg/version"
)

// Knode is this release of knode.
const Knode = "0.1.0"

// Kubernetes is the Kubernetes release whose API and behaviour knode
// follows, as a major and minor.
const (
	KubernetesMajor = "1"
	KubernetesMinor = "33"
)

// GitVersion is what /version and node status report, e.g. v1.33.0+knode0.1.0.
func GitVersion() string {
	return fmt.Sprintf("v%s.%s.0+knode%s", KubernetesMajor, KubernetesMinor, Knode)
}

// Info is the /version document.
func Info() apiversion.Info {
	return apiversion.Info{
		Major:      KubernetesMajor,
		Minor:      KubernetesMinor,
		GitVersion: GitVersion(),
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}
