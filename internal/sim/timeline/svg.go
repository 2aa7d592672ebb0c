package timeline

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Layout of the plot, in SVG user units (pixels at 100%).
const (
	svgWidth    = 1000
	plotLeft    = 70  // room for the node count axis
	plotRight   = 915 // leaves room for the pods axis
	headerH     = 94  // title and legend (a row for each axis)
	volumesH    = 18  // the legend's row for the volume series, when drawn
	panelTitleH = 26
	plotH       = 160
	panelGapH   = 18
	panelH      = panelTitleH + plotH + panelGapH
	footerH     = 46 // time tick labels and axis label
	xTicks      = 10 // at most this many time ticks
	yTicks      = 5  // at most this many ticks on each count axis
)

// series is one plotted line.
type series struct {
	label string // the CSV column, so the legend matches the file
	color string
	dash  string // stroke-dasharray; "" for solid
	width string
	right bool // on the pods axis instead of the node axis
	// volume series are drawn only for timelines with volumes, on the
	// right axis, with a legend row of their own.
	volume bool
	value  func(Row) int
}

var allSeries = []series{
	{label: "ready", color: "#2ca02c", width: "2", value: func(r Row) int { return r.Ready }},
	{label: "not_ready", color: "#d62728", width: "2", value: func(r Row) int { return r.NotReady }},
	{label: "unknown", color: "#ff7f0e", width: "2", value: func(r Row) int { return r.Unknown }},
	{label: "noexecute_tainted", color: "#9467bd", dash: "6 3", width: "1.5", value: func(r Row) int { return r.NoExecuteTainted }},
	{label: "shutting_down", color: "#8c564b", dash: "2 2", width: "2", value: func(r Row) int { return r.ShuttingDown }},
	{label: "pods_evicted (cumulative, right axis)", color: "#1f77b4", width: "1.5", right: true, value: func(r Row) int { return r.PodsEvicted }},
	{label: "pods_shut_down (cumulative, right axis)", color: "#17becf", dash: "6 3", width: "1.5", right: true, value: func(r Row) int { return r.PodsShutDown }},
	{label: "volumes_attached (right axis)", color: "#e377c2", width: "2", right: true, volume: true, value: func(r Row) int { return r.VolumesAttached }},
	{label: "volumes_force_detached (cumulative, right axis)", color: "#7f7f7f", dash: "4 2", width: "1.5", right: true, volume: true, value: func(r Row) int { return r.VolumesForceDetached }},
}

// hasVolumes reports whether any row counts a volume: only then are the
// volume series drawn.
func hasVolumes(rows []Row) bool {
	for _, r := range rows {
		if r.VolumesAttached > 0 || r.VolumesForceDetached > 0 {
			return true
		}
	}
	return false
}

// drawn is the series a plot of rows draws.
func drawn(volumes bool) []series {
	var out []series
	for _, s := range allSeries {
		if !s.volume || volumes {
			out = append(out, s)
		}
	}
	return out
}

// rightAxisColor draws the pods axis, which two series share.
const rightAxisColor = "#444"

