// Package openapi serves the API server's OpenAPI documents: the OpenAPI v2
// document at /openapi/v2 (JSON or protobuf) and the OpenAPI v3 discovery
// document at /openapi/v3 with one document per group-version below it.
//
// It owns two things. The schemas come from the k8s.io/api and apimachinery
// types through kube-openapi's openapi-gen (zz_generated.openapi.go); the
// paths come from the []registry.Kind the server serves, described the way a
// real kube-apiserver describes them: the same operation ids, the same
// x-kubernetes-action and x-kubernetes-group-version-kind extensions, and the
// same query parameters, fieldValidation among them.
//
// kubectl 1.27 to 1.33 need both versions. Each looks for fieldValidation
// on the PATCH operation of an object's kind in the v3 document; finding it,
// kubectl leaves validation to the server and sends fieldValidation=Strict,
// and without it validates on its own side against the v2 definitions.
// explain reads v3 (v2 when v3 is missing). kubectl 1.27 and 1.28 fetch the
// v2 document (as protobuf) for every create, apply and explain and fail if
// it is missing, and every release validates the items of a kind: List
// against the v2 definitions. apply builds its strategic-merge patches from
// the schemas' x-kubernetes-patch-* extensions.
//
// Callers build one Handler per server with NewHandler and route /openapi/v2,
// /openapi/v3 and everything below it to the Handler, without stripping the
// prefix. The
// documents are built in NewHandler, encoded on first request, and never
// change afterwards. Responses are not compressed.
//
// It does not describe the endpoints nobody registered as a Kind (the
// pods/binding and pods/eviction subresources, the deprecated /watch/
// paths), nor check that the server really serves what it describes. The
// one exception is pods/log, described with the pods kind.
//
// To regenerate the schemas after k8s.io/api or kube-openapi moves, keep the
// openapi-gen version below equal to k8s.io/kube-openapi in go.mod and run
// `go generate ./internal/openapi/`.
package openapi

//go:generate go run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260821135717-be32def86098 --output-dir . --output-pkg knode/internal/openapi --output-file zz_generated.openapi.go --go-header-file /dev/null --report-filename /dev/null k8s.io/api/core/v1 k8s.io/api/coordination/v1 k8s.io/api/apps/v1 k8s.io/api/autoscaling/v1 k8s.io/api/policy/v1 k8s.io/api/scheduling/v1 k8s.io/api/storage/v1 k8s.io/api/certificates/v1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/version
