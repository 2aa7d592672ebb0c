// Package swap holds the kubelet's swap rules as pure functions: whether the
// host has swap (from /proc/swaps), the failSwapOn start-up check, the
// memorySwap.swapBehavior value set, how many bytes of swap one container
// may use, the cgroup files that express that, and the node's
// status.nodeInfo.swap.
//
// The rules follow upstream kubelet 1.33/1.34 (pkg/kubelet/util/swap,
// pkg/kubelet/kuberuntime/kuberuntime_container_linux.go,
// pkg/kubelet/apis/config/validation). One deliberate difference is
// documented on CgroupValues: on cgroup v1 knode expresses LimitedSwap
// through memory.memsw.limit_in_bytes, where upstream falls back to NoSwap.
//
// The caller owns all I/O except ReadProcSwaps: it learns the cgroup version,
// whether the swap controller exists (on v2, memory.swap.max in the agent's
// own cgroup; on v1, memory.memsw.limit_in_bytes at the memory root), and
// the node's memory and swap capacity, and passes them in. When the swap
// controller is missing the caller writes no swap file at all, as upstream
// does.
//
// This package does not decide the tmpfs noswap mount option, and it does
// not read feature gates: NodeSwap is GA (locked on) since 1.34.
package swap
