// Package script parses the scenario scripts that `knode sim run FILE` replays
// in virtual time.
//
// What it owns: the scenario language, its syntax checks and its canonical
// printed form. A script is one statement per line; `#` starts a comment
// (also after a statement), blank lines are ignored, and tokens are separated
// by white space:
//
//	set <flag>=<value> ...                one or more settings, by upstream flag name
//	nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>]
//	                                      n nodes named <z>-1 … <z>-<n> in zone z,
//	                                      each a machine of c CPUs (default 4)
//	                                      split evenly over k NUMA nodes (default 1)
//	pods <n> [toleration=<seconds>|forever] [priority=<p>] [stop=<duration>|ignore] [cpu=<q>] [memory=<q>] [volume]
//	statefulset <name> replicas=<n> [volume]
//	                                      a StatefulSet of n pods <name>-0 …
//	                                      <name>-<n-1>, started in order
//	at <t> stop zone=<z> [from=<i>] [count=<k>]
//	                                      from virtual time t the agents of zone z
//	                                      fall silent: the k nodes from index i
//	                                      (i defaults to 1, k to the rest of the zone)
//	at <t> start zone=<z> [from=<i>] [count=<k>]
//	                                      they come back (a node that was shut
//	                                      down boots)
//	at <t> shutdown zone=<z> [from=<i>] [count=<k>]
//	                                      their machines shut down
//	at <t> force-delete zone=<z> [from=<i>] [count=<k>]
//	                                      an operator force-deletes the pods bound
//	                                      to those nodes (grace period 0)
//	at <t> taint out-of-service zone=<z> [from=<i>] [count=<k>]
//	                                      an operator taints those nodes
//	                                      node.kubernetes.io/out-of-service=nodeshutdown:NoExecute
//	at <t> untaint out-of-service zone=<z> [from=<i>] [count=<k>]
//	                                      an operator takes that taint off them
//	run <duration>                        advance virtual time
//
// A pod priority is a PriorityClass value: at most 1000000000 (a class a user
// may define), or 2000000000 or 2000001000 (the built-in
// system-cluster-critical and system-node-critical).
//
// A pod's stop says how its container answers a stop request (SIGTERM), as
// in a node shutdown: stop=<duration> exits cleanly (code 0) that long
// after it, stop=ignore ignores it and is killed when the grace period
// ends. Without stop the container exits at once, as a process SIGTERM
// kills.
//
// A pod with volume mounts a persistent volume of its own: a claim bound to
// a CSI volume that must be attached to the pod's node.
//
// A pod with cpu or memory asks for that quantity (a Kubernetes quantity
// such as 2, 500m or 1Gi, more than 0) as both its request and its limit,
// so it is Guaranteed; the one not named takes the simulator's default
// request as both. A whole number of CPUs is what the static CPU manager
// gives exclusive CPUs for.
//
// A machine's numa-nodes must divide its CPUs evenly: each NUMA node holds
// the same number of CPUs (and the same share of memory).
//
// A StatefulSet's pods are like a pods statement's without options; with
// volume, each mounts the claim data-<name>-<i> of a volumeClaimTemplate.
// Its name must be a DNS-1123 label, and so must its last pod's name
// (<name>-<n-1>, the pod's hostname); it must not be "pod", whose pods
// would take the names the pods statements give (pod-<i>), and two
// statefulset statements may not share a name.
//
// Times and durations are Go durations (90s, 10m, 1h). Parse checks every
// line and reports every problem it finds, each one naming file:line, the
// statement, the field and the rule. Beyond the syntax it checks what a whole
// script must satisfy by itself: a zone is declared by one nodes statement
// only (node names derive from it), an at statement names a declared
// zone and only nodes the zone has, and StatefulSets have distinct names.
//
// What callers must do: interpret the statements in order. Statements holds
// values (Set, Nodes, Pods, StatefulSet, At, Run), never pointers, so a type
// switch must use the value types.
//
// What it does not do: it does not know the flags, so set names and values
// are only checked for shape; it does not order at statements against run
// statements (an at time is absolute virtual time since the start); and it
// runs nothing.
package script

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// Script is a parsed scenario, statements in file order.
type Script struct {
	Statements []Statement
}