// WriteSVG draws rows as one panel per zone, stacked in zone order and
// sharing a time axis in minutes. Each panel plots the ready, not_ready and
// unknown node counts, noexecute_tainted and shutting_down against a node
// axis on the left, and pods_evicted and pods_shut_down against a pods
// axis on the right, as step lines
// (a value holds until the next sample). When any row counts a volume,
// volumes_attached and volumes_force_detached join the right axis, with a
// legend row of their own. pods_terminating, statefulset_ready and
// pods_rejected are not drawn. title goes on top. The output is
// self-contained and byte-identical for equal input; rows is not modified.
func WriteSVG(w io.Writer, rows []Row, title string) error {
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b Row) int {
		return cmp.Or(strings.Compare(a.Zone, b.Zone), cmp.Compare(a.TimeS, b.TimeS))
	})
	zones := groupByZone(sorted)
	volumes := hasVolumes(rows)
	header := headerH
	if volumes {
		header += volumesH
	}

	height := header + len(zones)*panelH + footerH
	if len(zones) == 0 {
		height = header + 60
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", escape(title))
	fmt.Fprintf(&b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", svgWidth, height)
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">%s</text>\n", svgWidth/2, escape(title))
	writeLegend(&b, volumes)

	if len(zones) == 0 {
		fmt.Fprintf(&b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#666\">no samples</text>\n", svgWidth/2, header+30)
	} else {
		x := timeAxis(sorted)
		for i, z := range zones {
			writePanel(&b, x, header+i*panelH, z, i == len(zones)-1, volumes)
		}
		// The time axis label, under the last panel's tick labels.
		fmt.Fprintf(&b, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">time (minutes)</text>\n",
			num((plotLeft+plotRight)/2.0), height-8)
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// zoneRows is one zone's rows, sorted by time.
type zoneRows struct {
	zone string
	rows []Row
}

// groupByZone splits rows sorted by zone into one group per zone.
func groupByZone(sorted []Row) []zoneRows {
	var out []zoneRows
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j].Zone == sorted[i].Zone {
			j++
		}
		out = append(out, zoneRows{zone: sorted[i].Zone, rows: sorted[i:j]})
		i = j
	}
	return out
}

// axis maps values in [0, top] onto a pixel range and knows its ticks.
type axis struct {
	top, step float64
	from, to  float64 // pixels for 0 and for top
}

func (a axis) pos(v float64) float64 { return a.from + v/a.top*(a.to-a.from) }

func (a axis) ticks() []float64 {
	var out []float64
	for i := 0; ; i++ {
		v := float64(i) * a.step
		if v > a.top*(1+1e-9) {
			return out
		}
		out = append(out, v)
	}
}

// timeAxis covers every zone's samples, in minutes.
func timeAxis(rows []Row) axis {
	var maxS int64
	for _, r := range rows {
		maxS = max(maxS, r.TimeS)
	}
	top, step := nice(float64(maxS)/60, xTicks, false)
	return axis{top: top, step: step, from: plotLeft, to: plotRight}
}

// nice picks a tick step of 1, 2 or 5 times a power of ten giving at most
// n steps up to max, and the top of the axis as a whole number of steps.
// Counts (integer) never step by less than 1. An empty range becomes [0, 1].
func nice(maxV float64, n int, integer bool) (top, step float64) {
	if maxV <= 0 {
		maxV = 1
	}
	raw := maxV / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * pow
	for _, m := range []float64{1, 2, 5} {
		if m*pow >= raw*(1-1e-9) {
			step = m * pow
			break
		}
	}
	if integer && step < 1 {
		step = 1
	}
	top = math.Ceil(maxV/step*(1-1e-9)) * step
	return top, step
}

// writeLegend lists the node axis's series on one row, the pods
// series of the right axis on the next, and its volume series, when
// drawn, on a third.
func writeLegend(b *bytes.Buffer, volumes bool) {
	rows := []struct{ right, volume bool }{{false, false}, {true, false}}
	if volumes {
		rows = append(rows, struct{ right, volume bool }{true, true})
	}
	for row, want := range rows {
		y := 54 + 18*row
		x := float64(plotLeft)
		for _, s := range allSeries {
			if s.right != want.right || s.volume != want.volume {
				continue
			}
			fmt.Fprintf(b, "<line x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\" %s/>\n", num(x), y-4, num(x+24), y-4, stroke(s))
			fmt.Fprintf(b, "<text x=\"%s\" y=\"%d\">%s</text>\n", num(x+30), y, escape(s.label))
			// Estimated width of the label at font-size 12, plus a gap.
			x += 30 + 7*float64(len(s.label)) + 24
		}
	}
}

func writePanel(b *bytes.Buffer, x axis, top int, z zoneRows, last, volumes bool) {
	plotTop := float64(top + panelTitleH)
	plotBottom := plotTop + plotH
	maxNodes, maxPods := 0, 0
	for _, r := range z.rows {
		maxNodes = max(maxNodes, r.Nodes, r.Ready, r.NotReady, r.Unknown, r.NoExecuteTainted, r.ShuttingDown)
		maxPods = max(maxPods, r.PodsEvicted, r.PodsShutDown)
		if volumes {
			maxPods = max(maxPods, r.VolumesAttached, r.VolumesForceDetached)
		}
	}
	yTop, yStep := nice(float64(maxNodes), yTicks, true)
	left := axis{top: yTop, step: yStep, from: plotBottom, to: plotTop}
	rTop, rStep := nice(float64(maxPods), yTicks, true)
	right := axis{top: rTop, step: rStep, from: plotBottom, to: plotTop}

	name := z.zone
	if name == "" {
		name = "(no zone)"
	}
	end := z.rows[len(z.rows)-1]
	fmt.Fprintf(b, "<g>\n<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", plotLeft, top+18, escape(name))
	status := fmt.Sprintf("at %s min: %d nodes, %d ready, %d not_ready, %d unknown, %d tainted, %d shutting down; %d pods, %d evicted, %d shut down",
		tick(float64(end.TimeS)/60), end.Nodes, end.Ready, end.NotReady, end.Unknown, end.NoExecuteTainted, end.ShuttingDown, end.Pods, end.PodsEvicted, end.PodsShutDown)
	rightLabel := "pods (cumulative)"
	if volumes {
		status += fmt.Sprintf("; %d volumes attached, %d force-detached", end.VolumesAttached, end.VolumesForceDetached)
		rightLabel = "pods, volumes"
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#444\">%s</text>\n", plotRight, top+18, status)

	// Grid and tick labels.
	for _, v := range x.ticks() {
		px := num(x.pos(v))
		fmt.Fprintf(b, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"#e5e5e5\"/>\n", px, num(plotTop), px, num(plotBottom))
		if last {
			fmt.Fprintf(b, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\">%s</text>\n", px, num(plotBottom+16), tick(v))
		}
	}
	for _, v := range left.ticks() {
		py := num(left.pos(v))
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"#e5e5e5\"/>\n", plotLeft, py, plotRight, py)
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">%s</text>\n", plotLeft-6, num(left.pos(v)+4), tick(v))
	}
	for _, v := range right.ticks() {
		py := num(right.pos(v))
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\" stroke=\"%s\"/>\n", plotRight, py, plotRight+4, py, rightAxisColor)
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%s\" fill=\"%s\">%s</text>\n", plotRight+7, num(right.pos(v)+4), rightAxisColor, tick(v))
	}
	fmt.Fprintf(b, "<rect x=\"%d\" y=\"%s\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", plotLeft, num(plotTop), plotRight-plotLeft, plotH)
	mid := num(plotTop + plotH/2)
	fmt.Fprintf(b, "<text x=\"22\" y=\"%s\" text-anchor=\"middle\" transform=\"rotate(-90 22 %s)\">nodes</text>\n", mid, mid)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%s\" text-anchor=\"middle\" fill=\"%s\" transform=\"rotate(90 %d %s)\">%s</text>\n", svgWidth-18, mid, rightAxisColor, svgWidth-18, mid, rightLabel)

	// The series, each as a step line: a value holds until the next sample.
	for _, s := range drawn(volumes) {
		y := left
		if s.right {
			y = right
		}
		fmt.Fprintf(b, "<polyline fill=\"none\" %s points=\"%s\"/>\n", stroke(s), steps(z.rows, x, y, s.value))
		if len(z.rows) == 1 {
			// A lone sample draws no line; mark it.
			r := z.rows[0]
			fmt.Fprintf(b, "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\"/>\n", num(x.pos(float64(r.TimeS)/60)), num(y.pos(float64(s.value(r)))), s.color)
		}
	}
	b.WriteString("</g>\n")
}

