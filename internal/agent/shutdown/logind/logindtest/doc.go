// Package logindtest runs logind's side of the protocol for tests: a private
// dbus-daemon (NewBus, StartBus) and, on it, a fake systemd-logind plus the
// one systemd manager method the agent uses (StartFake).
//
// It owns the daemon process and the fake's bus connections; both speak the
// real wire protocol, so the code under test is the production client.
//
// Callers must:
//   - Pass a testing.TB to NewBus/StartBus; the daemon is killed and reaped
//     at the test's cleanup, even when the test fails. Without dbus-daemon
//     on the machine the test is skipped, or fails when KNODE_REQUIRE_DBUS=1.
//   - Close every Fake they start (t.Cleanup(func() { f.Close() })).
//   - Wait for the fake with WaitFor or Changed, never by sleeping.
//
// It does not model all of logind: no sessions, seats, block locks' effect,
// or actual shutdowns. Inhibit records locks; KillUnit only understands
// SIGHUP to systemd-logind.service and then re-reads InhibitDelayMaxSec from
// the drop-in directory; the two properties are the only ones served.
package logindtest
