//! FILTER expressions over JSON attributes, with Redis 8 vector sets' syntax and semantics
//! (`modules/vector-sets/expr.c`): `.year > 1990 and .genre == "drama"`.
//!
//! - Values: numbers, strings (`"..."` or `'...'`, backslash escapes the next character),
//!   tuples (`[1, "a"]`, for `in`), `null`, `true`/`false` (1 and 0), and selectors (`.field`:
//!   a top-level field of the element's JSON object).
//! - Operators, loosest first: `or ||`; `and &&`; `> >= < <= == != in`; `+ -`; `* / %`;
//!   `**` (right associative); `not !` (prefix). Parentheses group.
//! - Arithmetic and ordering compare numbers (a string that is a number counts as one, any
//!   other string as 0); `==` compares strings as strings, numbers as numbers, `null` only
//!   equals `null`. JSON `true`/`false` are 1/0, JSON arrays are tuples.
//! - A selector naming a missing field (or an object, or no JSON at all) makes the whole
//!   expression false for that element, as in Redis.

use serde_json::Value as Json;

/// Deepest nesting of parentheses and prefix operators an expression may have.
const MAX_DEPTH: usize = 200;

/// A compile error: the byte offset in the expression where it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Byte offset of the offending token (0 when unknown).
    pub pos: usize,
}

/// A compiled FILTER expression.
#[derive(Clone, Debug)]
pub struct Filter {
    root: Node,
    /// Whether the expression reads any selector (a constant expression needs no JSON).
    uses_fields: bool,
}

#[derive(Clone, Debug, PartialEq)]
enum Val {
    Num(f64),
    Str(String),
    Tuple(Vec<Val>),
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Or,
    And,
    Gt,
    Gte,
    Lt,
    Lte,
    Eq,
    Neq,
    In,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

impl Op {
    fn precedence(self) -> u8 {
        match self {
            Op::Or => 0,
            Op::And => 1,
            Op::Gt | Op::Gte | Op::Lt | Op::Lte | Op::Eq | Op::Neq | Op::In => 2,
            Op::Add | Op::Sub => 3,
            Op::Mul | Op::Div | Op::Mod => 4,
            Op::Pow => 5,
        }
    }
}

#[derive(Clone, Debug)]
enum Node {
    Lit(Val),
    Field(String),
    Not(Box<Node>),
    Bin(Op, Box<Node>, Box<Node>),
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Val(Val),
    Field(String),
    Bin(Op),
    Not,
    Open,
    Close,
}

/// The token list with each token's byte offset.
struct Lexer<'a> {
    s: &'a [u8],
    p: usize,
    toks: Vec<(Tok, usize)>,
}

fn is_selector_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

const OP_CHARS: &[u8] = b"+-*%/!()<>=|&";

impl<'a> Lexer<'a> {
    fn skip_spaces(&mut self) {
        while self.p < self.s.len() && self.s[self.p].is_ascii_whitespace() {
            self.p += 1;
        }
    }

    fn peek(&self, off: usize) -> u8 {
        self.s.get(self.p + off).copied().unwrap_or(0)
    }

    /// Whether a `-` here starts a number (at the start, or after an operator other than `)`).
    fn minus_is_number(&self) -> bool {
        matches!(
            self.toks.last(),
            None | Some((Tok::Bin(_) | Tok::Not | Tok::Open, _))
        )
    }