// Statement is one line of a script: a Set, Nodes, Pods, StatefulSet, At or
// Run value.
type Statement interface {
	Pos() Pos
}

// Pos is where a statement starts. Line counts from 1.
type Pos struct {
	File string
	Line int
}

// String returns "file:line".
func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Set applies settings, given by upstream flag name without dashes.
type Set struct {
	At       Pos
	Settings []Setting // in script order; names are unique within one statement
}

// Setting is one name=value pair of a set statement. Name is non-empty and
// does not start with '-'; Value is non-empty.
type Setting struct {
	Name, Value string
}

// Nodes adds Count nodes named <Zone>-1 … <Zone>-<Count>, labelled
// topology.kubernetes.io/zone=<Zone>.
type Nodes struct {
	At    Pos
	Count int // at least 1
	Zone  string
	// CPUs is each machine's CPU count; 0 means not given, DefaultCPUs.
	CPUs int
	// NUMANodes is how many NUMA nodes each machine's CPUs and memory are
	// split over; 0 means not given, one. When given it divides the CPUs
	// (or DefaultCPUs) evenly.
	NUMANodes int
}

// DefaultCPUs is the CPU count of a machine whose nodes statement names
// none.
const DefaultCPUs = 4

// Pods adds Count pods.
type Pods struct {
	At         Pos
	Count      int // at least 1
	Toleration Toleration
	Priority   Priority
	Stop       Termination
	// Resources are the container's requests and limits, when the
	// statement names cpu or memory.
	Resources Resources
	// Volume gives each pod a persistent volume of its own.
	Volume bool
}

// Resources are what a pod's container asks for with cpu=<q> and
// memory=<q>: each is both its request and its limit, so the pod is
// Guaranteed.
type Resources struct {
	// CPU and Memory are more than 0 when given; a zero one was not named,
	// and the simulator gives it its default request as both.
	CPU, Memory resource.Quantity
}

// Given reports whether the statement named cpu or memory.
func (r Resources) Given() bool { return !r.CPU.IsZero() || !r.Memory.IsZero() }

// StatefulSet adds a StatefulSet of Replicas pods, <Name>-0 …
// <Name>-<Replicas-1>.
type StatefulSet struct {
	At Pos
	// Name is a DNS-1123 label, not "pod", unique among the script's
	// StatefulSets; <Name>-<Replicas-1> is a DNS-1123 label too.
	Name     string
	Replicas int // at least 1
	// Volume gives each pod a persistent volume of its own, through a
	// volumeClaimTemplate.
	Volume bool
}

// Termination is how the pods' container answers a stop request (SIGTERM).
type Termination struct {
	// Given is false when the script names no stop: the container exits
	// at once, as a process SIGTERM kills.
	Given bool
	// Ignore means the container ignores the request and is killed when
	// its grace period ends.
	Ignore bool
	// After is how long after the request the container exits, with code
	// 0; at least 0, meaningful only when Given and not Ignore.
	After time.Duration
}

// Priority is the PriorityClass value the pods get.
type Priority struct {
	// Given is false when the script names no priority: the pods name no
	// PriorityClass, so their priority is 0.
	Given bool
	// Value is from 0 to MaxUserPriority, or SystemClusterCritical or
	// SystemNodeCritical; meaningful only when Given.
	Value int32
}

// The pod priorities a script may name: any value a user-defined
// PriorityClass may have, and the two built-in classes'.
const (
	MaxUserPriority       int32 = 1000000000
	SystemClusterCritical int32 = 2000000000
	SystemNodeCritical    int32 = 2000001000
)

