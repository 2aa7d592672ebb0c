package noderestriction

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLabelRules(t *testing.T) {
	tests := []struct {
		key       string
		kubelet   bool // IsKubeletLabel
		forbidden bool // ForbiddenNodeLabel
	}{
		// The exact allow-list.
		{key: "kubernetes.io/hostname", kubelet: true},
		{key: "kubernetes.io/os", kubelet: true},
		{key: "kubernetes.io/arch", kubelet: true},
		{key: "beta.kubernetes.io/os", kubelet: true},
		{key: "beta.kubernetes.io/arch", kubelet: true},
		{key: "beta.kubernetes.io/instance-type", kubelet: true},
		{key: "node.kubernetes.io/instance-type", kubelet: true},
		{key: "topology.kubernetes.io/zone", kubelet: true},
		{key: "topology.kubernetes.io/region", kubelet: true},
		{key: "failure-domain.beta.kubernetes.io/zone", kubelet: true},
		{key: "failure-domain.beta.kubernetes.io/region", kubelet: true},
		// Allowed namespaces and their subdomains.
		{key: "kubelet.kubernetes.io/anything", kubelet: true},
		{key: "node.kubernetes.io/anything", kubelet: true},
		{key: "foo.kubelet.kubernetes.io/x", kubelet: true},
		{key: "a.b.node.kubernetes.io/x", kubelet: true},
		{key: "node.kubernetes.io/windows-build", kubelet: true},
		// Outside kubernetes.io and k8s.io: not kubelet labels, yet allowed.
		{key: "example.com/role", kubelet: false},
		{key: "role", kubelet: false},
		{key: "kubernetes.io", kubelet: false}, // no prefix: the name is "kubernetes.io"
		{key: "kubernetes.io.example.com/x", kubelet: false},
		{key: "xkubernetes.io/x", kubelet: false},
		// Forbidden: kubernetes.io / k8s.io keys off the list.
		{key: "node-role.kubernetes.io/worker", forbidden: true},
		{key: "node-role.kubernetes.io/control-plane", forbidden: true},
		{key: "kubernetes.io/role", forbidden: true},
		{key: "kubernetes.io/hostnamex", forbidden: true},
		{key: "topology.kubernetes.io/rack", forbidden: true},
		{key: "app.kubernetes.io/name", forbidden: true},
		{key: "k8s.io/x", forbidden: true},
		{key: "sub.k8s.io/x", forbidden: true},
		{key: "xnode.kubernetes.io/x", forbidden: true},
		{key: "kubelet.kubernetes.io.evil/x", kubelet: false},
		// Reserved for administrators.
		{key: "node-restriction.kubernetes.io/pool", forbidden: true},
		{key: "team.node-restriction.kubernetes.io/pool", forbidden: true},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got := []bool{IsKubeletLabel(tc.key), ForbiddenNodeLabel(tc.key)}
			if diff := cmp.Diff([]bool{tc.kubelet, tc.forbidden}, got); diff != "" {
				t.Errorf("[IsKubeletLabel, ForbiddenNodeLabel] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForbiddenNodeLabels(t *testing.T) {
	got := ForbiddenNodeLabels(map[string]string{
		"node-role.kubernetes.io/worker":      "",
		"kubernetes.io/hostname":              "n",
		"example.com/x":                       "y",
		"node-restriction.kubernetes.io/pool": "a",
		"app.kubernetes.io/name":              "z",
	})
	want := []string{"app.kubernetes.io/name", "node-restriction.kubernetes.io/pool", "node-role.kubernetes.io/worker"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := ForbiddenNodeLabels(map[string]string{"a": "b", "kubernetes.io/os": "linux"}); got != nil {
		t.Errorf("allowed labels: got %v, want nil", got)
	}
}

func TestAllowListsSorted(t *testing.T) {
	if !slices.IsSorted(KubeletLabels()) || !slices.IsSorted(KubeletLabelNamespaces()) {
		t.Errorf("lists must be sorted (the kubelet prints them sorted): %v %v", KubeletLabels(), KubeletLabelNamespaces())
	}
	l := KubeletLabels()
	l[0] = "changed"
	if KubeletLabels()[0] == "changed" {
		t.Error("KubeletLabels returned the package's slice")
	}
}

func TestValidateNodeLabelsFlag(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{name: "none", labels: nil},
		{name: "allowed", labels: map[string]string{"kubernetes.io/hostname": "h", "node.kubernetes.io/pool": "a", "example.com/gpu": "true"}},
		{name: "node-role",
			labels: map[string]string{"node-role.kubernetes.io/worker": "", "app.kubernetes.io/name": "x", "ok": "1"},
			want: "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: [app.kubernetes.io/name node-role.kubernetes.io/worker]\n" +
				"--node-labels in the 'kubernetes.io' namespace must begin with an allowed prefix (kubelet.kubernetes.io, node.kubernetes.io) or be in the specifically allowed set " +
				"(beta.kubernetes.io/arch, beta.kubernetes.io/instance-type, beta.kubernetes.io/os, failure-domain.beta.kubernetes.io/region, failure-domain.beta.kubernetes.io/zone, " +
				"kubernetes.io/arch, kubernetes.io/hostname, kubernetes.io/os, node.kubernetes.io/instance-type, topology.kubernetes.io/region, topology.kubernetes.io/zone)"},
		{name: "bad key and value",
			labels: map[string]string{"bad key": "v", "good": "bad value"},
			want:   "invalid node labels: 'bad key' - name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'); 'bad value' - a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := ValidateNodeLabelsFlag(tc.labels); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