    fn number(&mut self) -> Option<f64> {
        let start = self.p;
        while self.p < self.s.len() {
            let c = self.s[self.p];
            let ok = c.is_ascii_digit()
                || c == b'.'
                || c == b'e'
                || c == b'E'
                || (self.p == start && c == b'-')
                // an exponent's sign: 1e-5, 2E+3
                || ((c == b'-' || c == b'+')
                    && self.p > start
                    && matches!(self.s[self.p - 1], b'e' | b'E'));
            if !ok || self.p - start >= 255 {
                break;
            }
            self.p += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.p]).ok()?;
        let v: f64 = text.parse().ok()?;
        Some(v)
    }

    fn string(&mut self) -> Option<String> {
        let quote = self.s[self.p];
        self.p += 1;
        let mut out = Vec::new();
        while self.p < self.s.len() {
            let c = self.s[self.p];
            if c == b'\\' && self.p + 1 < self.s.len() {
                out.push(self.s[self.p + 1]);
                self.p += 2;
                continue;
            }
            if c == quote {
                self.p += 1;
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
            out.push(c);
            self.p += 1;
        }
        None
    }

    fn tuple(&mut self) -> Option<Vec<Val>> {
        self.p += 1; // '['
        let mut v = Vec::new();
        loop {
            self.skip_spaces();
            if self.peek(0) == b']' {
                self.p += 1;
                return Some(v);
            }
            let c = self.peek(0);
            if c.is_ascii_digit() || c == b'-' {
                v.push(Val::Num(self.number()?));
            } else if c == b'"' || c == b'\'' {
                v.push(Val::Str(self.string()?));
            } else {
                return None;
            }
            self.skip_spaces();
            match self.peek(0) {
                b']' => {
                    self.p += 1;
                    return Some(v);
                }
                b',' => self.p += 1,
                _ => return None,
            }
        }
    }

    /// An operator or a word literal (`null`, `true`, `false`): the longest operator that
    /// prefixes the run of letters and operator characters here.
    fn operator_or_word(&mut self) -> Option<Tok> {
        let start = self.p;
        let mut end = self.p;
        let run_char = |c: u8| c.is_ascii_alphabetic() || OP_CHARS.contains(&c);
        // Operators are at most 3 characters and words 5: look no further (keeps long runs
        // like "((((((" linear).
        while end < self.s.len() && end - start < 6 && run_char(self.s[end]) {
            end += 1;
        }
        let whole_run = end == self.s.len() || !run_char(self.s[end]);
        let run = &self.s[start..end];
        for (word, val) in [
            (&b"null"[..], Val::Null),
            (&b"true"[..], Val::Num(1.0)),
            (&b"false"[..], Val::Num(0.0)),
        ] {
            if run == word && whole_run {
                self.p = end;
                return Some(Tok::Val(val));
            }
        }
        const TABLE: &[(&str, Option<Op>, u8)] = &[
            // (text, binary op, special: 0 = binary, 1 = not, 2 = '(', 3 = ')')
            ("(", None, 2),
            (")", None, 3),
            ("!", None, 1),
            ("not", None, 1),
            ("**", Some(Op::Pow), 0),
            ("*", Some(Op::Mul), 0),
            ("/", Some(Op::Div), 0),
            ("%", Some(Op::Mod), 0),
            ("+", Some(Op::Add), 0),
            ("-", Some(Op::Sub), 0),
            (">", Some(Op::Gt), 0),
            (">=", Some(Op::Gte), 0),
            ("<", Some(Op::Lt), 0),
            ("<=", Some(Op::Lte), 0),
            ("==", Some(Op::Eq), 0),
            ("!=", Some(Op::Neq), 0),
            ("in", Some(Op::In), 0),
            ("and", Some(Op::And), 0),
            ("&&", Some(Op::And), 0),
            ("or", Some(Op::Or), 0),
            ("||", Some(Op::Or), 0),
        ];
        let mut best: Option<(usize, Tok)> = None;
        for &(text, op, kind) in TABLE {
            let t = text.as_bytes();
            if run.starts_with(t) && best.as_ref().is_none_or(|(l, _)| t.len() > *l) {
                let tok = match (kind, op) {
                    (1, _) => Tok::Not,
                    (2, _) => Tok::Open,
                    (3, _) => Tok::Close,
                    (_, Some(op)) => Tok::Bin(op),
                    _ => continue,
                };
                best = Some((t.len(), tok));
            }
        }
        let (len, tok) = best?;
        self.p = start + len;
        Some(tok)
    }

    fn run(mut self) -> Result<Vec<(Tok, usize)>, SyntaxError> {
        loop {
            self.skip_spaces();
            if self.p >= self.s.len() {
                return Ok(self.toks);
            }
            let at = self.p;
            let c = self.s[self.p];
            let tok = if c.is_ascii_digit()
                || (c == b'-' && self.minus_is_number() && self.peek(1).is_ascii_digit())
            {
                self.number().map(|n| Tok::Val(Val::Num(n)))
            } else if c == b'"' || c == b'\'' {
                self.string().map(|s| Tok::Val(Val::Str(s)))
            } else if c == b'.' && is_selector_char(self.peek(1)) {
                self.p += 1;
                let start = self.p;
                while self.p < self.s.len() && is_selector_char(self.s[self.p]) {
                    self.p += 1;
                }
                Some(Tok::Field(
                    String::from_utf8_lossy(&self.s[start..self.p]).into_owned(),
                ))
            } else if c == b'[' {
                self.tuple().map(|t| Tok::Val(Val::Tuple(t)))
            } else if c.is_ascii_alphabetic() || OP_CHARS.contains(&c) {
                self.operator_or_word()
            } else {
                None
            };
            match tok {
                Some(t) => self.toks.push((t, at)),
                None => {
                    return Err(SyntaxError {
                        pos: self.p.min(self.s.len()),
                    })
                }
            }
        }
    }
}

