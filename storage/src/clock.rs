//! Wall-clock time as nanoseconds since the Unix epoch (the unit of every deadline).

#[cfg(not(target_os = "linux"))]
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch (0 before it). Every command reads it once: on x86-64
/// Linux with a trusted time-stamp counter it is extrapolated from the TSC ([`tsc`]), else
/// it is [`system_now_ns`].
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[inline]
pub fn now_ns() -> u64 {
    tsc::now_ns()
}

/// Nanoseconds since the Unix epoch (0 before it): [`system_now_ns`].
#[cfg(all(target_os = "linux", not(target_arch = "x86_64")))]
#[inline]
pub fn now_ns() -> u64 {
    system_now_ns()
}

/// Nanoseconds since the Unix epoch (0 before it), from the system: on Linux it calls
/// `clock_gettime(CLOCK_REALTIME)` (the vDSO) directly, without std's `SystemTime` checks
/// and `Duration` arithmetic (about 100 instructions a call).
#[cfg(target_os = "linux")]
#[inline]
pub fn system_now_ns() -> u64 {
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

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod tsc {
    //! `CLOCK_REALTIME` extrapolated from the time-stamp counter. Each thread reads the
    //! system clock and the TSC together once per window (2^22 ticks, about a millisecond)
    //! and in between adds the ticks since, at the rate measured over its previous window
    //! (so it follows NTP's slewing too). One `rdtsc` is about 7 ns on the VMs here against
    //! 16 ns for the vDSO's `clock_gettime`, which every command pays once.
    //!
    //! Used only where the kernel itself keeps time with the TSC (clocksource `tsc`, which
    //! it picks only for a counter that is synchronized across CPUs) and the CPU says the
    //! counter runs at a constant rate through idle states (`constant_tsc`, `nonstop_tsc`);
    //! elsewhere every read is the system's.

    use std::cell::Cell;
    use std::sync::OnceLock;

    /// Ticks a thread extrapolates over before it reads the system clock again.
    const WINDOW: u64 = 1 << 22;
    /// A rate measured over a window may differ from the one in use by this fraction
    /// (1/1024; NTP slews by at most 1/2000); after a larger change (the clock was set)
    /// the old rate stays until [`MAX_REJECTS`] windows in a row have disagreed with it,
    /// and the last of them gives the new one.
    const DRIFT_SHIFT: u32 = 10;
    /// Windows in a row that disagree with the rate in use before it is replaced.
    const MAX_REJECTS: u8 = 3;

    #[derive(Clone, Copy)]
    struct Anchor {
        /// TSC at the last system read (0: none yet).
        tsc: u64,
        /// The system clock's nanoseconds then.
        ns: u64,
        /// Nanoseconds per tick, 32.32 fixed point (0: not measured yet).
        mult: u64,
        /// Windows in a row whose rate disagreed with `mult`.
        rejects: u8,
        /// 0: not checked yet, 1: TSC usable, 2: system clock only.
        state: u8,
    }

    thread_local! {
        static ANCHOR: Cell<Anchor> = const {
            Cell::new(Anchor { tsc: 0, ns: 0, mult: 0, rejects: 0, state: 0 })
        };
    }

    /// Nanoseconds since the Unix epoch.
    #[inline]
    pub fn now_ns() -> u64 {
        ANCHOR.with(|c| {
            let a = c.get();
            if a.mult != 0 {
                let d = rdtsc().wrapping_sub(a.tsc);
                if d < WINDOW {
                    return a.ns + ((u128::from(d) * u128::from(a.mult)) >> 32) as u64;
                }
            }
            refresh(c, a)
        })
    }

    /// Reads the system clock, starts a new window and measures the last one's rate.
    #[cold]
    #[inline(never)]
    fn refresh(c: &Cell<Anchor>, mut a: Anchor) -> u64 {
        if a.state == 0 {
            a.state = if usable() { 1 } else { 2 };
        }
        let ns = super::system_now_ns();
        if a.state != 1 {
            c.set(a);
            return ns;
        }
        let t = rdtsc();
        let dt = t.wrapping_sub(a.tsc);
        if a.tsc != 0 && dt < WINDOW {
            // Still inside the first window: no rate yet.
            return ns;
        }
        if a.tsc != 0 && ns > a.ns {
            let m = rate(dt, ns - a.ns);
            if m != 0 {
                let close = a.mult != 0 && m.abs_diff(a.mult) <= a.mult >> DRIFT_SHIFT;
                if a.mult == 0 || close || a.rejects + 1 >= MAX_REJECTS {
                    a.mult = m;
                    a.rejects = 0;
                } else {
                    a.rejects += 1;
                }
            }
        }
        a.tsc = t;
        a.ns = ns;
        c.set(a);
        ns
    }

    /// Nanoseconds per tick (32.32) over `dt` ticks and `dn` ns, or 0 outside 1/16 to 16 ns
    /// a tick (a 16 GHz to 62.5 MHz counter: something else happened).
    fn rate(dt: u64, dn: u64) -> u64 {
        if dt == 0 {
            return 0;
        }
        let m = (u128::from(dn) << 32) / u128::from(dt);
        if !((1 << 28)..=(1 << 36)).contains(&m) {
            return 0;
        }
        m as u64
    }

    /// True when the kernel keeps time with a constant, synchronized TSC.
    fn usable() -> bool {
        static USABLE: OnceLock<bool> = OnceLock::new();
        *USABLE.get_or_init(|| {
            let source = std::fs::read_to_string(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            )
            .unwrap_or_default();
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            let flags = cpuinfo
                .lines()
                .find(|l| l.starts_with("flags"))
                .unwrap_or_default();
            let has = |f: &str| flags.split_whitespace().any(|w| w == f);
            source.trim() == "tsc" && has("constant_tsc") && has("nonstop_tsc")
        })
    }

    #[inline]
    fn rdtsc() -> u64 {
        // SAFETY: RDTSC reads a counter; every x86-64 CPU has it and it touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn rate_bounds() {
            assert_eq!(super::rate(0, 5), 0);
            assert_eq!(super::rate(1000, 1000), 1 << 32);
            assert_eq!(super::rate(3000, 1000), (1u64 << 32) / 3);
            assert_eq!(super::rate(1, 1_000_000), 0);
            assert_eq!(super::rate(1_000_000, 1), 0);
        }

        #[test]
        fn follows_the_system_clock_over_many_windows() {
            // Whatever the machine (TSC or not), a reading stays within 200 us of the
            // system clock's around it, across window changes and a thread that sleeps.
            let mut worst = 0u64;
            for i in 0..20_000u32 {
                let before = super::super::system_now_ns();
                let now = super::now_ns();
                let after = super::super::system_now_ns();
                let off = if now < before {
                    before - now
                } else {
                    now.saturating_sub(after)
                };
                worst = worst.max(off);
                if i % 5_000 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(3));
                }
            }
            assert!(worst < 200_000, "off by {worst} ns");
        }
    }
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
