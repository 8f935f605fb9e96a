//! Argument parsing shared by the command families, with Redis's exact rules and errors.

use storage::clock::{NS_PER_MS, NS_PER_SEC};

use crate::error::CmdError;

/// Parses a signed 64-bit integer exactly as Redis's `string2ll` (no spaces, no `+`, no
/// leading zeros except "0"); otherwise `ERR value is not an integer or out of range`.
pub fn parse_i64(b: &[u8]) -> Result<i64, CmdError> {
    storage::value::parse_canonical_i64(b).ok_or(CmdError::NotInteger)
}

/// Like [`parse_i64`] but with a custom error text (e.g. "timeout is not an integer").
pub fn parse_i64_or(b: &[u8], err: &str) -> Result<i64, CmdError> {
    storage::value::parse_canonical_i64(b).ok_or_else(|| CmdError::err(err))
}

/// Parses a non-negative integer that must fit in `usize` (counts, indexes).
pub fn parse_usize(b: &[u8]) -> Result<usize, CmdError> {
    let v = parse_i64(b)?;
    usize::try_from(v).map_err(|_| CmdError::NotInteger)
}

/// Parses a float as Redis's `string2ld`/`strtold`: decimal or exponent forms and
/// `inf`/`-inf`; no spaces, no NaN. Otherwise `ERR value is not a valid float`.
pub fn parse_f64(b: &[u8]) -> Result<f64, CmdError> {
    parse_float(b).ok_or(CmdError::NotFloat)
}

/// The float value of `b`, if it is one Redis accepts.
pub fn parse_float(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b.len() > 5000 {
        return None;
    }
    let s = std::str::from_utf8(b).ok()?;
    if s.starts_with(|c: char| c.is_whitespace()) || s.ends_with(|c: char| c.is_whitespace()) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let v = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => {
            if lower.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        t if t.contains("nan") || t.contains("inf") => return None,
        _ => s.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// At most `max` bytes of `b` as text, CR/LF turned into spaces (for error messages).
pub fn lossy(b: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(max)]).replace(['\r', '\n'], " ")
}

/// A `HELP` reply in Redis's `addReplyHelp` layout: the header naming the command in
/// upper case, `lines`, then the HELP entry itself.
pub fn reply_help(out: &mut resp::ReplyWriter, cmd: &[u8], lines: &[&str]) {
    let cmd = String::from_utf8_lossy(cmd).to_ascii_uppercase();
    out.array(lines.len() + 3);
    out.simple(
        format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").as_bytes(),
    );
    for l in lines {
        out.simple(l.as_bytes());
    }
    out.simple(b"HELP");
    out.simple(b"    Prints this help.");
}

