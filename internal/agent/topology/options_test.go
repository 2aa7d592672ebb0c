package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     map[string]string
		want    Options
		wantErr string
	}{
		{name: "defaults", want: Options{MaxAllowableNUMANodes: 8}},
		{name: "prefer closest", raw: map[string]string{"prefer-closest-numa-nodes": "true"},
			want: Options{PreferClosestNUMA: true, MaxAllowableNUMANodes: 8}},
		{name: "max raised", raw: map[string]string{"max-allowable-numa-nodes": "16"},
			want: Options{MaxAllowableNUMANodes: 16}},
		{name: "max exactly default", raw: map[string]string{"max-allowable-numa-nodes": "8"},
			want: Options{MaxAllowableNUMANodes: 8}},
		{name: "max below default", raw: map[string]string{"max-allowable-numa-nodes": "7"},
			wantErr: `the minimum value of "max-allowable-numa-nodes" should not be less than 8`},
		{name: "max not a number", raw: map[string]string{"max-allowable-numa-nodes": "x"},
			wantErr: `unable to convert policy option to integer "max-allowable-numa-nodes": strconv.Atoi: parsing "x": invalid syntax`},
		{name: "bad bool", raw: map[string]string{"prefer-closest-numa-nodes": "maybe"},
			wantErr: `bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "maybe": invalid syntax`},
		{name: "unknown", raw: map[string]string{"foo": "1"},
			wantErr: `unknown Topology Manager Policy option: "foo"`},
		{name: "first error in key order", raw: map[string]string{"zzz": "1", "aaa": "1"},
			wantErr: `unknown Topology Manager Policy option: "aaa"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseOptions(tc.raw)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateConfig(t *testing.T) {
	for _, tc := range []struct {
		name          string
		policy, scope string
		options       map[string]string
		nodes         int
		wantErr       string
	}{
		{name: "defaults", policy: "none", scope: "container", nodes: 1},
		{name: "restricted pod", policy: "restricted", scope: "pod", nodes: 2},
		{name: "bad policy", policy: "strict", scope: "container", nodes: 1,
			wantErr: `invalid configuration: topologyManagerPolicy (--topology-manager-policy) "strict" must be one of: ["none" "best-effort" "restricted" "single-numa-node"]`},
		{name: "bad scope", policy: "none", scope: "node", nodes: 1,
			wantErr: `invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: "container", or "pod"`},
		{name: "both bad", policy: "", scope: "", nodes: 1,
			wantErr: `invalid configuration: topologyManagerPolicy (--topology-manager-policy) "" must be one of: ["none" "best-effort" "restricted" "single-numa-node"]` + "\n" +
				`invalid configuration: topologyManagerScope (--topology-manager-scope) "" must be one of: "container", or "pod"`},
		{name: "bad option", policy: "best-effort", scope: "container", nodes: 2, options: map[string]string{"foo": "bar"},
			wantErr: `invalid configuration: topologyManagerPolicyOptions: unknown Topology Manager Policy option: "foo"`},
		{name: "none ignores bad options", policy: "none", scope: "container", nodes: 2, options: map[string]string{"foo": "bar"}},
		{name: "exactly 8 nodes", policy: "best-effort", scope: "container", nodes: 8},
		{name: "9 nodes", policy: "single-numa-node", scope: "container", nodes: 9,
			wantErr: `invalid configuration: topologyManagerPolicy "single-numa-node": unsupported on machines with more than 8 NUMA Nodes`},
		{name: "9 nodes allowed by option", policy: "restricted", scope: "container", nodes: 9, options: map[string]string{"max-allowable-numa-nodes": "9"}},
		{name: "none on a big machine", policy: "none", scope: "container", nodes: 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateConfig(tc.policy, tc.scope, tc.options, tc.nodes)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("got %q\nwant %q", got, tc.wantErr)
			}
		})
	}
}
