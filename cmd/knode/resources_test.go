package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"knode/internal/agent/cgroups"
)

func TestCgroupsWarning(t *testing.T) {
	// A v1 tree where only cpu and cpuset can be written.
	root := t.TempDir()
	for _, ctl := range []string{"cpu", "cpuset"} {
		if err := os.Mkdir(filepath.Join(root, ctl), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	partial, err := cgroups.New(cgroups.Config{Mode: cgroups.V1, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, ctl := range []string{"memory", "pids"} {
		if err := os.Mkdir(filepath.Join(root, ctl), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	full, err := cgroups.New(cgroups.Config{Mode: cgroups.V1, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		m    *cgroups.Manager
		err  error
		want string // "" for no event
	}{
		{"everything enforced", full, nil, ""},
		{"missing controllers", partial, nil, "cgroup controllers [memory pids] cannot be written; not enforced: memory limits, pids limits"},
		{"no cgroups at all", nil, errors.New("read-only file system"), "cgroups cannot be written (read-only file system): no cpu, cpuset, memory or pids limit of any pod is enforced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := cgroupsWarning(tc.m, tc.err)
			switch {
			case tc.want == "" && ev != nil:
				t.Errorf("event %+v, want none", ev)
			case tc.want != "" && ev == nil:
				t.Errorf("no event, want %q", tc.want)
			case ev != nil && (ev.Type != "Warning" || ev.Reason != ReasonCgroupLimitsNotEnforced || ev.Message != tc.want):
				t.Errorf("event %+v, want Warning %s %q", ev, ReasonCgroupLimitsNotEnforced, tc.want)
			}
		})
	}
}
