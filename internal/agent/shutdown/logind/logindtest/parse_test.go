package logindtest

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseInhibitDelayMax(t *testing.T) {
	tests := []struct {
		name      string
		conf      string
		want      time.Duration
		wantFound bool
	}{
		{name: "kubelet drop-in", conf: "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n", want: 30 * time.Second, wantFound: true},
		{name: "empty", conf: ""},
		{name: "no section", conf: "InhibitDelayMaxSec=30\n"},
		{name: "other section", conf: "[Other]\nInhibitDelayMaxSec=30\n"},
		{name: "section ends", conf: "[Login]\n[Other]\nInhibitDelayMaxSec=30\n"},
		{name: "commented", conf: "[Login]\n#InhibitDelayMaxSec=30\n;InhibitDelayMaxSec=40\n"},
		{name: "spaces", conf: "  [Login]  \n  InhibitDelayMaxSec = 45  \n", want: 45 * time.Second, wantFound: true},
		{name: "last wins", conf: "[Login]\nInhibitDelayMaxSec=10\nInhibitDelayMaxSec=20\n", want: 20 * time.Second, wantFound: true},
		{name: "bad value ignored", conf: "[Login]\nInhibitDelayMaxSec=10\nInhibitDelayMaxSec=soon\n", want: 10 * time.Second, wantFound: true},
		{name: "negative ignored", conf: "[Login]\nInhibitDelayMaxSec=-5\n"},
		{name: "fraction", conf: "[Login]\nInhibitDelayMaxSec=1.5\n", want: 1500 * time.Millisecond, wantFound: true},
		{name: "zero", conf: "[Login]\nInhibitDelayMaxSec=0\n", want: 0, wantFound: true},
		{name: "go duration", conf: "[Login]\nInhibitDelayMaxSec=2m\n", want: 2 * time.Minute, wantFound: true},
		{name: "infinity", conf: "[Login]\nInhibitDelayMaxSec=infinity\n", want: math.MaxInt64, wantFound: true},
		{name: "other key", conf: "[Login]\nHandlePowerKey=poweroff\n"},
		{name: "no trailing newline", conf: "[Login]\nInhibitDelayMaxSec=7", want: 7 * time.Second, wantFound: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, found := parseInhibitDelayMax(tc.conf)
			if got != tc.want || found != tc.wantFound {
				t.Errorf("parseInhibitDelayMax(%q) = %v, %v; want %v, %v", tc.conf, got, found, tc.want, tc.wantFound)
			}
		})
	}
}

func TestReadDropIns(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		want      time.Duration
		wantFound bool
	}{
		{name: "none"},
		{name: "later name wins",
			files: map[string]string{
				"99-kubelet.conf": "[Login]\nInhibitDelayMaxSec=30\n",
				"10-vendor.conf":  "[Login]\nInhibitDelayMaxSec=5\n",
			},
			want: 30 * time.Second, wantFound: true},
		{name: "later file without the key keeps earlier",
			files: map[string]string{
				"10-vendor.conf": "[Login]\nInhibitDelayMaxSec=5\n",
				"50-other.conf":  "[Login]\nHandleLidSwitch=ignore\n",
			},
			want: 5 * time.Second, wantFound: true},
		{name: "only .conf counts",
			files: map[string]string{
				"99-kubelet.conf.bak":     "[Login]\nInhibitDelayMaxSec=30\n",
				".99-kubelet.conf.tmp123": "[Login]\nInhibitDelayMaxSec=40\n",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, found, err := readDropIns(dir)
			if err != nil {
				t.Fatalf("readDropIns: %v", err)
			}
			if got != tc.want || found != tc.wantFound {
				t.Errorf("readDropIns = %v, %v; want %v, %v", got, found, tc.want, tc.wantFound)
			}
		})
	}
}

func TestReadDropInsMissingDir(t *testing.T) {
	for _, dir := range []string{"", filepath.Join(t.TempDir(), "absent")} {
		if d, found, err := readDropIns(dir); err != nil || found {
			t.Errorf("readDropIns(%q) = %v, %v, %v; want nothing found", dir, d, found, err)
		}
	}
}
