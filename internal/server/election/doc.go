// Package election runs work only while this process holds a
// coordination.k8s.io/v1 Lease, as kube-controller-manager and
// kube-scheduler do: client-go's leaderelection with a resourcelock
// LeaseLock, in a loop that campaigns again after every term.
//
// A Candidate owns one Lease. Each time it acquires the Lease it starts a
// term: it calls Config.Work with a context that ends when the term ends,
// and Work must build everything it runs afresh and return only once all of
// it has stopped. A term ends when
//   - the elector fails to renew (client-go's renew deadline),
//   - no renewal has succeeded for RenewDeadline on Config.Clock since the
//     last one began (the step-down watchdog; it fires before the elector
//     would, and before any other candidate may acquire, since
//     RenewDeadline < LeaseDuration), or
//   - the context given to Run ends.
//
// The work stops first; only then is the Lease released (ReleaseOnCancel),
// so a successor never overlaps this term. The Candidate then campaigns
// again: unlike upstream's components, which exit when they lose their
// lease, a Candidate's process keeps running.
//
// Acquisition follows client-go, with one addition: a Lease held by a
// holder on this same host (identities are "<hostname>_<uuid>") whose
// renewTime is older than its leaseDurationSeconds is taken at once, since
// both sides read the same clock. client-go otherwise waits a full lease
// duration from when it first sees a record, whatever its timestamps say,
// which would delay `knode up` after a crash. A holder on another host is
// waited for as client-go does, so clock skew between machines is
// tolerated.
//
// The caller must give a client that may get, create and update Leases in
// the namespace, and create Events there. Config.Clock times the watchdog
// and judges expiry; client-go's elector itself runs on the real clock and
// cannot be given another, so Config.Clock should read real time outside of
// tests of the pure functions.
//
// Not here: deciding what runs under which Lease (package server does),
// coordinated leader election (LeaseCandidate), or fencing: a holder that
// is paused longer than its renew deadline may still finish a write it
// began before the pause, as with upstream.
package election
