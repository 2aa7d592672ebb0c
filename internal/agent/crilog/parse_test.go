package crilog_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/crilog"
)

func TestParse(t *testing.T) {
	ts := time.Date(2016, 10, 6, 0, 17, 9, 669794202, time.UTC)
	for _, tc := range []struct {
		name, line string
		want       crilog.Entry
		err        string
	}{
		{name: "full line", line: "2016-10-06T00:17:09.669794202Z stdout F log content 1\n",
			want: crilog.Entry{Time: ts, Stream: "stdout", Content: []byte("log content 1")}},
		{name: "partial, no newline given", line: "2016-10-06T00:17:09.669794202Z stderr P part",
			want: crilog.Entry{Time: ts, Stream: "stderr", Partial: true, Content: []byte("part")}},
		{name: "empty content", line: "2016-10-06T00:17:09.669794202Z stdout F \n",
			want: crilog.Entry{Time: ts, Stream: "stdout", Content: []byte{}}},
		{name: "content keeps spaces and a carriage return", line: "2016-10-06T00:17:09.669794202Z stdout F  a  b \r\n",
			want: crilog.Entry{Time: ts, Stream: "stdout", Content: []byte(" a  b \r")}},
		{name: "more tags after the first", line: "2016-10-06T00:17:09.669794202Z stdout P:x:y z\n",
			want: crilog.Entry{Time: ts, Stream: "stdout", Partial: true, Content: []byte("z")}},
		{name: "short fraction and an offset", line: "2016-10-06T02:17:09.5+02:00 stdout F x",
			want: crilog.Entry{Time: time.Date(2016, 10, 6, 0, 17, 9, 5e8, time.UTC), Stream: "stdout", Content: []byte("x")}},
		{name: "no fraction", line: "2016-10-06T00:17:09Z stdout F x",
			want: crilog.Entry{Time: time.Date(2016, 10, 6, 0, 17, 9, 0, time.UTC), Stream: "stdout", Content: []byte("x")}},

		{name: "empty", line: "", err: "no space after the timestamp"},
		{name: "only a newline", line: "\n", err: "no space after the timestamp"},
		{name: "bad time", line: "yesterday stdout F x", err: `timestamp "yesterday": want RFC 3339`},
		{name: "time without zone", line: "2016-10-06T00:17:09 stdout F x", err: "timestamp"},
		{name: "no stream", line: "2016-10-06T00:17:09Z stdout", err: "no space after the stream"},
		{name: "bad stream", line: "2016-10-06T00:17:09Z stdin F x", err: `stream "stdin": want stdout or stderr`},
		{name: "no tag", line: "2016-10-06T00:17:09Z stdout F", err: "no space after the tag"},
		{name: "bad tag", line: "2016-10-06T00:17:09Z stdout X:P x", err: `tag "X:P": want P or F`},
		{name: "lower-case tag", line: "2016-10-06T00:17:09Z stdout f x", err: `tag "f"`},
		{name: "docker json", line: `{"log":"x\n","stream":"stdout","time":"2016-10-06T00:17:09Z"}`, err: "timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := crilog.Parse([]byte(tc.line))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v (%+v)", tc.err, err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Time.Equal(tc.want.Time) {
				t.Errorf("Time = %v, want %v", got.Time, tc.want.Time)
			}
			got.Time, tc.want.Time = time.Time{}, time.Time{}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"2016-10-06T00:17:09.669794202Z stdout F log content 1\n",
		"2016-10-06T00:17:09.669794203Z stderr P log content 2",
		"2024-02-29T23:59:59.999999999+05:30 stdout F \n",
		"2016-10-06T00:17:09Z stdout P:x \n",
		"2016-10-06T00:17:09Z stdin F x\n",
		"2016-10-06T00:17:09Z stdout",
		"not a log line",
		"",
		"\n",
		" stdout F x",
		"2016-10-06T00:17:09,5Z stdout F x",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := crilog.Parse(line)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "crilog: ") {
				t.Errorf("error %q does not say where it comes from", err)
			}
			return
		}
		if e.Stream != crilog.Stdout && e.Stream != crilog.Stderr {
			t.Fatalf("stream %q", e.Stream)
		}
		body := bytes.TrimSuffix(line, []byte{'\n'})
		if !bytes.HasSuffix(body, e.Content) {
			t.Fatalf("content %q is not the end of the line %q", e.Content, line)
		}
		// Writing the entry back gives a line that parses to the same entry.
		tag := "F"
		if e.Partial {
			tag = "P"
		}
		again := append([]byte(e.Time.Format(time.RFC3339Nano)+" "+e.Stream+" "+tag+" "), e.Content...)
		e2, err := crilog.Parse(append(again, '\n'))
		if err != nil {
			t.Fatalf("%q parsed, but its rewrite %q does not: %v", line, again, err)
		}
		if !e2.Time.Equal(e.Time) || e2.Stream != e.Stream || e2.Partial != e.Partial || !bytes.Equal(e2.Content, e.Content) {
			t.Fatalf("%q parsed to %+v, its rewrite %q to %+v", line, e, again, e2)
		}
	})
}
