// Package timeline writes and reads the per-zone samples that a simulator
// run produces, as CSV and as an SVG plot.
//
// What it owns: the CSV format (its exact Header, plain integers, "\n" line
// ends) and the plot's layout. Both writers are deterministic: equal input
// gives byte-identical output.
//
// What callers must do: fill one Row per zone per sample time. WriteCSV
// keeps the given order; WriteSVG sorts a copy by zone, then time, so it
// accepts any order.
//
// What it does not do: sample anything, aggregate across zones or validate
// that the counts add up (ready+not_ready+unknown need not equal nodes).
package timeline

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Header is the first line of every timeline CSV, exactly.
const Header = "time_s,zone,nodes,ready,not_ready,unknown,noexecute_tainted,pods,pods_evicted,shutting_down,pods_shut_down,volumes_attached,volumes_force_detached,pods_terminating,statefulset_ready,pods_rejected"

// ErrFormat marks every error ReadCSV returns for bad content (as opposed
// to a failing reader).
var ErrFormat = errors.New("timeline CSV")

// Row is one zone at one sample time. All counts are at least 0.
type Row struct {
	TimeS int64  // virtual seconds since the start of the run
	Zone  string // the zone label value; "" for nodes without one
	// Node counts at TimeS: all nodes of the zone, then by Ready condition
	// status, then those carrying a NoExecute taint.
	Nodes, Ready, NotReady, Unknown, NoExecuteTainted int
	// Pods is the number of pods bound to the zone's nodes at TimeS that
	// have not finished (Succeeded or Failed); PodsEvicted counts the
	// zone's pods evicted since the start (cumulative, so it never
	// decreases along a zone's rows).
	Pods, PodsEvicted int
	// ShuttingDown is the zone's nodes whose machine is shutting down or
	// has shut down and not booted again at TimeS; PodsShutDown counts
	// the zone's pods that a node shutdown ended (Failed, reason
	// Terminated) since the start, cumulative like PodsEvicted.
	ShuttingDown, PodsShutDown int
	// VolumesAttached is the VolumeAttachments to the zone's nodes whose
	// status.attached is true and that are not being deleted at TimeS;
	// VolumesForceDetached counts the zone's volumes the attach/detach
	// controller detached without a verified unmount (on timeout or for
	// the out-of-service taint) since the start, cumulative like
	// PodsEvicted.
	VolumesAttached, VolumesForceDetached int
	// PodsTerminating is the pods bound to the zone's nodes at TimeS that
	// are being deleted (deletionTimestamp set) and are still in the API,
	// such as the pods evicted from a silent node.
	PodsTerminating int
	// StatefulSetReady is the sum of status.readyReplicas over all
	// StatefulSets at TimeS: a count for the whole cluster, so every
	// zone's row at one time holds the same value.
	StatefulSetReady int
	// PodsRejected counts the zone's pods its nodes' agents rejected at
	// admission (Failed with the "Pod was rejected: " message, such as a
	// TopologyAffinityError) since the start, cumulative like PodsEvicted.
	PodsRejected int
}

var header = strings.Split(Header, ",")

// fields returns the row as CSV fields in Header order.
func (r Row) fields() []string {
	return []string{
		strconv.FormatInt(r.TimeS, 10),
		r.Zone,
		strconv.Itoa(r.Nodes),
		strconv.Itoa(r.Ready),
		strconv.Itoa(r.NotReady),
		strconv.Itoa(r.Unknown),
		strconv.Itoa(r.NoExecuteTainted),
		strconv.Itoa(r.Pods),
		strconv.Itoa(r.PodsEvicted),
		strconv.Itoa(r.ShuttingDown),
		strconv.Itoa(r.PodsShutDown),
		strconv.Itoa(r.VolumesAttached),
		strconv.Itoa(r.VolumesForceDetached),
		strconv.Itoa(r.PodsTerminating),
		strconv.Itoa(r.StatefulSetReady),
		strconv.Itoa(r.PodsRejected),
	}
}

// WriteCSV writes Header and then one line per row, in the given order.
// A zone holding a comma, quote or line break is quoted as RFC 4180 says;
// valid label values never need it.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(r.fields()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads what WriteCSV writes. It is strict: the first line must be
// Header exactly, every line has all sixteen fields, and every count is a
// plain non-negative integer. It returns the first problem, wrapped in
// ErrFormat and naming the line and the column (1-based field number and
// its header name).
func ReadCSV(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // counted here, to say which line and how
	got, err := cr.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: line 1: missing header, want %q", ErrFormat, Header)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if err := checkHeader(got); err != nil {
		return nil, err
	}
	var rows []Row
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return nil, fmt.Errorf("%w: line %d: %d fields, want %d (%s)", ErrFormat, line, len(rec), len(header), Header)
		}
		row, err := parseRow(rec, func(i int) int { l, _ := cr.FieldPos(i); return l })
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
}

func checkHeader(got []string) error {
	for i, want := range header {
		if i >= len(got) {
			return fmt.Errorf("%w: line 1, column %d: header is missing %q (want exactly %q)", ErrFormat, i+1, want, Header)
		}
		if got[i] != want {
			return fmt.Errorf("%w: line 1, column %d: header field %q, want %q (want exactly %q)", ErrFormat, i+1, got[i], want, Header)
		}
	}
	if len(got) > len(header) {
		return fmt.Errorf("%w: line 1, column %d: unexpected header field %q (want exactly %q)", ErrFormat, len(header)+1, got[len(header)], Header)
	}
	return nil
}

// parseRow turns the sixteen fields of one record into a Row; lineOf gives the
// line of field i for errors.
func parseRow(rec []string, lineOf func(i int) int) (Row, error) {
	row := Row{Zone: rec[1]}
	ints := []*int{nil, nil, &row.Nodes, &row.Ready, &row.NotReady, &row.Unknown, &row.NoExecuteTainted, &row.Pods, &row.PodsEvicted, &row.ShuttingDown, &row.PodsShutDown, &row.VolumesAttached, &row.VolumesForceDetached, &row.PodsTerminating, &row.StatefulSetReady, &row.PodsRejected}
	for i, v := range rec {
		if i == 1 {
			continue
		}
		n, ok := nonNegative(v)
		if !ok {
			return Row{}, fmt.Errorf("%w: line %d, column %d (%s): %q: must be a non-negative integer", ErrFormat, lineOf(i), i+1, header[i], v)
		}
		if i == 0 {
			row.TimeS = n
			continue
		}
		if int64(int(n)) != n {
			return Row{}, fmt.Errorf("%w: line %d, column %d (%s): %q: out of range", ErrFormat, lineOf(i), i+1, header[i], v)
		}
		*ints[i] = int(n)
	}
	return row, nil
}

// nonNegative accepts decimal digits only: no sign, no spaces.
func nonNegative(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}
