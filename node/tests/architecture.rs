//! The node's structure, checked from its source: no code outside `cmd/` refers to a
//! particular command by name, and modules use only their layer and those below (less
//! the debt listed here, which may only shrink). What the rest of the node needs to know about a command
//! (routing, blocking timeouts, busy-script answers, propagation) is declared on its spec
//! next to its handler (see ARCHITECTURE.md).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use node::cmd::families;

/// String literals outside `cmd/` that spell a command's name without referring to the
/// command, each with the reason: (file under `src/`, literal, why).
const NOT_COMMANDS: &[(&str, &str, &str)] = &[
    ("config.rs", "debug", "a loglevel"),
    ("config.rs", "save", "the `save` directive"),
    ("config.rs", "swapdb", "a repl-diskless-load value"),
    ("main.rs", "debug", "a loglevel"),
    ("main.rs", "info", "a tracing level"),
    ("obuf.rs", "pubsub", "a client-output-buffer-limit class"),
    ("observe/latency.rs", "command", "a latency event class"),
    ("observe/mod.rs", "command", "a latency event class"),
    ("registry.rs", "readonly", "a COMMAND INFO flag name"),
    (
        "registry.rs",
        "pubsub",
        "a COMMAND INFO flag and group name",
    ),
    ("registry.rs", "list", "a group name"),
    ("registry.rs", "set", "a group name"),
    ("registry.rs", "stream", "a group name"),
    ("registry.rs", "cluster", "a group name"),
    ("snapshot.rs", "save", "the `save` directive"),
    ("server.rs", "save", "the `save` directive"),
    ("script/conv.rs", "set", "a Lua table key of a status reply"),
    (
        "script/mod.rs",
        "KEYS",
        "the Lua global holding a script's keys",
    ),
    (
        "effects.rs",
        "*",
        "the propagation vocabulary: the one place outside cmd/ that spells the commands \
         a stream is framed and rebuilt with (SELECT, MULTI/EXEC, DEL, RESTORE ...)",
    ),
    ("script/libs.rs", "function", "a Lua type name"),
    (
        "cluster/node.rs",
        "AUTH",
        "the node logging in to a peer as a Redis client",
    ),
    (
        "cluster/node.rs",
        "CLUSTER",
        "the node asking a peer to add it, as a Redis client",
    ),
];

/// References still to be moved onto specs (issue 35): (file, literal). Kept exact, so
/// that a new reference fails the test and a moved one must leave this list.
const TO_MOVE: &[(&str, &str)] = &[];

/// Every command name, lower case: top-level names and `container|sub`.
fn command_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in families() {
        for spec in family {
            names.insert(spec.name.to_ascii_lowercase());
            for sub in spec.subcommands {
                names.insert(format!("{}|{}", spec.name, sub.name).to_ascii_lowercase());
            }
        }
    }
    names
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every source file of `node/src`: its path under `src/` and its code ([`code_of`]).
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|path| {
            let rel = path
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(path).expect("read source");
            (rel, code_of(&text))
        })
        .collect()
}

/// The file's code before its unit tests (`#[cfg(test)] mod ...`), comments dropped.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t == "#[cfg(test)]"
            && lines.peek().is_some_and(|n| {
                let n = n.trim_start();
                n.starts_with("mod ")
                    || n.starts_with("pub mod ")
                    || n.starts_with("pub(crate) mod ")
            })
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The string literals of `code` (`"..."`, `b"..."`; raw strings as one literal each).
fn literals(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                // A comment after code: to the end of the line.
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\'' => {
                // A char literal ('"', '\'') or a lifetime.
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'#') | Some(b'"'))
                && (i == 0
                    || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'_'
                    || b[i - 1] == b'b') =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let start = j + 1;
                let end = (start..b.len())
                    .find(|&k| b[k..].starts_with(&close))
                    .unwrap_or(b.len());
                found.push(String::from_utf8_lossy(&b[start..end]).into_owned());
                i = end + close.len();
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'"' {
                    if b[j] == b'\\' {
                        j += 1;
                    }
                    j += 1;
                }
                found.push(String::from_utf8_lossy(&b[start..j.min(b.len())]).into_owned());
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    found
}

