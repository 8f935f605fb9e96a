//! Compiles arbitrary bytes as a vector-set FILTER expression and, when it compiles,
//! evaluates it against a few JSON attribute objects (and none). The first byte picks
//! how the rest splits into expression and attributes. No panic, no unbounded recursion.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vector::Filter;

const ATTRS: &[&str] = &[
    r#"{"year": 1984, "genre": "drama", "rating": 7.5, "ok": true, "tags": ["a", "b"], "n": null}"#,
    r#"{"a": -1e308, "b": "10", "c": [1, [2]], "d": {"e": 1}}"#,
    "[1, 2]",
    "not json",
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // Either the whole input is the expression, or it ends at the first NUL and the rest
    // is one more attribute text to evaluate against.
    let (expr, extra) = if sel & 1 == 0 {
        (rest, None)
    } else {
        match rest.iter().position(|&b| b == 0) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        }
    };
    match Filter::compile(expr) {
        Ok(f) => {
            for a in ATTRS {
                let _ = f.matches(Some(a));
            }
            let _ = f.matches(None);
            let _ = f.matches_bytes(extra);
        }
        Err(e) => assert!(e.pos <= expr.len()),
    }
});
