//! Wire-level behaviour of the real binary: pipelining, inline commands, RESP3, limits,
//! malformed input and many concurrent clients.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::{cmd, raw_roundtrip, Ember};
use redis::Value;

#[test]
fn pipeline_of_ten_thousand_commands_in_one_write() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let mut input = Vec::new();
    for i in 0..10_000 {
        input.extend_from_slice(
            format!("*2\r\n$4\r\nECHO\r\n${}\r\n{}\r\n", i.to_string().len(), i).as_bytes(),
        );
    }
    let mut expected = Vec::new();
    for i in 0..10_000 {
        expected.extend_from_slice(format!("${}\r\n{}\r\n", i.to_string().len(), i).as_bytes());
    }
    let out = raw_roundtrip(&mut s, &input, expected.len());
    assert_eq!(out.len(), expected.len());
    assert!(out == expected, "replies out of order or missing");
}

#[test]
fn inline_commands_and_quotes() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    assert_eq!(raw_roundtrip(&mut s, b"PING\r\n", 7), b"+PONG\r\n");
    assert_eq!(
        raw_roundtrip(&mut s, b"ECHO \"a b\"\n", 9),
        b"$3\r\na b\r\n"
    );
    assert_eq!(
        raw_roundtrip(&mut s, b"\r\nECHO 'x'\r\n", 7),
        b"$1\r\nx\r\n"
    );
}

#[test]
fn malformed_input_gets_protocol_error_and_close_while_others_continue() {
    let e = Ember::start(&[]);
    let mut good = e.conn();
    for bad in [
        &b"*abc\r\n"[..],
        b"*1\r\n$-5\r\n",
        b"*1\r\n+PING\r\n",
        b"ECHO \"unterminated\r\n",
    ] {
        let mut s = e.raw();
        s.write_all(bad).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("-ERR Protocol error"), "{bad:?} -> {text}");
        assert_eq!(
            cmd(&mut good, &["PING"]).unwrap(),
            Value::SimpleString("PONG".into())
        );
    }
}

#[test]
fn bulk_over_limit_is_refused_and_query_buffer_limit_closes() {
    let e = Ember::start(&[
        "--proto-max-bulk-len",
        "1mb",
        "--client-query-buffer-limit",
        "1mb",
    ]);
    let mut s = e.raw();
    s.write_all(b"*2\r\n$4\r\nECHO\r\n$2000000\r\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert_eq!(out, b"-ERR Protocol error: invalid bulk length\r\n");

    // A command still incomplete after more than client-query-buffer-limit bytes closes
    // the connection (each argument stays under proto-max-bulk-len).
    let mut s = e.raw();
    let part = vec![b'x'; 500_000];
    let mut closed = s.write_all(b"*10\r\n$4\r\nECHO\r\n").is_err();
    for _ in 0..8 {
        if closed {
            break;
        }
        let mut arg = format!("${}\r\n", part.len()).into_bytes();
        arg.extend_from_slice(&part);
        arg.extend_from_slice(b"\r\n");
        closed = s.write_all(&arg).is_err();
    }
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "connection should be closed");
    let mut c = e.conn();
    assert_eq!(
        cmd(&mut c, &["PING"]).unwrap(),
        Value::SimpleString("PONG".into())
    );
}

#[test]
fn big_value_round_trip_in_small_writes() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let value = vec![b'v'; 5 << 20];
    let mut input = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", value.len()).into_bytes();
    input.extend_from_slice(&value);
    input.extend_from_slice(b"\r\n");
    for chunk in input.chunks(7919) {
        s.write_all(chunk).unwrap();
    }
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    let mut c = e.conn();
    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert!(got == value);
}

#[test]
fn resp3_after_hello_and_back() {
    let e = Ember::start(&[]);
    let mut s = e.raw();
    let r = raw_roundtrip(&mut s, b"HELLO 3\r\n", 100);
    assert!(
        r.starts_with(b"%7\r\n$6\r\nserver\r\n"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    assert_eq!(raw_roundtrip(&mut s, b"GET nokey\r\n", 3), b"_\r\n");
    let r = raw_roundtrip(&mut s, b"HELLO 2\r\n", 100);
    assert!(r.starts_with(b"*14\r\n"));
    assert_eq!(raw_roundtrip(&mut s, b"GET nokey\r\n", 5), b"$-1\r\n");
}

/// Runs `f(i, connection)` for clients `0..n` at once, each on its own thread and
/// connection to `port`, and waits for all of them (a panic in one fails the test).
fn on_clients(port: u16, n: usize, f: fn(usize, &mut redis::Connection)) {
    let threads: Vec<_> = (0..n)
        .map(|i| {
            std::thread::spawn(move || {
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
                let mut c = client.get_connection().unwrap();
                f(i, &mut c);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn fifty_clients_times_ten_thousand_incr_lose_no_update() {
    let e = Ember::start(&["--threads", "4"]);
    on_clients(e.port, 50, |_, c| {
        // Pipelined in chunks so the test stays fast on two cores.
        for _ in 0..100 {
            let mut p = redis::pipe();
            for _ in 0..100 {
                p.cmd("INCR").arg("counter").ignore();
            }
            p.query::<()>(c).unwrap();
        }
    });
    let mut c = e.conn();
    let n: i64 = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(n, 500_000);
}

#[test]
fn one_worker_many_clients_at_pipeline_one_each_get_their_own_replies() {
    // One worker serves every connection, so rounds of several ready connections form,
    // in which a lone command is deferred behind the others (its key prefetched): each
    // client must still get its own replies, in its own order.
    let e = Ember::start(&["--threads", "1"]);
    on_clients(e.port, 32, |t, c| {
        let key = format!("own:{t}");
        for i in 0..300 {
            let v = format!("{t}:{i}");
            let _: () = redis::cmd("SET").arg(&key).arg(&v).query(c).unwrap();
            let got: String = redis::cmd("GET").arg(&key).query(c).unwrap();
            assert_eq!(got, v, "client {t} read another reply");
            let n: i64 = redis::cmd("INCR").arg("shared").query(c).unwrap();
            assert!(n >= 1);
        }
    });
    let mut c = e.conn();
    let n: i64 = redis::cmd("GET").arg("shared").query(&mut c).unwrap();
    assert_eq!(n, 32 * 300);
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let mut e = Ember::start(&[]);
    let pid = {
        let mut c = e.conn();
        let info: String = redis::cmd("CLIENT").arg("INFO").query(&mut c).unwrap();
        assert!(info.contains("id="));
        e.pid()
    };
    let st = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(e.wait_exit(Duration::from_secs(10)), Some(true));
}