#[test]
fn no_code_outside_cmd_names_a_command() {
    let names = command_names();
    assert!(names.contains("set") && names.contains("client|caching"));
    let mut found: BTreeSet<(String, String)> = BTreeSet::new();
    for (rel, code) in sources() {
        if rel.starts_with("cmd/") {
            continue;
        }
        for lit in literals(&code) {
            if names.contains(&lit.to_ascii_lowercase()) {
                found.insert((rel.clone(), lit));
            }
        }
    }
    let allowed: BTreeSet<(String, String)> = NOT_COMMANDS
        .iter()
        .map(|(f, l, _)| (f.to_string(), l.to_string()))
        .collect();
    let pending: BTreeSet<(String, String)> = TO_MOVE
        .iter()
        .map(|(f, l)| (f.to_string(), l.to_string()))
        .collect();
    let whole_files: BTreeSet<&str> = NOT_COMMANDS
        .iter()
        .filter(|(_, l, _)| *l == "*")
        .map(|(f, _, _)| *f)
        .collect();
    let named: Vec<_> = found
        .iter()
        .filter(|r| {
            !allowed.contains(*r) && !pending.contains(*r) && !whole_files.contains(r.0.as_str())
        })
        .collect();
    assert!(
        named.is_empty(),
        "code outside cmd/ names these commands; declare what it needs on the command's spec instead: {named:?}"
    );
    let moved: Vec<_> = pending.difference(&found).collect();
    assert!(
        moved.is_empty(),
        "no longer referenced: remove from TO_MOVE: {moved:?}"
    );
}

/// The node's modules by layer (ARCHITECTURE.md, "The node crate"): a module may use its
/// own layer and those below.
const LAYERS: &[(u8, &[&str])] = &[
    (
        0,
        &["error", "stats", "registry", "effects", "client", "ctx"],
    ),
    (
        1,
        &[
            "pubsub", "notify", "tracking", "watch", "evict", "obuf", "aof", "snapshot", "busy",
            "config", "observe",
        ],
    ),
    (2, &["exec", "blocking", "script"]),
    (3, &["cmd"]),
    (4, &["server", "conn", "balance", "cluster", "main", "lib"]),
];

/// Uses that point up a layer today, (from, to): the debt issue 35 pays off. Kept exact: a
/// new one fails the test, and one that is gone must leave the list.
const UPWARD_TODAY: &[(&str, &str)] = &[
    ("aof", "cmd"),
    ("aof", "server"),
    ("blocking", "server"),
    ("busy", "cluster"),
    ("busy", "cmd"),
    ("busy", "conn"),
    ("busy", "server"),
    ("client", "blocking"),
    ("client", "cluster"),
    ("client", "pubsub"),
    ("client", "tracking"),
    ("client", "watch"),
    ("cmd", "cluster"),
    ("cmd", "server"),
    ("ctx", "server"),
    ("evict", "cmd"),
    ("exec", "server"),
    ("evict", "server"),
    ("notify", "server"),
    ("pubsub", "server"),
    ("registry", "server"),
    ("script", "cluster"),
    ("script", "server"),
    ("snapshot", "cmd"),
    ("snapshot", "server"),
];

/// The top-level modules of `crate::` that `code` uses (`crate::x` paths and
/// `use crate::{x, y::z}` groups).
fn crate_uses(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name = ident(part.trim());
                if !name.is_empty() {
                    used.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

#[test]
fn modules_use_only_their_layer_and_below_but_for_the_listed_debt() {
    let layer_of = |m: &str| {
        LAYERS
            .iter()
            .find(|(_, ms)| ms.contains(&m))
            .map(|(l, _)| *l)
    };
    let mut upward: BTreeSet<(String, String)> = BTreeSet::new();
    for (rel, code) in sources() {
        let top = rel
            .split('/')
            .next()
            .unwrap_or("")
            .trim_end_matches(".rs")
            .to_string();
        let from = layer_of(&top).unwrap_or_else(|| panic!("module {top} has no layer"));
        for to in crate_uses(&code) {
            if let Some(l) = layer_of(&to) {
                if to != top && l > from {
                    upward.insert((top.clone(), to));
                }
            }
        }
    }
    let known: BTreeSet<(String, String)> = UPWARD_TODAY
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = upward.difference(&known).collect();
    assert!(new.is_empty(), "new uses that point up a layer: {new:?}");
    let paid: Vec<_> = known.difference(&upward).collect();
    assert!(paid.is_empty(), "gone (remove from UPWARD_TODAY): {paid:?}");
}

#[test]
fn crate_uses_are_found_in_paths_and_groups() {
    let used = crate_uses("use crate::{a, b::c};\nlet x = crate::d::e(); use crate::f;");
    let want: BTreeSet<String> = ["a", "b", "d", "f"].iter().map(|s| s.to_string()).collect();
    assert_eq!(used, want);
}

#[test]
fn the_scanner_sees_literals_and_skips_what_is_not_code() {
    let code = code_of(
        "let a = b\"GET\"; // \"set\"\n/// \"del\"\nlet c = '\"'; let d = r#\"x \"type\" y\"#;\nlet e = \"ex\\\"ec\";\n#[cfg(test)]\nmod tests { \"mget\" }\n",
    );
    assert_eq!(
        literals(&code),
        vec![
            "GET".to_string(),
            "x \"type\" y".to_string(),
            "ex\\\"ec".to_string()
        ]
    );
}
