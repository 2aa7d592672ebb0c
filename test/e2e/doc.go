// Package e2e drives the built knode binary the way a user does: it starts
// `knode server` (or `knode up`) on a free loopback port with a fresh data
// directory, and talks to it over real HTTPS with real kubectl binaries,
// client-go and the official Python client.
//
// The tests live in _test.go files only. TestMain builds ./cmd/knode once;
// set KNODE_E2E_BINARY to test a binary built elsewhere. `go test -short`
// skips the whole package.
//
// Environment:
//   - KNODE_E2E_KUBECTL_DIR: where kubectl.1.NN live (default
//     /usr/lib/google-cloud-sdk/bin).
//   - KNODE_E2E_ALLOW_NO_KUBECTL=1: pass when no kubectl version is installed.
//   - KNODE_E2E_CLIENT_CONTENT_TYPE: the Content-Type client-go sends
//     (default: client-go's own choice, protobuf for built-in types); set
//     application/json to tell an encoding bug from any other.
//   - KNODE_REQUIRE_PYTHON_CLIENT=1: fail, rather than skip, when
//     /usr/bin/python3 cannot import the kubernetes package.
//   - KNODE_REQUIRE_DBUS=1: fail, rather than skip, the graceful shutdown
//     tests when dbus-daemon is not installed (they start a private bus and
//     a fake logind on it).
//
// Not here: anything that needs more than one machine, or traffic to any
// address outside the loopback range.
package e2e