// Toleration is how long the pods tolerate the not-ready and unreachable
// NoExecute taints.
type Toleration struct {
	// Given is false when the script names no toleration: the pods carry
	// none of their own, so admission's defaults apply.
	Given bool
	// Forever means a toleration without tolerationSeconds: never evicted.
	Forever bool
	// Seconds is tolerationSeconds, at least 0; meaningful only when Given
	// and not Forever.
	Seconds int64
}

// Action is what an At statement does to a zone's agents.
type Action string

const (
	// Stop silences the agents: they stop posting status and renewing leases.
	Stop Action = "stop"
	// Start brings silenced agents back, and boots machines that were
	// shut down.
	Start Action = "start"
	// Shutdown shuts the machines down.
	Shutdown Action = "shutdown"
	// ForceDelete force-deletes the pods bound to the nodes, as an
	// operator does with kubectl delete --force --grace-period=0.
	ForceDelete Action = "force-delete"
	// Taint puts At.Taint on the nodes, as an operator does.
	Taint Action = "taint"
	// Untaint takes At.Taint off the nodes.
	Untaint Action = "untaint"
)

// TaintName names a taint that a Taint or Untaint action puts or takes off.
type TaintName string

// OutOfService is node.kubernetes.io/out-of-service=nodeshutdown:NoExecute,
// which an operator puts on nodes once they are known to be off.
const OutOfService TaintName = "out-of-service"

// At schedules an action on a zone's agents at an absolute virtual time.
// It applies to the nodes From, From+1, …: Count of them, or all the rest
// of the zone.
type At struct {
	At     Pos
	Time   time.Duration // since the start of the scenario; at least 0
	Action Action
	// Taint is the taint of a Taint or Untaint action (OutOfService); ""
	// for the other actions.
	Taint TaintName
	Zone  string
	From  int // index of the first node (1 is <zone>-1); 0 means 1
	Count int // how many nodes from From; 0 means to the end of the zone
}

// Run advances virtual time by Duration.
type Run struct {
	At       Pos
	Duration time.Duration // more than 0
}

// Pos implements Statement.
func (s Set) Pos() Pos { return s.At }

// Pos implements Statement.
func (s Nodes) Pos() Pos { return s.At }

// Pos implements Statement.
func (s Pods) Pos() Pos { return s.At }

// Pos implements Statement.
func (s StatefulSet) Pos() Pos { return s.At }

// Pos implements Statement.
func (s At) Pos() Pos { return s.At }

// Pos implements Statement.
func (s Run) Pos() Pos { return s.At }

// Error is one problem in a script. Parse joins several with errors.Join;
// use errors.As to reach them.
type Error struct {
	Pos Pos
	// Msg names the statement, the field and the rule, for example
	// `nodes: count "x": must be a positive integer`.
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Usage lines, quoted in errors so the reader sees the expected shape.
const (
	usageSet         = "set <flag>=<value> ..."
	usageNodes       = "nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>]"
	usagePods        = "pods <n> [toleration=<seconds>|forever] [priority=<p>] [stop=<duration>|ignore] [cpu=<q>] [memory=<q>] [volume]"
	usageStatefulSet = "statefulset <name> replicas=<n> [volume]"
	usageAt          = "at <t> stop|start|shutdown|force-delete|taint out-of-service|untaint out-of-service zone=<z> [from=<i>] [count=<k>]"
	usageRun         = "run <duration>"
)

// actions lists the actions of an at statement, for errors.
const actions = "stop, start, shutdown, force-delete, taint or untaint"

// Parse reads a whole script. file names the script in positions and
// errors. On any problem it returns a nil Script and every problem found,
// joined in line order.
func Parse(file string, r io.Reader) (*Script, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", file, err)
	}
	p := &parser{file: file}
	for i, line := range strings.Split(string(data), "\n") {
		p.line(Pos{File: file, Line: i + 1}, line)
	}
	p.crossCheck()
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return &Script{Statements: p.stmts}, nil
}

