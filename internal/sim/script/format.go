package script

import (
	"strconv"
	"strings"
	"time"
)

// String prints the script in canonical form: one statement a line, single
// spaces, no comments, durations in their shortest Go form (90s prints as
// 1m30s, 1h0m0s as 1h). Parsing the output gives back the same statements,
// at new positions.
func (s *Script) String() string {
	var b strings.Builder
	for _, st := range s.Statements {
		switch st := st.(type) {
		case Set:
			b.WriteString(st.String())
		case Nodes:
			b.WriteString(st.String())
		case Pods:
			b.WriteString(st.String())
		case StatefulSet:
			b.WriteString(st.String())
		case At:
			b.WriteString(st.String())
		case Run:
			b.WriteString(st.String())
		default:
			// Only this package's statement types reach a parsed Script.
			b.WriteString("# unprintable statement at " + st.Pos().String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// String prints the statement in canonical form.
func (s Set) String() string {
	var b strings.Builder
	b.WriteString("set")
	for _, kv := range s.Settings {
		b.WriteString(" " + kv.Name + "=" + kv.Value)
	}
	return b.String()
}

// String prints the statement in canonical form.
func (s Nodes) String() string {
	out := "nodes " + strconv.Itoa(s.Count) + " zone=" + s.Zone
	if s.CPUs > 0 {
		out += " cpus=" + strconv.Itoa(s.CPUs)
	}
	if s.NUMANodes > 0 {
		out += " numa-nodes=" + strconv.Itoa(s.NUMANodes)
	}
	return out
}

// String prints the statement in canonical form.
func (s Pods) String() string {
	out := "pods " + strconv.Itoa(s.Count)
	switch {
	case !s.Toleration.Given:
	case s.Toleration.Forever:
		out += " toleration=forever"
	default:
		out += " toleration=" + strconv.FormatInt(s.Toleration.Seconds, 10)
	}
	if s.Priority.Given {
		out += " priority=" + strconv.FormatInt(int64(s.Priority.Value), 10)
	}
	switch {
	case !s.Stop.Given:
	case s.Stop.Ignore:
		out += " stop=ignore"
	default:
		out += " stop=" + formatDuration(s.Stop.After)
	}
	if !s.Resources.CPU.IsZero() {
		out += " cpu=" + s.Resources.CPU.String()
	}
	if !s.Resources.Memory.IsZero() {
		out += " memory=" + s.Resources.Memory.String()
	}
	if s.Volume {
		out += " volume"
	}
	return out
}

// String prints the statement in canonical form.
func (s StatefulSet) String() string {
	out := "statefulset " + s.Name + " replicas=" + strconv.Itoa(s.Replicas)
	if s.Volume {
		out += " volume"
	}
	return out
}

// String prints the statement in canonical form.
func (s At) String() string {
	out := "at " + formatDuration(s.Time) + " " + string(s.Action)
	if s.Taint != "" {
		out += " " + string(s.Taint)
	}
	out += " zone=" + s.Zone
	if s.From > 0 {
		out += " from=" + strconv.Itoa(s.From)
	}
	if s.Count > 0 {
		out += " count=" + strconv.Itoa(s.Count)
	}
	return out
}

// String prints the statement in canonical form.
func (s Run) String() string {
	return "run " + formatDuration(s.Duration)
}

// formatDuration drops the zero minutes and seconds that
// time.Duration.String keeps, so 20m0s prints as 20m and 1h0m0s as 1h.
// time.ParseDuration reads the result back to the same value.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
	}
	return s
}
