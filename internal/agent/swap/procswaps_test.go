package swap

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"

type parsed struct {
	Enabled  bool
	Capacity int64
	Err      string
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEnabled(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    parsed
	}{
		{name: "empty file", content: "", want: parsed{}},
		{name: "white space only", content: " \n\t\n", want: parsed{}},
		{name: "header only, no devices", content: header, want: parsed{}},
		{name: "header only, no trailing newline", content: strings.TrimSpace(header), want: parsed{}},
		{name: "one swap file", content: header + "/swap.img                               file\t\t3954684\t\t1451840\t\t-1\n",
			want: parsed{Enabled: true, Capacity: 3954684 * 1024}},
		{name: "two devices are summed", content: header +
			"/dev/nvme0n1p3                          partition\t2097472\t\t0\t\t-2\n" +
			"/dev/zram0                              partition\t8388604\t\t0\t\t100\n",
			want: parsed{Enabled: true, Capacity: (2097472 + 8388604) * 1024}},
		{name: "file name with an escaped space", content: header + "/var/my\\040swap file 1024 0 -2\n",
			want: parsed{Enabled: true, Capacity: 1024 * 1024}},
		{name: "blank lines between devices are skipped", content: header + "/a partition 1 0 -1\n\n/b partition 2 0 -2\n",
			want: parsed{Enabled: true, Capacity: 3 * 1024}},
		{name: "a zero-sized device still counts as swap on", content: header + "/a partition 0 0 -1\n",
			want: parsed{Enabled: true, Capacity: 0}},
		{name: "CRLF line ends", content: strings.ReplaceAll(header+"/a partition 4 0 -1\n", "\n", "\r\n"),
			want: parsed{Enabled: true, Capacity: 4 * 1024}},
		{name: "device line without a size column", content: header + "/a partition\n",
			want: parsed{Enabled: true, Err: `/proc/swaps line 2: "/a partition" has no Size column`}},
		{name: "size is not a number", content: header + "/a partition 1 0 -1\n/b partition 12k 0 -1\n",
			want: parsed{Enabled: true, Err: `/proc/swaps line 3: Size "12k" must be a non-negative number of KiB`}},
		{name: "negative size", content: header + "/a partition -5 0 -1\n",
			want: parsed{Enabled: true, Err: `/proc/swaps line 2: Size "-5" must be a non-negative number of KiB`}},
		{name: "size overflows bytes", content: header + "/a partition " + strconv.FormatInt(math.MaxInt64/1024+1, 10) + " 0 -1\n",
			want: parsed{Enabled: true, Err: "/proc/swaps line 2: the total swap size overflows int64 bytes"}},
		{name: "largest size that fits", content: header + "/a partition " + strconv.FormatInt(math.MaxInt64/1024, 10) + " 0 -1\n",
			want: parsed{Enabled: true, Capacity: math.MaxInt64 / 1024 * 1024}},
		{name: "sum overflows bytes", content: header + "/a partition " + strconv.FormatInt(math.MaxInt64/1024, 10) + " 0 -1\n/b partition 1 0 -1\n",
			want: parsed{Enabled: true, Err: "/proc/swaps line 3: the total swap size overflows int64 bytes"}},
		{name: "no header: upstream still counts lines", content: "/a partition 1 0 -1\n/b partition 1 0 -1\n",
			want: parsed{Enabled: true, Err: `/proc/swaps line 1: "/a partition 1 0 -1" is not the header (Filename Type Size Used Priority)`}},
		{name: "a single unknown line is swap off", content: "garbage\n",
			want: parsed{Err: `/proc/swaps line 1: "garbage" is not the header (Filename Type Size Used Priority)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got parsed
			var err error
			got.Enabled, got.Capacity, err = Enabled(tt.content)
			got.Err = errString(err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Enabled(%q) (-want +got):\n%s", tt.content, diff)
			}
		})
	}
}

func TestReadProcSwaps(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "swaps")
	if err := os.WriteFile(file, []byte(header+"/swap.img file 2048 0 -2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want parsed
	}{
		{name: "file with one device", path: file, want: parsed{Enabled: true, Capacity: 2048 * 1024}},
		{name: "missing file means swap off", path: filepath.Join(dir, "absent"), want: parsed{}},
		{name: "other read errors are returned", path: dir, want: parsed{Err: "read " + dir + ": is a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got parsed
			var err error
			got.Enabled, got.Capacity, err = ReadProcSwaps(tt.path)
			got.Err = errString(err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadProcSwaps(%q) (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

// The empty path reads the host's /proc/swaps, whatever it holds.
func TestReadProcSwapsDefaultPath(t *testing.T) {
	var want parsed
	content, err := os.ReadFile(DefaultProcSwapsPath)
	if err == nil {
		want.Enabled, want.Capacity, err = Enabled(string(content))
		want.Err = errString(err)
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Skipf("cannot read %s: %v", DefaultProcSwapsPath, err)
	}
	var got parsed
	got.Enabled, got.Capacity, err = ReadProcSwaps("")
	got.Err = errString(err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadProcSwaps(\"\") (-want +got):\n%s", diff)
	}
}

func TestProcSwapsPath(t *testing.T) {
	for path, want := range map[string]string{"": "/proc/swaps", "/tmp/swaps": "/tmp/swaps"} {
		if got := procSwapsPath(path); got != want {
			t.Errorf("procSwapsPath(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestCheckFailSwapOn(t *testing.T) {
	const msg = "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false" +
		" (swapoff -a, or failSwapOn: false in the KubeletConfiguration)"
	tests := []struct {
		failSwapOn, enabled bool
		want                string
	}{
		{failSwapOn: true, enabled: true, want: msg},
		{failSwapOn: true, enabled: false},
		{failSwapOn: false, enabled: true},
		{failSwapOn: false, enabled: false},
	}
	for _, tt := range tests {
		err := CheckFailSwapOn(tt.failSwapOn, tt.enabled)
		if got := errString(err); got != tt.want {
			t.Errorf("CheckFailSwapOn(%v, %v) = %q, want %q", tt.failSwapOn, tt.enabled, got, tt.want)
		}
		if got, want := errors.Is(err, ErrSwapOn), tt.want != ""; got != want {
			t.Errorf("CheckFailSwapOn(%v, %v): errors.Is(err, ErrSwapOn) = %v, want %v", tt.failSwapOn, tt.enabled, got, want)
		}
	}
}

func TestValidateBehavior(t *testing.T) {
	tests := []struct {
		behavior string
		want     string
	}{
		{behavior: ""},
		{behavior: "NoSwap"},
		{behavior: "LimitedSwap"},
		{behavior: "UnlimitedSwap", want: `invalid configuration: memorySwap.swapBehavior "UnlimitedSwap" must be one of: "", "LimitedSwap" or "NoSwap"`},
		{behavior: "noswap", want: `invalid configuration: memorySwap.swapBehavior "noswap" must be one of: "", "LimitedSwap" or "NoSwap"`},
		{behavior: " NoSwap", want: `invalid configuration: memorySwap.swapBehavior " NoSwap" must be one of: "", "LimitedSwap" or "NoSwap"`},
	}
	for _, tt := range tests {
		if got := errString(ValidateBehavior(tt.behavior)); got != tt.want {
			t.Errorf("ValidateBehavior(%q) = %q, want %q", tt.behavior, got, tt.want)
		}
	}
}
