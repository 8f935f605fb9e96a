//! Expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (with NX, XX, GT, LT), TTL, PTTL,
//! EXPIRETIME, PEXPIRETIME, PERSIST, and Ember's nanosecond NEXPIRE, NEXPIREAT and NTTL.
//!
//! Deadlines are absolute nanoseconds since the epoch. Millisecond and second replies are
//! derived as Redis would from millisecond deadlines: PTTL is `deadline_ms - now_ms` and
//! TTL rounds it to the nearest second (`(ms + 500) / 1000`).

use resp::Args;
use storage::clock::NS_PER_MS;

use crate::cmd::util::{deadline, is, parse_i64, TimeUnit};
use crate::ctx::Ctx;
use crate::effects::deadline_cmd;
use crate::error::{CmdError, CmdResult};
use crate::registry::{flags::*, CommandSpec, Group};

const G: Group = Group::Generic;

/// Expiry commands.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("expire", -3, WRITE | FAST, (1, 1, 1), G, expire)
        .doc("Sets the expiration time of a key in seconds.", "1.0.0"),
    CommandSpec::new("pexpire", -3, WRITE | FAST, (1, 1, 1), G, pexpire).doc(
        "Sets the expiration time of a key in milliseconds.",
        "2.6.0",
    ),
    CommandSpec::new("expireat", -3, WRITE | FAST, (1, 1, 1), G, expireat).doc(
        "Sets the expiration time of a key to a Unix timestamp.",
        "1.2.0",
    ),
    CommandSpec::new("pexpireat", -3, WRITE | FAST, (1, 1, 1), G, pexpireat).doc(
        "Sets the expiration time of a key to a Unix milliseconds timestamp.",
        "2.6.0",
    ),
    CommandSpec::new("ttl", 2, READONLY | FAST, (1, 1, 1), G, ttl)
        .doc("Returns the expiration time in seconds of a key.", "1.0.0"),
    CommandSpec::new("pttl", 2, READONLY | FAST, (1, 1, 1), G, pttl).doc(
        "Returns the expiration time in milliseconds of a key.",
        "2.6.0",
    ),
    CommandSpec::new("expiretime", 2, READONLY | FAST, (1, 1, 1), G, expiretime).doc(
        "Returns the expiration time of a key as a Unix timestamp.",
        "7.0.0",
    ),
    CommandSpec::new("pexpiretime", 2, READONLY | FAST, (1, 1, 1), G, pexpiretime).doc(
        "Returns the expiration time of a key as a Unix milliseconds timestamp.",
        "7.0.0",
    ),
    CommandSpec::new("persist", 2, WRITE | FAST, (1, 1, 1), G, persist)
        .doc("Removes the expiration time of a key.", "2.2.0"),
    CommandSpec::new("nexpire", -3, WRITE | FAST, (1, 1, 1), G, nexpire).doc(
        "Sets the expiration time of a key in nanoseconds (Ember).",
        "0.1.0",
    ),
    CommandSpec::new("nexpireat", -3, WRITE | FAST, (1, 1, 1), G, nexpireat).doc(
        "Sets the expiration time of a key to a Unix nanoseconds timestamp (Ember).",
        "0.1.0",
    ),
    CommandSpec::new("nexpiretime", 2, READONLY | FAST, (1, 1, 1), G, nexpiretime).doc(
        "Returns the expiration time of a key as a Unix nanoseconds timestamp (Ember).",
        "0.1.0",
    ),
    CommandSpec::new("nttl", 2, READONLY | FAST, (1, 1, 1), G, nttl).doc(
        "Returns the expiration time in nanoseconds of a key (Ember).",
        "0.1.0",
    ),
];

