package metrics

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var errTaken = errors.New("test: metrics already registered")

func counter(name string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: name})
}

func TestRegister(t *testing.T) {
	if err := Register(nil, errTaken, counter("a")); err != nil {
		t.Errorf("nil registry: %v", err)
	}
	r := prometheus.NewRegistry()
	if err := Register(r, errTaken, counter("a"), counter("b")); err != nil {
		t.Fatal(err)
	}
	// A second component on the same registry: c would be new, b is taken.
	err := Register(r, errTaken, counter("c"), counter("b"))
	var dup prometheus.AlreadyRegisteredError
	if !errors.Is(err, errTaken) || !errors.As(err, &dup) {
		t.Fatalf("err = %v, want one wrapping the sentinel and AlreadyRegisteredError", err)
	}
	// Nothing of the failed call stays: c can be registered again.
	if err := r.Register(counter("c")); err != nil {
		t.Errorf("c stayed registered after the failed call: %v", err)
	}
	// Another failure (the same name with another help) is returned as it
	// is.
	bad := prometheus.NewCounter(prometheus.CounterOpts{Name: "a", Help: "not a"})
	if err := Register(r, errTaken, bad); err == nil || errors.Is(err, errTaken) {
		t.Errorf("invalid name: %v, want a plain error", err)
	}
}
