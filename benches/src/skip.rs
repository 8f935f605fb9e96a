//! A minimal RESP2/RESP3 reply *skipper*.
//!
//! The load generator does not need reply values, only where each reply ends and
//! whether it is an error, so instead of building frames it walks the bytes, counting
//! the elements still owed by aggregates, and allocates nothing. It must cost far less
//! than the server's own parsing, or the generator becomes the bottleneck.

use memchr::memchr;

/// Where one complete reply ends, and whether it was an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Bytes taken by the whole reply, from its type byte to its last CRLF.
    pub len: usize,
    /// For a top-level error (`-` simple or `!` blob), the byte range of its message.
    pub error: Option<(usize, usize)>,
}

/// Largest bulk length accepted (Redis's own proto-max-bulk-len default).
const MAX_BULK: i64 = 512 * 1024 * 1024;

/// Finds the end of the first reply in `buf`.
///
/// Returns `Ok(None)` when `buf` holds only part of a reply (read more and call again
/// with the same start), `Ok(Some(reply))` when a whole reply is there, and `Err` when
/// the bytes are not RESP.
pub fn skip_reply(buf: &[u8]) -> Result<Option<Reply>, String> {
    let mut pos = 0usize;
    let mut pending: u64 = 1;
    let mut error = None;
    while pending > 0 {
        let Some(&kind) = buf.get(pos) else {
            return Ok(None);
        };
        let line_start = pos + 1;
        let Some(cr) = memchr(b'\r', &buf[line_start..]) else {
            return Ok(None);
        };
        let cr = line_start + cr;
        match buf.get(cr + 1) {
            None => return Ok(None),
            Some(b'\n') => {}
            Some(_) => return Err(format!("bare CR in a {:?} line", kind as char)),
        }
        let line = &buf[line_start..cr];
        pos = cr + 2;
        pending -= 1;
        match kind {
            b'+' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'-' => {
                if line_start == 1 {
                    error = Some((line_start, cr));
                }
            }
            b'$' | b'!' | b'=' => {
                let n = parse_int(line)?;
                if n < 0 {
                    if n != -1 {
                        return Err(format!("bad bulk length {n}"));
                    }
                    continue;
                }
                if n > MAX_BULK {
                    return Err(format!("bulk length {n} too large"));
                }
                let n = n as usize;
                if buf.len() < pos + n + 2 {
                    return Ok(None);
                }
                if &buf[pos + n..pos + n + 2] != b"\r\n" {
                    return Err("bulk string not followed by CRLF".into());
                }
                if kind == b'!' && line_start == 1 {
                    error = Some((pos, pos + n));
                }
                pos += n + 2;
            }
            b'*' | b'~' | b'>' => {
                let n = parse_int(line)?;
                if n > 0 {
                    pending += n as u64;
                } else if n < -1 {
                    return Err(format!("bad aggregate length {n}"));
                }
            }
            b'%' | b'|' => {
                let n = parse_int(line)?;
                if n < 0 {
                    return Err(format!("bad map length {n}"));
                }
                pending += 2 * n as u64;
                if kind == b'|' {
                    // An attribute map precedes the value it annotates.
                    pending += 1;
                }
            }
            other => return Err(format!("unknown RESP type byte {other:#04x}")),
        }
    }
    Ok(Some(Reply { len: pos, error }))
}

