//! The AOF manifest parser and the AOF command reader on arbitrary bytes: every input is
//! accepted or rejected with an error, never a panic. A parsed manifest renders to text
//! that parses back to the same manifest; the reader's offsets only grow, stay within the
//! input, and a truncation is reported at the end of the last complete item.

#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::aof::{encode_command, CommandReader, Item, Manifest, ReadError};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        if let Ok(m) = Manifest::parse(rest) {
            let text = m.render();
            // (Quoting can push a long name past Redis's 1024-byte line limit.)
            if !text.is_empty() && text.lines().all(|l| l.len() < 1024) {
                assert_eq!(Manifest::parse(text.as_bytes()).ok(), Some(m));
            }
        }
        return;
    }
    let mut r = CommandReader::new(rest, 1 << 20);
    let mut last = 0u64;
    let mut again = Vec::new();
    loop {
        match r.next_item() {
            Ok(None) => {
                assert_eq!(r.offset(), rest.len() as u64);
                break;
            }
            Ok(Some(item)) => {
                assert!(r.offset() > last && r.offset() <= rest.len() as u64);
                last = r.offset();
                if let Item::Command(args) = item {
                    // Re-encoding gives back a command the reader reads the same.
                    again.clear();
                    encode_command(&mut again, &args);
                    let mut r2 = CommandReader::new(&again[..], 1 << 20);
                    assert!(matches!(r2.next_item(), Ok(Some(Item::Command(a))) if a == args));
                }
            }
            Err(ReadError::Truncated { offset }) => {
                assert_eq!(offset, last);
                break;
            }
            Err(ReadError::Corrupt { offset, .. }) => {
                assert!(offset >= last && offset <= rest.len() as u64);
                break;
            }
            Err(ReadError::NewerFormat { offset, .. }) => {
                assert_eq!(offset, last);
                break;
            }
            Err(ReadError::Io(e)) => panic!("no I/O error reading a slice: {e}"),
        }
    }
});