// steps returns polyline points for value over rows as a step function,
// with only the corners, so a long flat run costs two points.
func steps(rows []Row, x, y axis, value func(Row) int) string {
	var b strings.Builder
	var lastT int64
	point := func(t int64, v int) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(num(x.pos(float64(t) / 60)))
		b.WriteByte(',')
		b.WriteString(num(y.pos(float64(v))))
		lastT = t
	}
	prev := value(rows[0])
	point(rows[0].TimeS, prev)
	for _, r := range rows[1:] {
		if v := value(r); v != prev {
			point(r.TimeS, prev)
			point(r.TimeS, v)
			prev = v
		}
	}
	// Carry the final value to the last sample; a lone sample stays a point.
	if end := rows[len(rows)-1].TimeS; end != lastT {
		point(end, prev)
	}
	return b.String()
}

func stroke(s series) string {
	out := fmt.Sprintf("stroke=\"%s\" stroke-width=\"%s\"", s.color, s.width)
	if s.dash != "" {
		out += fmt.Sprintf(" stroke-dasharray=\"%s\"", s.dash)
	}
	return out
}

// num formats a coordinate with one decimal, the same way every time.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// tick formats a tick value without float noise (0.30000000000000004).
func tick(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

// escape makes s safe as XML character data; invalid UTF-8 and characters
// XML forbids become U+FFFD.
func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}
