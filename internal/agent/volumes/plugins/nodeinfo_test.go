package plugins

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

func TestHighestVersion(t *testing.T) {
	tests := []struct {
		name     string
		versions []string
		want     string
		wantErr  string
	}{
		{name: "one 1.x", versions: []string{"1.0.0"}, want: "1.0.0"},
		{name: "highest 1.x wins", versions: []string{"1.2.0", "1.10.0", "1.9.1"}, want: "1.10.0"},
		{name: "2.x is skipped", versions: []string{"2.0.0", "1.5.0"}, want: "1.5.0"},
		{name: "unparsable is skipped", versions: []string{"v1.x", "1.1"}, want: "1.1"},
		{name: "only 0.x", versions: []string{"0.3.0"}, wantErr: "highest supported version reported by driver is 0.3.0, must be v1.x"},
		{name: "only 2.x", versions: []string{"2.0.0"}, wantErr: "could not find a highest supported version from versions ([2.0.0]) reported by this driver"},
		{name: "empty", versions: nil, wantErr: "kubernetes.io/csi: CSI driver reporting empty array for supported versions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := highestVersion(tt.versions)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("highestVersion(%v) = %v, %v; want error containing %q", tt.versions, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("highestVersion(%v) = %v, %v; want %s", tt.versions, got, err, tt.want)
			}
		})
	}
}

func TestWithNodeID(t *testing.T) {
	tests := []struct {
		name        string
		current     string
		want        string
		wantChanged bool
		wantErr     bool
	}{
		{name: "no annotation", current: "", want: `{"d1":"n1"}`, wantChanged: true},
		{name: "merged with another driver", current: `{"other":"x"}`, want: `{"d1":"n1","other":"x"}`, wantChanged: true},
		{name: "already there", current: `{"d1":"n1"}`, want: `{"d1":"n1"}`},
		{name: "node ID changed", current: `{"d1":"old"}`, want: `{"d1":"n1"}`, wantChanged: true},
		{name: "not JSON", current: `nope`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := withNodeID(tt.current, "d1", "n1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got != tt.want || changed != tt.wantChanged {
				t.Errorf("withNodeID(%q) = %q, %v; want %q, %v", tt.current, got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

func TestWithoutNodeID(t *testing.T) {
	tests := []struct {
		name                  string
		current               string
		want                  string
		wantKeep, wantChanged bool
	}{
		{name: "no annotation", current: ""},
		{name: "last entry goes with the annotation", current: `{"d1":"n1"}`, wantChanged: true},
		{name: "other entries stay", current: `{"d1":"n1","other":"x"}`, want: `{"other":"x"}`, wantKeep: true, wantChanged: true},
		{name: "driver not there", current: `{"other":"x"}`, want: `{"other":"x"}`, wantKeep: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, keep, changed, err := withoutNodeID(tt.current, "d1")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || keep != tt.wantKeep || changed != tt.wantChanged {
				t.Errorf("withoutNodeID(%q) = %q, keep %v, changed %v; want %q, %v, %v", tt.current, got, keep, changed, tt.want, tt.wantKeep, tt.wantChanged)
			}
		})
	}
}

func TestWithTopology(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		topology    map[string]string
		want        map[string]string
		wantChanged bool
		wantErr     string
	}{
		{name: "no topology", labels: map[string]string{"a": "1"}, want: map[string]string{"a": "1"}},
		{name: "added", labels: map[string]string{"a": "1"}, topology: map[string]string{"zone": "z1"}, want: map[string]string{"a": "1", "zone": "z1"}, wantChanged: true},
		{name: "nil labels", topology: map[string]string{"zone": "z1"}, want: map[string]string{"zone": "z1"}, wantChanged: true},
		{name: "already there", labels: map[string]string{"zone": "z1"}, topology: map[string]string{"zone": "z1"}, want: map[string]string{"zone": "z1"}},
		{name: "collision", labels: map[string]string{"zone": "z2"}, topology: map[string]string{"zone": "z1"},
			wantErr: `detected topology value collision: driver reported "zone":"z1" but existing label is "zone":"z2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := withTopology(tt.labels, tt.topology)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || changed != tt.wantChanged {
				t.Errorf("changed = %v (want %v); labels (-want +got):\n%s", changed, tt.wantChanged, diff)
			}
		})
	}
}

func TestDriverEntry(t *testing.T) {
	tests := []struct {
		name       string
		maxVolumes int64
		want       *storagev1.VolumeNodeResources
	}{
		{name: "no limit", maxVolumes: 0},
		{name: "negative is no limit", maxVolumes: -1},
		{name: "limit", maxVolumes: 16, want: &storagev1.VolumeNodeResources{Count: ptr.To[int32](16)}},
		{name: "capped at int32", maxVolumes: 1 << 40, want: &storagev1.VolumeNodeResources{Count: ptr.To[int32](1<<31 - 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := driverEntry("d1", "n1", tt.maxVolumes, map[string]string{"b": "2", "a": "1"})
			want := storagev1.CSINodeDriver{Name: "d1", NodeID: "n1", TopologyKeys: []string{"a", "b"}, Allocatable: tt.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithDriver(t *testing.T) {
	entry := driverEntry("d1", "n1", 4, map[string]string{"zone": "z1"})
	other := storagev1.CSINodeDriver{Name: "other", NodeID: "x"}
	tests := []struct {
		name        string
		drivers     []storagev1.CSINodeDriver
		want        []storagev1.CSINodeDriver
		wantChanged bool
	}{
		{name: "first driver", want: []storagev1.CSINodeDriver{entry}, wantChanged: true},
		{name: "beside another", drivers: []storagev1.CSINodeDriver{other}, want: []storagev1.CSINodeDriver{other, entry}, wantChanged: true},
		{name: "unchanged", drivers: []storagev1.CSINodeDriver{entry, other}, want: []storagev1.CSINodeDriver{entry, other}},
		{name: "new node ID replaces", drivers: []storagev1.CSINodeDriver{{Name: "d1", NodeID: "old"}, other},
			want: []storagev1.CSINodeDriver{other, entry}, wantChanged: true},
		{name: "new limit replaces", drivers: []storagev1.CSINodeDriver{driverEntry("d1", "n1", 0, map[string]string{"zone": "z1"})},
			want: []storagev1.CSINodeDriver{entry}, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := withDriver(tt.drivers, entry)
			if diff := cmp.Diff(tt.want, got); diff != "" || changed != tt.wantChanged {
				t.Errorf("changed = %v (want %v); drivers (-want +got):\n%s", changed, tt.wantChanged, diff)
			}
		})
	}
}

func TestWithoutDriver(t *testing.T) {
	a := storagev1.CSINodeDriver{Name: "a"}
	b := storagev1.CSINodeDriver{Name: "b"}
	got, changed := withoutDriver([]storagev1.CSINodeDriver{a, b}, "a")
	if diff := cmp.Diff([]storagev1.CSINodeDriver{b}, got); diff != "" || !changed {
		t.Errorf("removing a: changed = %v; (-want +got):\n%s", changed, diff)
	}
	got, changed = withoutDriver([]storagev1.CSINodeDriver{b}, "a")
	if diff := cmp.Diff([]storagev1.CSINodeDriver{b}, got); diff != "" || changed {
		t.Errorf("removing a missing driver: changed = %v; (-want +got):\n%s", changed, diff)
	}
}
