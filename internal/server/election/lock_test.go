package election

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestTakeable(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	record := func(holder string, renewedAgo time.Duration, seconds int) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: seconds, RenewTime: metav1.NewTime(now.Add(-renewedAgo))}
	}
	for _, tc := range []struct {
		name string
		rec  resourcelock.LeaderElectionRecord
		id   string
		want bool
	}{
		{"same host, expired", record("node1_dead", 16*time.Second, 15), "node1_new", true},
		{"same host, exactly at expiry", record("node1_dead", 15*time.Second, 15), "node1_new", false},
		{"same host, just past expiry", record("node1_dead", 15*time.Second+time.Nanosecond, 15), "node1_new", true},
		{"same host, still valid", record("node1_dead", 5*time.Second, 15), "node1_new", false},
		{"other host, expired: client-go waits", record("node2_dead", time.Hour, 15), "node1_new", false},
		{"host with underscores", record("my_host_dead", time.Hour, 15), "my_host_new", true},
		{"our own record", record("node1_me", time.Hour, 15), "node1_me", false},
		{"released (no holder)", record("", time.Hour, 1), "node1_new", false},
		{"holder without a host part", record("dead", time.Hour, 15), "node1_new", false},
		{"we have no host part", record("node1_dead", time.Hour, 15), "new", false},
		{"no duration recorded", record("node1_dead", time.Hour, 0), "node1_new", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := takeable(tc.rec, tc.id, now); got != tc.want {
				t.Errorf("takeable(%+v, %q) = %v, want %v", tc.rec, tc.id, got, tc.want)
			}
		})
	}
}

func TestStepDownIn(t *testing.T) {
	last := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		since time.Duration
		want  time.Duration
	}{
		{"just renewed", 0, 10 * time.Second},
		{"within the deadline", 4 * time.Second, 6 * time.Second},
		{"exactly at the deadline", 10 * time.Second, 0},
		{"past the deadline", 12 * time.Second, -2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepDownIn(last, last.Add(tc.since), 10*time.Second); got != tc.want {
				t.Errorf("stepDownIn after %s = %s, want %s", tc.since, got, tc.want)
			}
		})
	}
}

func TestTimingErrors(t *testing.T) {
	names := TimingNames{LeaseDuration: field.NewPath("lease"), RenewDeadline: field.NewPath("renew"), RetryPeriod: field.NewPath("retry")}
	for _, tc := range []struct {
		name                string
		lease, renew, retry time.Duration
		want                []string
	}{
		{"upstream defaults", 15 * time.Second, 10 * time.Second, 2 * time.Second, nil},
		{"short but valid", 4 * time.Second, 3 * time.Second, time.Second, nil},
		{"renew equal to lease", 10 * time.Second, 10 * time.Second, 2 * time.Second,
			[]string{`lease: Invalid value: "10s": must be greater than renew (10s)`}},
		{"renew exactly retry times 1.2", 4 * time.Second, 1200 * time.Millisecond, time.Second,
			[]string{`renew: Invalid value: "1.2s": must be greater than retry (1s) times 1.2`}},
		{"renew just above retry times 1.2", 4 * time.Second, 1201 * time.Millisecond, time.Second, nil},
		{"fractional lease", 4500 * time.Millisecond, 3 * time.Second, time.Second,
			[]string{`lease: Invalid value: "4.5s": must be a whole number of seconds (the Lease records seconds)`}},
		{"zero and negative", 0, -time.Second, 0, []string{
			`lease: Invalid value: "0s": must be greater than zero`,
			`renew: Invalid value: "-1s": must be greater than zero`,
			`retry: Invalid value: "0s": must be greater than zero`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range TimingErrors(tc.lease, tc.renew, tc.retry, names) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TimingErrors(%s, %s, %s) (-want +got):\n%s", tc.lease, tc.renew, tc.retry, diff)
			}
		})
	}
}

func TestNewIdentity(t *testing.T) {
	a, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ha, okA := host(a)
	hb, okB := host(b)
	if !okA || !okB || ha != hb || a == b || strings.Count(a[len(ha)+1:], "-") != 4 {
		t.Errorf("identities %q and %q: want <hostname>_<uuid>, the same host and different UUIDs", a, b)
	}
}
