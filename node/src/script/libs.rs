//! The libraries Redis gives scripts beyond Lua's own, written in Rust: `cjson`
//! (lua-cjson's encode/decode with its defaults), `bit` (LuaBitOp) and `cmsgpack`.
//!
//! Differences from the C libraries: cjson's configuration functions
//! (`encode_keep_buffer`, `encode_max_depth`, ...) are accepted and ignored, and decode
//! error texts are close to but not always exactly lua-cjson's. `cmsgpack` offers
//! `pack`/`unpack` (lua-cmsgpack's encoding rules). `struct` is in [`super::structlib`].

use mlua::{LightUserData, Lua, MultiValue, Table, Value, Variadic};

/// Nesting limit of cjson encode/decode (lua-cjson's default 1000).
const MAX_DEPTH: usize = 1000;

/// Registers `cjson`, `bit`, `cmsgpack` and `struct` in `globals`.
pub fn register(lua: &Lua, globals: &Table) -> mlua::Result<()> {
    globals.raw_set("cjson", cjson(lua)?)?;
    globals.raw_set("bit", bit(lua)?)?;
    globals.raw_set("cmsgpack", cmsgpack(lua)?)?;
    globals.raw_set("struct", super::structlib::table(lua)?)?;
    Ok(())
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "encode",
        lua.create_function(|_, v: Value| {
            let mut out = Vec::new();
            encode(&v, &mut out, 0)?;
            Ok(mlua::BString::from(out))
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, s: mlua::LuaString| {
            let b = s.as_bytes();
            let mut p = Parser { s: &b, pos: 0, lua };
            p.ws();
            let v = p.value(0)?;
            p.ws();
            if p.pos < p.s.len() {
                return Err(p.err("the end"));
            }
            Ok(v)
        })?,
    )?;
    t.raw_set("null", null())?;
    for name in [
        "encode_keep_buffer",
        "encode_max_depth",
        "decode_max_depth",
        "encode_number_precision",
        "encode_invalid_numbers",
        "decode_invalid_numbers",
        "encode_sparse_array",
    ] {
        t.raw_set(
            name,
            lua.create_function(|_, _: MultiValue| Ok(Value::Nil))?,
        )?;
    }
    Ok(t)
}

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        Value::UserData(_) | Value::LightUserData(_) => "userdata",
        _ => "userdata",
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if !n.is_finite() {
        return Err(rt("Cannot serialise number: must not be NaN or Inf"));
    }
    out.extend_from_slice(fmt_g14(n).as_bytes());
    Ok(())
}

/// C's `%.14g`.
fn fmt_g14(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let sci = format!("{x:.13e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..14).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.unsigned_abs())
    } else {
        let decimals = (13 - exp).max(0) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

fn encode_string(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{:04x}", c).as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(n) => encode_number(*n as f64, out)?,
        Value::Number(n) => encode_number(*n, out)?,
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Err(rt(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            // An array when every key is a positive integer (lua-cjson's rule).
            let mut max = 0usize;
            let mut items = 0usize;
            let mut array = true;
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, _) = pair?;
                items += 1;
                let idx = match k {
                    Value::Integer(i) if i >= 1 => Some(i as usize),
                    Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => Some(n as usize),
                    _ => None,
                };
                match idx {
                    Some(i) => max = max.max(i),
                    None => {
                        array = false;
                        break;
                    }
                }
            }
            if array && items > 0 {
                if max > 10 && max > items * 2 {
                    return Err(rt("Cannot serialise table: excessively sparse array"));
                }
                out.push(b'[');
                for i in 1..=max {
                    if i > 1 {
                        out.push(b',');
                    }
                    let v: Value = t.raw_get(i)?;
                    encode(&v, out, depth + 1)?;
                }
                out.push(b']');
            } else {
                out.push(b'{');
                let mut first = true;
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    match &k {
                        Value::String(s) => encode_string(&s.as_bytes(), out),
                        Value::Integer(n) => {
                            out.push(b'"');
                            encode_number(*n as f64, out)?;
                            out.push(b'"');
                        }
                        Value::Number(n) => {
                            out.push(b'"');
                            encode_number(*n, out)?;
                            out.push(b'"');
                        }
                        _ => {
                            return Err(rt(
                                "Cannot serialise table: table key must be a number or string",
                            ))
                        }
                    }
                    out.push(b':');
                    encode(&v, out, depth + 1)?;
                }
                out.push(b'}');
            }
        }
        other => {
            return Err(rt(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            )))
        }
    }
    Ok(())
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    lua: &'a Lua,
}

