//! Connection commands against the real binary.

mod common;

use common::{cmd, raw_roundtrip, Ember};
use redis::Value;

#[test]
fn ping_echo_select_and_errors() {
    let e = Ember::start(&[]);
    let mut c = e.conn();
    assert_eq!(
        cmd(&mut c, &["PING"]).unwrap(),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(
        cmd(&mut c, &["ECHO", "hi"]).unwrap(),
        Value::BulkString(b"hi".to_vec())
    );
    assert!(cmd(&mut c, &["SELECT", "16"])
        .unwrap_err()
        .to_string()
        .contains("DB index is out of range"));
    let err = cmd(&mut c, &["NOSUCH", "a", "b"]).unwrap_err().to_string();
    assert!(
        err.contains("unknown command 'NOSUCH', with args beginning with: 'a' 'b'"),
        "{err}"
    );
    let err = cmd(&mut c, &["ECHO"]).unwrap_err().to_string();
    assert!(
        err.contains("wrong number of arguments for 'echo' command"),
        "{err}"
    );
}

#[test]
fn requirepass_auth_and_hello() {
    let e = Ember::start(&["--requirepass", "s3cret"]);
    let mut s = e.raw();
    let r = raw_roundtrip(&mut s, b"PING\r\n", 10);
    assert_eq!(r, b"-NOAUTH Authentication required.\r\n");
    let r = raw_roundtrip(&mut s, b"AUTH nope\r\n", 20);
    assert!(
        r.starts_with(b"-WRONGPASS"),
        "{}",
        String::from_utf8_lossy(&r)
    );
    let r = raw_roundtrip(&mut s, b"HELLO 3 AUTH default s3cret SETNAME me\r\n", 40);
    assert!(r.starts_with(b"%7\r\n"), "{}", String::from_utf8_lossy(&r));
    let r = raw_roundtrip(&mut s, b"CLIENT GETNAME\r\n", 8);
    assert_eq!(r, b"$2\r\nme\r\n");
}

#[test]
fn client_kill_closes_the_connection() {
    let e = Ember::start(&[]);
    let mut victim = e.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut victim).unwrap();
    let mut admin = e.conn();
    let n: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query(&mut admin)
        .unwrap();
    assert_eq!(n, 1);
    assert!(redis::cmd("PING").query::<String>(&mut victim).is_err());
}