type parser struct {
	file  string
	stmts []Statement
	errs  []error
	// broken holds the zones of nodes statements that had errors, so that
	// at statements naming them are not also reported as undeclared.
	broken map[string]bool
}

// statementErrors collects the problems of one statement.
type statementErrors struct {
	p    *parser
	at   Pos
	name string
	n    int
}

func (e *statementErrors) add(format string, args ...any) {
	e.n++
	e.p.errs = append(e.p.errs, &Error{Pos: e.at, Msg: e.name + ": " + fmt.Sprintf(format, args...)})
}

func (p *parser) line(at Pos, line string) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	tokens := strings.Fields(line)
	if len(tokens) == 0 {
		return
	}
	e := &statementErrors{p: p, at: at, name: tokens[0]}
	var stmt Statement
	switch tokens[0] {
	case "set":
		stmt = parseSet(e, at, tokens[1:])
	case "nodes":
		stmt = parseNodes(e, at, tokens[1:])
	case "pods":
		stmt = parsePods(e, at, tokens[1:])
	case "statefulset":
		stmt = parseStatefulSet(e, at, tokens[1:])
	case "at":
		stmt = parseAt(e, at, tokens[1:])
	case "run":
		stmt = parseRun(e, at, tokens[1:])
	default:
		p.errs = append(p.errs, &Error{Pos: at, Msg: fmt.Sprintf("unknown statement %q (want set, nodes, pods, statefulset, at or run)", tokens[0])})
		return
	}
	if e.n == 0 {
		p.stmts = append(p.stmts, stmt)
		return
	}
	if n, ok := stmt.(Nodes); ok {
		if p.broken == nil {
			p.broken = map[string]bool{}
		}
		p.broken[n.Zone] = true
	}
}

// args splits a statement's tokens into positional tokens and key=value
// arguments. Keys outside allowed, repeated keys and extra positional
// tokens are reported; the result holds each allowed key given once.
func args(e *statementErrors, tokens []string, positional int, usage string, allowed ...string) ([]string, map[string]string) {
	var pos []string
	kv := map[string]string{}
	for _, t := range tokens {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			if len(pos) == positional {
				e.add("unexpected argument %q (want %s)", t, usage)
				continue
			}
			pos = append(pos, t)
			continue
		}
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			e.add("unknown argument %q (want %s)", t, usage)
			continue
		}
		if prev, dup := kv[k]; dup {
			e.add("duplicate argument %q: %s=%s is already given", t, k, prev)
			continue
		}
		kv[k] = v
	}
	return pos, kv
}

func parseSet(e *statementErrors, at Pos, tokens []string) Statement {
	s := Set{At: at}
	seen := map[string]string{}
	for _, t := range tokens {
		name, value, ok := strings.Cut(t, "=")
		switch {
		case strings.HasPrefix(t, "-"):
			e.add("%q is not <flag>=<value>: write the flag name without leading dashes", t)
		case !ok:
			e.add("%q is not <flag>=<value>", t)
		case name == "":
			e.add("%q is not <flag>=<value>: the flag name is empty", t)
		case value == "":
			e.add("%q is not <flag>=<value>: the value is empty", t)
		default:
			if prev, dup := seen[name]; dup {
				e.add("duplicate flag %q: already set to %q in this statement", name, prev)
				continue
			}
			seen[name] = value
			s.Settings = append(s.Settings, Setting{Name: name, Value: value})
		}
	}
	if len(tokens) == 0 {
		e.add("missing <flag>=<value> (want %s)", usageSet)
	}
	return s
}