impl Parser<'_> {
    fn err(&self, expected: &str) -> mlua::Error {
        let found = match self.s.get(self.pos) {
            None => "T_END".to_string(),
            Some(_) => "invalid token".to_string(),
        };
        rt(format!(
            "Expected {expected} but found {found} at character {}",
            self.pos + 1
        ))
    }

    fn ws(&mut self) {
        while let Some(c) = self.s.get(self.pos) {
            if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    fn lit(&mut self, word: &[u8], v: Value) -> mlua::Result<Value> {
        if self.s[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("value"))
        }
    }

    fn value(&mut self, depth: usize) -> mlua::Result<Value> {
        if depth >= MAX_DEPTH {
            return Err(rt(format!(
                "Found too many nested data structures ({}) at character {}",
                depth + 1,
                self.pos + 1
            )));
        }
        match self.s.get(self.pos) {
            Some(b'{') => {
                self.pos += 1;
                let t = self.lua.create_table()?;
                self.ws();
                if self.s.get(self.pos) == Some(&b'}') {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.ws();
                    if self.s.get(self.pos) != Some(&b'"') {
                        return Err(self.err("object key string"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.s.get(self.pos) != Some(&b':') {
                        return Err(self.err("colon"));
                    }
                    self.pos += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    t.raw_set(self.lua.create_string(&k)?, v)?;
                    self.ws();
                    match self.s.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.err("comma or object end")),
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let t = self.lua.create_table()?;
                self.ws();
                if self.s.get(self.pos) == Some(&b']') {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1;
                loop {
                    self.ws();
                    let v = self.value(depth + 1)?;
                    t.raw_set(i, v)?;
                    i += 1;
                    self.ws();
                    match self.s.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.err("comma or array end")),
                    }
                }
            }
            Some(b'"') => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            Some(b't') => self.lit(b"true", Value::Boolean(true)),
            Some(b'f') => self.lit(b"false", Value::Boolean(false)),
            Some(b'n') => self.lit(b"null", null()),
            Some(c) if *c == b'-' || c.is_ascii_digit() => {
                let start = self.pos;
                while let Some(c) = self.s.get(self.pos) {
                    if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                let txt = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
                match txt.parse::<f64>() {
                    Ok(n) => Ok(Value::Number(n)),
                    Err(_) => {
                        self.pos = start;
                        Err(self.err("value"))
                    }
                }
            }
            _ => Err(self.err("value")),
        }
    }

    fn hex4(&mut self) -> mlua::Result<u32> {
        let h = self
            .s
            .get(self.pos..self.pos + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err("string"))?;
        self.pos += 4;
        Ok(h)
    }

    fn string(&mut self) -> mlua::Result<Vec<u8>> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                self.pos = start;
                return Err(self.err("value"));
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        return Err(self.err("value"));
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp)
                                && self.s.get(self.pos..self.pos + 2) == Some(b"\\u")
                            {
                                self.pos += 2;
                                let lo = self.hex4()?;
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo.wrapping_sub(0xdc00));
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            self.pos = start;
                            return Err(self.err("value"));
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }
}

/// LuaBitOp's normalisation of a number to a signed 32-bit integer.
fn tobit(v: &Value) -> mlua::Result<i32> {
    let n = match v {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        Value::String(s) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| rt("bad argument (number expected)"))?,
        other => {
            return Err(rt(format!(
                "bad argument (number expected, got {})",
                type_name(other)
            )))
        }
    };
    let r = n.round_ties_even().rem_euclid(4294967296.0);
    Ok(r as u64 as u32 as i32)
}

