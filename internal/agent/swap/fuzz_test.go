package swap

import (
	"strings"
	"testing"
)

// FuzzEnabled checks Enabled against upstream's line rule and its own
// contract: it never panics; enabled is "more than one line after trimming";
// a parse error leaves capacity 0; capacity is a non-negative multiple of
// 1024; and on content it accepts, one more 1 KiB device adds exactly 1024.
func FuzzEnabled(f *testing.F) {
	f.Add("")
	f.Add(header)
	f.Add(header + "/swap.img file 3954684 1451840 -1\n")
	f.Add(header + "/dev/sda2 partition 2097148 0 -2\n/dev/zram0 partition 8388604 0 100\n")
	f.Add(header + "/a partition\n")
	f.Add(header + "/a partition 9223372036854775807 0 -1\n")
	f.Add("Filename\n\n\n")
	f.Fuzz(func(t *testing.T, content string) {
		enabled, capacity, err := Enabled(content)
		trimmed := strings.TrimSpace(content)
		if want := trimmed != "" && strings.Contains(trimmed, "\n"); enabled != want {
			t.Fatalf("Enabled(%q) enabled = %v, want %v (upstream counts lines)", content, enabled, want)
		}
		if err != nil && capacity != 0 {
			t.Fatalf("Enabled(%q) = capacity %d with error %v, want 0", content, capacity, err)
		}
		if capacity < 0 || capacity%1024 != 0 {
			t.Fatalf("Enabled(%q) capacity = %d, want a non-negative multiple of 1024", content, capacity)
		}
		if err != nil || trimmed == "" || capacity > 1<<62 {
			return
		}
		more := trimmed + "\n/fuzz partition 1 0 -1\n"
		enabled2, capacity2, err := Enabled(more)
		if err != nil || !enabled2 || capacity2 != capacity+1024 {
			t.Fatalf("Enabled(%q) = %v, %d, %v; want true, %d, nil", more, enabled2, capacity2, err, capacity+1024)
		}
	})
}
