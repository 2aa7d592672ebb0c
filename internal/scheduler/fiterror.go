package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrNoNodes is Schedule's error when the cluster has no nodes; its text
// is upstream's, and it becomes the pod's unschedulable message as is.
var ErrNoNodes = errors.New("no nodes available to schedule pods")

// Preemption reasons, as upstream's DefaultPreemption words them.
const (
	ReasonNoVictims         = "No preemption victims found for incoming pod"
	ReasonPreemptionUseless = "Preemption is not helpful for scheduling"
	// preemptionNever is the whole preemption part for a pod with
	// preemptionPolicy Never.
	preemptionNever = "not eligible due to preemptionPolicy=Never."
)

// FitError is why a pod fits no node. Its Error is the message upstream's
// scheduler puts in the PodScheduled condition and the FailedScheduling
// event.
type FitError struct {
	// NumAllNodes counts every node in the snapshot.
	NumAllNodes int
	// Statuses are the rejections of the nodes the filters looked at.
	Statuses map[string]*Status
	// Absent is the status of every node not in Statuses (ruled out
	// before the filters); nil when there is none.
	Absent *Status
	// PreFilterMsg, when set, replaces the per-node reasons: the pod was
	// refused before any node was looked at.
	PreFilterMsg string
	// PostFilterMsg is what preemption had to say, "" for nothing.
	PostFilterMsg string
}

// Error renders the message in upstream's form:
//
//	0/N nodes are available: <counts>. <postfilter>
//
// where <counts> is "<count> <reason>" for each distinct reason, the
// strings sorted as strings (so "10 x" sorts before "2 y", as upstream),
// joined with ", ".
func (e *FitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "0/%d nodes are available:", e.NumAllNodes)
	if e.PreFilterMsg != "" {
		fmt.Fprintf(&b, " %s.", e.PreFilterMsg)
	} else if counts := e.reasonCounts(); len(counts) > 0 {
		fmt.Fprintf(&b, " %s.", strings.Join(counts, ", "))
	}
	if e.PostFilterMsg != "" {
		b.WriteString(" " + e.PostFilterMsg)
	}
	return b.String()
}

func (e *FitError) reasonCounts() []string {
	counts := map[string]int{}
	for _, st := range e.Statuses {
		for _, r := range st.Reasons {
			counts[r]++
		}
	}
	if absent := e.NumAllNodes - len(e.Statuses); absent > 0 && e.Absent != nil {
		for _, r := range e.Absent.Reasons {
			counts[r] += absent
		}
	}
	out := make([]string, 0, len(counts))
	for r, n := range counts {
		out = append(out, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(out)
	return out
}