func parseNodes(e *statementErrors, at Pos, tokens []string) Statement {
	s := Nodes{At: at}
	pos, kv := args(e, tokens, 1, usageNodes, "zone", "cpus", "numa-nodes")
	if len(pos) == 0 {
		e.add("missing count (want %s)", usageNodes)
	} else {
		s.Count = count(e, "count", pos[0])
	}
	if v, ok := kv["cpus"]; ok {
		s.CPUs = count(e, "cpus", v)
	}
	if v, ok := kv["numa-nodes"]; ok {
		s.NUMANodes = count(e, "numa-nodes", v)
		_, named := kv["cpus"]
		switch {
		case s.NUMANodes == 0:
		case named && s.CPUs > 0 && s.CPUs%s.NUMANodes != 0:
			e.add("numa-nodes %d: must divide cpus %d evenly (each NUMA node holds as many CPUs)", s.NUMANodes, s.CPUs)
		case !named && DefaultCPUs%s.NUMANodes != 0:
			e.add("numa-nodes %d: must divide the default %d CPUs evenly (each NUMA node holds as many CPUs; name more with cpus=<c>)", s.NUMANodes, DefaultCPUs)
		}
	}
	zone, ok := kv["zone"]
	if !ok {
		e.add("missing zone=<z> (want %s)", usageNodes)
		return s
	}
	if checkZone(e, zone) && s.Count > 0 {
		// The longest node name is the one with the highest index.
		name := zone + "-" + strconv.Itoa(s.Count)
		if msgs := content.IsDNS1123Subdomain(name); len(msgs) > 0 {
			e.add("zone %q: node names such as %q must be valid node names: %s", zone, name, strings.Join(msgs, "; "))
		}
	}
	s.Zone = zone
	return s
}

func parsePods(e *statementErrors, at Pos, tokens []string) Statement {
	s := Pods{At: at}
	rest, volume := word(e, tokens, "volume")
	s.Volume = volume
	pos, kv := args(e, rest, 1, usagePods, "toleration", "priority", "stop", "cpu", "memory")
	if len(pos) == 0 {
		e.add("missing count (want %s)", usagePods)
	} else {
		s.Count = count(e, "count", pos[0])
	}
	if v, ok := kv["toleration"]; ok {
		s.Toleration.Given = true
		if v == "forever" {
			s.Toleration.Forever = true
		} else if n, ok := wholeNumber(v); ok {
			s.Toleration.Seconds = int64(n)
		} else {
			e.add("toleration %q: must be a whole number of seconds or \"forever\"", v)
		}
	}
	if v, ok := kv["priority"]; ok {
		n, ok := wholeNumber(v)
		if ok && (n <= int(MaxUserPriority) || n == int(SystemClusterCritical) || n == int(SystemNodeCritical)) {
			s.Priority = Priority{Given: true, Value: int32(n)}
		} else {
			e.add("priority %q: must be a whole number up to %d (a user-defined PriorityClass), or %d (system-cluster-critical) or %d (system-node-critical)", v, MaxUserPriority, SystemClusterCritical, SystemNodeCritical)
		}
	}
	if v, ok := kv["stop"]; ok {
		if v == "ignore" {
			s.Stop = Termination{Given: true, Ignore: true}
		} else if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			s.Stop = Termination{Given: true, After: d}
		} else {
			e.add("stop %q: must be a non-negative Go duration such as 5s or 1m, or \"ignore\"", v)
		}
	}
	if v, ok := kv["cpu"]; ok {
		s.Resources.CPU = quantity(e, "cpu", v, "2 or 500m")
	}
	if v, ok := kv["memory"]; ok {
		s.Resources.Memory = quantity(e, "memory", v, "1Gi or 512Mi")
	}
	return s
}

// quantity parses a Kubernetes quantity more than 0, reporting field (with
// examples of the form) when it is not one.
func quantity(e *statementErrors, field, v, examples string) resource.Quantity {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() <= 0 {
		e.add("%s %q: must be a quantity more than 0, such as %s", field, v, examples)
		return resource.Quantity{}
	}
	return q
}

