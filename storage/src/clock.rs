//! Wall-clock time as nanoseconds since the Unix epoch (the unit of every deadline).

#[cfg(not(target_os = "linux"))]
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (0 before it). Every command reads it once, so on
/// Linux it calls `clock_gettime(CLOCK_REALTIME)` (the vDSO) directly, without std's
/// `SystemTime` checks and `Duration` arithmetic (about 100 instructions a call).
#[cfg(target_os = "linux")]
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call to fill in, and
    // CLOCK_REALTIME always exists (the call cannot fail with these arguments).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(NS_PER_SEC)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Nanoseconds since the Unix epoch (0 before it).
#[cfg(not(target_os = "linux"))]
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    now_ns() / 1_000_000
}

/// Nanoseconds in one millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds in one second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    #[test]
    fn now_ns_agrees_with_system_time() {
        use std::time::{SystemTime, UNIX_EPOCH};
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let now = super::now_ns();
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(
            before <= now && now <= after,
            "{before} <= {now} <= {after}"
        );
        assert!(now > 1_600_000_000 * super::NS_PER_SEC);
    }
}
