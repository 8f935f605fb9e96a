//! Records the git commit the node is built from, for INFO's `redis_git_sha1` and
//! `redis_git_dirty` (as Redis's mkreleasehdr.sh does): the first 8 hex digits of HEAD
//! and whether tracked files differed from it at build time; `00000000` and 0 outside a
//! git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<std::process::Output> {
    Command::new("git").args(args).output().ok()
}

fn main() {
    let sha = git(&["rev-parse", "--short=8", "HEAD"])
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| s.len() == 8 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| "00000000".to_string());
    let dirty = git(&["diff", "--quiet", "HEAD", "--"])
        .and_then(|o| o.status.code())
        .map_or(0, |c| u8::from(c == 1));
    println!("cargo:rustc-env=EMBER_GIT_SHA1={sha}");
    println!("cargo:rustc-env=EMBER_GIT_DIRTY={dirty}");
    // A new commit or checkout moves HEAD or the branch it points to.
    // (A path that does not exist would rerun this script, and rebuild the crate, every
    // time.)
    let mut watched = false;
    for p in ["../.git/HEAD", "../.git/refs/heads", "../.git/packed-refs"] {
        if std::path::Path::new(p).exists() {
            println!("cargo:rerun-if-changed={p}");
            watched = true;
        }
    }
    if !watched {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
