// Package nodelifecycle is knode's node lifecycle controller: it notices
// nodes that have gone silent, marks them Unknown, taints them, and paces
// NoExecute tainting per zone so that a network blip does not empty a zone.
//
// It owns, for every node:
//   - health: the Ready, MemoryPressure, DiskPressure and PIDPressure
//     conditions become Unknown when neither a Lease renewal nor a status
//     post has been seen for the grace period, timed on the controller's own
//     clock;
//   - the NoSchedule condition taints (not-ready, unreachable,
//     memory-pressure, disk-pressure, pid-pressure, network-unavailable,
//     unschedulable) and the beta os/arch labels;
//   - the NoExecute not-ready and unreachable taints, applied through one
//     rate-limited queue per zone (package queue) at a rate that follows the
//     zone's state: Normal, PartialDisruption or FullDisruption;
//   - marking the pods of a node that stops being Ready as not Ready, and
//     the upstream events (RegisteredNode, RemovingNode, NodeNotReady).
//
// The decisions are pure: PlanPass takes nodes, leases, the remembered
// State, now and Params and returns a Plan of what to write; Judge decides
// one node's health. The Controller is the shell: it reads through a
// Source (informers, or NewClientSource for deterministic stepping), calls
// PlanPass, applies the queue changes and does the writes. Every pass is a
// synchronous method (MonitorNodeHealth, DoNoExecuteTaintingPass,
// DoNoScheduleTaintingPass, or NoScheduleTaintingPassFor the nodes that
// changed); Run is only tickers around them.
//
// Callers must: give the controller a client with rights over nodes,
// node/status, pods/status, leases (read) and events; call Run, or step the
// passes themselves; and serve the metrics registered on Config.Registerer.
//
// Deliberate differences from upstream, each in the direction of fewer
// surprising evictions:
//   - A node whose Ready is Unknown is queued for the unreachable NoExecute
//     taint only once its grace period has run out on this controller's
//     clock. Upstream queues on the Unknown status alone, so after leaving
//     the all-zones-down mode (or after a restart) it could taint nodes at
//     once; here the fresh grace period really holds.
//   - While every zone is fully disrupted nothing is queued (upstream
//     queues behind a zero rate), so leaving that mode starts from empty
//     queues.
//   - A NoExecute swap (not-ready for unreachable) is one patch, not an add
//     followed by a remove.
//   - Health data of a deleted node is forgotten and its queue entry dropped;
//     a node that changes zone leaves its old zone's queue.
//   - A status post does not make the controller forget the Lease it last
//     saw (upstream does, and then counts that unchanged Lease as a fresh
//     heartbeat at the next pass).
//   - Conflict retries re-read at once rather than sleeping 20 ms.
//
// Not here: deleting pods (the taint eviction controller does that), the
// cloud provider's checks, CIDR allocation, or leader election.
package nodelifecycle
