package apiserver_test

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"knode/internal/apitest"
)

// A watch asked for in protobuf streams length-delimited WatchEvents whose
// objects are in Kubernetes protobuf, as client-go's informers expect.
func TestWatchInProtobuf(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	if _, err := s.Admin.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", s.URL+"/api/v1/nodes?watch=true&resourceVersion=0&timeoutSeconds=1", nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch, application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
		t.Fatalf("Content-Type %q", ct)
	}
	var size uint32
	if err := binary.Read(resp.Body, binary.BigEndian, &size); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, size)
	if _, err := io.ReadFull(resp.Body, frame); err != nil {
		t.Fatal(err)
	}
	var ev metav1.WatchEvent
	if _, _, err := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme).Decode(frame, nil, &ev); err != nil {
		t.Fatalf("decoding the frame: %v", err)
	}
	obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(ev.Object.Raw, nil, nil)
	if err != nil {
		t.Fatalf("decoding the object: %v", err)
	}
	if node, ok := obj.(*corev1.Node); ev.Type != "ADDED" || !ok || node.Name != "n1" {
		t.Errorf("first event %s %#v, want ADDED node n1", ev.Type, obj)
	}
}