/// Precedence-climbing parser over the token list.
struct Parser {
    toks: Vec<(Tok, usize)>,
    i: usize,
    end: usize,
    uses_fields: bool,
}

impl Parser {
    fn err_here(&self) -> SyntaxError {
        SyntaxError {
            pos: self.toks.get(self.i).map_or(self.end, |t| t.1),
        }
    }

    /// A value, a field, a negation or a parenthesised expression, with its tree height.
    fn primary(&mut self, depth: usize) -> Result<(Node, usize), SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.err_here());
        }
        let Some((tok, _)) = self.toks.get(self.i).cloned() else {
            return Err(self.err_here());
        };
        match tok {
            Tok::Val(v) => {
                self.i += 1;
                Ok((Node::Lit(v), 1))
            }
            Tok::Field(f) => {
                self.i += 1;
                self.uses_fields = true;
                Ok((Node::Field(f), 1))
            }
            Tok::Not => {
                self.i += 1;
                // `not` binds tighter than every binary operator.
                let (inner, h) = self.primary(depth + 1)?;
                Ok((Node::Not(Box::new(inner)), h + 1))
            }
            Tok::Open => {
                self.i += 1;
                let inner = self.expr(0, depth + 1)?;
                match self.toks.get(self.i) {
                    Some((Tok::Close, _)) => {
                        self.i += 1;
                        Ok(inner)
                    }
                    _ => Err(self.err_here()),
                }
            }
            Tok::Bin(_) | Tok::Close => Err(self.err_here()),
        }
    }

    /// Binary operators binding at least as tight as `min_prec`, with the tree height
    /// (bounded by [`MAX_DEPTH`] so evaluation and drop never recurse deeply).
    fn expr(&mut self, min_prec: u8, depth: usize) -> Result<(Node, usize), SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.err_here());
        }
        let (mut lhs, mut h) = self.primary(depth + 1)?;
        while let Some((Tok::Bin(op), _)) = self.toks.get(self.i) {
            let op = *op;
            let prec = op.precedence();
            if prec < min_prec {
                break;
            }
            self.i += 1;
            let next_min = if op == Op::Pow { prec } else { prec + 1 };
            let (rhs, rh) = self.expr(next_min, depth + 1)?;
            h = h.max(rh) + 1;
            if h > MAX_DEPTH {
                return Err(self.err_here());
            }
            lhs = Node::Bin(op, Box::new(lhs), Box::new(rhs));
        }
        Ok((lhs, h))
    }
}

impl Filter {
    /// Compiles `expr`; on a syntax error, the byte offset where it was found.
    pub fn compile(expr: &[u8]) -> Result<Filter, SyntaxError> {
        let toks = Lexer {
            s: expr,
            p: 0,
            toks: Vec::new(),
        }
        .run()?;
        let mut p = Parser {
            toks,
            i: 0,
            end: expr.len(),
            uses_fields: false,
        };
        let (root, _) = p.expr(0, 0)?;
        if p.i != p.toks.len() {
            return Err(p.err_here());
        }
        Ok(Filter {
            root,
            uses_fields: p.uses_fields,
        })
    }

    /// [`Filter::matches`] over attribute bytes (invalid UTF-8 or JSON: no match unless the
    /// expression reads no field).
    pub fn matches_bytes(&self, attrs: Option<&[u8]>) -> bool {
        if !self.uses_fields {
            return self.matches(None);
        }
        match attrs.map(std::str::from_utf8) {
            Some(Ok(s)) => self.matches(Some(s)),
            _ => false,
        }
    }

    /// Evaluates the filter against an element's JSON attributes (`None`: the element has
    /// none). True when the element passes.
    pub fn matches(&self, attrs: Option<&str>) -> bool {
        if !self.uses_fields {
            return eval(&self.root, None).is_some_and(|v| truthy(&v));
        }
        let Some(text) = attrs else { return false };
        let Ok(Json::Object(obj)) = serde_json::from_str::<Json>(text) else {
            return false;
        };
        eval(&self.root, Some(&obj)).is_some_and(|v| truthy(&v))
    }
}

/// Whether `s` is a JSON object (what FILTER expressions read fields from).
pub fn is_json_object(s: &str) -> bool {
    matches!(serde_json::from_str::<Json>(s), Ok(Json::Object(_)))
}

