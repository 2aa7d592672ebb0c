package nodelifecycle

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestComputeZoneState(t *testing.T) {
	tests := []struct {
		name            string
		ready, notReady int
		want            ZoneState
	}{
		{"empty zone", 0, 0, StateNormal},
		{"all ready", 10, 0, StateNormal},
		{"one node, not ready: full", 0, 1, StateFullDisruption},
		{"none ready: full, whatever the count", 0, 200, StateFullDisruption},
		{"2 not ready of 3 (67%): only 2, normal", 1, 2, StateNormal},
		{"3 not ready of 4 (75%): partial", 1, 3, StatePartialDisruption},
		{"2 not ready of 2 is full, not partial", 0, 2, StateFullDisruption},
		{"exactly at threshold 11/20 = 0.55: partial", 9, 11, StatePartialDisruption},
		{"just below: 10/20 = 0.50", 10, 10, StateNormal},
		{"just below: 5499/10000", 4501, 5499, StateNormal},
		{"exactly at threshold, large: 5500/10000", 4500, 5500, StatePartialDisruption},
		{"3 not ready of 100: normal", 97, 3, StateNormal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ComputeZoneState(tc.ready, tc.notReady, 0.55); got != tc.want {
				t.Errorf("ComputeZoneState(%d ready, %d not) = %s, want %s", tc.ready, tc.notReady, got, tc.want)
			}
		})
	}
}

func TestZoneRate(t *testing.T) {
	tests := []struct {
		name  string
		state ZoneState
		size  int
		want  float64
	}{
		{"normal", StateNormal, 10, 0.1},
		{"partial, zone of 50 (= threshold): stop", StatePartialDisruption, 50, 0},
		{"partial, zone of 51: secondary rate", StatePartialDisruption, 51, 0.01},
		{"partial, tiny zone: stop", StatePartialDisruption, 3, 0},
		{"full: normal rate again", StateFullDisruption, 50, 0.1},
		{"full, small: normal rate", StateFullDisruption, 1, 0.1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ZoneRate(tc.state, tc.size, params); got != tc.want {
				t.Errorf("ZoneRate(%s, %d) = %v, want %v", tc.state, tc.size, got, tc.want)
			}
		})
	}
}

