package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"knode/internal/storage"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		accept string
		want   mediaRequest
	}{
		{"", mediaRequest{}},
		{"application/json", mediaRequest{}},
		{"application/vnd.kubernetes.protobuf, */*", mediaRequest{protobuf: true}},
		{"application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", mediaRequest{table: true}},
		{"application/json;as=Table;v=v1;g=meta.k8s.io,application/json", mediaRequest{table: true}},
		{`application/json; as="Table" ; g=meta.k8s.io; v=v1beta1`, mediaRequest{table: true}},
		{"application/json;as=Table;g=meta.k8s.io;v=v2, application/vnd.kubernetes.protobuf", mediaRequest{protobuf: true}},
		{"application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io", mediaRequest{discoveryV2: true}},
		{"application/json;as=Table;as=x;g=meta.k8s.io;v=v1,application/vnd.kubernetes.protobuf", mediaRequest{protobuf: true}},
		{"application/vnd.kubernetes.protobuf;as=Other, application/vnd.kubernetes.protobuf", mediaRequest{protobuf: true}},
		{"text/plain, application/json, application/vnd.kubernetes.protobuf", mediaRequest{}},
	}
	for _, c := range cases {
		r := &http.Request{Header: http.Header{"Accept": {c.accept}}}
		if got := negotiate(r); got != c.want {
			t.Errorf("Accept %q: got %+v, want %+v", c.accept, got, c.want)
		}
	}
}

// mediaParamsModel is the obvious way to read a clause's parameters: a
// map, later keys winning.
func mediaParamsModel(clause string) map[string]string {
	params := map[string]string{}
	parts := strings.Split(clause, ";")
	for _, p := range parts[1:] {
		kv := strings.SplitN(strings.TrimSpace(p), "=", 2)
		if len(kv) == 2 {
			params[strings.TrimSpace(kv[0])] = strings.Trim(strings.TrimSpace(kv[1]), `"`)
		}
	}
	return params
}

func TestMediaParamMatchesModel(t *testing.T) {
	pieces := []string{"application/json", ";", "as", "=", "Table", " ", `"`, "g", "v", "v1", "", "=x", ";;"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for j := rng.Intn(10); j > 0; j-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		clause := b.String()
		model := mediaParamsModel(clause)
		for _, key := range []string{"as", "g", "v", "", "x"} {
			if got, want := mediaParam(clause, key), model[key]; got != want {
				t.Fatalf("mediaParam(%q, %q) = %q, want %q", clause, key, got, want)
			}
		}
		if got, want := mediaType(clause), strings.TrimSpace(strings.SplitN(clause, ";", 2)[0]); got != want {
			t.Fatalf("mediaType(%q) = %q, want %q", clause, got, want)
		}
	}
}

func TestReadAllMatchesIoReadAll(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 20000) // larger than maxPresized
	for _, n := range []int{0, 1, 200, 511, 512, 4096, maxPresized, maxPresized + 1, len(body)} {
		for _, declared := range []int64{-1, 0, int64(n) - 1, int64(n), int64(n) + 1, 3 << 20} {
			readers := map[string]func() io.Reader{
				"plain":    func() io.Reader { return bytes.NewReader(body[:n]) },
				"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body[:n])) },
				"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body[:n])) },
			}
			for name, r := range readers {
				got, err := readAll(r(), declared)
				if err != nil {
					t.Fatalf("%s n=%d declared=%d: %v", name, n, declared, err)
				}
				if !bytes.Equal(got, body[:n]) {
					t.Fatalf("%s n=%d declared=%d: read %d bytes, want %d", name, n, declared, len(got), n)
				}
			}
		}
	}
	failing := iotest.TimeoutReader(bytes.NewReader(body[:10]))
	if _, err := readAll(io.MultiReader(bytes.NewReader(body[:5]), failing), 100); err == nil {
		t.Fatal("readAll hid a read error")
	}
}

func TestIsAPIVersion(t *testing.T) {
	gvs := []schema.GroupVersion{{Version: "v1"}, {Group: "coordination.k8s.io", Version: "v1"}, {Group: "g", Version: ""}}
	for _, gv := range gvs {
		for _, s := range []string{"", "v1", "v2", "coordination.k8s.io/v1", "coordination.k8s.io/v2", "coordination.k8s.iox1", "g/", "g", "/v1"} {
			if got, want := isAPIVersion(s, gv), s == gv.String(); got != want {
				t.Errorf("isAPIVersion(%q, %v) = %v, want %v", s, gv, got, want)
			}
		}
	}
}

