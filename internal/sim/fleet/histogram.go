package fleet

import (
	"math"
	"sync/atomic"
	"time"
)

// Histogram bounds. Bucket 0 holds durations up to histogramMin; bucket i
// (1 ≤ i < histogramBuckets-1) those in (bound(i-1), bound(i)], where
// bound(i) = histogramMin × 2^(i/bucketsPerOctave); the last bucket holds
// everything longer. A percentile is therefore reported as the upper bound
// of its bucket: at most 1/bucketsPerOctave of an octave (4.4 %) high, and
// never above the largest duration seen.
const (
	histogramMin     = 100 * time.Microsecond
	bucketsPerOctave = 16
	octaves          = 20 // up to 100 µs × 2^20 ≈ 105 s
	histogramBuckets = bucketsPerOctave*octaves + 2
)

// Histogram counts durations in fixed logarithmic buckets. Observe is safe
// for concurrent use and costs a logarithm and two atomic adds, so every
// lease renewal of a large fleet can be recorded; memory is fixed
// (about 2.6 KB) however many are.
type Histogram struct {
	counts [histogramBuckets]atomic.Int64
	max    atomic.Int64 // nanoseconds
}

// Observe records one duration; negative durations count as zero.
func (h *Histogram) Observe(d time.Duration) {
	h.counts[bucketOf(d)].Add(1)
	for {
		old := h.max.Load()
		if int64(d) <= old || h.max.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// Snapshot returns the counts so far. Observations made while it runs may
// or may not be included.
func (h *Histogram) Snapshot() Counts {
	var c Counts
	for i := range h.counts {
		c.buckets[i] = h.counts[i].Load()
		c.total += c.buckets[i]
	}
	c.max = time.Duration(h.max.Load())
	return c
}

// Counts is a snapshot of a Histogram, or the difference of two.
type Counts struct {
	buckets [histogramBuckets]int64
	total   int64
	// max bounds every duration counted: the largest one of a snapshot;
	// for a difference, the bound of its highest non-empty bucket if that
	// is lower than the snapshot's largest.
	max time.Duration
}

// Total is the number of durations counted.
func (c Counts) Total() int64 { return c.total }

// Max is the largest duration counted: exact for a snapshot, and at most
// one bucket (4.4 %) high for a difference; 0 when nothing was counted.
func (c Counts) Max() time.Duration { return c.max }

// Sub returns the durations counted in c and not in earlier, a snapshot
// taken before c from the same Histogram.
func (c Counts) Sub(earlier Counts) Counts {
	out := c
	out.total = 0
	top := -1
	for i := range out.buckets {
		out.buckets[i] -= earlier.buckets[i]
		out.total += out.buckets[i]
		if out.buckets[i] > 0 {
			top = i
		}
	}
	if top < 0 {
		out.max = 0
	} else {
		out.max = min(out.max, bucketBound(top))
	}
	return out
}

// Percentile returns the upper bound of the bucket holding the q-th
// quantile (0 < q ≤ 1; 0.99 for p99), capped at Max; 0 when nothing was
// counted.
func (c Counts) Percentile(q float64) time.Duration {
	if c.total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(c.total)))
	rank = max(rank, 1)
	var seen int64
	for i, n := range c.buckets {
		seen += n
		if seen >= rank {
			return min(bucketBound(i), c.max)
		}
	}
	return c.max
}

// bucketOf returns the bucket d falls in.
func bucketOf(d time.Duration) int {
	if d <= histogramMin {
		return 0
	}
	i := int(math.Ceil(math.Log2(float64(d)/float64(histogramMin)) * bucketsPerOctave))
	// Float rounding may put d one bucket off: its bucket's bound must
	// not be below d, and the one under it must be.
	switch {
	case i > 1 && i < histogramBuckets && bucketBound(i-1) >= d:
		i--
	case i < histogramBuckets-1 && bucketBound(i) < d:
		i++
	}
	return min(i, histogramBuckets-1)
}

// bucketBound is the largest duration bucket i holds; the last bucket has
// no bound.
func bucketBound(i int) time.Duration {
	if i >= histogramBuckets-1 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(float64(histogramMin) * math.Exp2(float64(i)/bucketsPerOctave))
}