/// Parses a SCAN-family cursor as Redis 7.2 does (`strtoul` base 10: optional sign, a
/// negative value wraps, empty is 0; spaces, other text or overflow give
/// `ERR invalid cursor`).
pub fn parse_cursor(b: &[u8]) -> Result<u64, CmdError> {
    let invalid = || CmdError::err("invalid cursor");
    if b.is_empty() {
        return Ok(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &c in digits {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .ok_or_else(invalid)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// The options of SCAN, HSCAN, SSCAN and ZSCAN after the cursor.
#[derive(Debug, Clone, Copy)]
pub struct ScanOpts<'a> {
    /// COUNT (default 10).
    pub count: usize,
    /// MATCH pattern; `None` for none or `*`.
    pub pattern: Option<&'a [u8]>,
    /// TYPE filter (SCAN only).
    pub type_name: Option<&'a [u8]>,
}

/// Parses `[MATCH p] [COUNT n] [TYPE t]` from `args[from..]` as Redis does (`COUNT < 1` and
/// unknown options are syntax errors; TYPE only where `allow_type`).
pub fn parse_scan_opts<'a>(
    args: &resp::Args<'a>,
    from: usize,
    allow_type: bool,
) -> Result<ScanOpts<'a>, CmdError> {
    let mut o = ScanOpts {
        count: 10,
        pattern: None,
        type_name: None,
    };
    let mut i = from;
    while i < args.len() {
        let (opt, has_value) = (args.arg(i), i + 1 < args.len());
        let value = args.arg(i + 1);
        if is(opt, "count") && has_value {
            let n = parse_i64(value)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(opt, "match") && has_value {
            o.pattern = (value != b"*").then_some(value);
        } else if is(opt, "type") && has_value && allow_type {
            o.type_name = Some(value);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

/// Case-insensitive ASCII comparison of an argument with an option name.
#[inline]
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

/// The unit of a relative or absolute expiry argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds.
    Secs,
    /// Milliseconds.
    Millis,
    /// Nanoseconds (Ember's NEXPIRE family).
    Nanos,
}

impl TimeUnit {
    /// Nanoseconds per unit.
    pub fn ns(self) -> u64 {
        match self {
            TimeUnit::Secs => NS_PER_SEC,
            TimeUnit::Millis => NS_PER_MS,
            TimeUnit::Nanos => 1,
        }
    }
}

/// Converts an expiry amount to an absolute deadline in ns since the epoch.
/// `relative`: `v` counts from `now`. Returns `Ok(None)` when the deadline is already past
/// (the key must be deleted) and `Err` when the value overflows, with Redis's text
/// `ERR invalid expire time in '<cmd>' command`.
pub fn deadline(
    v: i64,
    unit: TimeUnit,
    relative: bool,
    now: u64,
    cmd: &str,
) -> Result<Option<u64>, CmdError> {
    let invalid = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    let scaled = i128::from(v) * i128::from(unit.ns());
    let abs = if relative {
        // Second and millisecond TTLs count from the current millisecond, as Redis's
        // mstime() + ttl: the deadline is a whole millisecond, which the AOF logs exactly
        // in Redis's own PEXPIREAT form.
        let base = if unit == TimeUnit::Nanos {
            now
        } else {
            now - now % NS_PER_MS
        };
        scaled + i128::from(base)
    } else {
        scaled
    };
    // Redis refuses values whose millisecond form overflows a signed 64-bit integer.
    if scaled.abs() / i128::from(NS_PER_MS) > i128::from(i64::MAX)
        || abs > i128::from(i64::MAX) * 1_000
    {
        return Err(invalid());
    }
    if abs <= i128::from(now) {
        return Ok(None);
    }
    u64::try_from(abs).map(Some).map_err(|_| invalid())
}

/// A blocking command's timeout in seconds (Redis's `getTimeoutFromObjectOrReply`): the
/// deadline, or `None` for 0 (wait forever).
pub fn parse_timeout(b: &[u8]) -> Result<Option<std::time::Instant>, CmdError> {
    let secs = parse_float(b)
        .filter(|v| !v.is_nan())
        .ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    if ms > i64::MAX as f64 {
        return Err(CmdError::err("timeout is out of range"));
    }
    if ms < 0.0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms == 0.0 {
        return Ok(None);
    }
    // Far-future deadlines saturate (a year is "forever" for a connection).
    let ms = (ms as u64).min(365 * 24 * 3600 * 1000);
    Ok(Some(
        std::time::Instant::now() + std::time::Duration::from_millis(ms),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors() {
        assert_eq!(parse_cursor(b"0").ok(), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615").ok(), Some(u64::MAX));
        assert_eq!(parse_cursor(b"007").ok(), Some(7));
        assert_eq!(parse_cursor(b"+5").ok(), Some(5));
        assert_eq!(parse_cursor(b"-1").ok(), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-0").ok(), Some(0));
        assert_eq!(parse_cursor(b"").ok(), Some(0));
        assert!(parse_cursor(b"18446744073709551616").is_err());
        assert!(parse_cursor(b"-18446744073709551616").is_err());
        assert!(parse_cursor(b"abc").is_err());
        assert!(parse_cursor(b"-").is_err());
        assert!(parse_cursor(b"1 ").is_err());
        assert!(parse_cursor(b" 1").is_err());
        assert!(parse_cursor(b"0x10").is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(parse_float(b"1.5"), Some(1.5));
        assert_eq!(parse_float(b"3.0e3"), Some(3000.0));
        assert_eq!(parse_float(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"abc"), None);
        assert_eq!(parse_float(b""), None);
    }

    #[test]
    fn deadlines() {
        let now = 1_000 * NS_PER_SEC;
        assert_eq!(
            deadline(10, TimeUnit::Secs, true, now, "x").unwrap(),
            Some(now + 10 * NS_PER_SEC)
        );
        assert_eq!(deadline(-1, TimeUnit::Secs, true, now, "x").unwrap(), None);
        assert_eq!(deadline(5, TimeUnit::Secs, false, now, "x").unwrap(), None);
        assert!(deadline(i64::MAX, TimeUnit::Secs, true, now, "set").is_err());
        assert_eq!(
            deadline(500, TimeUnit::Nanos, true, now, "x").unwrap(),
            Some(now + 500)
        );
    }
}
