//! A small HDR-like latency histogram with log-linear buckets.
//!
//! Values (nanoseconds) below 128 get one bucket each; above that, every power-of-two
//! range is split into 64 equal sub-buckets, so a recorded value is known to within
//! 1/64 (about 1.6%) of itself. The whole `u64` range fits in 3,776 counters (30 KiB),
//! and recording is a leading-zero count, a shift and an increment.

/// Sub-buckets per power of two (a power of two itself).
const SUB: u64 = 64;
/// log2 of [`SUB`].
const SUB_BITS: u32 = 6;
/// Number of buckets needed to cover every `u64`.
const BUCKETS: usize = ((64 - SUB_BITS) as usize + 1) * SUB as usize;

/// A log-linear histogram of `u64` values (used for nanoseconds).
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            sum: 0,
            max: 0,
        }
    }

    /// The bucket index holding `v`.
    fn index(v: u64) -> usize {
        if v < 2 * SUB {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= 7
        let shift = exp - SUB_BITS; // >= 1
        (shift as u64 * SUB + (v >> shift)) as usize
    }

    /// The smallest value and the width of bucket `idx`.
    fn bucket_range(idx: usize) -> (u64, u64) {
        let idx = idx as u64;
        if idx < 2 * SUB {
            return (idx, 1);
        }
        let shift = idx / SUB - 1;
        let mantissa = idx % SUB + SUB;
        (mantissa << shift, 1 << shift)
    }

    /// Records `n` occurrences of the value `v`.
    #[inline]
    pub fn record_n(&mut self, v: u64, n: u64) {
        self.counts[Self::index(v)] += n;
        self.total += n;
        self.sum += v as u128 * n as u128;
        if v > self.max {
            self.max = v;
        }
    }

    /// Adds every count of `other` into `self`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Largest recorded value (exact), 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean of the recorded values (exact), 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value at percentile `p` (0..=100): the midpoint of the bucket holding the
    /// `ceil(p% * count)`-th smallest value, capped at the exact maximum; 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (idx, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = Self::bucket_range(idx);
                return (low + width / 2).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_range_agree() {
        let mut probes: Vec<u64> = (0..5000).collect();
        for e in 7..64 {
            let base = 1u64 << e;
            probes.extend([base - 1, base, base + 1, base + base / 3]);
        }
        probes.push(u64::MAX);
        for v in probes {
            let idx = Histogram::index(v);
            assert!(idx < BUCKETS, "{v} -> {idx}");
            let (low, width) = Histogram::bucket_range(idx);
            assert!(low <= v && v - low < width, "{v} not in [{low}, +{width})");
            // relative precision: width / low <= 1/64 above the exact range
            if v >= 2 * SUB {
                assert!(width * SUB <= low, "{v}: width {width} low {low}");
            }
        }
    }

    #[test]
    fn percentiles_of_uniform_values() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record_n(v * 1000, 1); // 1 µs .. 100 ms in ns
        }
        assert_eq!(h.count(), 100_000);
        let close = |got: u64, want: f64| {
            let err = (got as f64 - want).abs() / want;
            assert!(err < 0.02, "got {got}, want {want}");
        };
        close(h.percentile(50.0), 50_000_000.0);
        close(h.percentile(99.0), 99_000_000.0);
        close(h.percentile(99.9), 99_900_000.0);
        assert_eq!(h.percentile(100.0), 100_000_000);
        assert_eq!(h.max(), 100_000_000);
        close(h.mean() as u64, 50_000_500.0);
    }

    #[test]
    fn small_values_are_exact_and_merge_adds() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        a.record_n(3, 9);
        b.record_n(100, 1);
        a.merge(&b);
        assert_eq!(a.count(), 10);
        assert_eq!(a.percentile(50.0), 3);
        assert_eq!(a.percentile(90.0), 3);
        assert_eq!(a.percentile(99.0), 100);
        assert_eq!(Histogram::new().percentile(50.0), 0);
    }
}
