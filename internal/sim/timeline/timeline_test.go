package timeline

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestCSVRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rows []Row
	}{
		{name: "no rows"},
		{name: "one row", rows: []Row{{TimeS: 0, Zone: "a", Nodes: 3, Ready: 3, Pods: 9}}},
		{name: "every field distinct", rows: []Row{
			{TimeS: 60, Zone: "a", Nodes: 1, Ready: 2, NotReady: 3, Unknown: 4, NoExecuteTainted: 5, Pods: 6, PodsEvicted: 7, ShuttingDown: 8, PodsShutDown: 9, VolumesAttached: 11, VolumesForceDetached: 12, PodsTerminating: 13, StatefulSetReady: 14, PodsRejected: 15},
			{TimeS: 60, Zone: "b", Nodes: 10, Ready: 20, NotReady: 30, Unknown: 40, NoExecuteTainted: 50, Pods: 60, PodsEvicted: 70, ShuttingDown: 80, PodsShutDown: 90, VolumesAttached: 110, VolumesForceDetached: 120, PodsTerminating: 130, StatefulSetReady: 140, PodsRejected: 150},
			{TimeS: 9223372036854775807, Zone: "", Nodes: 0},
		}},
		{name: "zone needing quotes", rows: []Row{{Zone: "a,\"b\"\nc"}}},
		{name: "order kept, not sorted", rows: []Row{{TimeS: 120, Zone: "z"}, {TimeS: 0, Zone: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteCSV(&buf, tt.rows); err != nil {
				t.Fatalf("WriteCSV: %v", err)
			}
			if !strings.HasPrefix(buf.String(), Header+"\n") {
				t.Errorf("output does not start with the header:\n%s", buf.String())
			}
			got, err := ReadCSV(&buf)
			if err != nil {
				t.Fatalf("ReadCSV: %v", err)
			}
			if diff := cmp.Diff(tt.rows, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteCSVExact(t *testing.T) {
	var buf bytes.Buffer
	rows := []Row{
		{TimeS: 0, Zone: "a", Nodes: 3, Ready: 3, Pods: 9},
		{TimeS: 30, Zone: "a", Nodes: 3, Ready: 1, NotReady: 0, Unknown: 2, NoExecuteTainted: 2, Pods: 9, PodsEvicted: 4},
		{TimeS: 40, Zone: "a", Nodes: 3, Ready: 1, NotReady: 1, Unknown: 1, NoExecuteTainted: 2, Pods: 7, PodsEvicted: 4, ShuttingDown: 2, PodsShutDown: 2},
		{TimeS: 50, Zone: "a", Nodes: 3, Ready: 1, NotReady: 1, Unknown: 1, NoExecuteTainted: 2, Pods: 7, PodsEvicted: 4, ShuttingDown: 2, PodsShutDown: 2, VolumesAttached: 5, VolumesForceDetached: 3},
		{TimeS: 60, Zone: "a", Nodes: 3, Ready: 1, NotReady: 1, Unknown: 1, NoExecuteTainted: 2, Pods: 5, PodsEvicted: 6, ShuttingDown: 2, PodsShutDown: 2, VolumesAttached: 5, VolumesForceDetached: 3, PodsTerminating: 2, StatefulSetReady: 4},
		{TimeS: 70, Zone: "a", Nodes: 3, Ready: 3, Pods: 5, PodsEvicted: 6, PodsShutDown: 2, StatefulSetReady: 4, PodsRejected: 3},
	}
	if err := WriteCSV(&buf, rows); err != nil {
		t.Fatal(err)
	}
	want := "time_s,zone,nodes,ready,not_ready,unknown,noexecute_tainted,pods,pods_evicted,shutting_down,pods_shut_down,volumes_attached,volumes_force_detached,pods_terminating,statefulset_ready,pods_rejected\n" +
		"0,a,3,3,0,0,0,9,0,0,0,0,0,0,0,0\n" +
		"30,a,3,1,0,2,2,9,4,0,0,0,0,0,0,0\n" +
		"40,a,3,1,1,1,2,7,4,2,2,0,0,0,0,0\n" +
		"50,a,3,1,1,1,2,7,4,2,2,5,3,0,0,0\n" +
		"60,a,3,1,1,1,2,5,6,2,2,5,3,2,4,0\n" +
		"70,a,3,3,0,0,0,5,6,0,2,0,0,0,4,3\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("CSV (-want +got):\n%s", diff)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrors(t *testing.T) {
	if err := WriteCSV(failWriter{}, []Row{{Zone: "a"}}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteCSV error = %v, want disk full", err)
	}
	if err := WriteSVG(failWriter{}, []Row{{Zone: "a"}}, "t"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteSVG error = %v, want disk full", err)
	}
}

func TestReadCSVErrors(t *testing.T) {
	const row = "0,a,1,1,0,0,0,0,0,0,0,0,0,0,0,0\n"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: `timeline CSV: line 1: missing header, want "` + Header + `"`},
		{name: "wrong header field", in: strings.Replace(Header, "nodes", "nodez", 1) + "\n" + row,
			want: `timeline CSV: line 1, column 3: header field "nodez", want "nodes" (want exactly "` + Header + `")`},
		{name: "header short", in: strings.TrimSuffix(Header, ",pods_rejected") + "\n",
			want: `timeline CSV: line 1, column 16: header is missing "pods_rejected" (want exactly "` + Header + `")`},
		{name: "header of the fifteen columns before the rejections", in: "time_s,zone,nodes,ready,not_ready,unknown,noexecute_tainted,pods,pods_evicted,shutting_down,pods_shut_down,volumes_attached,volumes_force_detached,pods_terminating,statefulset_ready\n",
			want: `timeline CSV: line 1, column 16: header is missing "pods_rejected" (want exactly "` + Header + `")`},
		{name: "header of the thirteen columns before the terminating pods", in: "time_s,zone,nodes,ready,not_ready,unknown,noexecute_tainted,pods,pods_evicted,shutting_down,pods_shut_down,volumes_attached,volumes_force_detached\n",
			want: `timeline CSV: line 1, column 14: header is missing "pods_terminating" (want exactly "` + Header + `")`},
		{name: "header of the eleven columns before volumes", in: "time_s,zone,nodes,ready,not_ready,unknown,noexecute_tainted,pods,pods_evicted,shutting_down,pods_shut_down\n",
			want: `timeline CSV: line 1, column 12: header is missing "volumes_attached" (want exactly "` + Header + `")`},
		{name: "header of the nine columns before shutdowns", in: "time_s,zone,nodes,ready,not_ready,unknown,noexecute_tainted,pods,pods_evicted\n",
			want: `timeline CSV: line 1, column 10: header is missing "shutting_down" (want exactly "` + Header + `")`},
		{name: "header long", in: Header + ",extra\n",
			want: `timeline CSV: line 1, column 17: unexpected header field "extra" (want exactly "` + Header + `")`},
		{name: "header with space", in: strings.Replace(Header, ",zone", ", zone", 1) + "\n",
			want: `timeline CSV: line 1, column 2: header field " zone", want "zone" (want exactly "` + Header + `")`},
		{name: "too few fields", in: Header + "\n" + row + "5,a,1\n",
			want: `timeline CSV: line 3: 3 fields, want 16 (` + Header + `)`},
		{name: "a row of the nine columns before shutdowns", in: Header + "\n0,a,1,1,0,0,0,0,0\n",
			want: `timeline CSV: line 2: 9 fields, want 16 (` + Header + `)`},
		{name: "a row of the eleven columns before volumes", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2: 11 fields, want 16 (` + Header + `)`},
		{name: "a row of the thirteen columns before the terminating pods", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2: 13 fields, want 16 (` + Header + `)`},
		{name: "pods terminating negative", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,0,0,-1,0,0\n",
			want: `timeline CSV: line 2, column 14 (pods_terminating): "-1": must be a non-negative integer`},
		{name: "a row of the fifteen columns before the rejections", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2: 15 fields, want 16 (` + Header + `)`},
		{name: "pods rejected negative", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,0,0,0,0,-4\n",
			want: `timeline CSV: line 2, column 16 (pods_rejected): "-4": must be a non-negative integer`},
		{name: "statefulset ready not a number", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,0,0,0,z,0\n",
			want: `timeline CSV: line 2, column 15 (statefulset_ready): "z": must be a non-negative integer`},
		{name: "not a number", in: Header + "\n" + row + "60,a,1,x,0,0,0,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 3, column 4 (ready): "x": must be a non-negative integer`},
		{name: "negative", in: Header + "\n-1,a,1,1,0,0,0,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2, column 1 (time_s): "-1": must be a non-negative integer`},
		{name: "plus sign", in: Header + "\n0,a,1,1,0,0,0,0,+3,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2, column 9 (pods_evicted): "+3": must be a non-negative integer`},
		{name: "negative shutting down", in: Header + "\n0,a,1,1,0,0,0,0,0,-1,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2, column 10 (shutting_down): "-1": must be a non-negative integer`},
		{name: "pods shut down not a number", in: Header + "\n0,a,1,1,0,0,0,0,0,0,x,0,0,0,0,0\n",
			want: `timeline CSV: line 2, column 11 (pods_shut_down): "x": must be a non-negative integer`},
		{name: "volumes attached negative", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,-2,0,0,0,0\n",
			want: `timeline CSV: line 2, column 12 (volumes_attached): "-2": must be a non-negative integer`},
		{name: "volumes force-detached not a number", in: Header + "\n0,a,1,1,0,0,0,0,0,0,0,0,y,0,0,0\n",
			want: `timeline CSV: line 2, column 13 (volumes_force_detached): "y": must be a non-negative integer`},
		{name: "empty count", in: Header + "\n0,a,,1,0,0,0,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2, column 3 (nodes): "": must be a non-negative integer`},
		{name: "time overflow", in: Header + "\n9223372036854775808,a,1,1,0,0,0,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: line 2, column 1 (time_s): "9223372036854775808": must be a non-negative integer`},
		{name: "bad quoting", in: Header + "\n0,a\"b,1,1,0,0,0,0,0,0,0,0,0,0,0,0\n",
			want: `timeline CSV: parse error on line 2, column 4: bare " in non-quoted-field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := ReadCSV(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ReadCSV = %v, want an error", rows)
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("error %v does not wrap ErrFormat", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNice(t *testing.T) {
	tests := []struct {
		name      string
		max       float64
		n         int
		integer   bool
		top, step float64
	}{
		{name: "empty range", max: 0, n: 5, integer: true, top: 1, step: 1},
		{name: "one", max: 1, n: 5, integer: true, top: 1, step: 1},
		{name: "small counts step by 1", max: 3, n: 5, integer: true, top: 3, step: 1},
		{name: "exactly five steps", max: 10, n: 5, integer: true, top: 10, step: 2},
		{name: "just over", max: 11, n: 5, integer: true, top: 15, step: 5},
		{name: "hundreds", max: 300, n: 5, integer: true, top: 300, step: 100},
		{name: "fractional minutes", max: 1.5, n: 10, top: 1.6, step: 0.2},
		{name: "six hours in minutes", max: 360, n: 10, top: 400, step: 50},
		{name: "ninety minutes", max: 90, n: 10, top: 90, step: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, step := nice(tt.max, tt.n, tt.integer)
			if diff := cmp.Diff([2]float64{tt.top, tt.step}, [2]float64{top, step}); diff != "" {
				t.Errorf("nice(%v, %d, %v) [top step] (-want +got):\n%s", tt.max, tt.n, tt.integer, diff)
			}
		})
	}
}

func TestSteps(t *testing.T) {
	x := axis{top: 10, step: 1, from: 0, to: 10} // one pixel per minute
	y := axis{top: 10, step: 1, from: 10, to: 0} // value v at pixel 10-v
	ready := func(r Row) int { return r.Ready }
	tests := []struct {
		name string
		rows []Row
		want string
	}{
		{name: "one sample", rows: []Row{{TimeS: 60, Ready: 2}}, want: "1.0,8.0"},
		{name: "flat", rows: []Row{{TimeS: 0, Ready: 2}, {TimeS: 60, Ready: 2}, {TimeS: 120, Ready: 2}}, want: "0.0,8.0 2.0,8.0"},
		{name: "one change", rows: []Row{{TimeS: 0, Ready: 2}, {TimeS: 60, Ready: 2}, {TimeS: 120, Ready: 5}, {TimeS: 180, Ready: 5}},
			want: "0.0,8.0 2.0,8.0 2.0,5.0 3.0,5.0"},
		{name: "change at the last sample", rows: []Row{{TimeS: 0, Ready: 2}, {TimeS: 60, Ready: 0}},
			want: "0.0,8.0 1.0,8.0 1.0,10.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, steps(tt.rows, x, y, ready)); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}

// outage builds rows for zones, each sampled every 60s for samples times,
// with the agents of the silent zones (all zones if none are named) silent
// for the middle third of the run.
func outage(zones []string, samples int, silent ...string) []Row {
	var rows []Row
	for i := range samples {
		for zi, z := range zones {
			n := 10 + zi
			r := Row{TimeS: int64(i) * 60, Zone: z, Nodes: n, Ready: n, Pods: 3 * n}
			if len(silent) > 0 && !slices.Contains(silent, z) {
				rows = append(rows, r)
				continue
			}
			if i > samples/3 && i < 2*samples/3 {
				r.Ready, r.Unknown = 2, n-2
				r.NoExecuteTainted = min(n-2, i-samples/3)
			}
			if i > samples/3+5 {
				r.PodsEvicted = min(3*(n-2), 3*(i-samples/3-5))
			}
			rows = append(rows, r)
		}
	}
	return rows
}

func render(t *testing.T, rows []Row, title string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSVG(&buf, rows, title); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	return buf.String()
}

// wellFormed parses svg as XML and returns its character data.
func wellFormed(t *testing.T, svg string) string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Space + " " + tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteByte('\n')
		}
	}
	if want := "http://www.w3.org/2000/svg svg"; root != want {
		t.Errorf("root element %q, want %q", root, want)
	}
	return text.String()
}

func TestWriteSVG(t *testing.T) {
	legend := []string{"ready", "not_ready", "unknown", "noexecute_tainted", "shutting_down", "pods_evicted (cumulative, right axis)", "pods_shut_down (cumulative, right axis)", "time (minutes)"}
	tests := []struct {
		name      string
		rows      []Row
		title     string
		zones     []string // zone panel titles expected in the text
		polylines int
	}{
		{name: "no rows", title: "nothing", zones: nil, polylines: 0},
		{name: "one row", rows: []Row{{TimeS: 0, Zone: "a", Nodes: 1, Ready: 1}}, title: "one", zones: []string{"a"}, polylines: 7},
		{name: "five zones, six hours", rows: outage([]string{"a", "b", "c", "d", "e"}, 361), title: "outage", zones: []string{"a", "b", "c", "d", "e"}, polylines: 35},
		{name: "unlabelled zone", rows: []Row{{Zone: ""}, {TimeS: 60, Zone: ""}}, title: "t", zones: []string{"(no zone)"}, polylines: 7},
		{name: "text is escaped", rows: []Row{{Zone: "<b>&\"x\x01"}}, title: "a < b & c]]>", zones: []string{"<b>&\"x\uFFFD"}, polylines: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svg := render(t, tt.rows, tt.title)
			text := wellFormed(t, svg)
			for _, want := range append([]string{tt.title}, tt.zones...) {
				if !strings.Contains(text, want+"\n") {
					t.Errorf("text %q missing from the SVG's text:\n%s", want, text)
				}
			}
			for _, want := range legend {
				if len(tt.rows) == 0 && want == "time (minutes)" {
					continue
				}
				if !strings.Contains(text, want+"\n") {
					t.Errorf("legend entry %q missing", want)
				}
			}
			if got := strings.Count(svg, "<polyline "); got != tt.polylines {
				t.Errorf("%d polylines, want %d", got, tt.polylines)
			}
			if again := render(t, tt.rows, tt.title); again != svg {
				t.Errorf("second WriteSVG differs from the first")
			}
		})
	}
}

func TestWriteSVGIgnoresInputOrder(t *testing.T) {
	rows := outage([]string{"a", "b", "c"}, 30)
	want := render(t, rows, "t")
	reversed := make([]Row, len(rows))
	for i, r := range rows {
		reversed[len(rows)-1-i] = r
	}
	saved := append([]Row(nil), reversed...)
	if got := render(t, reversed, "t"); got != want {
		t.Errorf("reversed input gives a different SVG")
	}
	if diff := cmp.Diff(saved, reversed); diff != "" {
		t.Errorf("WriteSVG modified its input (-before +after):\n%s", diff)
	}
}

func TestWriteSVGPanelOrder(t *testing.T) {
	svg := render(t, outage([]string{"c", "a", "b"}, 3), "t")
	ia, ib, ic := strings.Index(svg, ">a</text>"), strings.Index(svg, ">b</text>"), strings.Index(svg, ">c</text>")
	if ia < 0 || !(ia < ib && ib < ic) {
		t.Errorf("panels not in zone order: a at %d, b at %d, c at %d", ia, ib, ic)
	}
	if !strings.Contains(svg, `height="`+strconv.Itoa(headerH+3*panelH+footerH)+`"`) {
		t.Errorf("height does not fit three panels")
	}
}

// TestWriteSVGGolden keeps one small plot under review in testdata; open
// testdata/outage.svg in a browser after -update.
func TestWriteSVGGolden(t *testing.T) {
	got := render(t, outage([]string{"zone-a", "zone-b", "zone-c"}, 91, "zone-b"), "zone-b silent from 30m to 60m")
	const golden = "testdata/outage.svg"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}

// rollingReboot builds a zone of ten nodes and 100 pods, sampled every 30s
// for 15 minutes, whose nodes shut down five at a time (1-5 from 5m to 7m,
// 6-10 from 9m to 11m), each batch's pods ending as they go down.
func rollingReboot() []Row {
	var rows []Row
	for i := range 31 {
		t := int64(i) * 30
		r := Row{TimeS: t, Zone: "b", Nodes: 10, Ready: 10, Pods: 100}
		for _, batch := range []struct{ from, to int64 }{{300, 420}, {540, 660}} {
			if t >= batch.from {
				r.PodsShutDown += 50
				r.Pods -= 50
			}
			if t >= batch.from && t < batch.to {
				r.ShuttingDown, r.Ready, r.NotReady = 5, 5, 5
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// The pods axis on the right is shared: it reaches the pods shut down when
// they outnumber the pods evicted.
func TestWriteSVGPodsAxisCoversShutdowns(t *testing.T) {
	svg := render(t, rollingReboot(), "t")
	if want := `fill="#444">100</text>`; !strings.Contains(svg, want) {
		t.Errorf("no pods axis tick %q for the 100 pods shut down:\n%s", want, svg)
	}
	if want := "0 shutting down; 0 pods, 0 evicted, 100 shut down</text>"; !strings.Contains(svg, want) {
		t.Errorf("panel header does not end with %q", want)
	}
}

// TestWriteSVGRebootGolden keeps a plot of shutdowns under review, like
// TestWriteSVGGolden.
func TestWriteSVGRebootGolden(t *testing.T) {
	got := render(t, rollingReboot(), "zone b rebooted five nodes at a time")
	const golden = "testdata/reboot.svg"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}

// volumeOutage builds a zone of ten nodes whose twenty volumes stay
// attached through an outage until six minutes after its pods went, when
// they are force-detached, sampled every minute for 30 minutes.
func volumeOutage() []Row {
	var rows []Row
	for i := range 31 {
		r := Row{TimeS: int64(i) * 60, Zone: "b", Nodes: 10, Ready: 10, Pods: 20, VolumesAttached: 20}
		if i >= 5 {
			r.Ready, r.Unknown, r.NoExecuteTainted = 0, 10, 10
		}
		if i >= 15 {
			r.Pods = 0
		}
		if i >= 21 {
			r.VolumesAttached, r.VolumesForceDetached = 0, 20
		}
		rows = append(rows, r)
	}
	return rows
}

// The volume series are drawn only for a timeline that has volumes: then
// they get a legend row of their own, a line each in every panel, and the
// right axis, shared with the pods, reaches them.
func TestWriteSVGVolumes(t *testing.T) {
	labels := []string{"volumes_attached (right axis)", "volumes_force_detached (cumulative, right axis)"}
	svg := render(t, volumeOutage(), "t")
	text := wellFormed(t, svg)
	for _, want := range append(labels, "pods, volumes", "0 pods, 0 evicted, 0 shut down; 0 volumes attached, 20 force-detached") {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("text %q missing from the SVG's text:\n%s", want, text)
		}
	}
	if got := strings.Count(svg, "<polyline "); got != 9 {
		t.Errorf("%d polylines, want 9 (7 series and 2 volume series)", got)
	}
	if !strings.Contains(svg, `height="`+strconv.Itoa(headerH+volumesH+panelH+footerH)+`"`) {
		t.Errorf("height does not leave room for the volume legend row")
	}
	if want := `fill="#444">20</text>`; !strings.Contains(svg, want) {
		t.Errorf("no right axis tick %q for the 20 volumes", want)
	}

	without := render(t, outage([]string{"a"}, 10), "t")
	for _, label := range append(labels, "pods, volumes", "volumes attached") {
		if strings.Contains(without, label) {
			t.Errorf("a timeline without volumes draws %q", label)
		}
	}
}

// TestWriteSVGVolumesGolden keeps a plot of volumes under review, like
// TestWriteSVGGolden.
func TestWriteSVGVolumesGolden(t *testing.T) {
	got := render(t, volumeOutage(), "zone b's volumes force-detached 6 minutes after its pods went")
	const golden = "testdata/volumes.svg"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", golden, diff)
	}
}
