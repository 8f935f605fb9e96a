//! Redis glob-style pattern matching (`stringmatchlen` in Redis's util.c).
//!
//! Supports `*`, `?`, `[abc]`, `[^abc]`, `[a-z]` and `\` escapes, optionally case-insensitive.
//! Recursion on `*` is bounded so that hostile patterns cannot exhaust the stack or CPU.

/// True when `string` matches the glob `pattern`.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, nocase, &mut skip_longer, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn match_impl(
    mut p: &[u8],
    mut s: &[u8],
    nocase: bool,
    skip_longer: &mut bool,
    nesting: usize,
) -> bool {
    // Same bound as Redis: a pattern with many stars could otherwise recurse deeply.
    if nesting > 1000 {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_impl(&p[1..], s, nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s = &s[1..];
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if eq(p[0], s[0], nocase) {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut start, mut end) = (p[0], p[2]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = if nocase {
                            s[0].to_ascii_lowercase()
                        } else {
                            s[0]
                        };
                        let (st, en) = if nocase {
                            (start.to_ascii_lowercase(), end.to_ascii_lowercase())
                        } else {
                            (start, end)
                        };
                        p = &p[2..];
                        if c >= st && c <= en {
                            matched = true;
                        }
                    } else if eq(p[0], s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if p.is_empty() {
                    // Unterminated class: Redis treats the end of the pattern as the end of the class.
                    let m = if not { !matched } else { matched };
                    if !m {
                        return false;
                    }
                    s = &s[1..];
                    return s.is_empty();
                }
                let m = if not { !matched } else { matched };
                if !m {
                    return false;
                }
                s = &s[1..];
            }
            b'\\' if p.len() >= 2 => {
                p = &p[1..];
                if !eq(p[0], s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        p = &p[1..];
        if s.is_empty() {
            while !p.is_empty() && p[0] == b'*' {
                p = &p[1..];
            }
            break;
        }
    }
    if s.is_empty() {
        while p.first() == Some(&b'*') {
            p = &p[1..];
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn basics() {
        assert!(m("*", "anything"));
        assert!(m("*", ""));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(m("h\\*llo", "h*llo"));
        assert!(!m("h\\*llo", "hello"));
        assert!(m("key:*", "key:1"));
        assert!(!m("key:*", "kex:1"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(glob_match(b"HELLO", b"hello", true));
        assert!(!glob_match(b"HELLO", b"hello", false));
    }

    #[test]
    fn hostile_patterns_terminate() {
        let p = "*a".repeat(2000) + "b";
        let s = "a".repeat(3000);
        assert!(!m(&p, &s));
        assert!(!m("[", "a") || m("[", "a"));
        assert!(!m("[a-", "b"));
    }
}
