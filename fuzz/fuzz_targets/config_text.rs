//! Feeds arbitrary text to the redis.conf-style config loader: it must either accept the
//! text or return an error naming a line, never panic; an accepted config must survive
//! CONFIG GET of every directive.

#![no_main]

use libfuzzer_sys::fuzz_target;
use node::config::Config;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut cfg = Config::default();
    match cfg.apply_text(&text) {
        Ok(()) => {
            for (name, value) in cfg.matching(b"*") {
                // Every value read back must be accepted again as the same directive.
                let mut again = Config::default();
                again
                    .set(name, &[value.clone()], false)
                    .unwrap_or_else(|e| panic!("{name} {value:?} read back but refused: {e}"));
            }
        }
        Err(e) => assert!(e.to_string().contains("at line")),
    }
});