/// A JSON value as an expression value (`None`: objects, nested arrays, which make the
/// expression false).
fn from_json(j: &Json, top: bool) -> Option<Val> {
    Some(match j {
        Json::Null => Val::Null,
        Json::Bool(b) => Val::Num(if *b { 1.0 } else { 0.0 }),
        Json::Number(n) => Val::Num(n.as_f64()?),
        Json::String(s) => Val::Str(s.clone()),
        Json::Array(a) if top => Val::Tuple(
            a.iter()
                .map(|x| from_json(x, false))
                .collect::<Option<Vec<_>>>()?,
        ),
        _ => return None,
    })
}

fn to_num(v: &Val) -> f64 {
    match v {
        Val::Num(n) => *n,
        Val::Str(s) => {
            let t = s.as_str();
            // strtod semantics: the whole string must be a number (no surrounding spaces
            // beyond leading ones, which strtod skips).
            let t = t.trim_start();
            if t.is_empty() {
                0.0
            } else {
                t.parse::<f64>().unwrap_or(0.0)
            }
        }
        _ => 0.0,
    }
}

fn truthy(v: &Val) -> bool {
    match v {
        Val::Num(n) => *n != 0.0,
        Val::Str(s) => !s.is_empty(),
        Val::Null => false,
        Val::Tuple(_) => true,
    }
}

fn equal(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::Num(x), Val::Num(y)) => x == y,
        (Val::Null, _) | (_, Val::Null) => matches!((a, b), (Val::Null, Val::Null)),
        _ => to_num(a) == to_num(b),
    }
}

