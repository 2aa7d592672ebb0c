package cni_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/cni"
)

func TestRenderSingleStackExact(t *testing.T) {
	got, err := cni.Render(cni.Network{PodCIDRs: []string{"10.244.1.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "cniVersion": "1.0.0",
  "name": "knode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [
            {
              "subnet": "10.244.1.0/24"
            }
          ]
        ],
        "routes": [
          {
            "dst": "0.0.0.0/0"
          }
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      },
      "snat": true
    }
  ]
}
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
}

// list is the part of a rendered list the table checks.
type list struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []struct {
		Type         string          `json:"type"`
		Bridge       string          `json:"bridge,omitempty"`
		IsGateway    bool            `json:"isGateway,omitempty"`
		IPMasq       bool            `json:"ipMasq,omitempty"`
		HairpinMode  *bool           `json:"hairpinMode,omitempty"`
		MTU          int             `json:"mtu,omitempty"`
		Capabilities map[string]bool `json:"capabilities,omitempty"`
		SNAT         *bool           `json:"snat,omitempty"`
		IPAM         *struct {
			Type   string `json:"type"`
			Ranges [][]struct {
				Subnet string `json:"subnet"`
			} `json:"ranges"`
			Routes []struct {
				Dst string `json:"dst"`
			} `json:"routes"`
			DataDir string `json:"dataDir,omitempty"`
		} `json:"ipam,omitempty"`
	} `json:"plugins"`
}

// summary is what a case expects of a rendered list.
type summary struct {
	Name, Bridge    string
	Subnets, Routes []string
	MTU             int
	Hairpin, Masq   bool
	DataDir         string
}

func summarize(t *testing.T, raw []byte) summary {
	t.Helper()
	var l list
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	if l.CNIVersion != cni.Version || len(l.Plugins) != 2 || l.Plugins[0].Type != "bridge" || l.Plugins[1].Type != "portmap" {
		t.Fatalf("want cniVersion %s with bridge then portmap, got %s", cni.Version, raw)
	}
	pm := l.Plugins[1]
	if !pm.Capabilities["portMappings"] || pm.SNAT == nil || !*pm.SNAT {
		t.Errorf("portmap: want portMappings capability and snat, got %s", raw)
	}
	b := l.Plugins[0]
	if !b.IsGateway || b.HairpinMode == nil || b.IPAM == nil || b.IPAM.Type != "host-local" {
		t.Fatalf("bridge: want isGateway, hairpinMode and host-local, got %s", raw)
	}
	s := summary{Name: l.Name, Bridge: b.Bridge, MTU: b.MTU, Hairpin: *b.HairpinMode, Masq: b.IPMasq, DataDir: b.IPAM.DataDir}
	for _, set := range b.IPAM.Ranges {
		if len(set) != 1 {
			t.Errorf("want one range per set, got %d", len(set))
		}
		for _, r := range set {
			s.Subnets = append(s.Subnets, r.Subnet)
		}
	}
	for _, r := range b.IPAM.Routes {
		s.Routes = append(s.Routes, r.Dst)
	}
	return s
}

