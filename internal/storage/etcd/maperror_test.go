package etcd

import (
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"knode/internal/storage"
)

// TestMapErrorUnavailable: a member without a leader, a timed-out request
// and a broken connection are storage.ErrUnavailable (the API server's
// 503); a compaction stays ErrCompacted, and anything else is neither.
func TestMapErrorUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"no leader", rpctypes.ErrGRPCNoLeader, true},
		{"no leader, client form", rpctypes.ErrNoLeader, true},
		{"request timed out", rpctypes.ErrTimeout, true},
		{"timed out, leader failed", rpctypes.ErrTimeoutDueToLeaderFail, true},
		{"connection reset", status.Error(codes.Unavailable, "error reading from server: connection reset by peer"), true},
		{"compacted", rpctypes.ErrCompacted, false},
		{"permission", rpctypes.ErrPermissionDenied, false},
		{"other", errors.New("boom"), false},
	} {
		got := mapError(tc.err)
		if errors.Is(got, storage.ErrUnavailable) != tc.unavailable {
			t.Errorf("%s: mapError(%v) = %v, unavailable %v, want %v", tc.name, tc.err, got, !tc.unavailable, tc.unavailable)
		}
	}
	if !errors.Is(mapError(rpctypes.ErrCompacted), storage.ErrCompacted) {
		t.Error("a compaction is no longer ErrCompacted")
	}
}
