// Package logind is the node agent's D-Bus client for systemd-logind: it reads
// the shutdown inhibitor settings, takes a delay inhibitor lock, asks systemd
// to reload logind, and watches for PrepareForShutdown.
//
// It owns one private connection to the system bus per Conn, the logind
// drop-in file it writes (WriteDropIn), and the rule that a PrepareForShutdown
// signal counts only when it comes from the current owner of
// org.freedesktop.login1. Upstream accepts the signal from any sender; here a
// signal from anyone else is dropped and logged at Warn.
//
// Callers must:
//   - Close every Conn they Dial, and every inhibitor file they are given:
//     holding the file holds the lock, closing it releases the lock.
//   - Treat the channel from Watch closing as "the connection is gone": Dial
//     again, take a new lock if one is needed, and Watch again. A logind
//     restart does not close the channel; it shows up as OwnerChanged, and the
//     new logind has forgotten every lock taken from the old one.
//
// It does not decide anything: not whether the delay is long enough, not
// when to release the lock, not how to retry. It holds no timers and no
// clock; every call blocks until the bus answers or the connection closes.
// Tests speak to a fake logind on a private bus, see package logindtest.
package logind
