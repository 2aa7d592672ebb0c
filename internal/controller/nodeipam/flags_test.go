package nodeipam_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/controller/nodeipam"
)

func TestParseFlags(t *testing.T) {
	type want struct {
		CIDRs  []string
		V4, V6 int
	}
	cases := []struct {
		name                 string
		cidr                 string
		mask, maskV4, maskV6 int
		want                 want
		wantErr              string
	}{
		{name: "ipv4 defaults", cidr: "10.244.0.0/16", want: want{[]string{"10.244.0.0/16"}, 24, 64}},
		{name: "ipv6 defaults", cidr: "fd00:10:244::/56", want: want{[]string{"fd00:10:244::/56"}, 24, 64}},
		{name: "generic mask, ipv4", cidr: "10.244.0.0/16", mask: 26, want: want{[]string{"10.244.0.0/16"}, 26, 26}},
		{name: "generic mask, ipv6", cidr: "fd00::/100", mask: 112, want: want{[]string{"fd00::/100"}, 112, 112}},
		{name: "ipv4 flag on an ipv4 cluster", cidr: "10.244.0.0/16", maskV4: 25, want: want{[]string{"10.244.0.0/16"}, 25, 64}},
		{name: "ipv6 flag on an ipv6 cluster", cidr: "fd00::/56", maskV6: 70, want: want{[]string{"fd00::/56"}, 24, 70}},
		{name: "host bits are dropped and spaces trimmed", cidr: " 10.244.1.7/16 ", want: want{[]string{"10.244.0.0/16"}, 24, 64}},
		{
			name: "dual stack, ipv4 first", cidr: "10.244.0.0/16,fd00::/56",
			want: want{[]string{"10.244.0.0/16", "fd00::/56"}, 24, 64},
		},
		{
			name: "dual stack, ipv6 first, family flags", cidr: "fd00::/56, 10.244.0.0/16", maskV4: 26, maskV6: 72,
			want: want{[]string{"fd00::/56", "10.244.0.0/16"}, 26, 72},
		},
		{name: "empty", cidr: "", wantErr: "must specify --cluster-cidr if --allocate-node-cidrs is set"},
		{name: "not a CIDR", cidr: "10.244.0.0", wantErr: `--cluster-cidr: invalid CIDR[0] "10.244.0.0": invalid CIDR address: 10.244.0.0`},
		{
			name: "two of one family", cidr: "10.0.0.0/16,10.1.0.0/16",
			wantErr: "len of ClusterCIDRs==2 and they are not configured as dual stack (at least one from each IPFamily",
		},
		{
			name: "three", cidr: "10.0.0.0/16,fd00::/56,10.1.0.0/16",
			wantErr: "length of clusterCIDRs is:3 more than max allowed of 2",
		},
		{
			name: "generic mask with dual stack", cidr: "10.0.0.0/16,fd00::/56", mask: 24,
			wantErr: "usage of --node-cidr-mask-size is not allowed with dual-stack clusters",
		},
		{
			name: "generic mask with a family mask", cidr: "10.0.0.0/16", mask: 24, maskV4: 24,
			wantErr: "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags",
		},
		{
			name: "ipv4 flag on an ipv6 cluster", cidr: "fd00::/56", maskV4: 24,
			wantErr: "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster",
		},
		{
			name: "ipv6 flag on an ipv4 cluster", cidr: "10.0.0.0/16", maskV6: 64,
			wantErr: "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster",
		},
		{
			name: "node mask shorter than the cluster mask", cidr: "10.0.0.0/16", mask: 15,
			wantErr: "invalid --cluster-cidr 10.0.0.0/16, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family (15)",
		},
		{
			name: "ipv6 node mask more than 16 bits longer", cidr: "fd00::/47",
			wantErr: "New CIDR set failed; the node CIDR size is too big",
		},
		{name: "negative", cidr: "10.0.0.0/16", maskV4: -1, wantErr: "--node-cidr-mask-size-ipv4 must not be negative, got -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := nodeipam.ParseFlags(tc.cidr, tc.mask, tc.maskV4, tc.maskV6)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, nodeipam.ErrInvalidFlags) {
					t.Fatalf("error = %v\nwant    %s (matching ErrInvalidFlags)", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := want{V4: cfg.NodeCIDRMaskSizeIPv4, V6: cfg.NodeCIDRMaskSizeIPv6}
			for _, c := range cfg.ClusterCIDRs {
				got.CIDRs = append(got.CIDRs, c.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
