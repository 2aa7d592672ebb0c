package crilog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Options are the kubelet's log options.
type Options struct {
	// Timestamps starts each line with the time of its first part in
	// TimestampFormat and a space.
	Timestamps bool
	// Since leaves out the lines whose first part is before it; zero keeps
	// all. The caller turns sinceSeconds into a time on its own clock.
	Since time.Time
	// TailLines keeps only the last lines (see the package doc for how
	// they are counted); nil keeps all, 0 none. It must not be negative.
	TailLines *int64
	// LimitBytes ends the output after that many bytes (timestamps
	// included), in the middle of a line if it falls there; nil means no
	// limit. It must be positive.
	LimitBytes *int64
	// Stream is Stdout or Stderr for one stream, "" for both.
	Stream string
}

func (o Options) validate() error {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be non-negative"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be positive"))
	}
	if o.Stream != "" && o.Stream != Stdout && o.Stream != Stderr {
		errs = append(errs, field.NotSupported(field.NewPath("stream"), o.Stream, []string{"", Stdout, Stderr}))
	}
	if err := errs.ToAggregate(); err != nil {
		return fmt.Errorf("crilog: %w", err)
	}
	return nil
}

// streamIndex numbers the streams: 0 stdout, 1 stderr.
func streamIndex(s string) int {
	if s == Stderr {
		return 1
	}
	return 0
}

// selected reports which streams opts keeps.
func (o Options) selected() [2]bool {
	switch o.Stream {
	case Stdout:
		return [2]bool{true, false}
	case Stderr:
		return [2]bool{false, true}
	}
	return [2]bool{true, true}
}

// Copy writes the log in r as opts says, from the start of r to its end at
// the time of the call (a last line without its newline included), and
// returns the bytes written. Reaching LimitBytes is not an error. Lines
// that do not parse are skipped; use a Follower to count them.
func Copy(w io.Writer, r io.ReadSeeker, opts Options) (n int64, err error) {
	f, err := NewFollower(r, 0, opts)
	if err != nil {
		return 0, err
	}
	return f.Drain(w)
}

// Follower writes a log as it grows. Each Step writes the complete entries
// appended since the last one; the caller decides when to call it (on a
// ticker of its clock, say) and calls Drain once the container ended.
// A Follower is not safe for concurrent use.
type Follower struct {
	r    io.ReadSeeker
	opts Options
	sel  [2]bool
	off  int64
	// left is what LimitBytes still allows; negative means no limit.
	left      int64
	malformed int64
	streams   [2]lineState
}

// lineState is where a stream is in its current line.
type lineState struct {
	// skip is how many more lines of the stream end before the first one
	// TailLines keeps; entries until then are not written.
	skip int64
	// inLine: a part of the current line was read, its F not yet.
	inLine bool
	// write: the current line is written (it is not before Since).
	write bool
}

// NewFollower returns a Follower of r from offset, which must be where an
// entry starts (0, or a Follower's Offset). With opts.TailLines it starts
// at the last lines between offset and r's end at the time of the call.
func NewFollower(r io.ReadSeeker, offset int64, opts Options) (*Follower, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("crilog: offset %d: must not be negative", offset)
	}
	f := &Follower{r: r, opts: opts, sel: opts.selected(), off: offset, left: -1}
	if opts.LimitBytes != nil {
		f.left = *opts.LimitBytes
	}
	if opts.TailLines != nil {
		end, err := r.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, fmt.Errorf("crilog: %w", err)
		}
		if end < offset {
			return nil, fmt.Errorf("crilog: offset %d is past the end of the log (%d bytes)", offset, end)
		}
		t, err := findTail(r, offset, end, *opts.TailLines, f.sel)
		if err != nil {
			return nil, err
		}
		f.off = t.start
		f.streams[0].skip, f.streams[1].skip = t.skip[0], t.skip[1]
	}
	return f, nil
}

// Offset is where the next Step reads: just after the last entry read.
func (f *Follower) Offset() int64 { return f.off }

// Malformed is how many lines did not parse and were skipped.
func (f *Follower) Malformed() int64 { return f.malformed }

// Done reports whether LimitBytes has been written: no Step writes more.
func (f *Follower) Done() bool { return f.left == 0 }

// Step writes what the entries appended since the last Step add to the
// output, and returns the bytes written. An entry whose newline is not yet
// written is left for a later Step. It does not block beyond its reads and
// writes.
func (f *Follower) Step(w io.Writer) (int64, error) { return f.read(w, false) }

// Drain is Step for a log that is no longer written: a last entry without
// its newline is read too.
func (f *Follower) Drain(w io.Writer) (int64, error) { return f.read(w, true) }

// errLimit ends a read at LimitBytes.
var errLimit = errors.New("limit reached")

func (f *Follower) read(w io.Writer, last bool) (int64, error) {
	if f.Done() {
		return 0, nil
	}
	if _, err := f.r.Seek(f.off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("crilog: %w", err)
	}
	out := &limitWriter{w: w, left: f.left}
	br := bufio.NewReaderSize(f.r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			f.left = out.left
			return out.n, fmt.Errorf("crilog: %w", err)
		}
		complete := len(line) > 0 && line[len(line)-1] == '\n'
		if len(line) == 0 || (!complete && !last) {
			break
		}
		f.off += int64(len(line))
		if werr := f.write(out, line); werr != nil {
			f.left = out.left
			if errors.Is(werr, errLimit) {
				return out.n, nil
			}
			return out.n, werr
		}
		if !complete {
			break
		}
	}
	f.left = out.left
	return out.n, nil
}

