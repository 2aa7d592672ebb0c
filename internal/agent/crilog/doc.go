// Package crilog reads container logs in the CRI format and writes them as
// the kubelet's log endpoint serves them (kubectl logs).
//
// The format: a CRI runtime (containerd) writes one entry per line,
//
//	<time, RFC 3339 with nanoseconds> <stdout|stderr> <tag> <content>\n
//
// where the tag is F for the end of a line of the container's output, or P
// for a part that the next entry of the same stream continues (a runtime
// splits long lines); more tags may follow the first, after ':'. Parse
// reads one entry.
//
// What it owns: turning a log file into the text the kubelet serves, with
// the kubelet's options (Options): parts joined into their line (the
// newline comes only at the F entry), each line stamped with the time of
// its first part when asked (TimestampFormat, the kubelet's fixed-width
// RFC 3339), lines before a time left out, one stream or both, the last N
// lines, and at most N bytes. Copy does it once; a Follower does it again
// and again as the file grows, on its caller's clock.
//
// Lines: a line belongs to one stream; the parts of a stdout line and of a
// stderr line may interleave, and each stream keeps its own line. Output
// keeps the file's order of entries, as the kubelet's does, so a part of
// one stream's line may be written between the parts of the other's.
// TailLines counts lines from the end in the order they ended (a line
// still unfinished at the end of the file counts as one), reading the file
// backwards in blocks, so its cost is that of the lines returned, not of
// the file. Since is applied after TailLines, as the kubelet does: the
// result is the lines among the last N that began at or after Since.
//
// What the caller must do: open the file and close it, turn sinceSeconds
// into Since on its own clock, and decide when to call Follower.Step again
// and when to stop (the container ended: Drain). A line that does not
// parse is skipped and counted (Follower.Malformed), never an error.
//
// What it does not do: it watches nothing (no fsnotify, no timers), does
// not follow a rotated file to its successor, and reads no other log
// format (the docker json-file format of old kubelets).
package crilog