func TestZoneKey(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"no labels", nil, ""},
		{"topology labels", map[string]string{corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: "z"}, "r:\x00:z"},
		{"beta labels win", map[string]string{corev1.LabelFailureDomainBetaRegion: "br", corev1.LabelTopologyRegion: "r", corev1.LabelFailureDomainBetaZone: "bz", corev1.LabelTopologyZone: "z"}, "br:\x00:bz"},
		{"an empty beta label still wins (presence, not value)", map[string]string{corev1.LabelFailureDomainBetaZone: "", corev1.LabelTopologyZone: "z", corev1.LabelTopologyRegion: "r"}, "r:\x00:"},
		{"zone only", map[string]string{corev1.LabelTopologyZone: "z"}, ":\x00:z"},
		{"both empty", map[string]string{corev1.LabelTopologyZone: "", corev1.LabelTopologyRegion: ""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mkNode("a")
			n.Labels = tc.labels
			if got := ZoneKey(n); got != tc.want {
				t.Errorf("ZoneKey = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecideZones(t *testing.T) {
	type zc = map[string]*zoneCount
	tests := []struct {
		name      string
		prevZones map[string]ZoneState
		prevRates map[string]float64
		seen      []string
		counts    zc
		wantZones map[string]ZoneState
		wantRates map[string]float64
		changes   []QueueChange
		reports   []ZoneReport
		dis       Disruption
	}{
		{
			name:      "no nodes at all: nothing",
			prevZones: map[string]ZoneState{}, prevRates: map[string]float64{},
			wantZones: map[string]ZoneState{}, wantRates: map[string]float64{},
		},
		{
			name:      "new healthy zone: queue created at the normal rate, Initial to Normal",
			prevZones: map[string]ZoneState{}, prevRates: map[string]float64{},
			seen:      []string{"a"},
			counts:    zc{"a": {ready: 3}},
			wantZones: map[string]ZoneState{"a": StateNormal}, wantRates: map[string]float64{"a": 0.1},
			changes: []QueueChange{{Zone: "a", Create: true, QPS: 0.1}},
			reports: []ZoneReport{{Zone: "a", Size: 3, Health: 100}},
		},
		{
			name:      "first pass with every node dead: enters the all-down mode",
			prevZones: map[string]ZoneState{}, prevRates: map[string]float64{},
			seen:      []string{"a"},
			counts:    zc{"a": {notReady: 3}},
			wantZones: map[string]ZoneState{"a": StateFullDisruption}, wantRates: map[string]float64{"a": 0},
			changes: []QueueChange{{Zone: "a", Create: true, QPS: 0.1}, {Zone: "a", QPS: 0}},
			reports: []ZoneReport{{Zone: "a", Size: 3, Unhealthy: 3, Health: 0}},
			dis:     DisruptionEntered,
		},
		{
			name:      "one zone dies, another is fine: the dead zone is tainted at the normal rate",
			prevZones: map[string]ZoneState{"a": StateNormal, "b": StateNormal}, prevRates: map[string]float64{"a": 0.1, "b": 0.1},
			seen:      []string{"a", "b"},
			counts:    zc{"a": {notReady: 60}, "b": {ready: 60}},
			wantZones: map[string]ZoneState{"a": StateFullDisruption, "b": StateNormal}, wantRates: map[string]float64{"a": 0.1, "b": 0.1},
			reports: []ZoneReport{{Zone: "a", Size: 60, Unhealthy: 60}, {Zone: "b", Size: 60, Health: 100}},
		},
		{
			name:      "partial disruption of a zone of 51: secondary rate",
			prevZones: map[string]ZoneState{"a": StateNormal}, prevRates: map[string]float64{"a": 0.1},
			seen:      []string{"a"},
			counts:    zc{"a": {ready: 20, notReady: 31}},
			wantZones: map[string]ZoneState{"a": StatePartialDisruption}, wantRates: map[string]float64{"a": 0.01},
			changes: []QueueChange{{Zone: "a", QPS: 0.01}},
			reports: []ZoneReport{{Zone: "a", Size: 51, Unhealthy: 31, Health: float64(100*20) / 51}},
		},
		{
			name:      "partial disruption of a zone of 50: stopped",
			prevZones: map[string]ZoneState{"a": StateNormal}, prevRates: map[string]float64{"a": 0.1},
			seen:      []string{"a"},
			counts:    zc{"a": {ready: 20, notReady: 30}},
			wantZones: map[string]ZoneState{"a": StatePartialDisruption}, wantRates: map[string]float64{"a": 0},
			changes: []QueueChange{{Zone: "a", QPS: 0}},
			reports: []ZoneReport{{Zone: "a", Size: 50, Unhealthy: 30, Health: 40}},
		},
		{
			name:      "every zone down, not all were: enter, every rate 0",
			prevZones: map[string]ZoneState{"a": StateNormal, "b": StateFullDisruption}, prevRates: map[string]float64{"a": 0.1, "b": 0.1},
			seen:      []string{"a", "b"},
			counts:    zc{"a": {notReady: 5}, "b": {notReady: 5}},
			wantZones: map[string]ZoneState{"a": StateFullDisruption, "b": StateFullDisruption}, wantRates: map[string]float64{"a": 0, "b": 0},
			changes: []QueueChange{{Zone: "a", QPS: 0}, {Zone: "b", QPS: 0}},
			reports: []ZoneReport{{Zone: "a", Size: 5, Unhealthy: 5}, {Zone: "b", Size: 5, Unhealthy: 5}},
			dis:     DisruptionEntered,
		},
		{
			name:      "still all down: nothing changes",
			prevZones: map[string]ZoneState{"a": StateFullDisruption, "b": StateFullDisruption}, prevRates: map[string]float64{"a": 0, "b": 0},
			seen:      []string{"a", "b"},
			counts:    zc{"a": {notReady: 5}, "b": {notReady: 5}},
			wantZones: map[string]ZoneState{"a": StateFullDisruption, "b": StateFullDisruption}, wantRates: map[string]float64{"a": 0, "b": 0},
			reports: []ZoneReport{{Zone: "a", Size: 5, Unhealthy: 5}, {Zone: "b", Size: 5, Unhealthy: 5}},
		},
		{
			name:      "one node back: leave, every zone gets its state's rate (still-dead zone too)",
			prevZones: map[string]ZoneState{"a": StateFullDisruption, "b": StateFullDisruption}, prevRates: map[string]float64{"a": 0, "b": 0},
			seen:      []string{"a", "b"},
			counts:    zc{"a": {ready: 1, notReady: 4}, "b": {notReady: 5}},
			wantZones: map[string]ZoneState{"a": StatePartialDisruption, "b": StateFullDisruption}, wantRates: map[string]float64{"a": 0, "b": 0.1},
			changes: []QueueChange{{Zone: "b", QPS: 0.1}},
			reports: []ZoneReport{{Zone: "a", Size: 5, Unhealthy: 4, Health: 20}, {Zone: "b", Size: 5, Unhealthy: 5}},
			dis:     DisruptionLeft,
		},
		{
			name:      "a zone with no counted node left: dropped, reported empty, queue kept",
			prevZones: map[string]ZoneState{"a": StateNormal, "gone": StatePartialDisruption}, prevRates: map[string]float64{"a": 0.1, "gone": 0},
			seen:      []string{"a", "excl"},
			counts:    zc{"a": {ready: 2}},
			wantZones: map[string]ZoneState{"a": StateNormal}, wantRates: map[string]float64{"a": 0.1, "gone": 0, "excl": 0.1},
			changes: []QueueChange{{Zone: "excl", Create: true, QPS: 0.1}},
			reports: []ZoneReport{{Zone: "a", Size: 2, Health: 100}, {Zone: "excl", Health: 100}, {Zone: "gone", Health: 100}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := sortedKeys(tc.counts)
			d := decideZones(tc.prevZones, tc.prevRates, tc.seen, tc.counts, keys, params)
			if diff := cmp.Diff(tc.wantZones, d.zones); diff != "" {
				t.Errorf("zones (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRates, d.rates); diff != "" {
				t.Errorf("rates (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.changes, d.changes); diff != "" {
				t.Errorf("queue changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.reports, d.reports); diff != "" {
				t.Errorf("reports (-want +got):\n%s", diff)
			}
			if d.disruption != tc.dis {
				t.Errorf("disruption = %v, want %v", d.disruption, tc.dis)
			}
		})
	}
}