// write adds one entry to the output.
func (f *Follower) write(out *limitWriter, line []byte) error {
	e, err := Parse(line)
	if err != nil {
		f.malformed++
		return nil
	}
	s := streamIndex(e.Stream)
	if !f.sel[s] {
		return nil
	}
	st := &f.streams[s]
	if st.skip > 0 {
		if !e.Partial {
			st.skip--
		}
		return nil
	}
	if !st.inLine {
		st.inLine = true
		st.write = !e.Time.Before(f.opts.Since)
		if st.write && f.opts.Timestamps {
			var stamp [len(TimestampFormat) + 8]byte
			if err := out.write(append(e.Time.AppendFormat(stamp[:0], TimestampFormat), ' ')); err != nil {
				return err
			}
		}
	}
	if !e.Partial {
		st.inLine = false
	}
	if !st.write {
		return nil
	}
	if err := out.write(e.Content); err != nil {
		return err
	}
	if !e.Partial {
		return out.write([]byte{'\n'})
	}
	return nil
}

// limitWriter counts what it writes and stops at left bytes (negative: no
// limit) with errLimit.
type limitWriter struct {
	w    io.Writer
	left int64
	n    int64
}

func (l *limitWriter) write(p []byte) error {
	limited := l.left >= 0 && int64(len(p)) >= l.left
	if limited {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	if l.left >= 0 {
		l.left -= int64(n)
	}
	if err != nil {
		return err
	}
	if limited {
		return errLimit
	}
	return nil
}

// readBlock is how much findTail reads at a time.
var readBlock int64 = 32 << 10

// tail is where the last lines begin, and how many lines of each stream
// end between there and the first line kept.
type tail struct {
	start int64
	skip  [2]int64
}

// findTail reads r[from:end) backwards, entry by entry, until it has seen
// the last n lines of the selected streams and where each of them begins.
//
// A line ends at its F entry, or, unfinished, at its stream's last entry;
// lines are counted in the order they end. The scan keeps going past the
// n-th line end while a counted line's first part is not yet found; line
// ends it passes on the way belong to lines not kept, and the forward read
// skips that many of each stream.
func findTail(r io.ReadSeeker, from, end, n int64, sel [2]bool) (tail, error) {
	t := tail{start: end}
	if n == 0 {
		return t, nil
	}
	var (
		count   int64
		open    [2]bool  // a counted line of the stream whose first part is not found yet
		seen    [2]bool  // an entry of the stream was seen
		done    [2]bool  // no more lines of the stream are counted
		pending [2]int64 // lines not kept, ending after the latest start
	)
	// visit takes the entries from the last one back; it returns false
	// once the tail is found.
	visit := func(line []byte, off int64) bool {
		e, err := Parse(line)
		if err != nil {
			return true
		}
		s := streamIndex(e.Stream)
		if !sel[s] {
			return true
		}
		first := !seen[s]
		seen[s] = true
		include := func() {
			t.start = off
			for i := range pending {
				t.skip[i] += pending[i]
				pending[i] = 0
			}
		}
		switch {
		case e.Partial && open[s]:
			include()
		case e.Partial && first: // the stream's unfinished last line
			if count < n {
				count++
				open[s] = true
				include()
			} else {
				// Not kept: the forward read skips it to its F, which
				// comes after end if it comes at all, whatever start is.
				done[s] = true
				t.skip[s]++
			}
		case e.Partial:
			// A part of a line not kept.
		default: // F: ends a line, and the stream's open line begins after it
			open[s] = false
			if count < n && !done[s] {
				count++
				open[s] = true
				include()
			} else {
				done[s] = true
				pending[s]++
			}
		}
		return count < n || open[0] || open[1]
	}

	// buf holds r[pos:lineEnd), the entries not visited yet that were read.
	var buf []byte
	pos, lineEnd := end, end
	for lineEnd > from {
		// The last entry in buf starts after the last newline before its
		// own (the final byte); read more until that newline is in buf.
		i := -1
		if len(buf) > 1 {
			i = bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		}
		if i < 0 && pos > from {
			size := min(readBlock, pos-from)
			chunk := make([]byte, size, size+int64(len(buf)))
			if _, err := r.Seek(pos-size, io.SeekStart); err != nil {
				return tail{}, fmt.Errorf("crilog: %w", err)
			}
			if _, err := io.ReadFull(r, chunk); err != nil {
				return tail{}, fmt.Errorf("crilog: reading the log backwards: %w", err)
			}
			pos -= size
			buf = append(chunk, buf...)
			continue
		}
		start := i + 1 // 0 when buf begins at from
		if !visit(buf[start:], pos+int64(start)) {
			return t, nil
		}
		buf = buf[:start]
		lineEnd = pos + int64(start)
	}
	return t, nil
}
