//! LZF (de)compression, as Redis uses for long strings in RDB files and DUMP payloads.
//!
//! The format is liblzf's: a literal run is `000LLLLL` followed by `L + 1` bytes; a back
//! reference is `LLLOOOOO [LLLLLLLL] OOOOOOOO`: length `L + 2` (an extra length byte when
//! the 3-bit field is 7), offset `O + 1` back from the output position.

/// Decompresses `input` into exactly `out_len` bytes; `None` when the data is malformed
/// or does not produce exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len.min(input.len().saturating_mul(64) + 64));
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n)?;
            if out.len() + n > out_len {
                return None;
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(i)?);
                i += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(i)?) + 1;
            i += 1;
            if back > out.len() || out.len() + len > out_len {
                return None;
            }
            let start = out.len() - back;
            for k in 0..len {
                let b = out[start + k];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

const HLOG: u32 = 14;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

fn hash3(b: &[u8]) -> usize {
    let v = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
    (v.wrapping_mul(2_654_435_761) >> (32 - HLOG)) as usize
}

/// Compresses `input`; `None` when the result would not be smaller than the input
/// (Redis then stores the string as is).
pub fn compress(input: &[u8]) -> Option<Vec<u8>> {
    let n = input.len();
    if n < 4 {
        return None;
    }
    let mut table = vec![usize::MAX; 1 << HLOG];
    let mut out: Vec<u8> = Vec::with_capacity(n);
    let mut lit_start = 0usize;
    let mut i = 0usize;
    let flush_lits = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut s = from;
        while s < to {
            let run = (to - s).min(32);
            out.push((run - 1) as u8);
            out.extend_from_slice(&input[s..s + run]);
            s += run;
        }
    };
    while i + 2 < n {
        let h = hash3(&input[i..]);
        let cand = table[h];
        table[h] = i;
        if cand != usize::MAX && i - cand <= MAX_OFF && input[cand..cand + 3] == input[i..i + 3] {
            let max = (n - i).min(MAX_REF);
            let mut len = 3;
            while len < max && input[cand + len] == input[i + len] {
                len += 1;
            }
            flush_lits(&mut out, lit_start, i);
            let off = i - cand - 1;
            let l = len - 2;
            if l < 7 {
                out.push(((l << 5) | (off >> 8)) as u8);
            } else {
                out.push(((7 << 5) | (off >> 8)) as u8);
                out.push((l - 7) as u8);
            }
            out.push(off as u8);
            i += len;
            lit_start = i;
            if out.len() >= n {
                return None;
            }
        } else {
            i += 1;
        }
    }
    flush_lits(&mut out, lit_start, n);
    (out.len() < n).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let inputs: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"hello world hello world hello world, said the hello world program".to_vec(),
            (0..10_000u32).map(|i| (i % 251) as u8).collect(),
            (0..5000u32)
                .flat_map(|i| format!("key:{i},").into_bytes())
                .collect(),
        ];
        for inp in inputs {
            let c = compress(&inp).expect("compressible");
            assert!(c.len() < inp.len());
            assert_eq!(decompress(&c, inp.len()).unwrap(), inp);
        }
    }

    #[test]
    fn incompressible_and_bad_input() {
        let mut x = 12345u64;
        let rnd: Vec<u8> = (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(compress(&rnd).is_none());
        assert!(decompress(&[0x20, 0x00], 3).is_none()); // back reference before start
        assert!(decompress(&[0x05, b'a'], 6).is_none()); // short literal
        assert!(decompress(&[0x00, b'a'], 2).is_none()); // wrong length
    }

    #[test]
    fn decodes_long_back_references() {
        // Hand-assembled: literal "a", a 23-byte and a 3-byte back reference at offset 1.
        let c = [0x00, b'a', 0xe0, 0x0e, 0x00, 0x20, 0x00];
        let d = decompress(&c, 1 + 23 + 3);
        assert_eq!(d.unwrap(), vec![b'a'; 27]);
    }
}