func TestIsRevision(t *testing.T) {
	for _, c := range []struct {
		rv   string
		rev  int64
		want bool
	}{
		{"1", 1, true}, {"01", 1, false}, {"", 0, false}, {"0", 0, true},
		{"9223372036854775807", 9223372036854775807, true}, {"123456789", 123456780, false},
	} {
		if got := isRevision(c.rv, c.rev); got != c.want {
			t.Errorf("isRevision(%q, %d) = %v, want %v", c.rv, c.rev, got, c.want)
		}
	}
}

// A protobuf body decodes to the same object, kind and error whether it
// takes decodeProtobufBody's way or the serializer's.
func TestProtobufBodyDecodesAsSerializer(t *testing.T) {
	renew := metav1.NewMicroTime(metav1.Now().Rfc3339Copy().Time)
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "kube-node-lease", ResourceVersion: "7", UID: "u"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &renew},
	}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	encode := func(obj runtime.Object) []byte {
		var buf bytes.Buffer
		if err := protobufSerializer.Encode(obj, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	leaseGVK := coordinationv1.SchemeGroupVersion.WithKind("Lease")
	good := encode(lease)
	envelope := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"}, Raw: []byte{0x0a, 0xff}}
	raw, err := envelope.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append(append([]byte(nil), storageProtobufPrefix...), raw...)
	cases := []struct {
		name     string
		data     []byte
		fastPath bool
	}{
		{"lease", good, true},
		{"node at the lease endpoint", encode(node), false},
		{"not protobuf", []byte(`{"kind":"Lease"}`), false},
		{"prefix only", storageProtobufPrefix, false},
		{"empty", nil, false},
		{"corrupt object", corrupt, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ok, _ := decodeProtobufBody(&coordinationv1.Lease{}, leaseGVK, c.data)
			if ok != c.fastPath {
				t.Errorf("took the direct way: %v, want %v", ok, c.fastPath)
			}
			got, _, gotErr := decodeObject(&coordinationv1.Lease{}, leaseGVK, protobufMediaType, c.data, validationStrict)
			want, wantErr := serializerDecode(&coordinationv1.Lease{}, leaseGVK, c.data)
			if diff := cmp.Diff(errString(wantErr), errString(gotErr)); diff != "" {
				t.Errorf("error (-serializer +decodeObject):\n%s", diff)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("object (-serializer +decodeObject):\n%s", diff)
			}
		})
	}
}

// serializerDecode is decodeObject's protobuf branch as it was before
// the direct way: the serializer decodes every body.
func serializerDecode(into runtime.Object, gvk schema.GroupVersionKind, data []byte) (runtime.Object, error) {
	out, got, err := protobufSerializer.Decode(data, nil, into)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
	}
	if got != nil && (got.Kind != gvk.Kind || got.GroupVersion().String() != gvk.GroupVersion().String()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s", got.Kind, got.Version, gvk.Kind))
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestToStatusUnavailable: a store that cannot serve is a 503 whatever the
// path it came through, an API status stays as it is, anything else is 500.
func TestToStatusUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int32
	}{
		{fmt.Errorf("reading namespace: %w", fmt.Errorf("%w: etcd: etcdserver: no leader", storage.ErrUnavailable)), http.StatusServiceUnavailable},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x"), http.StatusNotFound},
		{fmt.Errorf("something else"), http.StatusInternalServerError},
	} {
		st := toStatus(tc.err)
		if st.Code != tc.code || !strings.Contains(st.Message, strings.SplitN(tc.err.Error(), ":", 2)[0]) && tc.code != http.StatusNotFound {
			t.Errorf("%v: code %d message %q, want %d", tc.err, st.Code, st.Message, tc.code)
		}
	}
	if st := toStatus(fmt.Errorf("%w: etcd: etcdserver: no leader", storage.ErrUnavailable)); st.Reason != metav1.StatusReasonServiceUnavailable || !strings.Contains(st.Message, "no leader") {
		t.Errorf("status %+v, want ServiceUnavailable naming the cause", st)
	}
}
