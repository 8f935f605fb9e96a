//! Conversions between Redis replies and Lua values, following Redis 7.2's
//! `script_lua.c` rules in both directions.
//!
//! Redis -> Lua (the reply of `redis.call`): integers become numbers, bulk strings
//! strings, RESP2 nulls `false` (RESP3 null `nil`), status replies `{ok=...}`, errors
//! `{err=...}`, arrays tables, and after `redis.setresp(3)` maps `{map={...}}`, sets
//! `{set={k=true}}`, doubles `{double=n}`, big numbers `{big_number=s}`, verbatim strings
//! `{verbatim_string={format=..., string=...}}` and booleans Lua booleans.
//!
//! Lua -> Redis (a script's return value): strings become bulk strings, numbers integers
//! (truncated), `true` `:1` (a boolean under RESP3 scripts), `false` null, tables with an
//! `err`/`ok`/`double`/`big_number`/`verbatim_string`/`map`/`set` field the matching reply,
//! other tables arrays (up to the first `nil`), anything else null.

use mlua::{Lua, Table, Value};
use resp::{Frame, ReplyWriter};

/// Deepest table nesting converted to a reply (Redis reaches its Lua stack limit).
const MAX_DEPTH: usize = 1000;

/// Normalises an error text as `luaPushErrorBuff` does: `-CODE msg` keeps its code,
/// a text without a leading `-` (or without a space) gets `ERR`; trailing CR/LF go.
pub fn normalize_error(text: &str) -> String {
    let (code, msg) = match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => (code.to_string(), msg.to_string()),
            None => ("ERR".to_string(), rest.to_string()),
        },
        None => ("ERR".to_string(), text.to_string()),
    };
    format!("{code} {}", msg.trim_matches(|c| c == '\r' || c == '\n'))
}

/// A `{err = msg}` table (msg already normalised).
pub fn err_table(lua: &Lua, msg: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", msg)?;
    Ok(t)
}

/// Converts a command reply into its Lua value; `resp3` is the script's protocol
/// (RESP2 nulls become `false`, RESP3 nulls `nil`).
pub fn frame_to_lua(lua: &Lua, f: Frame, resp3: bool) -> mlua::Result<Value> {
    Ok(match f {
        Frame::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s)?;
            Value::Table(t)
        }
        Frame::Error(e) => Value::Table(err_table(lua, &normalize_error(&format!("-{e}")))?),
        Frame::BlobError(e) => {
            let e = String::from_utf8_lossy(&e).into_owned();
            Value::Table(err_table(lua, &normalize_error(&format!("-{e}")))?)
        }
        Frame::Integer(n) => Value::Number(n as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(&b)?),
        Frame::Null => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        Frame::Array(items) | Frame::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, it) in items.into_iter().enumerate() {
                t.raw_set(i + 1, frame_to_lua(lua, it, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let inner = lua.create_table()?;
            for (k, v) in pairs {
                let k = frame_to_lua(lua, k, resp3)?;
                let v = frame_to_lua(lua, v, resp3)?;
                if !k.is_nil() {
                    inner.raw_set(k, v)?;
                }
            }
            let t = lua.create_table()?;
            t.raw_set("map", inner)?;
            Value::Table(t)
        }
        Frame::Set(items) => {
            let inner = lua.create_table()?;
            for it in items {
                let k = frame_to_lua(lua, it, resp3)?;
                if !k.is_nil() {
                    inner.raw_set(k, true)?;
                }
            }
            let t = lua.create_table()?;
            t.raw_set("set", inner)?;
            Value::Table(t)
        }
        Frame::Double(d) => {
            let t = lua.create_table()?;
            t.raw_set("double", d)?;
            Value::Table(t)
        }
        Frame::Boolean(b) => Value::Boolean(b),
        Frame::BigNumber(s) => {
            let t = lua.create_table()?;
            t.raw_set("big_number", s)?;
            Value::Table(t)
        }
        Frame::Verbatim { format, text } => {
            let inner = lua.create_table()?;
            inner.raw_set("string", lua.create_string(&text)?)?;
            inner.raw_set("format", format)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        Frame::Attribute { data, .. } => frame_to_lua(lua, *data, resp3)?,
    })
}

/// Writes a script's return value as a reply; `resp3` is the script's protocol (it decides
/// how booleans are sent).
pub fn lua_to_reply(out: &mut ReplyWriter, v: &Value, resp3: bool) {
    write_value(out, v, resp3, 0);
}

/// The Lua number `n` as Redis sends it: truncated to an integer.
pub fn number_to_i64(n: f64) -> i64 {
    n as i64
}

fn write_value(out: &mut ReplyWriter, v: &Value, resp3: bool, depth: usize) {
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if resp3 {
                out.boolean(*b);
            } else if *b {
                out.int(1);
            } else {
                out.null();
            }
        }
        Value::Integer(n) => out.int(*n),
        Value::Number(n) => out.int(number_to_i64(*n)),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                out.error("ERR reached lua stack limit");
                return;
            }
            write_table(out, t, resp3, depth)
        }
        _ => out.null(),
    }
}

fn write_table(out: &mut ReplyWriter, t: &Table, resp3: bool, depth: usize) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        let msg = String::from_utf8_lossy(&e.as_bytes()).into_owned();
        out.error(&msg);
        return;
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        out.simple(&s.as_bytes());
        return;
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(n)) => return out.double(n),
        Ok(Value::Integer(n)) => return out.double(n as f64),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        let digits = String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " ");
        out.big_number(&digits);
        return;
    }
    if let Ok(Value::Table(vt)) = t.raw_get::<Value>("verbatim_string") {
        if let (Ok(Value::String(f)), Ok(Value::String(s))) =
            (vt.raw_get::<Value>("format"), vt.raw_get::<Value>("string"))
        {
            let f = String::from_utf8_lossy(&f.as_bytes()).into_owned();
            out.verbatim(&f, &s.as_bytes());
            return;
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs: Vec<(Value, Value)> = m.pairs::<Value, Value>().filter_map(Result::ok).collect();
        out.map(pairs.len());
        for (k, v) in &pairs {
            write_value(out, k, resp3, depth + 1);
            write_value(out, v, resp3, depth + 1);
        }
        return;
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let keys: Vec<Value> = s
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| k)
            .collect();
        out.set(keys.len());
        for k in &keys {
            write_value(out, k, resp3, depth + 1);
        }
        return;
    }
    let mut items = Vec::new();
    let mut j = 1i64;
    loop {
        match t.raw_get::<Value>(j) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
        j += 1;
    }
    out.array(items.len());
    for v in &items {
        write_value(out, v, resp3, depth + 1);
    }
}

/// Formats `x` as C's `%.17g` (how Redis turns Lua numbers into command arguments).
pub fn fmt_g17(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{x:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..17).contains(&exp) {
        let mant = trim_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (16 - exp).max(0) as usize;
        trim_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g17() {
        assert_eq!(fmt_g17(3.0), "3");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(-2.5), "-2.5");
        assert_eq!(fmt_g17(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(fmt_g17(0.0001), "0.0001");
        assert_eq!(fmt_g17(0.00001), "1.0000000000000001e-05");
    }

    #[test]
    fn errors() {
        assert_eq!(normalize_error("-ERR bad\r\n"), "ERR bad");
        assert_eq!(normalize_error("-My error"), "My error");
        assert_eq!(normalize_error("-x"), "ERR x");
        assert_eq!(normalize_error("plain text"), "ERR plain text");
    }
}
