//! The `struct` library Redis gives scripts (Roberto Ierusalimschy's struct.c 0.2, as
//! vendored in Redis): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, pos])` and
//! `struct.size(fmt)`, with the same format language, alignment rules and error texts.
//!
//! Format: `>` big-endian, `<` little-endian, `!n` maximum alignment (default 1; `!`
//! alone is 8), `x` one zero/padding byte, `b`/`B` char, `h`/`H` short (2), `l`/`L` long
//! (8), `T` size_t (8), `i`/`I[n]` integer of n bytes (default 4, at most 32), `f` float,
//! `d` double, `s` zero-terminated string, `cn` n chars (`c0`: the whole string when
//! packing; the previous unpacked number when unpacking), spaces ignored. Lower case is
//! signed.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

/// Largest integer size (`MAXINTSIZE`).
const MAX_INT_SIZE: usize = 32;
/// Alignment of `!` without a number (`MAXALIGN`: a double's alignment).
const MAX_ALIGN: usize = 8;

#[derive(Clone, Copy)]
struct Header {
    big: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            big: cfg!(target_endian = "big"),
            align: 1,
        }
    }
}

fn rt(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

fn arg_error(n: usize, func: &str, msg: &str) -> mlua::Error {
    rt(format!("bad argument #{n} to '{func}' ({msg})"))
}

/// A format string being read, option by option.
struct Fmt<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.s.get(self.pos)?;
        self.pos += 1;
        Some(c)
    }

    /// struct.c's `getnum`: the digits at the cursor, or `default` when there are none.
    fn num(&mut self, default: usize) -> mlua::Result<usize> {
        let Some(c) = self.s.get(self.pos) else {
            return Ok(default);
        };
        if !c.is_ascii_digit() {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(&c) = self.s.get(self.pos) {
            if !c.is_ascii_digit() {
                break;
            }
            let d = i64::from(c - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return Err(rt("integral size overflow"));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    /// struct.c's `optsize`: the size of option `opt` (0 for those without one).
    fn size(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.num(1)?,
            b'i' | b'I' => {
                let sz = self.num(4)?;
                if sz > MAX_INT_SIZE {
                    return Err(rt(format!(
                        "integral size {sz} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                sz
            }
            _ => 0,
        })
    }

    /// struct.c's `controloptions`: endianness, alignment, spaces; anything else errors.
    fn control(&mut self, opt: u8, h: &mut Header, func: &str) -> mlua::Result<()> {
        match opt {
            b' ' => Ok(()),
            b'>' => {
                h.big = true;
                Ok(())
            }
            b'<' => {
                h.big = false;
                Ok(())
            }
            b'!' => {
                let a = self.num(MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return Err(rt(format!("alignment {a} is not a power of 2")));
                }
                h.align = a;
                Ok(())
            }
            c => Err(arg_error(
                1,
                func,
                &format!("invalid format option '{}'", c as char),
            )),
        }
    }
}

/// Padding needed before an item of `size` at offset `len` (struct.c's `gettoalign`).
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn number(lua: &Lua, v: Option<&Value>, n: usize, func: &str) -> mlua::Result<f64> {
    let got = match v {
        Some(v) => lua.coerce_number(v.clone())?,
        None => None,
    };
    got.ok_or_else(|| {
        let ty = v.map_or("nil", |v| v.type_name());
        arg_error(n, func, &format!("number expected, got {ty}"))
    })
}

fn string(lua: &Lua, v: Option<&Value>, n: usize, func: &str) -> mlua::Result<Vec<u8>> {
    let got = match v {
        Some(v) => lua.coerce_string(v.clone())?,
        None => None,
    };
    got.map(|s| s.as_bytes().to_vec()).ok_or_else(|| {
        let ty = v.map_or("nil", |v| v.type_name());
        arg_error(n, func, &format!("string expected, got {ty}"))
    })
}

fn pack(lua: &Lua, args: &[Value]) -> mlua::Result<Vec<u8>> {
    let fmt = string(lua, args.first(), 1, "pack")?;
    let mut f = Fmt { s: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut out = Vec::new();
    let mut arg = 1; // index into args of the next value (Lua argument arg + 1)
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number(lua, args.get(arg), arg + 1, "pack")?;
                arg += 1;
                let mut v: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut buf = vec![0u8; size];
                for i in 0..size {
                    let at = if h.big { size - 1 - i } else { i };
                    buf[at] = (v & 0xff) as u8;
                    v >>= 8;
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let x = number(lua, args.get(arg), arg + 1, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    x.to_be_bytes()
                } else {
                    x.to_le_bytes()
                });
            }
            b'd' => {
                let x = number(lua, args.get(arg), arg + 1, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    x.to_be_bytes()
                } else {
                    x.to_le_bytes()
                });
            }
            b'c' | b's' => {
                let s = string(lua, args.get(arg), arg + 1, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(arg_error(arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, &mut h, "pack")?,
        }
    }
    Ok(out)
}

fn unpack(lua: &Lua, args: &[Value]) -> mlua::Result<MultiValue> {
    let fmt = string(lua, args.first(), 1, "unpack")?;
    let data = string(lua, args.get(1), 2, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        v => number(lua, v, 3, "unpack")?,
    };
    let ld = data.len();
    let start = start as i64;
    if start < 1 || (start - 1) as usize > ld {
        return Err(arg_error(3, "unpack", "offset must be 1 or greater"));
    }
    let mut pos = (start - 1) as usize;
    let mut f = Fmt { s: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut out: Vec<Value> = Vec::new();
    let short = || arg_error(2, "unpack", "data string too short");
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos += to_align(pos, &h, opt, size);
        if size > ld || pos > ld - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let bytes = &data[pos..pos + size];
                let mut l: u64 = 0;
                for i in 0..size {
                    let b = if h.big { bytes[i] } else { bytes[size - 1 - i] };
                    l = (l << 8) | u64::from(b);
                }
                let v = if opt.is_ascii_lowercase() {
                    let mask = u64::MAX.checked_shl((size * 8).saturating_sub(1) as u32);
                    match mask {
                        Some(m) if size > 0 && l & m != 0 => (l | m) as i64 as f64,
                        _ => l as i64 as f64,
                    }
                } else {
                    l as f64
                };
                out.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let x = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                out.push(Value::Number(f64::from(x)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let x = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                out.push(Value::Number(x));
            }
            b'c' => {
                if size == 0 {
                    let prev = match out.last() {
                        Some(v) => lua.coerce_number(v.clone())?,
                        None => None,
                    };
                    let Some(n) = prev else {
                        return Err(rt("format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = if n > 0.0 { n as usize } else { 0 };
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(e) = memchr::memchr(0, &data[pos..]) else {
                    return Err(rt("unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + e])?));
                size = e + 1;
            }
            _ => f.control(opt, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(lua: &Lua, args: &[Value]) -> mlua::Result<usize> {
    let fmt = string(lua, args.first(), 1, "size")?;
    let mut f = Fmt { s: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(1, "size", "option 's' has no fixed size"));
        }
        if opt == b'c' && size == 0 {
            return Err(arg_error(1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos)
}

/// The `struct` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "pack",
        lua.create_function(|lua, a: Variadic<Value>| Ok(mlua::BString::from(pack(lua, &a)?)))?,
    )?;
    t.raw_set(
        "unpack",
        lua.create_function(|lua, a: Variadic<Value>| unpack(lua, &a))?,
    )?;
    t.raw_set(
        "size",
        lua.create_function(|lua, a: Variadic<Value>| size(lua, &a))?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .raw_set("struct", table(&lua).unwrap())
            .unwrap();
        lua
    }

    fn s(code: &str) -> String {
        let lua = lua();
        let v = lua
            .load(code)
            .eval::<MultiValue>()
            .unwrap_or_else(|e| panic!("{code}: {e}"));
        v.iter()
            .map(|x| match x {
                Value::String(s) => format!("{:?}", s.as_bytes().to_vec()),
                Value::Number(n) => n.to_string(),
                Value::Integer(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    fn e(code: &str) -> String {
        let lua = lua();
        let r = lua.load(code).eval::<MultiValue>();
        r.expect_err(code).to_string()
    }

    #[test]
    fn pack_integers_and_endianness() {
        assert_eq!(s("return struct.pack('>I2', 258)"), "[1, 2]");
        assert_eq!(s("return struct.pack('<I2', 258)"), "[2, 1]");
        assert_eq!(s("return struct.pack('b', -1)"), "[255]");
        assert_eq!(s("return struct.pack('>i3', -2)"), "[255, 255, 254]");
        assert_eq!(s("return struct.pack('>l', 1)"), "[0, 0, 0, 0, 0, 0, 0, 1]");
        assert_eq!(
            s("return struct.pack('<h', '7')"),
            "[7, 0]",
            "numeric strings"
        );
    }

    #[test]
    fn alignment_strings_and_floats() {
        // Default alignment 1: no padding; `!4` pads the int to a 4-byte boundary.
        assert_eq!(s("return struct.pack('bI', 1, 2)"), "[1, 2, 0, 0, 0]");
        assert_eq!(
            s("return struct.pack('!4bI', 1, 2)"),
            "[1, 0, 0, 0, 2, 0, 0, 0]"
        );
        assert_eq!(s("return struct.size('!4bI')"), "8");
        assert_eq!(s("return struct.size('!bd')"), "16");
        assert_eq!(s("return struct.pack('s', 'ab')"), "[97, 98, 0]");
        assert_eq!(s("return struct.pack('c3', 'abcd')"), "[97, 98, 99]");
        assert_eq!(s("return struct.pack('c0', 'abcd')"), "[97, 98, 99, 100]");
        assert_eq!(s("return struct.pack('xb', 5)"), "[0, 5]");
        assert_eq!(
            s("return struct.unpack('<d', struct.pack('<d', 1.5))"),
            "1.5,9"
        );
        assert_eq!(
            s("return struct.unpack('>f', struct.pack('>f', 0.25))"),
            "0.25,5"
        );
    }

    #[test]
    fn unpack_round_trips_and_positions() {
        assert_eq!(
            s("return struct.unpack('>I2i2', struct.pack('>I2i2', 65535, -3))"),
            "65535,-3,5"
        );
        assert_eq!(s("return struct.unpack('s', 'hi\\0rest')"), "[104, 105],4");
        assert_eq!(s("return struct.unpack('B', 'abc', 2)"), "98,3");
        assert_eq!(
            s("return struct.unpack('Bc0', struct.pack('Bc0', 3, 'xyz'))"),
            "[120, 121, 122],5"
        );
        assert_eq!(s("return struct.unpack('xB', 'ab')"), "98,3");
    }

    #[test]
    fn errors_match_struct_c() {
        assert!(e("return struct.pack('q', 1)")
            .contains("bad argument #1 to 'pack' (invalid format option 'q')"));
        assert!(e("return struct.pack('i33', 1)")
            .contains("integral size 33 is larger than limit of 32"));
        assert!(e("return struct.pack('!3b', 1)").contains("alignment 3 is not a power of 2"));
        assert!(e("return struct.pack('c5', 'ab')").contains("string too short"));
        assert!(e("return struct.pack('I')")
            .contains("bad argument #2 to 'pack' (number expected, got nil)"));
        assert!(e("return struct.unpack('I', 'ab')")
            .contains("bad argument #2 to 'unpack' (data string too short)"));
        assert!(e("return struct.unpack('s', 'ab')").contains("unfinished string in data"));
        assert!(e("return struct.unpack('c0', 'ab')").contains("format 'c0' needs a previous size"));
        assert!(e("return struct.unpack('B', 'ab', 0)").contains("offset must be 1 or greater"));
        assert!(e("return struct.size('s')").contains("option 's' has no fixed size"));
        assert!(e("return struct.size('c0')").contains("option 'c0' has no fixed size"));
        assert!(e("return struct.pack('i99999999999', 1)").contains("integral size overflow"));
    }
}