func TestRender(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name string
		in   cni.Network
		want summary
	}{
		{
			name: "IPv4 with defaults",
			in:   cni.Network{PodCIDRs: []string{"10.244.1.0/24"}},
			want: summary{Name: "knode", Bridge: "cni0", Subnets: []string{"10.244.1.0/24"}, Routes: []string{"0.0.0.0/0"}, Hairpin: true},
		},
		{
			name: "IPv6 only",
			in:   cni.Network{PodCIDRs: []string{"fd00:10:244:1::/64"}},
			want: summary{Name: "knode", Bridge: "cni0", Subnets: []string{"fd00:10:244:1::/64"}, Routes: []string{"::/0"}, Hairpin: true},
		},
		{
			name: "dual stack keeps the node's order",
			in:   cni.Network{PodCIDRs: []string{"fd00:10:244:1::/64", "10.244.1.0/24"}},
			want: summary{Name: "knode", Bridge: "cni0", Subnets: []string{"fd00:10:244:1::/64", "10.244.1.0/24"}, Routes: []string{"::/0", "0.0.0.0/0"}, Hairpin: true},
		},
		{
			name: "every field set",
			in: cni.Network{
				Name: "pods.v1", Bridge: "kbr-0123456789a", PodCIDRs: []string{"10.1.0.0/30", "fd00::/126"},
				MTU: 1400, HairpinMode: &off, IPMasq: true, IPAMDataDir: "/var/lib/knode/cni",
			},
			want: summary{
				Name: "pods.v1", Bridge: "kbr-0123456789a", Subnets: []string{"10.1.0.0/30", "fd00::/126"}, Routes: []string{"0.0.0.0/0", "::/0"},
				MTU: 1400, Masq: true, DataDir: "/var/lib/knode/cni",
			},
		},
		{
			name: "smallest IPv4 MTU",
			in:   cni.Network{PodCIDRs: []string{"10.1.0.0/16"}, MTU: 68},
			want: summary{Name: "knode", Bridge: "cni0", Subnets: []string{"10.1.0.0/16"}, Routes: []string{"0.0.0.0/0"}, MTU: 68, Hairpin: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := cni.Render(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summarize(t, raw)); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
			again, _ := cni.Render(tc.in)
			if !bytes.Equal(raw, again) {
				t.Errorf("Render is not deterministic:\n%s\n%s", raw, again)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   cni.Network
		want []string // each must be in the error
	}{
		{"no CIDR", cni.Network{}, []string{"podCIDRs: Required value", "no pod CIDR"}},
		{"three CIDRs", cni.Network{PodCIDRs: []string{"10.0.0.0/24", "fd00::/64", "10.1.0.0/24"}}, []string{"podCIDRs: Too many: 3", "at most 2"}},
		{"not a CIDR", cni.Network{PodCIDRs: []string{"10.0.0.0"}}, []string{`podCIDRs[0]: Invalid value: "10.0.0.0"`, "must be a CIDR"}},
		{"garbage second", cni.Network{PodCIDRs: []string{"10.0.0.0/24", "x/64"}}, []string{`podCIDRs[1]: Invalid value: "x/64"`}},
		{"host bits", cni.Network{PodCIDRs: []string{"10.0.0.5/24"}}, []string{`podCIDRs[0]`, "no host bits set): 10.0.0.0/24"}},
		{"two IPv4", cni.Network{PodCIDRs: []string{"10.0.0.0/24", "10.1.0.0/24"}}, []string{`podCIDRs[1]: Invalid value: "10.1.0.0/24"`, "other IP family than podCIDRs[0]: at most one IPv4 CIDR"}},
		{"two IPv6", cni.Network{PodCIDRs: []string{"fd00::/64", "fd01::/64"}}, []string{`podCIDRs[1]`, "at most one IPv6 CIDR"}},
		{"IPv4 too small", cni.Network{PodCIDRs: []string{"10.0.0.0/31"}}, []string{`podCIDRs[0]`, "IPv4 prefix of /30 or shorter"}},
		{"IPv6 too small", cni.Network{PodCIDRs: []string{"fd00::/127"}}, []string{`podCIDRs[0]`, "IPv6 prefix of /126 or shorter"}},
		{"IPv4-mapped", cni.Network{PodCIDRs: []string{"::ffff:10.0.0.0/120"}}, []string{`podCIDRs[0]`, "IPv4-mapped"}},
		{"bridge too long", cni.Network{Bridge: "abcdefghijklmnop", PodCIDRs: []string{"10.0.0.0/24"}}, []string{"bridge: Too long", "15"}},
		{"bridge with slash", cni.Network{Bridge: "a/b", PodCIDRs: []string{"10.0.0.0/24"}}, []string{`bridge: Invalid value: "a/b"`, "Linux interface name"}},
		{"bad name", cni.Network{Name: "-pods", PodCIDRs: []string{"10.0.0.0/24"}}, []string{`name: Invalid value: "-pods"`}},
		{"MTU too small", cni.Network{MTU: 67, PodCIDRs: []string{"10.0.0.0/24"}}, []string{"mtu: Invalid value: 67", "from 68 to 65535"}},
		{"MTU negative", cni.Network{MTU: -1, PodCIDRs: []string{"10.0.0.0/24"}}, []string{"mtu: Invalid value: -1"}},
		{"MTU too small for IPv6", cni.Network{MTU: 1279, PodCIDRs: []string{"10.0.0.0/24", "fd00::/64"}}, []string{"mtu: Invalid value: 1279", "at least 1280 with an IPv6 pod CIDR"}},
		{"relative data dir", cni.Network{IPAMDataDir: "cni", PodCIDRs: []string{"10.0.0.0/24"}}, []string{`ipamDataDir: Invalid value: "cni"`, "absolute"}},
		{"all at once", cni.Network{Bridge: "a b", PodCIDRs: []string{"nope"}}, []string{"bridge: Invalid value", "podCIDRs[0]: Invalid value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := cni.Render(tc.in)
			if err == nil {
				t.Fatalf("want an error, got\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// IsGateway false leaves the bridge's address (and forwarding) alone.
func TestRenderWithoutGateway(t *testing.T) {
	off := false
	for _, tc := range []struct {
		gw   *bool
		want string
	}{{nil, `"isGateway": true`}, {&off, `"isGateway": false`}} {
		out, err := cni.Render(cni.Network{PodCIDRs: []string{"10.244.1.0/24"}, IsGateway: tc.gw})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("IsGateway %v: %s lacks %s", tc.gw, out, tc.want)
		}
	}
}