// word takes the word w (a flag without a value, such as volume) out of
// tokens, reporting it when repeated; present says whether it was there.
func word(e *statementErrors, tokens []string, w string) (rest []string, present bool) {
	rest = tokens[:0:0]
	for _, t := range tokens {
		if t != w {
			rest = append(rest, t)
			continue
		}
		if present {
			e.add("duplicate argument %q: %s is already given", t, w)
		}
		present = true
	}
	return rest, present
}

func parseStatefulSet(e *statementErrors, at Pos, tokens []string) Statement {
	s := StatefulSet{At: at}
	rest, volume := word(e, tokens, "volume")
	s.Volume = volume
	pos, kv := args(e, rest, 1, usageStatefulSet, "replicas")
	if len(pos) == 0 {
		e.add("missing name (want %s)", usageStatefulSet)
	}
	if v, ok := kv["replicas"]; ok {
		s.Replicas = count(e, "replicas", v)
	} else {
		e.add("missing replicas=<n> (want %s)", usageStatefulSet)
	}
	if len(pos) == 0 {
		return s
	}
	s.Name = pos[0]
	switch msgs := content.IsDNS1123Label(s.Name); {
	case len(msgs) > 0:
		e.add("name %q: must be a DNS-1123 label: %s", s.Name, strings.Join(msgs, "; "))
	case s.Name == podPrefix:
		e.add("name %q: the pods statements name their pods %s-<i>, so a StatefulSet's pods would take their names", s.Name, podPrefix)
	case s.Replicas > 0:
		// The last pod's name is the longest, and is its hostname.
		last := s.Name + "-" + strconv.Itoa(s.Replicas-1)
		if msgs := content.IsDNS1123Label(last); len(msgs) > 0 {
			e.add("name %q: pod names such as %q must be DNS-1123 labels (they are the pods' hostnames): %s", s.Name, last, strings.Join(msgs, "; "))
		}
	}
	return s
}

// podPrefix starts the names of the pods statements' pods.
const podPrefix = "pod"

func parseAt(e *statementErrors, at Pos, tokens []string) Statement {
	s := At{At: at}
	pos, kv := args(e, tokens, 3, usageAt, "zone", "from", "count")
	if len(pos) == 0 {
		e.add("missing time (want %s)", usageAt)
	} else {
		d, err := time.ParseDuration(pos[0])
		if err != nil || d < 0 {
			e.add("time %q: must be a non-negative Go duration such as 90s or 10m", pos[0])
		}
		s.Time = d
	}
	if len(pos) < 2 {
		e.add("missing action %s (want %s)", actions, usageAt)
	} else {
		switch a := Action(pos[1]); a {
		case Stop, Start, Shutdown, ForceDelete:
			s.Action = a
			if len(pos) > 2 {
				e.add("unexpected argument %q (want %s)", pos[2], usageAt)
			}
		case Taint, Untaint:
			s.Action = a
			switch {
			case len(pos) < 3:
				e.add("missing the taint after %s: out-of-service (want %s)", a, usageAt)
			case TaintName(pos[2]) != OutOfService:
				e.add("taint %q: must be out-of-service", pos[2])
			default:
				s.Taint = OutOfService
			}
		case Action(OutOfService):
			e.add("action %q: must be %s (write taint out-of-service)", pos[1], actions)
		default:
			e.add("action %q: must be %s", pos[1], actions)
		}
	}
	if zone, ok := kv["zone"]; ok {
		checkZone(e, zone)
		s.Zone = zone
	} else {
		e.add("missing zone=<z> (want %s)", usageAt)
	}
	if v, ok := kv["from"]; ok {
		s.From = count(e, "from", v)
	}
	if v, ok := kv["count"]; ok {
		s.Count = count(e, "count", v)
	}
	return s
}

