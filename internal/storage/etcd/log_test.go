package etcd

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestStartupNoiseFilter(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	lg := zap.New(startupNoiseFilter{core}).With(zap.String("member", "m"))
	lg.Error("failed to update storage version", zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	lg.Error("failed to update storage version", zap.Error(errors.New("disk on fire")))
	lg.Error("something else", zap.Error(errors.New("missing term information")))
	lg.Debug("below the level")

	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message+": "+e.ContextMap()["error"].(string))
	}
	want := []string{
		"failed to update storage version: disk on fire",
		"something else: missing term information",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged (-want +got):\n%s", diff)
	}
}
