package shutdown

import (
	"fmt"
	"time"
)

// Report is what <root-dir>/shutdown-report.json says of the last
// shutdown. Durations are in seconds.
type Report struct {
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// Cancelled: logind cancelled the shutdown before it ended.
	Cancelled bool `json:"cancelled"`
	// DelayGrantedSeconds is logind's InhibitDelayMaxUSec when the lock
	// was taken; DelayRequestedSeconds what the groups and the status
	// reserve asked for.
	DelayGrantedSeconds   float64 `json:"delayGrantedSeconds"`
	DelayRequestedSeconds float64 `json:"delayRequestedSeconds"`
	// StatusReserveSeconds is the part of the delay kept for final
	// statuses.
	StatusReserveSeconds float64 `json:"statusReserveSeconds"`
	// Cuts are the groups shortened to fit the granted delay.
	Cuts []CutReport `json:"cuts,omitempty"`
	// Groups are the groups that had pods, in the order they were stopped.
	Groups []GroupReport `json:"groups"`
}

// CutReport is one group Fit shortened.
type CutReport struct {
	Priority         int32   `json:"priority"`
	RequestedSeconds float64 `json:"requestedSeconds"`
	GrantedSeconds   float64 `json:"grantedSeconds"`
}

// GroupReport is one group of a shutdown.
type GroupReport struct {
	Priority int32 `json:"priority"`
	// BudgetSeconds is the group's period after fitting; WaitedSeconds
	// how long the shutdown waited for it.
	BudgetSeconds float64     `json:"budgetSeconds"`
	WaitedSeconds float64     `json:"waitedSeconds"`
	Pods          []PodReport `json:"pods"`
}

// PodReport is one pod of a shutdown.
type PodReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Priority  int32  `json:"priority"`
	// GraceSeconds is the grace it was given; TookSeconds how long it took
	// to stop (to the end of the shutdown if it had not stopped by then).
	GraceSeconds float64 `json:"graceSeconds"`
	TookSeconds  float64 `json:"tookSeconds"`
	// Stopped: it stopped before the shutdown ended. KilledAfterGrace: it
	// did not stop within its grace, so it was killed.
	Stopped          bool `json:"stopped"`
	KilledAfterGrace bool `json:"killedAfterGrace"`
	// StatusPosted: its final status reached the API server before the
	// lock was released. Gone: the pod left the API first.
	StatusPosted bool `json:"statusPosted"`
	Gone         bool `json:"gone,omitempty"`
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// report builds the report of run r. Called after r ended.
func (m *Manager) report(r *run) Report {
	rep := Report{
		Started:               r.started,
		Ended:                 r.ended,
		Cancelled:             r.cancelled,
		DelayGrantedSeconds:   seconds(r.granted),
		DelayRequestedSeconds: seconds(m.Requested()),
		StatusReserveSeconds:  seconds(m.cfg.StatusReserve),
		Groups:                []GroupReport{},
	}
	for _, c := range r.cuts {
		rep.Cuts = append(rep.Cuts, CutReport{Priority: c.Priority, RequestedSeconds: seconds(c.Requested), GrantedSeconds: seconds(c.Granted)})
	}
	for i, g := range r.plan.Groups {
		if i > r.group || (i == r.group && r.groupStarted.IsZero()) {
			break // never started (cancelled)
		}
		waited := r.waited[i]
		if i == r.group {
			waited = r.ended.Sub(r.groupStarted)
		}
		gr := GroupReport{Priority: g.Priority, BudgetSeconds: seconds(g.Period), WaitedSeconds: seconds(waited), Pods: []PodReport{}}
		for _, p := range g.Pods {
			pr := PodReport{Namespace: p.Pod.Namespace, Name: p.Pod.Name, UID: string(p.Pod.UID), Priority: Priority(p.Pod), GraceSeconds: seconds(p.Grace)}
			t, _ := m.cfg.Pods.Terminated(p.Pod.UID)
			took := r.ended.Sub(t.Requested)
			if !t.Stopped.IsZero() && !t.Stopped.After(r.ended) {
				pr.Stopped = true
				took = t.Stopped.Sub(t.Requested)
			}
			pr.TookSeconds = seconds(took)
			pr.KilledAfterGrace = !pr.Stopped || took >= p.Grace
			pr.StatusPosted = !t.Posted.IsZero() && !t.Posted.After(r.ended)
			pr.Gone = t.Gone
			gr.Pods = append(gr.Pods, pr)
		}
		rep.Groups = append(rep.Groups, gr)
	}
	return rep
}

// Summary is the report in one sentence, for the event at the end of a
// shutdown.
func (r Report) Summary(path string) string {
	var pods, killed, posted int
	for _, g := range r.Groups {
		for _, p := range g.Pods {
			pods++
			if p.KilledAfterGrace {
				killed++
			}
			if p.StatusPosted {
				posted++
			}
		}
	}
	verb := "Shutdown finished"
	if r.Cancelled {
		verb = "Shutdown cancelled"
	}
	return fmt.Sprintf("%s after %v of the %v delay logind granted: %d pods stopped in %d priority groups, %d killed after their grace, %d of %d final statuses posted; report in %s",
		verb, r.Ended.Sub(r.Started).Round(time.Millisecond), time.Duration(r.DelayGrantedSeconds*float64(time.Second)).Round(time.Millisecond), pods, len(r.Groups), killed, posted, pods, path)
}