/// The NX / XX / GT / LT conditions of the EXPIRE family.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Cond {
    /// Parses `opts` as Redis's `parseExtendedExpireArgumentsOrReply`.
    fn parse(opts: Args<'_>) -> Result<Cond, CmdError> {
        let mut c = Cond::default();
        for o in opts {
            if is(o, "nx") {
                c.nx = true;
            } else if is(o, "xx") {
                c.xx = true;
            } else if is(o, "gt") {
                c.gt = true;
            } else if is(o, "lt") {
                c.lt = true;
            } else {
                return Err(CmdError::err(format!(
                    "Unsupported option {}",
                    String::from_utf8_lossy(o)
                )));
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(CmdError::err(
                "NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(CmdError::err(
                "GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// True when a key whose deadline is `current` may get deadline `new` (`None` for
    /// `new`: already past; for `current`: no TTL, which GT and LT treat as infinite).
    fn allows(self, current: Option<u64>, new: Option<u64>) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt {
            match (current, new) {
                (Some(cur), Some(at)) if at > cur => {}
                _ => return false,
            }
        }
        if self.lt {
            if let (Some(cur), Some(at)) = (current, new) {
                if at >= cur {
                    return false;
                }
            }
        }
        true
    }
}

/// The EXPIRE family: `cmd key amount [NX|XX|GT|LT ...]`.
fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    unit: TimeUnit,
    relative: bool,
    name: &str,
) -> CmdResult {
    let cond = Cond::parse(args.slice(3))?;
    let mut amount = parse_i64(args.arg(2))?;
    if unit == TimeUnit::Millis && amount == i64::MIN {
        // Redis range-checks only second amounts; i64::MIN ms is simply in the past.
        amount += 1;
    }
    let at = deadline(amount, unit, relative, ctx.now, name)?;
    let mut g = ctx.lock(args.arg(1));
    let Some(e) = g.get() else {
        drop(g);
        ctx.out.int(0);
        declare_expiry(ctx, args.arg(1), Form::Expire);
        return Ok(());
    };
    let current = e.expire_at();
    let key = args.arg(1);
    let done = if !cond.allows(current, at) {
        false
    } else {
        match at {
            Some(at) => {
                let done = g.set_expire(at);
                drop(g);
                ctx.notify(crate::notify::GENERIC, "expire", key);
                done
            }
            None => {
                let old = g.remove();
                drop(g);
                drop(old);
                ctx.notify(crate::notify::GENERIC, "del", key);
                true
            }
        }
    };
    ctx.out.int(i64::from(done));
    declare_expiry(ctx, key, Form::Expire);
    Ok(())
}

/// How a command with a relative (or any) expiry declares its effect ([`declare_expiry`]).
pub(crate) enum Form<'a> {
    /// EXPIRE and kin: the absolute deadline the key ended with (nothing without one).
    Expire,
    /// GETEX with options: the absolute deadline, or PERSIST.
    Getex,
    /// SET, SETEX, PSETEX: `base` (the SET without its expiry options), then the deadline.
    Set(&'a [&'a [u8]]),
}

/// Declares ([`crate::effects`]) the effect of a command that left `key` as it is now, in
/// its absolute form: the deadline it ended with (`PEXPIREAT`, `SET .. PXAT`, or Ember's
/// `NEXPIREAT` for a deadline that is not a whole millisecond), `DEL` when the key is gone
/// (a deadline in the past). Reads the key only while the effects are wanted.
pub(crate) fn declare_expiry(ctx: &mut Ctx<'_>, key: &[u8], form: Form<'_>) {
    if !ctx.client.fx.on() {
        return;
    }
    let state = ctx.lock(key).peek().map(|e| e.expire_at());
    let fx = &mut ctx.client.fx;
    match (state, form) {
        (None, _) => fx.record(&[&b"DEL"[..], key]),
        (Some(Some(at)), Form::Expire | Form::Getex) => fx.record(&deadline_cmd(key, at)),
        (Some(None), Form::Expire) => fx.nothing(),
        (Some(None), Form::Getex) => fx.record(&[&b"PERSIST"[..], key]),
        (Some(Some(at)), Form::Set(base)) if at.is_multiple_of(NS_PER_MS) => {
            let ms = itoa::Buffer::new()
                .format(at / NS_PER_MS)
                .as_bytes()
                .to_vec();
            let mut v: Vec<&[u8]> = base.to_vec();
            v.push(b"PXAT");
            v.push(&ms);
            fx.record(&v);
        }
        (Some(Some(at)), Form::Set(base)) => {
            fx.record(base);
            fx.record(&deadline_cmd(key, at));
        }
        (Some(None), Form::Set(base)) => fx.record(base),
    }
}

fn expire(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Secs, true, "expire")
}

fn pexpire(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Millis, true, "pexpire")
}

fn expireat(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Secs, false, "expireat")
}

fn pexpireat(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Millis, false, "pexpireat")
}

fn nexpire(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Nanos, true, "nexpire")
}

fn nexpireat(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    expire_generic(ctx, args, TimeUnit::Nanos, false, "nexpireat")
}

/// What the TTL family reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ttl {
    /// Remaining time to live in seconds, rounded (TTL).
    Secs,
    /// Remaining time to live in milliseconds (PTTL).
    Millis,
    /// Remaining time to live in nanoseconds (NTTL).
    Nanos,
    /// Absolute deadline in seconds (EXPIRETIME).
    AbsSecs,
    /// Absolute deadline in milliseconds (PEXPIRETIME).
    AbsMillis,
    /// Absolute deadline in nanoseconds (NEXPIRETIME).
    AbsNanos,
}

