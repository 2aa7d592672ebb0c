package crilog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"knode/internal/agent/crilog"
)

// growingLog is a log file in a temp dir: the test appends to it as a
// runtime would, and reads it through its own handle.
type growingLog struct {
	t *testing.T
	w *os.File
	r *os.File
}

func newGrowingLog(t *testing.T, initial string) *growingLog {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	g := &growingLog{t: t, w: w, r: r}
	g.append(initial)
	return g
}

func (g *growingLog) append(s string) {
	g.t.Helper()
	if _, err := g.w.WriteString(s); err != nil {
		g.t.Fatal(err)
	}
}

// step runs one Step (or Drain) and checks what it wrote.
func step(t *testing.T, f *crilog.Follower, drain bool, want string) {
	t.Helper()
	var out bytes.Buffer
	var n int64
	var err error
	if drain {
		n, err = f.Drain(&out)
	} else {
		n, err = f.Step(&out)
	}
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != want || n != int64(out.Len()) {
		t.Fatalf("wrote %q (returned %d), want %q", out.String(), n, want)
	}
}

func TestFollower(t *testing.T) {
	first := "2024-01-01T00:00:01Z stdout F one\n"
	log := newGrowingLog(t, first+"2024-01-01T00:00:02Z stdout P tw")
	f, err := crilog.NewFollower(log.r, 0, crilog.Options{Timestamps: true})
	if err != nil {
		t.Fatal(err)
	}

	step(t, f, false, "2024-01-01T00:00:01.000000000Z one\n")
	if f.Offset() != int64(len(first)) {
		t.Fatalf("Offset = %d, want %d: the entry without its newline is not read yet", f.Offset(), len(first))
	}
	step(t, f, false, "") // nothing new

	log.append("o-\n") // the entry is complete, a part of a line
	step(t, f, false, "2024-01-01T00:00:02.000000000Z two-")

	log.append("2024-01-01T00:00:03Z stderr F err\nnot an entry\n2024-01-01T00:00:04Z stdout F parts\n")
	step(t, f, false, "2024-01-01T00:00:03.000000000Z err\nparts\n")
	if f.Malformed() != 1 {
		t.Errorf("Malformed = %d, want 1", f.Malformed())
	}

	// The container ended with a last entry short of its newline.
	log.append("2024-01-01T00:00:05Z stdout F last")
	step(t, f, false, "")
	step(t, f, true, "2024-01-01T00:00:05.000000000Z last\n")
	step(t, f, true, "")
	if fi, _ := log.r.Stat(); f.Offset() != fi.Size() {
		t.Errorf("Offset = %d after Drain, want the size %d", f.Offset(), fi.Size())
	}
}

func TestFollowerFromTail(t *testing.T) {
	log := newGrowingLog(t, "2024-01-01T00:00:01Z stdout F one\n2024-01-01T00:00:02Z stdout F two\n2024-01-01T00:00:03Z stderr F three\n")
	f, err := crilog.NewFollower(log.r, 0, crilog.Options{TailLines: i64(1), Stream: "stdout"})
	if err != nil {
		t.Fatal(err)
	}
	step(t, f, false, "two\n")
	log.append("2024-01-01T00:00:04Z stdout F four\n2024-01-01T00:00:05Z stderr F five\n")
	step(t, f, false, "four\n")

	// Tail 0 follows only what comes next.
	g, err := crilog.NewFollower(log.r, 0, crilog.Options{TailLines: i64(0)})
	if err != nil {
		t.Fatal(err)
	}
	step(t, g, false, "")
	log.append("2024-01-01T00:00:06Z stderr F six\n")
	step(t, g, false, "six\n")
	step(t, f, false, "")
}

func TestFollowerDropsAnUnfinishedLineOutsideTheTail(t *testing.T) {
	// The stdout line is unfinished when the Follower starts; tail 1 keeps
	// only the stderr line after it, so the stdout line's end, written
	// later, is not written either.
	log := newGrowingLog(t, "2024-01-01T00:00:01Z stdout P a\n2024-01-01T00:00:02Z stderr F E\n")
	f, err := crilog.NewFollower(log.r, 0, crilog.Options{TailLines: i64(1)})
	if err != nil {
		t.Fatal(err)
	}
	step(t, f, false, "E\n")
	log.append("2024-01-01T00:00:03Z stdout F b\n2024-01-01T00:00:04Z stdout F c\n")
	step(t, f, false, "c\n")
}

func TestFollowerLimit(t *testing.T) {
	log := newGrowingLog(t, "2024-01-01T00:00:01Z stdout F abc\n")
	f, err := crilog.NewFollower(log.r, 0, crilog.Options{LimitBytes: i64(6)})
	if err != nil {
		t.Fatal(err)
	}
	step(t, f, false, "abc\n")
	if f.Done() {
		t.Fatal("Done before the limit")
	}
	log.append("2024-01-01T00:00:02Z stdout F def\n")
	step(t, f, false, "de")
	if !f.Done() {
		t.Fatal("not Done at the limit")
	}
	log.append("2024-01-01T00:00:03Z stdout F ghi\n")
	step(t, f, false, "")
	step(t, f, true, "")
}

func TestFollowerFromOffset(t *testing.T) {
	first := "2024-01-01T00:00:01Z stdout F one\n"
	log := newGrowingLog(t, first+"2024-01-01T00:00:02Z stdout F two\n")
	f, err := crilog.NewFollower(log.r, int64(len(first)), crilog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	step(t, f, false, "two\n")

	// A tail from an offset counts only what is after it.
	f, err = crilog.NewFollower(log.r, int64(len(first)), crilog.Options{TailLines: i64(5)})
	if err != nil {
		t.Fatal(err)
	}
	step(t, f, false, "two\n")

	for _, tc := range []struct {
		offset int64
		opts   crilog.Options
		want   string
	}{
		{-1, crilog.Options{}, "offset -1: must not be negative"},
		{1 << 20, crilog.Options{TailLines: i64(1)}, "past the end"},
		{0, crilog.Options{Stream: "both"}, "stream: Unsupported value"},
	} {
		if _, err := crilog.NewFollower(log.r, tc.offset, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewFollower(%d, %+v): want an error with %q, got %v", tc.offset, tc.opts, tc.want, err)
		}
	}
}