/// Parses a RESP length or integer line.
fn parse_int(line: &[u8]) -> Result<i64, String> {
    let (neg, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 18 {
        return Err(format!("bad length {:?}", String::from_utf8_lossy(line)));
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(format!("bad length {:?}", String::from_utf8_lossy(line)));
        }
        n = n * 10 + (d - b'0') as i64;
    }
    Ok(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every prefix of `wire` shorter than the reply must read as incomplete, and the
    /// whole must read as one reply of exactly `wire.len()` bytes, even with trailing data.
    fn check_split(wire: &[u8], want_error: Option<&str>) {
        for cut in 0..wire.len() {
            assert_eq!(
                skip_reply(&wire[..cut]).unwrap(),
                None,
                "prefix of {cut} bytes of {:?}",
                String::from_utf8_lossy(wire)
            );
        }
        let mut with_tail = wire.to_vec();
        with_tail.extend_from_slice(b"+NEXT\r\n");
        for buf in [wire, &with_tail[..]] {
            let r = skip_reply(buf).unwrap().expect("complete");
            assert_eq!(r.len, wire.len());
            let msg = r
                .error
                .map(|(a, b)| std::str::from_utf8(&buf[a..b]).unwrap());
            assert_eq!(msg, want_error);
        }
    }

    #[test]
    fn simple_replies_split_anywhere() {
        check_split(b"+OK\r\n", None);
        check_split(b":12345\r\n", None);
        check_split(b"$-1\r\n", None);
        check_split(b"$0\r\n\r\n", None);
        check_split(b"$5\r\nhe\r\no\r\n", None);
        check_split(b"_\r\n", None);
        check_split(b",3.5\r\n", None);
        check_split(b"#t\r\n", None);
        check_split(b"(123456789012345678901\r\n", None);
    }

    #[test]
    fn errors_are_reported() {
        check_split(
            b"-ERR unknown command 'FOO'\r\n",
            Some("ERR unknown command 'FOO'"),
        );
        check_split(b"!9\r\nERR a\r\nb!\r\n", Some("ERR a\r\nb!"));
        // An error nested in an array (e.g. EXEC) is not a top-level error.
        check_split(b"*2\r\n+OK\r\n-ERR x\r\n", None);
    }

    #[test]
    fn aggregates_split_anywhere() {
        check_split(b"*3\r\n$3\r\nabc\r\n$-1\r\n:7\r\n", None);
        check_split(b"*-1\r\n", None);
        check_split(b"*0\r\n", None);
        check_split(b"*2\r\n*2\r\n+a\r\n+b\r\n*1\r\n$1\r\nc\r\n", None);
        check_split(b"%2\r\n+k\r\n:1\r\n+k2\r\n*1\r\n:2\r\n", None);
        check_split(b"~2\r\n+a\r\n+b\r\n", None);
        check_split(b">2\r\n+message\r\n+x\r\n", None);
        check_split(b"|1\r\n+ttl\r\n:3\r\n+OK\r\n", None);
    }

    #[test]
    fn pipelined_replies_walk_one_by_one() {
        let wire = b"+OK\r\n$2\r\nhi\r\n-ERR no\r\n:1\r\n";
        let mut at = 0;
        let mut lens = vec![];
        while let Some(r) = skip_reply(&wire[at..]).unwrap() {
            lens.push((r.len, r.error.is_some()));
            at += r.len;
        }
        assert_eq!(lens, vec![(5, false), (8, false), (9, true), (4, false)]);
        assert_eq!(at, wire.len());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(skip_reply(b"?x\r\n").is_err());
        assert!(skip_reply(b"$abc\r\n").is_err());
        assert!(skip_reply(b"$2\r\nabcd\r\n").is_err());
        assert!(skip_reply(b"+a\rb\r\n").is_err());
        assert!(skip_reply(b"*-5\r\n").is_err());
    }

    /// Replies of the shapes the benchmark receives, pipelined 30 deep.
    fn pipelined_corpus() -> Vec<(&'static str, Vec<u8>)> {
        let v = "v".repeat(256);
        let bulk = format!("${}\r\n{v}\r\n", v.len());
        let mget = format!("*8\r\n{}$-1\r\n", bulk.repeat(7));
        [
            ("GET", bulk),
            ("MGET", mget),
            ("SET", "+OK\r\n".to_string()),
            ("INCR", ":123456\r\n".to_string()),
        ]
        .into_iter()
        .map(|(n, one)| (n, one.repeat(30).into_bytes()))
        .collect()
    }

    #[test]
    fn agrees_with_resp_parse_frame() {
        let limits = resp::Limits::default();
        let mut wires: Vec<Vec<u8>> = vec![
            b"+OK\r\n".to_vec(),
            b"-ERR unknown command 'X'\r\n".to_vec(),
            b":-7\r\n".to_vec(),
            b"$-1\r\n".to_vec(),
            b"*-1\r\n".to_vec(),
            b"*3\r\n$3\r\nabc\r\n$-1\r\n:7\r\n".to_vec(),
            b"*2\r\n*2\r\n+a\r\n+b\r\n*1\r\n$1\r\nc\r\n".to_vec(),
            b"%1\r\n+k\r\n*1\r\n:2\r\n".to_vec(),
            b"~2\r\n+a\r\n+b\r\n".to_vec(),
            b"!5\r\nERR x\r\n".to_vec(),
            b"=8\r\ntxt:abcd\r\n".to_vec(),
            b"|1\r\n+ttl\r\n:3\r\n+OK\r\n".to_vec(),
            b"_\r\n#f\r\n,1.5\r\n".to_vec(),
        ];
        wires.extend(pipelined_corpus().into_iter().map(|(_, w)| w));
        for wire in wires {
            let mut at = 0;
            while at < wire.len() {
                let (frame, n) = resp::parse_frame(&wire[at..], &limits).unwrap().unwrap();
                let r = skip_reply(&wire[at..]).unwrap().unwrap();
                assert_eq!(r.len, n, "{:?}", String::from_utf8_lossy(&wire[at..]));
                let is_err = matches!(frame, resp::Frame::Error(_) | resp::Frame::BlobError(_));
                assert_eq!(r.error.is_some(), is_err, "{frame:?}");
                for cut in 0..n {
                    assert!(skip_reply(&wire[at..at + cut]).unwrap().is_none());
                    assert!(resp::parse_frame(&wire[at..at + cut], &limits)
                        .unwrap()
                        .is_none());
                }
                at += n;
            }
        }
    }

    /// `cargo test --release -p ember-benches -- --ignored --nocapture skipper_speed`
    #[test]
    #[ignore = "timing, run by hand"]
    fn skipper_speed() {
        use std::time::Instant;
        let limits = resp::Limits::default();
        for (name, wire) in pipelined_corpus() {
            let rounds = 20_000;
            let t = Instant::now();
            let mut count = 0u64;
            for _ in 0..rounds {
                let mut at = 0;
                while let Some(r) = skip_reply(std::hint::black_box(&wire[at..])).unwrap() {
                    at += r.len;
                    count += 1;
                }
            }
            let skip_ns = t.elapsed().as_nanos() as f64 / count as f64;
            let t = Instant::now();
            let mut count = 0u64;
            for _ in 0..rounds {
                let mut at = 0;
                while let Some((_, n)) =
                    resp::parse_frame(std::hint::black_box(&wire[at..]), &limits).unwrap()
                {
                    at += n;
                    count += 1;
                }
            }
            let parse_ns = t.elapsed().as_nanos() as f64 / count as f64;
            println!(
                "{name:5} reply: skip_reply {skip_ns:6.1} ns, resp::parse_frame {parse_ns:6.1} ns"
            );
        }
    }
}
