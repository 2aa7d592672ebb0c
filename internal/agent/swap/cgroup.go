package swap

import (
	"math"
	"strconv"
)

// The cgroup files a container's swap decision is written to.
const (
	// SwapMaxFile is cgroup v2's swap ceiling, in bytes ("max" is unlimited,
	// which knode never writes). In CRI terms it is
	// LinuxContainerResources.Unified["memory.swap.max"].
	SwapMaxFile = "memory.swap.max"
	// MemswLimitFile is cgroup v1's memory+swap ceiling, in bytes. In CRI
	// terms it is LinuxContainerResources.MemorySwapLimitInBytes.
	MemswLimitFile = "memory.memsw.limit_in_bytes"
)

// CgroupValues is the container's swap decision as cgroup file name to
// decimal value, for the runtime to write (or turn into CRI fields). A nil
// map means write nothing. memoryLimitBytes is the container's memory limit
// (0 or less: none); swapBytes is what Limit returned (0 on error).
//
// Only call it when the node's swap controller exists; upstream writes no
// swap file at all without one.
//
// cgroup v2, as upstream: memory.swap.max is swapBytes under LimitedSwap and
// "0" otherwise (NoSwap, "" and unknown values), with or without a memory
// limit.
//
// cgroup v1, knode's choice: memory.memsw.limit_in_bytes is the memory limit
// plus swapBytes under LimitedSwap, and the memory limit alone otherwise. A
// container without a memory limit gets no file (unlimited), because memsw
// cannot sit below an unlimited memory.limit_in_bytes. Upstream treats
// LimitedSwap on v1 as NoSwap (memsw = memory limit): it never grants swap
// on v1. The sum saturates at MaxInt64.
func CgroupValues(behavior string, memoryLimitBytes, swapBytes int64, cgroupV2 bool) map[string]string {
	if behavior != LimitedSwap || swapBytes < 0 {
		swapBytes = 0
	}
	if cgroupV2 {
		return map[string]string{SwapMaxFile: strconv.FormatInt(swapBytes, 10)}
	}
	if memoryLimitBytes <= 0 {
		return nil
	}
	memsw := memoryLimitBytes + swapBytes
	if swapBytes > math.MaxInt64-memoryLimitBytes {
		memsw = math.MaxInt64
	}
	return map[string]string{MemswLimitFile: strconv.FormatInt(memsw, 10)}
}
