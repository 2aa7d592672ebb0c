package nodestatus

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/host"
)

func qp(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Threshold
		wantErr string
	}{
		{name: "empty means none", in: "", want: []Threshold{}},
		{name: "one quantity", in: "memory.available<100Mi", want: []Threshold{{Signal: SignalMemoryAvailable, Quantity: qp("100Mi")}}},
		{name: "one percentage", in: "nodefs.available<10%", want: []Threshold{{Signal: SignalNodeFsAvailable, Percentage: 0.1}}},
		{name: "fractional percentage", in: "nodefs.inodesFree<0.5%", want: []Threshold{{Signal: SignalNodeFsInodesFree, Percentage: 0.005}}},
		{
			name: "sorted by signal",
			in:   "pid.available<1k,memory.available<1Gi,imagefs.available<15%",
			want: []Threshold{
				{Signal: SignalImageFsAvailable, Percentage: 0.15},
				{Signal: SignalMemoryAvailable, Quantity: qp("1Gi")},
				{Signal: SignalPIDAvailable, Quantity: qp("1k")},
			},
		},
		{name: "spaces and empty statements", in: " memory.available < 1Gi ,, ", want: []Threshold{{Signal: SignalMemoryAvailable, Quantity: qp("1Gi")}}},
		{name: "a repeated signal keeps the last value", in: "memory.available<1Gi,memory.available<2Gi", want: []Threshold{{Signal: SignalMemoryAvailable, Quantity: qp("2Gi")}}},
		{name: "0% disables the signal", in: "nodefs.available<0%,memory.available<1Mi", want: []Threshold{{Signal: SignalMemoryAvailable, Quantity: qp("1Mi")}}},
		{name: "100% disables the signal", in: "nodefs.available<100%", want: []Threshold{}},
		{name: "every signal is accepted", in: "allocatableMemory.available<1Mi,containerfs.available<1%,containerfs.inodesFree<1%,imagefs.inodesFree<1%", want: []Threshold{
			{Signal: SignalAllocatableMemoryAvailable, Quantity: qp("1Mi")},
			{Signal: SignalContainerFsAvailable, Percentage: 0.01},
			{Signal: SignalContainerFsInodesFree, Percentage: 0.01},
			{Signal: SignalImageFsInodesFree, Percentage: 0.01},
		}},
		{name: "no operator", in: "memory.available=100Mi", wantErr: `invalid eviction threshold "memory.available=100Mi": expected <signal><<value>, for example memory.available<100Mi or nodefs.available<10%`},
		{name: "greater-than is not an operator", in: "memory.available>100Mi", wantErr: `invalid eviction threshold "memory.available>100Mi": expected <signal><<value>`},
		{name: "unknown signal", in: "memory.free<1Gi", wantErr: "unsupported eviction signal memory.free"},
		{name: "zero quantity", in: "memory.available<0", wantErr: "eviction threshold memory.available must be positive: 0"},
		{name: "negative quantity", in: "memory.available<-1Mi", wantErr: "eviction threshold memory.available must be positive: -1Mi"},
		{name: "bad quantity", in: "memory.available<lots", wantErr: `eviction threshold memory.available: invalid quantity "lots": quantities must match the regular expression`},
		{name: "negative percentage", in: "nodefs.available<-5%", wantErr: "eviction percentage threshold nodefs.available must be >= 0%: -5%"},
		{name: "over 100%", in: "nodefs.available<150%", wantErr: "eviction percentage threshold nodefs.available must be <= 100%: 150%"},
		{name: "bad percentage", in: "nodefs.available<ten%", wantErr: `eviction threshold nodefs.available: invalid percentage "ten%"`},
		{name: "NaN percentage", in: "nodefs.available<NaN%", wantErr: `eviction threshold nodefs.available: invalid percentage "NaN%"`},
		{name: "two operators", in: "memory.available<1Gi<2Gi", wantErr: `eviction threshold memory.available: invalid quantity "1Gi<2Gi"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseThresholds(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("ParseThresholds(%q) error = %v, want prefix %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseThresholds(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpOpts[0]); diff != "" {
				t.Errorf("ParseThresholds(%q) (-want +got):\n%s", tt.in, diff)
			}
			if got == nil {
				t.Errorf("ParseThresholds(%q) = nil; want non-nil so that it means \"none\", not \"defaults\"", tt.in)
			}
		})
	}
}

func TestThresholdsFromMapDefaults(t *testing.T) {
	got, err := ThresholdsFromMap(map[string]string{
		"memory.available":  "100Mi",
		"nodefs.available":  "10%",
		"nodefs.inodesFree": "5%",
		"imagefs.available": "15%",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Threshold{
		{Signal: SignalImageFsAvailable, Percentage: 0.15},
		{Signal: SignalMemoryAvailable, Quantity: qp("100Mi")},
		{Signal: SignalNodeFsAvailable, Percentage: 0.1},
		{Signal: SignalNodeFsInodesFree, Percentage: 0.05},
	}
	if diff := cmp.Diff(want, got, cmpOpts[0]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(DefaultEvictionHard(), []Threshold{want[1], want[2], want[3], want[0]}, cmpOpts[0]); diff != "" {
		t.Errorf("DefaultEvictionHard differs from the documented defaults (-default +documented):\n%s", diff)
	}
}

func TestThresholdString(t *testing.T) {
	for _, s := range []string{"memory.available<100Mi", "nodefs.available<10%", "nodefs.inodesFree<5%", "imagefs.available<15%", "pid.available<1k", "nodefs.available<0.5%"} {
		th, err := ParseThresholds(s)
		if err != nil || len(th) != 1 {
			t.Fatalf("ParseThresholds(%q) = %v, %v", s, th, err)
		}
		if got := th[0].String(); got != s {
			t.Errorf("String() = %q, want %q", got, s)
		}
	}
}

func TestThresholdValue(t *testing.T) {
	tests := []struct {
		name     string
		t        Threshold
		capacity int64
		want     int64
	}{
		{"quantity ignores capacity", Threshold{Quantity: qp("100Mi")}, 1 << 40, 100 << 20},
		// float32(0.1) is slightly above 0.1, so 10% of 100Gi is 160 bytes
		// more than a tenth, exactly as the kubelet computes it.
		{"10% of 100Gi", Threshold{Percentage: 0.1}, 100 << 30, 10737418400},
		{"15% of 100Gi", Threshold{Percentage: 0.15}, 100 << 30, 16106128000},
		{"5% of a million inodes", Threshold{Percentage: 0.05}, 1000000, 50000},
		{"percentage of zero capacity", Threshold{Percentage: 0.5}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.t.Value(tt.capacity)
			if got := v.Value(); got != tt.want {
				t.Errorf("Value(%d) = %d, want %d", tt.capacity, got, tt.want)
			}
		})
	}
}

func TestObservationsAndThresholdsMet(t *testing.T) {
	mi := func(n int64) uint64 { return uint64(n) << 20 }
	tests := []struct {
		name       string
		thresholds string
		facts      host.Facts
		want       []Signal
	}{
		{name: "healthy machine meets nothing", thresholds: "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,pid.available<100", facts: machine()},
		{
			name:       "memory exactly at the threshold is not pressure",
			thresholds: "memory.available<100Mi",
			facts:      func() host.Facts { f := machine(); f.Memory.Available = mi(100); return f }(),
		},
		{
			name:       "memory one byte below the threshold is pressure",
			thresholds: "memory.available<100Mi",
			facts:      func() host.Facts { f := machine(); f.Memory.Available = mi(100) - 1; return f }(),
			want:       []Signal{SignalMemoryAvailable},
		},
		{
			name:       "memory percentage of MemTotal",
			thresholds: "memory.available<50%",
			facts:      func() host.Facts { f := machine(); f.Memory.Available = 4<<30 - 1; return f }(),
			want:       []Signal{SignalMemoryAvailable},
		},
		{
			name:       "nodefs exactly at 10% is not pressure",
			thresholds: "nodefs.available<10%",
			facts:      func() host.Facts { f := machine(); f.RootFS.Available = 10737418400; return f }(),
		},
		{
			name:       "nodefs below 10% is pressure",
			thresholds: "nodefs.available<10%",
			facts:      func() host.Facts { f := machine(); f.RootFS.Available = 10737418399; return f }(),
			want:       []Signal{SignalNodeFsAvailable},
		},
		{
			name:       "imagefs is measured on the root filesystem",
			thresholds: "nodefs.available<10%,imagefs.available<15%",
			facts:      func() host.Facts { f := machine(); f.RootFS.Available = 14 << 30; return f }(),
			want:       []Signal{SignalImageFsAvailable},
		},
		{
			name:       "inodes",
			thresholds: "nodefs.inodesFree<5%,imagefs.inodesFree<1000,containerfs.inodesFree<6%",
			facts:      func() host.Facts { f := machine(); f.RootFS.InodesFree = 49999; return f }(),
			want:       []Signal{SignalContainerFsInodesFree, SignalNodeFsInodesFree},
		},
		{
			name:       "pid.available is max minus running",
			thresholds: "pid.available<50",
			facts:      func() host.Facts { f := machine(); f.PIDs = host.PIDs{Max: 1000, Running: 951}; return f }(),
			want:       []Signal{SignalPIDAvailable},
		},
		{
			name:       "pid.available exactly at the threshold",
			thresholds: "pid.available<50",
			facts:      func() host.Facts { f := machine(); f.PIDs = host.PIDs{Max: 1000, Running: 950}; return f }(),
		},
		{
			name:       "unread signals are not met",
			thresholds: "memory.available<100Gi,nodefs.available<99%,pid.available<1G",
			facts: withErr(withErr(withErr(machine(), host.FactMemory, errors.New("x")),
				host.FactRootFS, errors.New("y")), host.FactPIDs, errors.New("z")),
		},
		{
			name:       "allocatableMemory.available is never observed",
			thresholds: "allocatableMemory.available<100Gi",
			facts:      machine(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th, err := ParseThresholds(tt.thresholds)
			if err != nil {
				t.Fatal(err)
			}
			var got []Signal
			for _, m := range ThresholdsMet(th, Observations(tt.facts)) {
				got = append(got, m.Signal)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("met signals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObservationsSaturate(t *testing.T) {
	f := machine()
	f.Memory = host.Memory{Capacity: math.MaxUint64, Available: math.MaxUint64}
	obs := Observations(f)[SignalMemoryAvailable]
	if obs.Available != math.MaxInt64 || obs.Capacity != math.MaxInt64 {
		t.Errorf("memory observation = %+v, want saturated at MaxInt64", obs)
	}
}

func FuzzParseThresholds(f *testing.F) {
	for _, s := range []string{
		"memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%",
		"pid.available<1k", "nodefs.available<0%", "nodefs.available<100%", "memory.available<1e3",
		"x<1", "memory.available<", "<", ",", "nodefs.available<1e40%", "nodefs.available<-0%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := ParseThresholds(s)
		if err != nil {
			return
		}
		seen := map[Signal]bool{}
		for _, x := range th {
			if _, ok := signalCondition[x.Signal]; !ok {
				t.Fatalf("ParseThresholds(%q) accepted signal %q", s, x.Signal)
			}
			if seen[x.Signal] {
				t.Fatalf("ParseThresholds(%q) returned %q twice", s, x.Signal)
			}
			seen[x.Signal] = true
			if x.Quantity != nil {
				if x.Quantity.Sign() <= 0 {
					t.Fatalf("ParseThresholds(%q) accepted non-positive %v", s, x.Quantity)
				}
			} else if !(x.Percentage >= 0 && x.Percentage <= 1) {
				t.Fatalf("ParseThresholds(%q) accepted percentage %v", s, x.Percentage)
			}
			// Every accepted threshold formats to something that parses back
			// to the same signal and (nearly) the same value.
			again, err := ParseThresholds(x.String())
			if err != nil {
				t.Fatalf("String() of %q = %q does not parse: %v", s, x.String(), err)
			}
			if len(again) == 0 {
				// A tiny percentage can print as 0% (disabled), or a large one
				// as 100%; both mean the threshold never or always fires.
				continue
			}
			y := again[0]
			if y.Signal != x.Signal {
				t.Fatalf("round trip of %q changed the signal: %q", x.String(), y.Signal)
			}
			switch {
			case x.Quantity != nil && (y.Quantity == nil || x.Quantity.Cmp(*y.Quantity) != 0):
				t.Fatalf("round trip of %q changed the quantity: %v", x.String(), y.Quantity)
			case x.Quantity == nil && math.Abs(float64(x.Percentage-y.Percentage)) > 1e-6:
				t.Fatalf("round trip of %q changed the percentage: %v -> %v", x.String(), x.Percentage, y.Percentage)
			}
		}
	})
}
