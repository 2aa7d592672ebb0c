package apiserver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/apitest"
)

// Every resource request is counted by verb, resource, subresource, scope
// and code, and timed, under upstream's metric names; watches are not.
func TestRequestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s := apitest.Start(t, apitest.Options{Metrics: reg})
	pods := s.Admin.CoreV1().Pods("default")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := pods.Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Get(ctx, "missing", metav1.GetOptions{}); err == nil {
		t.Fatal("get of a missing pod succeeded")
	}
	if _, err := s.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// counts is apiserver_request_total by "verb resource scope code".
	counts := map[string]float64{}
	var timed uint64
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := labels(m)
			switch f.GetName() {
			case "apiserver_request_total":
				if l["component"] != "apiserver" || l["version"] != "v1" {
					t.Errorf("labels %v", l)
				}
				counts[strings.Join([]string{l["verb"], l["resource"], l["scope"], l["code"]}, " ")] += m.GetCounter().GetValue()
			case "apiserver_request_duration_seconds":
				timed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{
		"POST pods namespace 201": 1,
		"GET pods resource 200":   2,
		"GET pods resource 404":   1,
		"LIST nodes cluster 200":  1,
	}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("apiserver_request_total{%s} = %v, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	for k := range counts {
		if strings.HasPrefix(k, "WATCH") {
			t.Errorf("a watch was counted: %s", k)
		}
	}
	var total float64
	for _, v := range counts {
		total += v
	}
	if timed != uint64(total) {
		t.Errorf("%d requests timed, %v counted", timed, total)
	}
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, p := range m.GetLabel() {
		out[p.GetName()] = p.GetValue()
	}
	return out
}