fn arg(args: &Variadic<Value>, i: usize) -> mlua::Result<i32> {
    tobit(args.get(i).unwrap_or(&Value::Nil))
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, a: Variadic<Value>| arg(&a, 0))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, a: Variadic<Value>| Ok(!arg(&a, 0)?))?,
    )?;
    t.raw_set(
        "band",
        lua.create_function(|_, a: Variadic<Value>| {
            let mut r = arg(&a, 0)?;
            for i in 1..a.len() {
                r &= arg(&a, i)?;
            }
            Ok(r)
        })?,
    )?;
    t.raw_set(
        "bor",
        lua.create_function(|_, a: Variadic<Value>| {
            let mut r = arg(&a, 0)?;
            for i in 1..a.len() {
                r |= arg(&a, i)?;
            }
            Ok(r)
        })?,
    )?;
    t.raw_set(
        "bxor",
        lua.create_function(|_, a: Variadic<Value>| {
            let mut r = arg(&a, 0)?;
            for i in 1..a.len() {
                r ^= arg(&a, i)?;
            }
            Ok(r)
        })?,
    )?;
    t.raw_set(
        "lshift",
        lua.create_function(|_, a: Variadic<Value>| {
            Ok(((arg(&a, 0)? as u32) << (arg(&a, 1)? & 31)) as i32)
        })?,
    )?;
    t.raw_set(
        "rshift",
        lua.create_function(|_, a: Variadic<Value>| {
            Ok(((arg(&a, 0)? as u32) >> (arg(&a, 1)? & 31)) as i32)
        })?,
    )?;
    t.raw_set(
        "arshift",
        lua.create_function(|_, a: Variadic<Value>| Ok(arg(&a, 0)? >> (arg(&a, 1)? & 31)))?,
    )?;
    t.raw_set(
        "rol",
        lua.create_function(|_, a: Variadic<Value>| {
            Ok((arg(&a, 0)? as u32).rotate_left((arg(&a, 1)? & 31) as u32) as i32)
        })?,
    )?;
    t.raw_set(
        "ror",
        lua.create_function(|_, a: Variadic<Value>| {
            Ok((arg(&a, 0)? as u32).rotate_right((arg(&a, 1)? & 31) as u32) as i32)
        })?,
    )?;
    t.raw_set(
        "bswap",
        lua.create_function(|_, a: Variadic<Value>| Ok(arg(&a, 0)?.swap_bytes()))?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, a: Variadic<Value>| {
            let x = arg(&a, 0)? as u32;
            let n = if a.len() > 1 { arg(&a, 1)? } else { 8 };
            let upper = n < 0;
            let n = (n.unsigned_abs()).min(8) as usize;
            let s = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

/// lua-cmsgpack's nesting limit: deeper tables encode as nil.
const MSGPACK_MAX_NESTING: usize = 16;

fn cmsgpack(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|_, a: MultiValue| {
            if a.is_empty() {
                return Err(rt("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in a.iter() {
                mp_encode(v, &mut out, 0)?;
            }
            Ok(mlua::BString::from(out))
        })?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let b = s.as_bytes();
            let mut pos = 0;
            let mut vals = Vec::new();
            while pos < b.len() {
                vals.push(mp_decode(lua, &b, &mut pos, 0)?);
            }
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    Ok(t)
}

fn mp_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn mp_number(x: f64, out: &mut Vec<u8>) {
    if x.fract() == 0.0 && (-9.223372036854776e18..9.223372036854776e18).contains(&x) {
        mp_int(x as i64, out);
    } else if (x as f32) as f64 == x || x.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(x as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&x.to_be_bytes());
    }
}

fn mp_len(len: usize, fix: u8, fixmax: usize, c16: u8, c32: u8, out: &mut Vec<u8>) {
    if len < fixmax {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(c16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(c32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

fn mp_encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => mp_int(*n, out),
        Value::Number(n) => mp_number(*n, out),
        Value::String(s) => {
            let b = s.as_bytes();
            let len = b.len();
            if len < 32 {
                out.push(0xa0 | len as u8);
            } else if len <= 0xff {
                out.extend_from_slice(&[0xd9, len as u8]);
            } else if len <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(len as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if depth < MSGPACK_MAX_NESTING => {
            let mut count = 0usize;
            let mut max = 0usize;
            let mut array = true;
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Integer(i) if i >= 1 => max = max.max(i as usize),
                    _ => array = false,
                }
            }
            if array && count == max {
                mp_len(count, 0x90, 16, 0xdc, 0xdd, out);
                for i in 1..=count {
                    let v: Value = t.raw_get(i)?;
                    mp_encode(&v, out, depth + 1)?;
                }
            } else {
                mp_len(count, 0x80, 16, 0xde, 0xdf, out);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    mp_encode(&k, out, depth + 1)?;
                    mp_encode(&v, out, depth + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn mp_take<'b>(b: &'b [u8], pos: &mut usize, n: usize) -> mlua::Result<&'b [u8]> {
    let end = pos
        .checked_add(n)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| rt("Missing bytes in input."))?;
    let s = &b[*pos..end];
    *pos = end;
    Ok(s)
}

fn mp_be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn mp_decode(lua: &Lua, b: &[u8], pos: &mut usize, depth: usize) -> mlua::Result<Value> {
    if depth > 1000 {
        return Err(rt("Bad data format in input."));
    }
    let c = mp_take(b, pos, 1)?[0];
    let str_of = |pos: &mut usize, n: usize| -> mlua::Result<Value> {
        Ok(Value::String(lua.create_string(mp_take(b, pos, n)?)?))
    };
    let num = |v: f64| Ok(Value::Number(v));
    match c {
        0x00..=0x7f => num(c as f64),
        0xe0..=0xff => num(c as i8 as f64),
        0xa0..=0xbf => str_of(pos, (c & 0x1f) as usize),
        0x90..=0x9f => mp_array(lua, b, pos, (c & 0x0f) as usize, depth),
        0x80..=0x8f => mp_map(lua, b, pos, (c & 0x0f) as usize, depth),
        0xc0 => Ok(Value::Nil),
        0xc2 => Ok(Value::Boolean(false)),
        0xc3 => Ok(Value::Boolean(true)),
        0xcc => num(mp_take(b, pos, 1)?[0] as f64),
        0xcd => num(mp_be(mp_take(b, pos, 2)?) as f64),
        0xce => num(mp_be(mp_take(b, pos, 4)?) as f64),
        0xcf => num(mp_be(mp_take(b, pos, 8)?) as f64),
        0xd0 => num(mp_take(b, pos, 1)?[0] as i8 as f64),
        0xd1 => num(mp_be(mp_take(b, pos, 2)?) as u16 as i16 as f64),
        0xd2 => num(mp_be(mp_take(b, pos, 4)?) as u32 as i32 as f64),
        0xd3 => num(mp_be(mp_take(b, pos, 8)?) as i64 as f64),
        0xca => num(f32::from_bits(mp_be(mp_take(b, pos, 4)?) as u32) as f64),
        0xcb => num(f64::from_bits(mp_be(mp_take(b, pos, 8)?))),
        0xd9 | 0xc4 => {
            let n = mp_take(b, pos, 1)?[0] as usize;
            str_of(pos, n)
        }
        0xda | 0xc5 => {
            let n = mp_be(mp_take(b, pos, 2)?) as usize;
            str_of(pos, n)
        }
        0xdb | 0xc6 => {
            let n = mp_be(mp_take(b, pos, 4)?) as usize;
            str_of(pos, n)
        }
        0xdc => {
            let n = mp_be(mp_take(b, pos, 2)?) as usize;
            mp_array(lua, b, pos, n, depth)
        }
        0xdd => {
            let n = mp_be(mp_take(b, pos, 4)?) as usize;
            mp_array(lua, b, pos, n, depth)
        }
        0xde => {
            let n = mp_be(mp_take(b, pos, 2)?) as usize;
            mp_map(lua, b, pos, n, depth)
        }
        0xdf => {
            let n = mp_be(mp_take(b, pos, 4)?) as usize;
            mp_map(lua, b, pos, n, depth)
        }
        _ => Err(rt("Bad data format in input.")),
    }
}

fn mp_array(lua: &Lua, b: &[u8], pos: &mut usize, n: usize, depth: usize) -> mlua::Result<Value> {
    // Each element takes at least one byte: a bogus count cannot over-allocate.
    if n > b.len() - *pos {
        return Err(rt("Missing bytes in input."));
    }
    let t = lua.create_table_with_capacity(n, 0)?;
    for i in 1..=n {
        let v = mp_decode(lua, b, pos, depth + 1)?;
        t.raw_set(i, v)?;
    }
    Ok(Value::Table(t))
}

fn mp_map(lua: &Lua, b: &[u8], pos: &mut usize, n: usize, depth: usize) -> mlua::Result<Value> {
    if n > b.len() - *pos {
        return Err(rt("Missing bytes in input."));
    }
    let t = lua.create_table()?;
    for _ in 0..n {
        let k = mp_decode(lua, b, pos, depth + 1)?;
        let v = mp_decode(lua, b, pos, depth + 1)?;
        if !k.is_nil() {
            t.raw_set(k, v)?;
        }
    }
    Ok(Value::Table(t))
}
