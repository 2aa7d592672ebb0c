package critest

import (
	"path/filepath"
	"testing"
)

// Env is what Setup started.
type Env struct {
	// Endpoint is containerd's CRI endpoint.
	Endpoint string
	// Registry is the registry's address ("127.0.0.1:PORT").
	Registry string
	// Image is the busybox image in the registry ("<Registry>/knode/busybox:1"),
	// also the sandbox image.
	Image string
	// Layout is the image's OCI layout (tag Tag), to push elsewhere.
	Layout  string
	Network Network
}

// Setup checks the tools (RequireTools), builds the image, starts a
// registry and pushes the image to it, creates a bridge network, and starts
// a containerd that uses all three. Everything is removed when the test
// ends.
func Setup(t testing.TB) Env {
	t.Helper()
	RequireTools(t)
	work := t.TempDir()
	layout := BuildImage(t, work)
	reg := StartRegistry(t)
	image := reg + "/knode/busybox:" + Tag
	Push(t, layout, image)
	confDir := filepath.Join(work, "net.d")
	network := BridgeNetwork(t, confDir)
	endpoint := StartContainerd(t, Options{
		SandboxImage: image,
		Mirrors:      []string{reg},
		CNIConfDir:   confDir,
	})
	return Env{Endpoint: endpoint, Registry: reg, Image: image, Layout: layout, Network: network}
}
