package crilog_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/crilog"
)

// sample has every kind of line: both streams, a line in three parts, a
// line that is not an entry, and an entry in another time zone.
const sample = `2024-01-01T00:00:01Z stdout F one
2024-01-01T00:00:02Z stderr F err one
2024-01-01T00:00:03Z stdout P tw
2024-01-01T00:00:04Z stdout P o-
2024-01-01T00:00:05Z stdout F parts
this is not an entry
2024-01-01T00:00:06Z stderr F err two
2024-01-01T01:00:07.5+01:00 stdout F four
`

func i64(v int64) *int64 { return &v }

func at(sec float64) time.Time {
	return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))
}

func TestCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  string
		opts crilog.Options
		want string
	}{
		{name: "everything", log: sample, want: "one\nerr one\ntwo-parts\nerr two\nfour\n"},
		{name: "empty log", log: "", want: ""},
		{name: "stdout", log: sample, opts: crilog.Options{Stream: "stdout"}, want: "one\ntwo-parts\nfour\n"},
		{name: "stderr", log: sample, opts: crilog.Options{Stream: "stderr"}, want: "err one\nerr two\n"},
		{name: "timestamps of the first part, fixed width, own zone", log: sample, opts: crilog.Options{Timestamps: true},
			want: "2024-01-01T00:00:01.000000000Z one\n" +
				"2024-01-01T00:00:02.000000000Z err one\n" +
				"2024-01-01T00:00:03.000000000Z two-parts\n" +
				"2024-01-01T00:00:06.000000000Z err two\n" +
				"2024-01-01T01:00:07.500000000+01:00 four\n"},
		{name: "since a line's first part keeps it", log: sample, opts: crilog.Options{Since: at(3)}, want: "two-parts\nerr two\nfour\n"},
		{name: "since after a line's first part drops all its parts", log: sample, opts: crilog.Options{Since: at(4)}, want: "err two\nfour\n"},
		{name: "since compares instants across zones", log: sample, opts: crilog.Options{Since: at(7.5)}, want: "four\n"},
		{name: "since after everything", log: sample, opts: crilog.Options{Since: at(8)}, want: ""},
		{name: "tail 0", log: sample, opts: crilog.Options{TailLines: i64(0)}, want: ""},
		{name: "tail 1", log: sample, opts: crilog.Options{TailLines: i64(1)}, want: "four\n"},
		{name: "tail 2", log: sample, opts: crilog.Options{TailLines: i64(2)}, want: "err two\nfour\n"},
		{name: "tail 3 takes a line in parts whole", log: sample, opts: crilog.Options{TailLines: i64(3)}, want: "two-parts\nerr two\nfour\n"},
		{name: "tail 5, all lines", log: sample, opts: crilog.Options{TailLines: i64(5)}, want: "one\nerr one\ntwo-parts\nerr two\nfour\n"},
		{name: "tail more than all", log: sample, opts: crilog.Options{TailLines: i64(100)}, want: "one\nerr one\ntwo-parts\nerr two\nfour\n"},
		{name: "tail counts the stream's lines", log: sample, opts: crilog.Options{TailLines: i64(2), Stream: "stdout"}, want: "two-parts\nfour\n"},
		{name: "tail of stderr", log: sample, opts: crilog.Options{TailLines: i64(1), Stream: "stderr"}, want: "err two\n"},
		{name: "since after tail", log: sample, opts: crilog.Options{TailLines: i64(3), Since: at(5)}, want: "err two\nfour\n"},
		{name: "limit cuts a line", log: sample, opts: crilog.Options{LimitBytes: i64(5)}, want: "one\ne"},
		{name: "limit at a line's end", log: sample, opts: crilog.Options{LimitBytes: i64(4)}, want: "one\n"},
		{name: "limit counts timestamps", log: sample, opts: crilog.Options{LimitBytes: i64(10), Timestamps: true}, want: "2024-01-01"},
		{name: "limit above the size", log: sample, opts: crilog.Options{LimitBytes: i64(1000)}, want: "one\nerr one\ntwo-parts\nerr two\nfour\n"},
		{name: "all options", log: sample, opts: crilog.Options{TailLines: i64(2), Stream: "stdout", Since: at(2), Timestamps: true, LimitBytes: i64(36)},
			want: "2024-01-01T00:00:03.000000000Z two-p"},
		{
			name: "interleaved parts are written in the file's order",
			log:  "2024-01-01T00:00:01Z stdout P a\n2024-01-01T00:00:02Z stderr F E\n2024-01-01T00:00:03Z stdout F b\n",
			want: "aE\nb\n",
		},
		{
			name: "each stream keeps its own line",
			log:  "2024-01-01T00:00:01Z stdout P a\n2024-01-01T00:00:02Z stderr F E\n2024-01-01T00:00:03Z stdout F b\n",
			opts: crilog.Options{Stream: "stdout", Timestamps: true},
			want: "2024-01-01T00:00:01.000000000Z ab\n",
		},
		{
			name: "tail over interleaved parts counts lines by their end",
			log:  "2024-01-01T00:00:01Z stdout P a\n2024-01-01T00:00:02Z stderr F E\n2024-01-01T00:00:03Z stdout F b\n",
			opts: crilog.Options{TailLines: i64(1)},
			want: "ab\n",
		},
		{
			name: "an unfinished last line is written as it is",
			log:  "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout P bc\n",
			opts: crilog.Options{Timestamps: true},
			want: "2024-01-01T00:00:01.000000000Z a\n2024-01-01T00:00:02.000000000Z bc",
		},
		{
			name: "an unfinished last line counts as a line",
			log:  "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout P bc\n",
			opts: crilog.Options{TailLines: i64(1)},
			want: "bc",
		},
		{
			name: "a last entry without its newline",
			log:  "2024-01-01T00:00:01Z stdout F a\n2024-01-01T00:00:02Z stdout F b",
			want: "a\nb\n",
		},
		{
			name: "only lines that are not entries",
			log:  "garbage\n\nmore garbage",
			opts: crilog.Options{TailLines: i64(2)},
			want: "",
		},
		{
			name: "empty lines of content",
			log:  "2024-01-01T00:00:01Z stdout F \n2024-01-01T00:00:02Z stdout F \n2024-01-01T00:00:03Z stdout F x\n",
			opts: crilog.Options{TailLines: i64(2)},
			want: "\nx\n",
		},
	} {
		for _, block := range []int64{1, 5, 4096} {
			t.Run(fmt.Sprintf("%s/block=%d", tc.name, block), func(t *testing.T) {
				defer crilog.SetReadBlock(block)()
				var out bytes.Buffer
				n, err := crilog.Copy(&out, strings.NewReader(tc.log), tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, out.String()); diff != "" {
					t.Errorf("Copy (-want +got):\n%s", diff)
				}
				if n != int64(out.Len()) {
					t.Errorf("Copy returned %d, wrote %d bytes", n, out.Len())
				}
			})
		}
	}
}

func TestCopyRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opts crilog.Options
		want string
	}{
		{crilog.Options{TailLines: i64(-1)}, "tailLines: Invalid value: -1: must be non-negative"},
		{crilog.Options{LimitBytes: i64(0)}, "limitBytes: Invalid value: 0: must be positive"},
		{crilog.Options{Stream: "stdin"}, `stream: Unsupported value: "stdin"`},
	} {
		_, err := crilog.Copy(io.Discard, strings.NewReader(sample), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: want an error with %q, got %v", tc.opts, tc.want, err)
		}
	}
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestCopyReturnsWriteErrors(t *testing.T) {
	if _, err := crilog.Copy(errWriter{}, strings.NewReader(sample), crilog.Options{}); err != io.ErrClosedPipe {
		t.Errorf("want the writer's error, got %v", err)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r    io.ReadSeeker
	read int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *countingReader) Seek(off int64, whence int) (int64, error) { return c.r.Seek(off, whence) }

func TestTailReadsOnlyTheEnd(t *testing.T) {
	var log bytes.Buffer
	for i := range 100000 {
		fmt.Fprintf(&log, "2024-01-01T00:00:00.%09dZ stdout F line %d\n", i, i)
	}
	r := &countingReader{r: bytes.NewReader(log.Bytes())}
	var out bytes.Buffer
	if _, err := crilog.Copy(&out, r, crilog.Options{TailLines: i64(3)}); err != nil {
		t.Fatal(err)
	}
	if want := "line 99997\nline 99998\nline 99999\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	if r.read > 256<<10 {
		t.Errorf("tail of 3 lines read %d of %d bytes", r.read, log.Len())
	}
}

