package apiserver

import (
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/auth"
)

func TestDecodePodLogOptions(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		query   string
		want    *corev1.PodLogOptions
		wantErr string
	}{
		{name: "nothing", query: "", want: &corev1.PodLogOptions{}},
		{name: "booleans as the parameter codec reads them", query: "follow&previous=1&timestamps=yes&insecureSkipTLSVerifyBackend=true",
			want: &corev1.PodLogOptions{Follow: true, Previous: true, Timestamps: true, InsecureSkipTLSVerifyBackend: true}},
		{name: "false and 0 are false", query: "follow=false&previous=0&timestamps=FALSE",
			want: &corev1.PodLogOptions{}},
		{name: "integers, the first value counting", query: "tailLines=0&tailLines=9&limitBytes=1&sinceSeconds=30",
			want: &corev1.PodLogOptions{TailLines: ptr.To[int64](0), LimitBytes: ptr.To[int64](1), SinceSeconds: ptr.To[int64](30)}},
		{name: "negative integers parse (validation refuses them)", query: "tailLines=-1",
			want: &corev1.PodLogOptions{TailLines: ptr.To[int64](-1)}},
		{name: "sinceTime", query: "sinceTime=2026-03-01T12:00:00Z&container=c&stream=All",
			want: &corev1.PodLogOptions{SinceTime: &at, Container: "c", Stream: ptr.To(corev1.LogStreamAll)}},
		{name: "an integer that is not", query: "tailLines=1.5", wantErr: `tailLines: Invalid value: "1.5": must be an integer`},
		{name: "an integer too large", query: "limitBytes=99999999999999999999", wantErr: `limitBytes: Invalid value: "99999999999999999999": must be an integer`},
		{name: "an empty integer", query: "sinceSeconds=", wantErr: `sinceSeconds: Invalid value: "": must be an integer`},
		{name: "two bad values, both named", query: "tailLines=x&sinceTime=noon",
			wantErr: `[tailLines: Invalid value: "x": must be an integer, sinceTime: Invalid value: "noon": must be an RFC 3339 time, such as 2006-01-02T15:04:05Z]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodePodLogOptions(q)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want a BadRequest %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePodLogOptions(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	tests := []struct {
		name string
		opts corev1.PodLogOptions
		want []string
	}{
		{name: "nothing set"},
		{name: "at the boundaries", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](0), LimitBytes: ptr.To[int64](1), SinceSeconds: ptr.To[int64](1)}},
		{name: "sinceTime alone", opts: corev1.PodLogOptions{SinceTime: &at}},
		{name: "tailLines -1", opts: corev1.PodLogOptions{TailLines: ptr.To[int64](-1)},
			want: []string{"tailLines: Invalid value: -1: must be greater than or equal to 0"}},
		{name: "limitBytes 0", opts: corev1.PodLogOptions{LimitBytes: ptr.To[int64](0)},
			want: []string{"limitBytes: Invalid value: 0: must be greater than 0"}},
		{name: "sinceSeconds 0", opts: corev1.PodLogOptions{SinceSeconds: ptr.To[int64](0)},
			want: []string{"sinceSeconds: Invalid value: 0: must be greater than 0"}},
		{name: "both since, the bad seconds not reported", opts: corev1.PodLogOptions{SinceSeconds: ptr.To[int64](0), SinceTime: &at},
			want: []string{"sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"}},
		{name: "stream All", opts: corev1.PodLogOptions{Stream: ptr.To(corev1.LogStreamAll)}},
		{name: "stream Stderr", opts: corev1.PodLogOptions{Stream: ptr.To(corev1.LogStreamStderr)},
			want: []string{`stream: Unsupported value: "Stderr": supported values: "All"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range validatePodLogOptions(&tc.opts) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLogContainer(t *testing.T) {
	containers := func(names ...string) []corev1.Container {
		var out []corev1.Container
		for _, n := range names {
			out = append(out, corev1.Container{Name: n})
		}
		return out
	}
	tests := []struct {
		name      string
		spec      corev1.PodSpec
		container string
		want      string
		wantErr   string
	}{
		{name: "the only container", spec: corev1.PodSpec{Containers: containers("app"), InitContainers: containers("setup")}, want: "app"},
		{name: "named", spec: corev1.PodSpec{Containers: containers("a", "b")}, container: "b", want: "b"},
		{name: "an init container", spec: corev1.PodSpec{Containers: containers("a"), InitContainers: containers("setup")}, container: "setup", want: "setup"},
		{name: "an ephemeral container", container: "debug", want: "debug",
			spec: corev1.PodSpec{Containers: containers("a"), EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}}},
		{name: "not in the pod", spec: corev1.PodSpec{Containers: containers("a")}, container: "b",
			wantErr: "container b is not valid for pod p"},
		{name: "several, none named", spec: corev1.PodSpec{Containers: containers("a", "b")},
			wantErr: "a container name must be specified for pod p, choose one of: [a b]"},
		{name: "several, init and ephemeral offered too, in upstream's order",
			spec: corev1.PodSpec{Containers: containers("a", "b"), InitContainers: containers("i1", "i2"),
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}},
			wantErr: "a container name must be specified for pod p, choose one of: [i1 i2 a b debug]"},
		{name: "no containers", wantErr: "a container name must be specified for pod p"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: tc.spec}
			got, err := logContainer(pod, tc.container)
			if tc.wantErr != "" {
				if !apierrors.IsBadRequest(err) || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want a BadRequest %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestAgentAddress(t *testing.T) {
	addr := func(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: a}
	}
	tests := []struct {
		name    string
		addrs   []corev1.NodeAddress
		port    int32
		want    string
		wantErr string
	}{
		{name: "InternalIP preferred", port: 10250,
			addrs: []corev1.NodeAddress{addr(corev1.NodeHostName, "n1"), addr(corev1.NodeExternalIP, "203.0.113.1"), addr(corev1.NodeInternalIP, "10.0.0.1")},
			want:  "10.0.0.1:10250"},
		{name: "else the first address", port: 10250,
			addrs: []corev1.NodeAddress{addr(corev1.NodeHostName, "n1.example"), addr(corev1.NodeExternalIP, "203.0.113.1")},
			want:  "n1.example:10250"},
		{name: "an empty InternalIP is skipped", port: 1,
			addrs: []corev1.NodeAddress{addr(corev1.NodeInternalIP, ""), addr(corev1.NodeExternalIP, "203.0.113.1")},
			want:  "203.0.113.1:1"},
		{name: "IPv6", port: 65535, addrs: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "fd00::1")}, want: "[fd00::1]:65535"},
		{name: "no port", addrs: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1")},
			wantErr: `node "n1" reports no agent port (status.daemonEndpoints.kubeletEndpoint.port is 0), so its agent cannot be reached; has its agent started?`},
		{name: "port out of range", port: 65536, addrs: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1")},
			wantErr: `node "n1" reports no agent port (status.daemonEndpoints.kubeletEndpoint.port is 65536), so its agent cannot be reached; has its agent started?`},
		{name: "no address", port: 10250,
			wantErr: `node "n1" reports no address (status.addresses is empty), so its agent cannot be reached; has its agent started?`},
		{name: "an address that is no host", port: 10250, addrs: []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1/foo?x")},
			wantErr: `node "n1" reports address "10.0.0.1/foo?x", which is neither an IP address nor a DNS name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			node.Status.Addresses = tc.addrs
			node.Status.DaemonEndpoints.KubeletEndpoint.Port = tc.port
			got, err := agentAddress(node)
			if tc.wantErr != "" {
				if !apierrors.IsServiceUnavailable(err) || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want a ServiceUnavailable %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestContainerLogsURL(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 3, 1, 14, 0, 0, 0, time.FixedZone("+2", 2*3600)))
	tests := []struct {
		name string
		opts corev1.PodLogOptions
		want string
	}{
		{name: "no options", want: "https://10.0.0.1:10250/containerLogs/ns/p/c"},
		{name: "every option", opts: corev1.PodLogOptions{
			Follow: true, Previous: true, Timestamps: true, SinceTime: &at, TailLines: ptr.To[int64](0), LimitBytes: ptr.To[int64](5),
			// Chosen already, or not the agent's business.
			Container: "other", InsecureSkipTLSVerifyBackend: true, Stream: ptr.To(corev1.LogStreamAll),
		}, want: "https://10.0.0.1:10250/containerLogs/ns/p/c?follow=true&limitBytes=5&previous=true&sinceTime=2026-03-01T12%3A00%3A00Z&tailLines=0&timestamps=true"},
		{name: "sinceSeconds", opts: corev1.PodLogOptions{SinceSeconds: ptr.To[int64](60)},
			want: "https://10.0.0.1:10250/containerLogs/ns/p/c?sinceSeconds=60"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := containerLogsURL("10.0.0.1:10250", "ns", "p", "c", &tc.opts).String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestAgentError(t *testing.T) {
	tests := []struct {
		name        string
		code        int
		contentType string
		body        string
		want        metav1.Status
	}{
		{name: "text 404", code: 404, contentType: "text/plain; charset=utf-8", body: "pod not found\n",
			want: metav1.Status{Status: "Failure", Code: 404, Reason: metav1.StatusReasonNotFound, Message: "pod not found",
				Details: &metav1.StatusDetails{Name: "p", Kind: "pods/log"}}},
		{name: "empty 503", code: 503,
			want: metav1.Status{Status: "Failure", Code: 503, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "the server is currently unable to handle the request (get pods/log p)",
				Details: &metav1.StatusDetails{Name: "p", Kind: "pods/log"}}},
		{name: "a Status kept", code: 403, contentType: "application/json",
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Forbidden (user=x, verb=get, resource=nodes, subresource=log)","reason":"Forbidden","code":403}`,
			want: metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Code: 403, Reason: metav1.StatusReasonForbidden,
				Message: "Forbidden (user=x, verb=get, resource=nodes, subresource=log)"}},
		{name: "JSON that is no Status is text", code: 500, contentType: "application/json", body: `{"error":"boom"}`,
			want: metav1.Status{Status: "Failure", Code: 500, Reason: metav1.StatusReasonInternalError, Message: `{"error":"boom"}`,
				Details: &metav1.StatusDetails{Name: "p", Kind: "pods/log"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := agentError(tc.code, tc.contentType, []byte(tc.body), "n1", "p")
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("%T is no APIStatus", err)
			}
			if diff := cmp.Diff(tc.want, status.Status()); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetricVerbOfPodLog(t *testing.T) {
	a := auth.Attributes{Verb: "get", APIVersion: "v1", Resource: "pods", Subresource: subLog, Name: "p", Namespace: "ns", ResourceRequest: true}
	if got := metricVerb(httptest.NewRequest("GET", "/api/v1/namespaces/ns/pods/p/log", nil), a); got != "CONNECT" {
		t.Errorf("metric verb of reading pods/log = %q, want CONNECT (upstream's OverrideMetricsVerb)", got)
	}
	a.Subresource = "status"
	if got := metricVerb(httptest.NewRequest("GET", "/api/v1/namespaces/ns/pods/p/status", nil), a); got != "GET" {
		t.Errorf("metric verb of reading pods/status = %q, want GET", got)
	}
}
