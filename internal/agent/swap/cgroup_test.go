package swap

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCgroupValues(t *testing.T) {
	tests := []struct {
		name      string
		behavior  string
		memLimit  int64
		swapBytes int64
		v2        bool
		want      map[string]string
	}{
		{name: "v2 NoSwap", behavior: NoSwap, memLimit: gi, v2: true, want: map[string]string{"memory.swap.max": "0"}},
		{name: "v2 empty behavior", behavior: "", memLimit: gi, swapBytes: 5, v2: true, want: map[string]string{"memory.swap.max": "0"}},
		{name: "v2 unknown behavior", behavior: "UnlimitedSwap", swapBytes: 5, v2: true, want: map[string]string{"memory.swap.max": "0"}},
		{name: "v2 LimitedSwap", behavior: LimitedSwap, memLimit: 2 * gi, swapBytes: 134217728, v2: true,
			want: map[string]string{"memory.swap.max": "134217728"}},
		{name: "v2 LimitedSwap without a memory limit", behavior: LimitedSwap, swapBytes: 134217728, v2: true,
			want: map[string]string{"memory.swap.max": "134217728"}},
		{name: "v2 LimitedSwap, ineligible container", behavior: LimitedSwap, memLimit: gi, v2: true, want: map[string]string{"memory.swap.max": "0"}},
		{name: "v2 negative swap is 0", behavior: LimitedSwap, swapBytes: -1, v2: true, want: map[string]string{"memory.swap.max": "0"}},
		{name: "v2 MaxInt64", behavior: LimitedSwap, swapBytes: math.MaxInt64, v2: true, want: map[string]string{"memory.swap.max": "9223372036854775807"}},
		{name: "v1 NoSwap caps memsw at the memory limit", behavior: NoSwap, memLimit: gi, swapBytes: 5,
			want: map[string]string{"memory.memsw.limit_in_bytes": "1073741824"}},
		{name: "v1 empty behavior", behavior: "", memLimit: gi, want: map[string]string{"memory.memsw.limit_in_bytes": "1073741824"}},
		{name: "v1 NoSwap without a memory limit writes nothing", behavior: NoSwap},
		{name: "v1 LimitedSwap adds the swap", behavior: LimitedSwap, memLimit: 2 * gi, swapBytes: 134217728,
			want: map[string]string{"memory.memsw.limit_in_bytes": "2281701376"}},
		{name: "v1 LimitedSwap, ineligible container", behavior: LimitedSwap, memLimit: gi,
			want: map[string]string{"memory.memsw.limit_in_bytes": "1073741824"}},
		{name: "v1 LimitedSwap without a memory limit writes nothing", behavior: LimitedSwap, swapBytes: 134217728},
		{name: "v1 negative memory limit is none", behavior: NoSwap, memLimit: -1},
		{name: "v1 sum saturates", behavior: LimitedSwap, memLimit: math.MaxInt64 - 1, swapBytes: 2,
			want: map[string]string{"memory.memsw.limit_in_bytes": "9223372036854775807"}},
		{name: "v1 sum exactly MaxInt64", behavior: LimitedSwap, memLimit: math.MaxInt64 - 2, swapBytes: 2,
			want: map[string]string{"memory.memsw.limit_in_bytes": "9223372036854775807"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CgroupValues(tt.behavior, tt.memLimit, tt.swapBytes, tt.v2)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CgroupValues (-want +got):\n%s", diff)
			}
		})
	}
}
