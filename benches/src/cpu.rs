//! The generator's own CPU time, read from `/proc/self/stat` (Linux).
//!
//! `utime` and `stime` there are in clock ticks; the tick rate is the auxiliary vector's
//! `AT_CLKTCK` (read from `/proc/self/auxv`, so no `sysconf` call and no unsafe code),
//! falling back to 100, the value on every mainstream Linux port.

/// `AT_CLKTCK` in the ELF auxiliary vector.
const AT_CLKTCK: u64 = 17;

/// Clock ticks per second used by `/proc/*/stat`.
pub fn clock_ticks_per_sec() -> u64 {
    let Ok(auxv) = std::fs::read("/proc/self/auxv") else {
        return 100;
    };
    const W: usize = std::mem::size_of::<usize>();
    for pair in auxv.chunks_exact(2 * W) {
        let word = |b: &[u8]| {
            let mut v = [0u8; 8];
            if cfg!(target_endian = "little") {
                v[..W].copy_from_slice(b);
                u64::from_le_bytes(v)
            } else {
                v[8 - W..].copy_from_slice(b);
                u64::from_be_bytes(v)
            }
        };
        let (key, val) = (word(&pair[..W]), word(&pair[W..]));
        if key == AT_CLKTCK && val > 0 {
            return val;
        }
        if key == 0 {
            break;
        }
    }
    100
}

/// `utime + stime` in ticks from the text of a `/proc/<pid>/stat` file.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // rest starts at field 3 (state); utime is field 14, stime field 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// CPU-seconds (user + system, all threads) used by this process so far.
pub fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    Some(parse_stat_ticks(&stat)? as f64 / clock_ticks_per_sec() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_line() {
        let line = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194304 100 0 0 0 \
                    250 75 0 0 20 0 3 0 12345 1000000 200 18446744073709551615";
        assert_eq!(parse_stat_ticks(line), Some(325));
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn reads_own_cpu() {
        assert!(clock_ticks_per_sec() >= 1);
        assert!(process_cpu_seconds().unwrap() >= 0.0);
    }
}
