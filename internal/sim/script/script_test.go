package script

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the parser's output")

func pos(line int) Pos { return Pos{File: "s.txt", Line: line} }

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Statement
	}{
		{name: "empty", in: "", want: nil},
		{name: "only comments and blanks", in: "# hello\n\n   \t\n# bye", want: nil},
		{
			name: "every statement",
			in: `set node-monitor-grace-period=50s  node-eviction-rate=0.1
nodes 3 zone=a
pods 10
pods 2 toleration=0
pods 1 toleration=forever
pods 3 priority=2000000000 toleration=60
at 0s stop zone=a count=2
at 90s start zone=a
at 2m shutdown zone=a from=2 count=2
at 3m start zone=a from=3
run 1h
`,
			want: []Statement{
				Set{At: pos(1), Settings: []Setting{{"node-monitor-grace-period", "50s"}, {"node-eviction-rate", "0.1"}}},
				Nodes{At: pos(2), Count: 3, Zone: "a"},
				Pods{At: pos(3), Count: 10},
				Pods{At: pos(4), Count: 2, Toleration: Toleration{Given: true, Seconds: 0}},
				Pods{At: pos(5), Count: 1, Toleration: Toleration{Given: true, Forever: true}},
				Pods{At: pos(6), Count: 3, Toleration: Toleration{Given: true, Seconds: 60}, Priority: Priority{Given: true, Value: 2000000000}},
				At{At: pos(7), Time: 0, Action: Stop, Zone: "a", Count: 2},
				At{At: pos(8), Time: 90 * time.Second, Action: Start, Zone: "a"},
				At{At: pos(9), Time: 2 * time.Minute, Action: Shutdown, Zone: "a", From: 2, Count: 2},
				At{At: pos(10), Time: 3 * time.Minute, Action: Start, Zone: "a", From: 3},
				Run{At: pos(11), Duration: time.Hour},
			},
		},
		{
			name: "comments after statements, tabs and CRLF",
			in:   "nodes\t2 zone=b # two nodes\r\nrun 90s#no space\r\n",
			want: []Statement{
				Nodes{At: pos(1), Count: 2, Zone: "b"},
				Run{At: pos(2), Duration: 90 * time.Second},
			},
		},
		{
			name: "arguments in any order",
			in:   "nodes zone=z 1\nat zone=z 5m stop count=1",
			want: []Statement{
				Nodes{At: pos(1), Count: 1, Zone: "z"},
				At{At: pos(2), Time: 5 * time.Minute, Action: Stop, Zone: "z", Count: 1},
			},
		},
		{
			name: "set value may hold =",
			in:   "set feature-gates=A=true,B=false",
			want: []Statement{Set{At: pos(1), Settings: []Setting{{"feature-gates", "A=true,B=false"}}}},
		},
		{
			name: "count at exactly the zone size",
			in:   "nodes 4 zone=a\nat 1m stop zone=a count=4",
			want: []Statement{
				Nodes{At: pos(1), Count: 4, Zone: "a"},
				At{At: pos(2), Time: time.Minute, Action: Stop, Zone: "a", Count: 4},
			},
		},
		{
			name: "from and count reach exactly the last node",
			in:   "nodes 10 zone=b\nat 1m shutdown zone=b from=6 count=5\nat 2m start zone=b from=10",
			want: []Statement{
				Nodes{At: pos(1), Count: 10, Zone: "b"},
				At{At: pos(2), Time: time.Minute, Action: Shutdown, Zone: "b", From: 6, Count: 5},
				At{At: pos(3), Time: 2 * time.Minute, Action: Start, Zone: "b", From: 10},
			},
		},
		{
			name: "priority bounds",
			in:   "pods 1 priority=0\npods 1 priority=1000000000\npods 1 priority=2000001000",
			want: []Statement{
				Pods{At: pos(1), Count: 1, Priority: Priority{Given: true, Value: 0}},
				Pods{At: pos(2), Count: 1, Priority: Priority{Given: true, Value: 1000000000}},
				Pods{At: pos(3), Count: 1, Priority: Priority{Given: true, Value: 2000001000}},
			},
		},
		{
			name: "stop durations and ignore",
			in:   "pods 1 stop=0s\npods 2 stop=90s priority=2000000000\npods 3 stop=1.5s toleration=forever\npods 4 stop=ignore",
			want: []Statement{
				Pods{At: pos(1), Count: 1, Stop: Termination{Given: true}},
				Pods{At: pos(2), Count: 2, Stop: Termination{Given: true, After: 90 * time.Second}, Priority: Priority{Given: true, Value: 2000000000}},
				Pods{At: pos(3), Count: 3, Stop: Termination{Given: true, After: 1500 * time.Millisecond}, Toleration: Toleration{Given: true, Forever: true}},
				Pods{At: pos(4), Count: 4, Stop: Termination{Given: true, Ignore: true}},
			},
		},
		{
			name: "volume, anywhere among the arguments",
			in:   "pods 2 volume\npods 3 toleration=forever volume priority=5\npods 1 volume stop=ignore",
			want: []Statement{
				Pods{At: pos(1), Count: 2, Volume: true},
				Pods{At: pos(2), Count: 3, Toleration: Toleration{Given: true, Forever: true}, Priority: Priority{Given: true, Value: 5}, Volume: true},
				Pods{At: pos(3), Count: 1, Stop: Termination{Given: true, Ignore: true}, Volume: true},
			},
		},
		{
			name: "machines of several NUMA nodes",
			in:   "nodes 2 zone=a cpus=8 numa-nodes=2\nnodes 1 numa-nodes=4 zone=b\nnodes 3 zone=c cpus=6\nnodes 1 zone=d cpus=5 numa-nodes=5",
			want: []Statement{
				Nodes{At: pos(1), Count: 2, Zone: "a", CPUs: 8, NUMANodes: 2},
				Nodes{At: pos(2), Count: 1, Zone: "b", NUMANodes: 4},
				Nodes{At: pos(3), Count: 3, Zone: "c", CPUs: 6},
				Nodes{At: pos(4), Count: 1, Zone: "d", CPUs: 5, NUMANodes: 5},
			},
		},
		{
			name: "Guaranteed pods",
			in:   "pods 4 cpu=2 memory=1Gi\npods 1 memory=512Mi volume\npods 2 cpu=500m toleration=forever\npods 1 cpu=2000m",
			want: []Statement{
				Pods{At: pos(1), Count: 4, Resources: Resources{CPU: resource.MustParse("2"), Memory: resource.MustParse("1Gi")}},
				Pods{At: pos(2), Count: 1, Resources: Resources{Memory: resource.MustParse("512Mi")}, Volume: true},
				Pods{At: pos(3), Count: 2, Resources: Resources{CPU: resource.MustParse("500m")}, Toleration: Toleration{Given: true, Forever: true}},
				Pods{At: pos(4), Count: 1, Resources: Resources{CPU: resource.MustParse("2")}},
			},
		},
		{
			name: "operator actions",
			in:   "nodes 10 zone=b\nat 15m force-delete zone=b count=5\nat 15m taint out-of-service zone=b from=6\nat 20m untaint zone=b out-of-service count=2",
			want: []Statement{
				Nodes{At: pos(1), Count: 10, Zone: "b"},
				At{At: pos(2), Time: 15 * time.Minute, Action: ForceDelete, Zone: "b", Count: 5},
				At{At: pos(3), Time: 15 * time.Minute, Action: Taint, Taint: OutOfService, Zone: "b", From: 6},
				At{At: pos(4), Time: 20 * time.Minute, Action: Untaint, Taint: OutOfService, Zone: "b", Count: 2},
			},
		},
		{
			name: "statefulsets",
			in:   "statefulset db replicas=3 volume\nstatefulset replicas=1 web\nstatefulset volume pods-2 replicas=10",
			want: []Statement{
				StatefulSet{At: pos(1), Name: "db", Replicas: 3, Volume: true},
				StatefulSet{At: pos(2), Name: "web", Replicas: 1},
				StatefulSet{At: pos(3), Name: "pods-2", Replicas: 10, Volume: true},
			},
		},
		{
			name: "statefulset whose last pod name is exactly 63 characters",
			in:   "statefulset " + strings.Repeat("a", 60) + " replicas=100",
			want: []Statement{StatefulSet{At: pos(1), Name: strings.Repeat("a", 60), Replicas: 100}},
		},
		{
			name: "at may come before nodes",
			in:   "at 1m stop zone=a\nnodes 1 zone=a",
			want: []Statement{
				At{At: pos(1), Time: time.Minute, Action: Stop, Zone: "a"},
				Nodes{At: pos(2), Count: 1, Zone: "a"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("s.txt", strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got.Statements); diff != "" {
				t.Errorf("statements (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string // one line per error, in order
	}{
		{name: "unknown statement", in: "\n\nnodez 3", want: []string{
			`s.txt:3: unknown statement "nodez" (want set, nodes, pods, statefulset, at or run)`}},
		{name: "nodes count not a number", in: "nodes x zone=a", want: []string{
			`s.txt:1: nodes: count "x": must be a positive integer`}},
		{name: "nodes count zero", in: "nodes 0 zone=a", want: []string{
			`s.txt:1: nodes: count "0": must be a positive integer`}},
		{name: "nodes count negative", in: "nodes -1 zone=a", want: []string{
			`s.txt:1: nodes: count "-1": must be a positive integer`}},
		{name: "nodes count with sign", in: "nodes +1 zone=a", want: []string{
			`s.txt:1: nodes: count "+1": must be a positive integer`}},
		{name: "nodes count overflows", in: "nodes 99999999999999999999 zone=a", want: []string{
			`s.txt:1: nodes: count "99999999999999999999": must be a positive integer`}},
		{name: "nodes missing everything", in: "nodes", want: []string{
			`s.txt:1: nodes: missing count (want nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>])`,
			`s.txt:1: nodes: missing zone=<z> (want nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>])`}},
		{name: "nodes missing zone", in: "nodes 3", want: []string{
			`s.txt:1: nodes: missing zone=<z> (want nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>])`}},
		{name: "nodes empty zone", in: "nodes 3 zone=", want: []string{
			`s.txt:1: nodes: zone: must not be empty`}},
		{name: "nodes zone not a label value", in: "nodes 3 zone=a/b", want: []string{
			`s.txt:1: nodes: zone "a/b": must be a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{name: "nodes zone not usable in node names", in: "nodes 3 zone=Zone_A", want: []string{
			`s.txt:1: nodes: zone "Zone_A": node names such as "Zone_A-3" must be valid node names: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "nodes unknown argument", in: "nodes 3 zone=a colour=red", want: []string{
			`s.txt:1: nodes: unknown argument "colour=red" (want nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>])`}},
		{name: "nodes extra positional", in: "nodes 3 4 zone=a", want: []string{
			`s.txt:1: nodes: unexpected argument "4" (want nodes <n> zone=<z> [cpus=<c>] [numa-nodes=<k>])`}},
		{name: "nodes duplicate argument", in: "nodes 3 zone=a zone=b", want: []string{
			`s.txt:1: nodes: duplicate argument "zone=b": zone=a is already given`}},
		{name: "nodes zone declared twice", in: "nodes 3 zone=a\nnodes 2 zone=a", want: []string{
			`s.txt:2: nodes: zone "a": already declared at s.txt:1 (node names derive from the zone, so each zone has one nodes statement)`}},
		{name: "nodes cpus zero", in: "nodes 3 zone=a cpus=0", want: []string{
			`s.txt:1: nodes: cpus "0": must be a positive integer`}},
		{name: "nodes numa-nodes not a number", in: "nodes 3 zone=a numa-nodes=two", want: []string{
			`s.txt:1: nodes: numa-nodes "two": must be a positive integer`}},
		{name: "nodes numa-nodes not dividing cpus", in: "nodes 3 zone=a cpus=8 numa-nodes=3", want: []string{
			`s.txt:1: nodes: numa-nodes 3: must divide cpus 8 evenly (each NUMA node holds as many CPUs)`}},
		{name: "nodes more NUMA nodes than CPUs", in: "nodes 3 zone=a cpus=2 numa-nodes=4", want: []string{
			`s.txt:1: nodes: numa-nodes 4: must divide cpus 2 evenly (each NUMA node holds as many CPUs)`}},
		{name: "nodes numa-nodes not dividing the default cpus", in: "nodes 3 zone=a numa-nodes=3", want: []string{
			`s.txt:1: nodes: numa-nodes 3: must divide the default 4 CPUs evenly (each NUMA node holds as many CPUs; name more with cpus=<c>)`}},
		{name: "nodes bad cpus and numa-nodes", in: "nodes 3 zone=a cpus=x numa-nodes=3", want: []string{
			`s.txt:1: nodes: cpus "x": must be a positive integer`}},
		{name: "pods cpu zero", in: "pods 3 cpu=0", want: []string{
			`s.txt:1: pods: cpu "0": must be a quantity more than 0, such as 2 or 500m`}},
		{name: "pods cpu negative", in: "pods 3 cpu=-1", want: []string{
			`s.txt:1: pods: cpu "-1": must be a quantity more than 0, such as 2 or 500m`}},
		{name: "pods cpu not a quantity", in: "pods 3 cpu=two", want: []string{
			`s.txt:1: pods: cpu "two": must be a quantity more than 0, such as 2 or 500m`}},
		{name: "pods memory not a quantity", in: "pods 3 memory=1GB", want: []string{
			`s.txt:1: pods: memory "1GB": must be a quantity more than 0, such as 1Gi or 512Mi`}},
		{name: "pods memory empty", in: "pods 3 memory=", want: []string{
			`s.txt:1: pods: memory "": must be a quantity more than 0, such as 1Gi or 512Mi`}},
		{name: "pods cpu twice", in: "pods 3 cpu=1 cpu=2", want: []string{
			`s.txt:1: pods: duplicate argument "cpu=2": cpu=1 is already given`}},
		{name: "pods bad toleration", in: "pods 3 toleration=abc", want: []string{
			`s.txt:1: pods: toleration "abc": must be a whole number of seconds or "forever"`}},
		{name: "pods negative toleration", in: "pods 3 toleration=-1", want: []string{
			`s.txt:1: pods: toleration "-1": must be a whole number of seconds or "forever"`}},
		{name: "pods missing count", in: "pods toleration=5", want: []string{
			`s.txt:1: pods: missing count (want pods <n> [toleration=<seconds>|forever] [priority=<p>] [stop=<duration>|ignore] [cpu=<q>] [memory=<q>] [volume])`}},
		{name: "pods volume twice", in: "pods 3 volume volume", want: []string{
			`s.txt:1: pods: duplicate argument "volume": volume is already given`}},
		{name: "pods volume with a value", in: "pods 3 volume=1", want: []string{
			`s.txt:1: pods: unknown argument "volume=1" (want pods <n> [toleration=<seconds>|forever] [priority=<p>] [stop=<duration>|ignore] [cpu=<q>] [memory=<q>] [volume])`}},
		{name: "pods volume misspelt", in: "pods 3 volumes", want: []string{
			`s.txt:1: pods: unexpected argument "volumes" (want pods <n> [toleration=<seconds>|forever] [priority=<p>] [stop=<duration>|ignore] [cpu=<q>] [memory=<q>] [volume])`}},
		{name: "pods priority above user classes", in: "pods 3 priority=1000000001", want: []string{
			`s.txt:1: pods: priority "1000000001": must be a whole number up to 1000000000 (a user-defined PriorityClass), or 2000000000 (system-cluster-critical) or 2000001000 (system-node-critical)`}},
		{name: "pods priority negative", in: "pods 3 priority=-1", want: []string{
			`s.txt:1: pods: priority "-1": must be a whole number up to 1000000000 (a user-defined PriorityClass), or 2000000000 (system-cluster-critical) or 2000001000 (system-node-critical)`}},
		{name: "pods priority not a number", in: "pods 3 priority=high", want: []string{
			`s.txt:1: pods: priority "high": must be a whole number up to 1000000000 (a user-defined PriorityClass), or 2000000000 (system-cluster-critical) or 2000001000 (system-node-critical)`}},
		{name: "pods stop negative", in: "pods 3 stop=-5s", want: []string{
			`s.txt:1: pods: stop "-5s": must be a non-negative Go duration such as 5s or 1m, or "ignore"`}},
		{name: "pods stop without unit", in: "pods 3 stop=5", want: []string{
			`s.txt:1: pods: stop "5": must be a non-negative Go duration such as 5s or 1m, or "ignore"`}},
		{name: "pods stop empty", in: "pods 3 stop=", want: []string{
			`s.txt:1: pods: stop "": must be a non-negative Go duration such as 5s or 1m, or "ignore"`}},
		{name: "pods stop misspelt ignore", in: "pods 3 stop=Ignore", want: []string{
			`s.txt:1: pods: stop "Ignore": must be a non-negative Go duration such as 5s or 1m, or "ignore"`}},
		{name: "pods stop twice", in: "pods 3 stop=5s stop=ignore", want: []string{
			`s.txt:1: pods: duplicate argument "stop=ignore": stop=5s is already given`}},
		{name: "at negative time", in: "nodes 1 zone=a\n\n\n\n\n\nat -5s stop zone=a", want: []string{
			`s.txt:7: at: time "-5s": must be a non-negative Go duration such as 90s or 10m`}},
		{name: "at time without unit", in: "nodes 1 zone=a\nat 10 stop zone=a", want: []string{
			`s.txt:2: at: time "10": must be a non-negative Go duration such as 90s or 10m`}},
		{name: "at bad action", in: "nodes 1 zone=a\nat 10s pause zone=a", want: []string{
			`s.txt:2: at: action "pause": must be stop, start, shutdown, force-delete, taint or untaint`}},
		{name: "at missing all", in: "at", want: []string{
			`s.txt:1: at: missing time (want ` + usageAt + `)`,
			`s.txt:1: at: missing action stop, start, shutdown, force-delete, taint or untaint (want ` + usageAt + `)`,
			`s.txt:1: at: missing zone=<z> (want ` + usageAt + `)`}},
		{name: "at taint out-of-service beyond zone", in: "nodes 3 zone=a\nat 1s taint out-of-service zone=a from=4", want: []string{
			`s.txt:2: at: from 4: zone "a" has only 3 nodes (declared at s.txt:1)`}},
		{name: "at out-of-service, the old form", in: "nodes 3 zone=a\nat 1s out-of-service zone=a", want: []string{
			`s.txt:2: at: action "out-of-service": must be stop, start, shutdown, force-delete, taint or untaint (write taint out-of-service)`}},
		{name: "at taint without the taint", in: "nodes 3 zone=a\nat 1s taint zone=a", want: []string{
			`s.txt:2: at: missing the taint after taint: out-of-service (want ` + usageAt + `)`}},
		{name: "at untaint another taint", in: "nodes 3 zone=a\nat 1s untaint unreachable zone=a", want: []string{
			`s.txt:2: at: taint "unreachable": must be out-of-service`}},
		{name: "at stop with a taint", in: "nodes 3 zone=a\nat 1s stop out-of-service zone=a", want: []string{
			`s.txt:2: at: unexpected argument "out-of-service" (want ` + usageAt + `)`}},
		{name: "at taint with two taints", in: "nodes 3 zone=a\nat 1s taint out-of-service out-of-service zone=a", want: []string{
			`s.txt:2: at: unexpected argument "out-of-service" (want ` + usageAt + `)`}},
		{name: "statefulset missing everything", in: "statefulset", want: []string{
			`s.txt:1: statefulset: missing name (want statefulset <name> replicas=<n> [volume])`,
			`s.txt:1: statefulset: missing replicas=<n> (want statefulset <name> replicas=<n> [volume])`}},
		{name: "statefulset replicas zero", in: "statefulset db replicas=0", want: []string{
			`s.txt:1: statefulset: replicas "0": must be a positive integer`}},
		{name: "statefulset replicas not a number", in: "statefulset db replicas=three volume", want: []string{
			`s.txt:1: statefulset: replicas "three": must be a positive integer`}},
		{name: "statefulset name not a label", in: "statefulset DB replicas=1", want: []string{
			`s.txt:1: statefulset: name "DB": must be a DNS-1123 label: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`}},
		{name: "statefulset name of the pods statements", in: "statefulset pod replicas=2", want: []string{
			`s.txt:1: statefulset: name "pod": the pods statements name their pods pod-<i>, so a StatefulSet's pods would take their names`}},
		{name: "statefulset pod names too long", in: "statefulset " + strings.Repeat("a", 60) + " replicas=101", want: []string{
			`s.txt:1: statefulset: name "` + strings.Repeat("a", 60) + `": pod names such as "` + strings.Repeat("a", 60) + `-100" must be DNS-1123 labels (they are the pods' hostnames): must be no more than 63 bytes`}},
		{name: "statefulset two names", in: "statefulset db web replicas=1", want: []string{
			`s.txt:1: statefulset: unexpected argument "web" (want statefulset <name> replicas=<n> [volume])`}},
		{name: "statefulset volume twice", in: "statefulset db replicas=1 volume volume", want: []string{
			`s.txt:1: statefulset: duplicate argument "volume": volume is already given`}},
		{name: "statefulset unknown argument", in: "statefulset db replicas=1 toleration=5", want: []string{
			`s.txt:1: statefulset: unknown argument "toleration=5" (want statefulset <name> replicas=<n> [volume])`}},
		{name: "statefulset name used twice", in: "statefulset db replicas=1\n\nstatefulset db replicas=2 volume", want: []string{
			`s.txt:3: statefulset: name "db": already used at s.txt:1 (each StatefulSet has its own name)`}},
		{name: "at from zero", in: "nodes 1 zone=a\nat 1s shutdown zone=a from=0", want: []string{
			`s.txt:2: at: from "0": must be a positive integer`}},
		{name: "at from beyond zone", in: "nodes 10 zone=a\nat 1s shutdown zone=a from=11", want: []string{
			`s.txt:2: at: from 11: zone "a" has only 10 nodes (declared at s.txt:1)`}},
		{name: "at from and count beyond zone", in: "nodes 10 zone=a\nat 1s start zone=a from=6 count=6", want: []string{
			`s.txt:2: at: from 6 count 6: zone "a" has only 10 nodes, so at most 5 from node 6 (declared at s.txt:1)`}},
		{name: "at from 1 and count beyond zone", in: "nodes 3 zone=a\nat 1s stop zone=a from=1 count=4", want: []string{
			`s.txt:2: at: count 4: zone "a" has only 3 nodes (declared at s.txt:1)`}},
		{name: "at count zero", in: "nodes 1 zone=a\nat 1s stop zone=a count=0", want: []string{
			`s.txt:2: at: count "0": must be a positive integer`}},
		{name: "at undeclared zone", in: "nodes 1 zone=a\nat 1s stop zone=b", want: []string{
			`s.txt:2: at: zone "b": no nodes statement declares this zone`}},
		{name: "at count beyond zone", in: "nodes 3 zone=a\nat 1s stop zone=a count=4", want: []string{
			`s.txt:2: at: count 4: zone "a" has only 3 nodes (declared at s.txt:1)`}},
		{name: "at on a zone whose nodes statement is broken", in: "nodes x zone=a\nat 1s stop zone=a", want: []string{
			`s.txt:1: nodes: count "x": must be a positive integer`}},
		{name: "run zero", in: "run 0s", want: []string{
			`s.txt:1: run: duration "0s": must be a positive Go duration such as 90s or 20m`}},
		{name: "run missing", in: "run", want: []string{
			`s.txt:1: run: missing duration (want run <duration>)`}},
		{name: "run extra", in: "run 1m 2m x=y", want: []string{
			`s.txt:1: run: unexpected argument "2m" (want run <duration>)`,
			`s.txt:1: run: unknown argument "x=y" (want run <duration>)`}},
		{name: "set not a pair", in: "set foo", want: []string{
			`s.txt:1: set: "foo" is not <flag>=<value>`}},
		{name: "set with dashes", in: "set --foo=1", want: []string{
			`s.txt:1: set: "--foo=1" is not <flag>=<value>: write the flag name without leading dashes`}},
		{name: "set empty name and value", in: "set =1 a=", want: []string{
			`s.txt:1: set: "=1" is not <flag>=<value>: the flag name is empty`,
			`s.txt:1: set: "a=" is not <flag>=<value>: the value is empty`}},
		{name: "set duplicate", in: "set a=1 a=2", want: []string{
			`s.txt:1: set: duplicate flag "a": already set to "1" in this statement`}},
		{name: "set nothing", in: "set # none", want: []string{
			`s.txt:1: set: missing <flag>=<value> (want set <flag>=<value> ...)`}},
		{name: "errors from several lines, in line order", in: "at 1s stop zone=q\nnodes 0 zone=a\nrun -1s", want: []string{
			`s.txt:1: at: zone "q": no nodes statement declares this zone`,
			`s.txt:2: nodes: count "0": must be a positive integer`,
			`s.txt:3: run: duration "-1s": must be a positive Go duration such as 90s or 20m`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("s.txt", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded with %v, want errors", got)
			}
			if got != nil {
				t.Errorf("Parse returned a script with its error: %v", got)
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("errors.As(%v, *Error) = false", err)
			}
		})
	}
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Parse("s.txt", iotest.ErrReader(boom))
	if !errors.Is(err, boom) {
		t.Fatalf("Parse error = %v, want it to wrap %v", err, boom)
	}
	if want := "s.txt: read: boom"; err.Error() != want {
		t.Errorf("Parse error = %q, want %q", err, want)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{500 * time.Millisecond, "500ms"},
		{90 * time.Second, "1m30s"},
		{20 * time.Minute, "20m"},
		{time.Hour, "1h"},
		{time.Hour + 5*time.Second, "1h0m5s"},
		{90 * time.Minute, "1h30m"},
		{10 * time.Hour, "10h"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got := formatDuration(tt.in)
			if got != tt.want {
				t.Errorf("formatDuration(%v) = %q, want %q", tt.in, got, tt.want)
			}
			back, err := time.ParseDuration(got)
			if err != nil || back != tt.in {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v", got, back, err, tt.in)
			}
		})
	}
}

// TestGolden parses each testdata/*.txt and compares the canonical form, or
// the errors, with testdata/*.golden. Run with -update to rewrite them.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.txt")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			s, err := Parse(filepath.Base(file), strings.NewReader(string(in)))
			if err != nil {
				got = "error:\n" + err.Error() + "\n"
			} else {
				got = s.String()
			}
			golden := strings.TrimSuffix(file, ".txt") + ".golden"
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
		})
	}
}