/// The reply of the TTL family for a key with deadline `at` (ns), evaluated at `now`.
fn ttl_value(kind: Ttl, at: u64, now: u64) -> i64 {
    let at_ms = at / NS_PER_MS;
    let left_ms = at_ms.saturating_sub(now / NS_PER_MS);
    let v = match kind {
        Ttl::Secs => (left_ms + 500) / 1000,
        Ttl::Millis => left_ms,
        Ttl::Nanos => at.saturating_sub(now),
        Ttl::AbsSecs => (at_ms + 500) / 1000,
        Ttl::AbsMillis => at_ms,
        Ttl::AbsNanos => at,
    };
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// TTL, PTTL, NTTL, EXPIRETIME, PEXPIRETIME, NEXPIRETIME: -2 without the key, -1 without a deadline.
fn ttl_generic(ctx: &mut Ctx<'_>, args: Args<'_>, kind: Ttl) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let found = g.peek().map(|e| e.expire_at());
    drop(g);
    ctx.hit_key(found.is_some(), args.arg(1));
    let v = match found {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => ttl_value(kind, at, ctx.now),
    };
    ctx.out.int(v);
    Ok(())
}

fn ttl(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, Ttl::Secs)
}

fn pttl(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, Ttl::Millis)
}

fn nttl(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, Ttl::Nanos)
}

fn expiretime(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, Ttl::AbsSecs)
}

fn pexpiretime(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, Ttl::AbsMillis)
}

fn nexpiretime(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    ttl_generic(ctx, args, Ttl::AbsNanos)
}

fn persist(ctx: &mut Ctx<'_>, args: Args<'_>) -> CmdResult {
    let mut g = ctx.lock(args.arg(1));
    let had = g.get().is_some_and(|e| e.expire_at().is_some());
    let done = had && g.set_expire(0);
    drop(g);
    if done {
        ctx.notify(crate::notify::GENERIC, "persist", args.arg(1));
    }
    ctx.out.int(i64::from(done));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(nx: bool, xx: bool, gt: bool, lt: bool) -> Cond {
        Cond { nx, xx, gt, lt }
    }

    #[test]
    fn conditions() {
        let none = Cond::default();
        assert!(none.allows(None, Some(5)));
        assert!(none.allows(Some(5), None));
        let nx = c(true, false, false, false);
        assert!(nx.allows(None, Some(5)));
        assert!(!nx.allows(Some(5), Some(6)));
        let xx = c(false, true, false, false);
        assert!(!xx.allows(None, Some(5)));
        assert!(xx.allows(Some(5), Some(6)));
        let gt = c(false, false, true, false);
        assert!(!gt.allows(None, Some(5)), "no TTL is infinite for GT");
        assert!(!gt.allows(Some(5), Some(5)));
        assert!(gt.allows(Some(5), Some(6)));
        assert!(
            !gt.allows(Some(5), None),
            "a past deadline is never greater"
        );
        let lt = c(false, false, false, true);
        assert!(lt.allows(None, Some(5)), "no TTL is infinite for LT");
        assert!(!lt.allows(Some(5), Some(5)));
        assert!(lt.allows(Some(5), Some(4)));
        assert!(lt.allows(Some(5), None));
        let xx_gt = c(false, true, true, false);
        assert!(!xx_gt.allows(None, Some(5)));
        assert!(xx_gt.allows(Some(5), Some(6)));
    }

    #[test]
    fn ttl_rounding() {
        let now = 1_000 * NS_PER_MS * 1000;
        let at = now + 100_500 * NS_PER_MS;
        assert_eq!(ttl_value(Ttl::Millis, at, now), 100_500);
        assert_eq!(ttl_value(Ttl::Secs, at, now), 101);
        assert_eq!(ttl_value(Ttl::Secs, now + 1_499 * NS_PER_MS, now), 1);
        assert_eq!(ttl_value(Ttl::Nanos, now + 7, now), 7);
        assert_eq!(ttl_value(Ttl::Millis, now + 7, now), 0);
        assert_eq!(
            ttl_value(Ttl::AbsMillis, 4_000_000_000_000 * NS_PER_MS, now),
            4_000_000_000_000
        );
        assert_eq!(
            ttl_value(Ttl::AbsSecs, 4_000_000_000_000 * NS_PER_MS, now),
            4_000_000_000
        );
    }
}
