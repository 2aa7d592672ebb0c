package crilog

import (
	"bytes"
	"fmt"
	"time"
)

// The streams of an entry.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// TimestampFormat is how Options.Timestamps stamps a line: RFC 3339 with
// nine digits of fraction always, the kubelet's RFC3339NanoFixed. The
// entry's own offset is kept (the runtime's choice, UTC for containerd's
// "Z" or the machine's zone).
const TimestampFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Entry is one line of a CRI log file.
type Entry struct {
	// Time is when the runtime read the content from the container.
	Time time.Time
	// Stream is Stdout or Stderr.
	Stream string
	// Partial is true for a part of a line (tag P) that the stream's next
	// entry continues; false for the last part (tag F).
	Partial bool
	// Content is the text after the tag, without the entry's newline. It
	// shares memory with the line given to Parse.
	Content []byte
}

// Parse reads one entry. line may end in its newline or not; it is not
// copied. A line that is not an entry gets an error naming the part that
// is wrong.
func Parse(line []byte) (Entry, error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return Entry{}, fmt.Errorf("crilog: no space after the timestamp in %q", clip(line))
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return Entry{}, fmt.Errorf("crilog: timestamp %q: want RFC 3339 with an optional fraction, e.g. 2016-10-06T00:17:09.669794202Z", clip(ts))
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return Entry{}, fmt.Errorf("crilog: no space after the stream in %q", clip(line))
	}
	e := Entry{Time: t, Stream: string(stream)}
	if e.Stream != Stdout && e.Stream != Stderr {
		return Entry{}, fmt.Errorf("crilog: stream %q: want stdout or stderr", clip(stream))
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return Entry{}, fmt.Errorf("crilog: no space after the tag in %q", clip(line))
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(tag) {
	case "P":
		e.Partial = true
	case "F":
	default:
		return Entry{}, fmt.Errorf("crilog: tag %q: want P or F, optionally followed by ':' and more tags", clip(tags))
	}
	e.Content = content
	return e, nil
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	const max = 64
	if len(b) > max {
		return b[:max]
	}
	return b
}