fn eval(n: &Node, obj: Option<&serde_json::Map<String, Json>>) -> Option<Val> {
    Some(match n {
        Node::Lit(v) => v.clone(),
        Node::Field(f) => from_json(obj?.get(f.as_str())?, true)?,
        Node::Not(x) => Val::Num(if truthy(&eval(x, obj)?) { 0.0 } else { 1.0 }),
        Node::Bin(op, a, b) => {
            let a = eval(a, obj)?;
            let b = eval(b, obj)?;
            let bool_num = |x: bool| Val::Num(if x { 1.0 } else { 0.0 });
            match op {
                Op::Or => bool_num(truthy(&a) || truthy(&b)),
                Op::And => bool_num(truthy(&a) && truthy(&b)),
                Op::Gt => bool_num(to_num(&a) > to_num(&b)),
                Op::Gte => bool_num(to_num(&a) >= to_num(&b)),
                Op::Lt => bool_num(to_num(&a) < to_num(&b)),
                Op::Lte => bool_num(to_num(&a) <= to_num(&b)),
                Op::Eq => bool_num(equal(&a, &b)),
                Op::Neq => bool_num(!equal(&a, &b)),
                Op::In => match &b {
                    Val::Tuple(items) => bool_num(items.iter().any(|x| equal(&a, x))),
                    // A substring test when both sides are strings.
                    Val::Str(hay) => match &a {
                        Val::Str(needle) => bool_num(hay.contains(needle.as_str())),
                        _ => bool_num(false),
                    },
                    _ => bool_num(false),
                },
                Op::Add => Val::Num(to_num(&a) + to_num(&b)),
                Op::Sub => Val::Num(to_num(&a) - to_num(&b)),
                Op::Mul => Val::Num(to_num(&a) * to_num(&b)),
                Op::Div => Val::Num(to_num(&a) / to_num(&b)),
                Op::Mod => Val::Num(to_num(&a) % to_num(&b)),
                Op::Pow => Val::Num(to_num(&a).powf(to_num(&b))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(expr: &str, json: &str) -> bool {
        Filter::compile(expr.as_bytes())
            .unwrap_or_else(|e| panic!("{expr}: {e:?}"))
            .matches(Some(json))
    }

    #[test]
    fn comparisons_and_logic() {
        let j = r#"{"year": 1984, "genre": "drama", "rating": 7.5, "ok": true, "tags": ["a", "b"], "n": null}"#;
        assert!(t(".year > 1980 and .genre == \"drama\"", j));
        assert!(!t(".year > 1990 and .genre == \"drama\"", j));
        assert!(t(".year > 1990 or .genre == 'drama'", j));
        assert!(t("not (.year < 1980)", j));
        assert!(t("!(.year < 1980) && .rating >= 7.5", j));
        assert!(t(".year != 1985 || false", j));
        assert!(t(".ok == 1 and .ok", j));
        assert!(t(".ok == true", j));
        assert!(t("\"a\" in .tags", j));
        assert!(!t("\"c\" in .tags", j));
        assert!(t(".genre in [\"drama\", \"comedy\"]", j));
        assert!(t(".year in [1984, 1985]", j));
        assert!(!t(".year in [1, 2]", j));
        assert!(t(".n == null", j));
        assert!(!t(".missing == 1", j), "missing field is false");
        assert!(!t("not .missing", j), "missing field is false even negated");
        assert!(t("\"ram\" in .genre", j), "substring");
    }

    #[test]
    fn arithmetic_and_precedence() {
        let j = r#"{"a": 2, "b": 3, "s": "10"}"#;
        assert!(t(".a + .b * 2 == 8", j));
        assert!(t("(.a + .b) * 2 == 10", j));
        assert!(t("2 ** 3 ** 2 == 512", j), "** is right associative");
        assert!(t(".b % .a == 1", j));
        assert!(t(".s + 1 == 11", j), "numeric strings convert");
        assert!(t("0 - .a + 5 == 3", j));
        assert!(t("5 - -2 == 7", j));
        assert!(t("1e3 == 1000", j));
        assert!(t(".a / 4 == 0.5", j));
        assert!(t("(5+2)*3 and 'foo' == 'foo'", j));
        assert!(t("'it\\'s' == \"it's\"", j));
    }

    #[test]
    fn syntax_errors_have_positions() {
        for bad in [
            "",
            ".year >",
            "(.a == 1",
            ".a == 1)",
            ".a 1",
            "\"open",
            "[1, 2",
            ".a == @",
            "and",
            ".movie.genre == 1",
            "1 ==== 2",
        ] {
            assert!(
                Filter::compile(bad.as_bytes()).is_err(),
                "{bad:?} should fail"
            );
        }
        let e = Filter::compile(b".year > 1990 and @").unwrap_err();
        assert_eq!(e.pos, 17);
    }

    #[test]
    fn no_attributes_or_bad_json() {
        let f = Filter::compile(b".a == 1").unwrap();
        assert!(!f.matches(None));
        assert!(!f.matches(Some("not json")));
        assert!(!f.matches(Some("[1]")));
        assert!(!f.matches(Some(r#"{"a": {"b": 1}}"#)));
        let c = Filter::compile(b"1 + 1 == 2").unwrap();
        assert!(c.matches(None), "constant expression needs no attributes");
    }

    /// A small in-process fuzz: random token soups and random bytes never panic, and errors
    /// point inside the expression.
    #[test]
    fn random_inputs_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        const PIECES: &[&str] = &[
            ".year",
            ".genre",
            ".tags",
            ".n",
            ".x-y_z",
            "1",
            "-2.5",
            "1e3",
            "\"drama\"",
            "'a'",
            "[1, 'a']",
            "[]",
            "null",
            "true",
            "false",
            "and",
            "or",
            "not",
            "!",
            "&&",
            "||",
            "==",
            "!=",
            "<",
            "<=",
            ">",
            ">=",
            "in",
            "+",
            "-",
            "*",
            "/",
            "%",
            "**",
            "(",
            ")",
            " ",
            "@",
            "[",
            "\"",
            ".",
            "e",
        ];
        let json = r#"{"year": 1984, "genre": "drama", "tags": ["a", 1], "n": null}"#;
        for _ in 0..50_000 {
            let n = rng.random_range(0..12);
            let mut e = String::new();
            for _ in 0..n {
                e.push_str(PIECES[rng.random_range(0..PIECES.len())]);
                if rng.random_bool(0.5) {
                    e.push(' ');
                }
            }
            match Filter::compile(e.as_bytes()) {
                Ok(f) => {
                    let _ = f.matches(Some(json));
                    let _ = f.matches(None);
                }
                Err(err) => assert!(err.pos <= e.len(), "{e:?} {err:?}"),
            }
        }
        for _ in 0..20_000 {
            let len = rng.random_range(0..40);
            let b: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            if let Ok(f) = Filter::compile(&b) {
                let _ = f.matches_bytes(Some(&b));
            }
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "(".repeat(100_000) + "1" + &")".repeat(100_000);
        assert!(Filter::compile(deep.as_bytes()).is_err());
        let nots = "!".repeat(100_000) + "1";
        assert!(Filter::compile(nots.as_bytes()).is_err());
        let chain = vec!["1"; 100].join(" + ");
        assert!(Filter::compile(chain.as_bytes()).is_ok());
        let chain = vec!["1"; 100_000].join(" + ");
        assert!(
            Filter::compile(chain.as_bytes()).is_err(),
            "tree height bound"
        );
        let pow = vec!["1"; 100_000].join(" ** ");
        assert!(
            Filter::compile(pow.as_bytes()).is_err(),
            "right-nested depth bound"
        );
    }
}