func parseRun(e *statementErrors, at Pos, tokens []string) Statement {
	s := Run{At: at}
	pos, _ := args(e, tokens, 1, usageRun)
	if len(pos) == 0 {
		e.add("missing duration (want %s)", usageRun)
		return s
	}
	d, err := time.ParseDuration(pos[0])
	if err != nil || d <= 0 {
		e.add("duration %q: must be a positive Go duration such as 90s or 20m", pos[0])
	}
	s.Duration = d
	return s
}

// count parses a positive integer, reporting field when it is not one.
func count(e *statementErrors, field, v string) int {
	n, ok := wholeNumber(v)
	if !ok || n < 1 {
		e.add("%s %q: must be a positive integer", field, v)
		return 0
	}
	return n
}

// wholeNumber accepts decimal digits only (no sign) that fit an int and an
// int64.
func wholeNumber(v string) (int, bool) {
	if v == "" {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, strconv.IntSize)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// checkZone reports a zone that is empty or not a valid label value.
func checkZone(e *statementErrors, zone string) bool {
	if zone == "" {
		e.add("zone: must not be empty")
		return false
	}
	if msgs := content.IsLabelValue(zone); len(msgs) > 0 {
		e.add("zone %q: must be a valid label value: %s", zone, strings.Join(msgs, "; "))
		return false
	}
	return true
}

// crossCheck applies the rules that span statements, to statements that
// parsed cleanly.
func (p *parser) crossCheck() {
	sets := map[string]StatefulSet{}
	for _, st := range p.stmts {
		s, ok := st.(StatefulSet)
		if !ok {
			continue
		}
		if first, dup := sets[s.Name]; dup {
			p.errs = append(p.errs, &Error{Pos: s.At, Msg: fmt.Sprintf("statefulset: name %q: already used at %s (each StatefulSet has its own name)", s.Name, first.At)})
			continue
		}
		sets[s.Name] = s
	}
	declared := map[string]Nodes{}
	for _, st := range p.stmts {
		n, ok := st.(Nodes)
		if !ok {
			continue
		}
		if first, dup := declared[n.Zone]; dup {
			p.errs = append(p.errs, &Error{Pos: n.At, Msg: fmt.Sprintf("nodes: zone %q: already declared at %s (node names derive from the zone, so each zone has one nodes statement)", n.Zone, first.At)})
			continue
		}
		declared[n.Zone] = n
	}
	for _, st := range p.stmts {
		a, ok := st.(At)
		if !ok {
			continue
		}
		n, ok := declared[a.Zone]
		switch {
		case !ok && p.broken[a.Zone]:
		case !ok:
			p.errs = append(p.errs, &Error{Pos: a.At, Msg: fmt.Sprintf("at: zone %q: no nodes statement declares this zone", a.Zone)})
		case a.From > n.Count:
			p.errs = append(p.errs, &Error{Pos: a.At, Msg: fmt.Sprintf("at: from %d: zone %q has only %d nodes (declared at %s)", a.From, a.Zone, n.Count, n.At)})
		case a.From > 1 && a.Count > n.Count-a.From+1:
			p.errs = append(p.errs, &Error{Pos: a.At, Msg: fmt.Sprintf("at: from %d count %d: zone %q has only %d nodes, so at most %d from node %d (declared at %s)", a.From, a.Count, a.Zone, n.Count, n.Count-a.From+1, a.From, n.At)})
		case a.Count > n.Count:
			p.errs = append(p.errs, &Error{Pos: a.At, Msg: fmt.Sprintf("at: count %d: zone %q has only %d nodes (declared at %s)", a.Count, a.Zone, n.Count, n.At)})
		}
	}
	sortErrors(p.errs)
}

// sortErrors puts errors in line order; the cross checks append theirs
// after the per-line ones. The sort is stable so one line keeps its order.
func sortErrors(errs []error) {
	line := func(err error) int {
		var e *Error
		if errors.As(err, &e) {
			return e.Pos.Line
		}
		return 0
	}
	slices.SortStableFunc(errs, func(a, b error) int { return cmp.Compare(line(a), line(b)) })
}