var ignorePos = cmpopts.IgnoreTypes(Pos{})

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"set a=1 b=c=d\nnodes 3 zone=a\npods 10 toleration=300\nat 90s stop zone=a count=2\nat 10m start zone=a\nrun 1h\n",
		"nodes 10 zone=b\npods 5 priority=2000000000\nat 1m shutdown zone=b from=6 count=5\nat 3m start zone=b from=6\n",
		"nodes 1 zone=a # c\r\nat 0 start zone=a\n",
		"pods 1 toleration=forever\nrun 1.5h\n",
		"pods 2 stop=ignore\npods 1 stop=1.5s priority=5\npods 3 stop=90s\n",
		"nodes 4 zone=b\npods 8 volume toleration=30\nat 1m force-delete zone=b count=2\nat 1m taint out-of-service zone=b from=3\nat 2m untaint out-of-service zone=b\n",
		"statefulset db replicas=3 volume\nstatefulset web replicas=1\n",
		"nodes 2 zone=a cpus=8 numa-nodes=2\npods 3 cpu=2000m memory=1.5Gi\npods 1 memory=1e3\n",
		"nodes x\nat -1s\nrun 0\nset --a=b\n",
		"set a=\u00e9\u00a0b\n",
		"nodes 2 zone=a.b_c\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse("fuzz.txt", strings.NewReader(in))
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned a script and an error")
			}
			return
		}
		out := s.String()
		s2, err := Parse("fuzz.txt", strings.NewReader(out))
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\ninput:\n%q\ncanonical:\n%q", err, in, out)
		}
		if diff := cmp.Diff(s.Statements, s2.Statements, ignorePos); diff != "" {
			t.Fatalf("round trip changed the script (-first +second):\n%s\ncanonical:\n%q", diff, out)
		}
		if out2 := s2.String(); out2 != out {
			t.Fatalf("canonical form is not stable:\n%q\n%q", out, out2)
		}
	})
}