// entry is a generated log line: an entry or, with bad, one that is not.
type entry struct {
	sec     int
	stream  int
	partial bool
	content string
	bad     bool
}

func (e entry) String() string {
	if e.bad {
		return "not an entry " + e.content + "\n"
	}
	tag := "F"
	if e.partial {
		tag = "P"
	}
	return fmt.Sprintf("2024-01-01T00:%02d:%02dZ %s %s %s\n", e.sec/60, e.sec%60, []string{"stdout", "stderr"}[e.stream], tag, e.content)
}

// model is what Copy should write, computed forwards over all entries: a
// line is kept when its last entry is among the last TailLines line ends.
func model(entries []entry, opts crilog.Options) string {
	sel := [2]bool{opts.Stream != "stderr", opts.Stream != "stdout"}
	type line struct {
		first, last int // entry indexes
	}
	var lines []*line
	lineOf := make([]*line, len(entries))
	var cur [2]*line
	for i, e := range entries {
		if e.bad || !sel[e.stream] {
			continue
		}
		if cur[e.stream] == nil {
			cur[e.stream] = &line{first: i}
			lines = append(lines, cur[e.stream])
		}
		l := cur[e.stream]
		l.last = i
		lineOf[i] = l
		if !e.partial {
			cur[e.stream] = nil
		}
	}
	kept := map[*line]bool{}
	for _, l := range lines {
		kept[l] = true
	}
	if opts.TailLines != nil {
		// Lines end in the order of their last entries.
		byEnd := append([]*line(nil), lines...)
		for i := range byEnd {
			for j := i + 1; j < len(byEnd); j++ {
				if byEnd[j].last < byEnd[i].last {
					byEnd[i], byEnd[j] = byEnd[j], byEnd[i]
				}
			}
		}
		for i, l := range byEnd {
			kept[l] = int64(len(byEnd)-i) <= *opts.TailLines
		}
	}
	var out strings.Builder
	for i, e := range entries {
		l := lineOf[i]
		if l == nil || !kept[l] {
			continue
		}
		first := entries[l.first]
		if at(float64(first.sec)).Before(opts.Since) {
			continue
		}
		if i == l.first && opts.Timestamps {
			out.WriteString(at(float64(e.sec)).Format(crilog.TimestampFormat) + " ")
		}
		out.WriteString(e.content)
		if !e.partial {
			out.WriteString("\n")
		}
	}
	s := out.String()
	if opts.LimitBytes != nil && int64(len(s)) > *opts.LimitBytes {
		s = s[:*opts.LimitBytes]
	}
	return s
}

// TestCopyAgainstModel checks Copy on random logs and options against the
// forward model, with small read blocks so that lines straddle them.
func TestCopyAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		entries := make([]entry, rng.IntN(14))
		for i := range entries {
			entries[i] = entry{
				sec:     i,
				stream:  rng.IntN(2),
				partial: rng.IntN(3) == 0,
				content: strings.Repeat(string(rune('a'+i%26)), rng.IntN(4)),
				bad:     rng.IntN(10) == 0,
			}
		}
		var log strings.Builder
		for _, e := range entries {
			log.WriteString(e.String())
		}
		var opts crilog.Options
		if rng.IntN(2) == 0 {
			opts.TailLines = i64(int64(rng.IntN(8)))
		}
		opts.Stream = []string{"", "stdout", "stderr"}[rng.IntN(3)]
		opts.Timestamps = rng.IntN(3) == 0
		if rng.IntN(3) == 0 {
			opts.Since = at(float64(rng.IntN(14)))
		}
		if rng.IntN(4) == 0 {
			opts.LimitBytes = i64(int64(1 + rng.IntN(30)))
		}
		block := int64(1 + rng.IntN(40))
		restore := crilog.SetReadBlock(block)
		var out bytes.Buffer
		_, err := crilog.Copy(&out, strings.NewReader(log.String()), opts)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		if want := model(entries, opts); out.String() != want {
			tail := "nil"
			if opts.TailLines != nil {
				tail = fmt.Sprint(*opts.TailLines)
			}
			t.Fatalf("case %d, block %d, tail %s, opts %+v, log:\n%s\ngot  %q\nwant %q", iter, block, tail, opts, log.String(), out.String(), want)
		}
	}
}
