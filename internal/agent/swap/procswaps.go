package swap

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// DefaultProcSwapsPath is where the kernel lists the active swap areas.
const DefaultProcSwapsPath = "/proc/swaps"

// Enabled reads the content of /proc/swaps: a header line, then one line per
// active swap area ("Filename Type Size Used Priority", Size in KiB).
//
// enabled follows upstream exactly: after trimming surrounding white space,
// swap is on when the content has more than one line (the header plus at
// least one more), whatever those lines hold. capacityBytes is the sum of
// the Size column, in bytes.
//
// err is set when the header is not /proc/swaps' header or a device line
// has no valid Size; then capacityBytes is 0 but enabled still holds, so a
// failSwapOn check never passes on content it could not parse.
func Enabled(procSwaps string) (enabled bool, capacityBytes int64, err error) {
	content := strings.TrimSpace(procSwaps)
	if content == "" {
		return false, 0, nil
	}
	lines := strings.Split(content, "\n")
	enabled = len(lines) > 1
	if header := strings.Fields(lines[0]); len(header) == 0 || header[0] != "Filename" {
		return enabled, 0, fmt.Errorf("/proc/swaps line 1: %q is not the header (Filename Type Size Used Priority)", lines[0])
	}
	var total int64
	for i, line := range lines[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 3 {
			return enabled, 0, fmt.Errorf("/proc/swaps line %d: %q has no Size column", i+2, line)
		}
		kib, perr := strconv.ParseInt(fields[2], 10, 64)
		if perr != nil || kib < 0 {
			return enabled, 0, fmt.Errorf("/proc/swaps line %d: Size %q must be a non-negative number of KiB", i+2, fields[2])
		}
		if kib > (math.MaxInt64-total)/1024 {
			return enabled, 0, fmt.Errorf("/proc/swaps line %d: the total swap size overflows int64 bytes", i+2)
		}
		total += kib * 1024
	}
	return enabled, total, nil
}

// ReadProcSwaps reads the file at path ("" means DefaultProcSwapsPath) and
// parses it with Enabled. A missing file means swap is off, as upstream
// assumes; any other read error is returned.
func ReadProcSwaps(path string) (enabled bool, capacityBytes int64, err error) {
	content, err := os.ReadFile(procSwapsPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	return Enabled(string(content))
}

// procSwapsPath is path, or DefaultProcSwapsPath when path is empty.
func procSwapsPath(path string) string {
	if path == "" {
		return DefaultProcSwapsPath
	}
	return path
}

// ErrSwapOn is upstream's start-up error when swap is on and failSwapOn is
// true. CheckFailSwapOn wraps it; test for it with errors.Is.
var ErrSwapOn = errors.New("running with swap on is not supported, please disable swap or set --fail-swap-on flag to false")

// CheckFailSwapOn is the start-up check: with failSwapOn (the default) the
// agent refuses to start on a host with swap enabled. The error reads
// upstream's sentence first, then how to fix it.
func CheckFailSwapOn(failSwapOn, enabled bool) error {
	if failSwapOn && enabled {
		return fmt.Errorf("%w (swapoff -a, or failSwapOn: false in the KubeletConfiguration)", ErrSwapOn)
	}
	return nil
}
