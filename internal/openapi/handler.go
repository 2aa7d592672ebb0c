package openapi

import (
	"bytes"
	"crypto/sha512"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"github.com/munnerz/goautoneg"
	"google.golang.org/protobuf/proto"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"knode/internal/registry"
)

// ErrInvalidKind is returned by NewHandler when a Kind lacks what the
// documents need.
var ErrInvalidKind = errors.New("invalid kind")

// Media types of the v2 document. kubectl asks for protobuf, under the
// older name with "@"; the response names the newer one, as upstream does.
const (
	mediaTypeJSON              = "application/json"
	mediaTypeV2Protobuf        = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaTypeV2ProtobufOldName = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// Handler serves GET (and HEAD) on /openapi/v2, /openapi/v3 and
// /openapi/v3/<document>, e.g. /openapi/v3/api/v1 or
// /openapi/v3/apis/apps/v1. Mount it so that it sees the full request path
// (no prefix stripping). It is safe for concurrent use.
type Handler struct {
	v2 *v2Document

	v3 *handler3.OpenAPIService
	// v3Docs holds the document names below /openapi/v3/, e.g. "api/v1".
	v3Docs map[string]bool
}

// v2Document is the v2 document, encoded on first use: encoding (protobuf
// above all) costs several times what building costs, and a server that
// no kubectl talks to never pays it.
type v2Document struct {
	once  sync.Once
	spec  *spec.Swagger // dropped once encoded
	json  []byte
	proto []byte
	etag  string
	err   error
}

func (d *v2Document) encode() error {
	d.once.Do(func() {
		if d.json, d.err = d.spec.MarshalJSON(); d.err != nil {
			d.err = fmt.Errorf("encoding OpenAPI v2: %w", d.err)
			return
		}
		if d.proto, d.err = v2Protobuf(d.json); d.err != nil {
			d.err = fmt.Errorf("encoding OpenAPI v2 as protobuf: %w", d.err)
			return
		}
		d.etag = strconv.Quote(fmt.Sprintf("%X", sha512.Sum512(d.json)))
		d.spec = nil
	})
	return d.err
}

// NewHandler builds the OpenAPI documents describing kinds, for a server of
// the given version (e.g. "v1.33.0", reported as info.version); each is
// encoded (JSON, protobuf) when first asked for. It returns
// ErrInvalidKind when a kind misses a name, a version or a constructor, and
// an error when a kind's type has no generated schema (the generated file
// then needs the kind's package added and regenerating).
func NewHandler(kinds []registry.Kind, version string) (*Handler, error) {
	for i, k := range kinds {
		if err := checkKind(k); err != nil {
			return nil, fmt.Errorf("kinds[%d]: %w", i, err)
		}
	}
	namer := newDefinitionNamer(kinds)
	info := &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: version}}
	operationIDAndTags := func(r common.Route) (string, []string, error) {
		return r.OperationName(), r.(*route).tags, nil
	}
	cs := containers(kinds)
	all := make([]common.RouteContainer, len(cs))
	for i, c := range cs {
		all[i] = c
	}

	v2, err := builder.BuildOpenAPISpecFromRoutes(all, &common.Config{
		ProtocolList:                   []string{"https"},
		Info:                           info,
		CommonResponses:                map[int]spec.Response{http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
		GetDefinitions:                 GetOpenAPIDefinitions,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              namer.name,
		SecurityDefinitions: &spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		DefaultSecurity: []map[string][]string{{"BearerToken": {}}},
	})
	if err != nil {
		return nil, fmt.Errorf("building OpenAPI v2: %w", err)
	}
	h := &Handler{v2: &v2Document{spec: v2}, v3: handler3.NewOpenAPIService(), v3Docs: map[string]bool{}}

	// One definitions map, with v3 references, serves every v3 document.
	definitions := GetOpenAPIDefinitions(func(name string) spec.Ref {
		defName, _ := namer.name(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(defName))
	})
	v3Config := &common.OpenAPIV3Config{
		Info:                           info,
		CommonResponses:                map[int]*spec3.Response{http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}},
		Definitions:                    definitions,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		GetDefinitionName:              namer.name,
		SecuritySchemes: spec3.SecuritySchemes{"BearerToken": &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		PostProcessSpec: func(s *spec3.OpenAPI) (*spec3.OpenAPI, error) {
			s.SecurityRequirement = []map[string][]string{{"BearerToken": {}}}
			return s, nil
		},
	}
	for _, c := range cs {
		doc, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{c}, v3Config)
		if err != nil {
			return nil, fmt.Errorf("building OpenAPI v3 %s: %w", c.v3Name(), err)
		}
		h.v3.UpdateGroupVersion(c.v3Name(), doc)
		h.v3Docs[c.v3Name()] = true
	}
	// handler3 encodes each v3 document on first use.
	return h, nil
}

func checkKind(k registry.Kind) error {
	switch {
	case k.GroupVersion.Version == "":
		return fmt.Errorf("%w: GroupVersion.Version is required", ErrInvalidKind)
	case k.Resource == "":
		return fmt.Errorf("%w: Resource is required", ErrInvalidKind)
	case k.Kind == "":
		return fmt.Errorf("%w: Kind is required", ErrInvalidKind)
	case k.ListKind == "":
		return fmt.Errorf("%w: ListKind is required", ErrInvalidKind)
	case k.New == nil || k.New() == nil:
		return fmt.Errorf("%w: New is required", ErrInvalidKind)
	case k.NewList == nil || k.NewList() == nil:
		return fmt.Errorf("%w: NewList is required", ErrInvalidKind)
	}
	return nil
}

func v2Protobuf(jsonDoc []byte) ([]byte, error) {
	doc, err := openapiv2.ParseDocument(jsonDoc)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(doc)
}

// ServeHTTP answers the OpenAPI paths; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	path := r.URL.Path
	switch {
	case path == "/openapi/v2":
		h.serveV2(w, r)
	case path == "/openapi/v3":
		h.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(path, "/openapi/v3/") && h.v3Docs[strings.TrimPrefix(path, "/openapi/v3/")]:
		h.v3.HandleGroupVersion(w, r)
	default:
		http.NotFound(w, r)
	}
}

// serveV2 sends the v2 document as JSON or protobuf, whichever the Accept
// header prefers (JSON when it names neither but allows anything), and
// answers a matching If-None-Match with 304.
func (h *Handler) serveV2(w http.ResponseWriter, r *http.Request) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	w.Header().Add("Vary", "Accept")
	d := h.v2
	if err := d.encode(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	offers := []struct {
		mediaType, contentType string
		body                   []byte
	}{
		{mediaTypeJSON, mediaTypeJSON, d.json},
		{mediaTypeV2Protobuf, mediaTypeV2Protobuf, d.proto},
		{mediaTypeV2ProtobufOldName, mediaTypeV2Protobuf, d.proto},
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, o := range offers {
			typ, sub, _ := strings.Cut(o.mediaType, "/")
			if (clause.Type != typ && clause.Type != "*") || (clause.SubType != sub && clause.SubType != "*") {
				continue
			}
			w.Header().Set("Content-Type", o.contentType)
			w.Header().Set("Etag", d.etag)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(o.body))
			return
		}
	}
	http.Error(w, "the OpenAPI v2 document is available as "+mediaTypeJSON+" or "+mediaTypeV2Protobuf, http.StatusNotAcceptable)
}
