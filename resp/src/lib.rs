//! RESP2/RESP3 wire protocol for Ember.
//!
//! # Layout
//!
//! * [`request`]: the server-side [`RequestParser`] (multibulk and inline
//!   commands, exact Redis 7 semantics and error texts) and [`Args`], a
//!   borrowed view of a parsed command's arguments.
//! * [`reply`]: [`ReplyWriter`], which encodes replies straight into an
//!   output buffer in the connection's [`Protocol`], and Redis's double
//!   formatting ([`reply::format_double`]).
//! * [`frame`]: the general [`Frame`] value with [`parse_frame`] and
//!   [`encode_frame`], for clients, tools, tests and fuzzing.
//! * [`ProtocolError`]: every protocol error; its `Display` is the text Redis
//!   sends after `-ERR `.
//!
//! # Example
//!
//! ```
//! use resp::{Args, Protocol, ReplyWriter, RequestKind, RequestParser};
//!
//! let mut parser = RequestParser::default();
//! let mut spans = Vec::new();
//! let buf = b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\n";
//!
//! let (used, kind) = parser.parse(buf, &mut spans).unwrap().unwrap();
//! assert_eq!(kind, RequestKind::Multibulk);
//! let args = Args::new(buf, &spans);
//! assert_eq!(args.arg(1), b"hi");
//!
//! let mut out = ReplyWriter::new(Protocol::Resp2);
//! out.bulk(args.arg(1));
//! assert_eq!(out.buffer(), b"$2\r\nhi\r\n");
//!
//! // Inline commands are unescaped into the parser's own buffer.
//! let rest = &buf[used..];
//! let (_, kind) = parser.parse(rest, &mut spans).unwrap().unwrap();
//! assert_eq!(kind, RequestKind::Inline);
//! assert_eq!(Args::new(parser.inline_buf(), &spans).arg(0), b"PING");
//! ```
//!
//! Nothing here panics on any input, recurses on client data, or allocates
//! in proportion to a length announced by the peer.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
pub mod frame;
pub mod reply;
pub mod request;

pub use error::ProtocolError;
pub use frame::{encode_frame, parse_frame, Frame};
pub use reply::ReplyWriter;
pub use request::{Args, Batch, BatchCommand, Limits, OwnedArgs, RequestKind, RequestParser};

/// Which protocol a connection speaks (RESP2 default; RESP3 after `HELLO 3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3, negotiated with `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The null reply: RESP2 `$-1`, RESP3 `_`.
    #[inline]
    pub fn null(self) -> &'static [u8] {
        match self {
            Protocol::Resp2 => b"$-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        }
    }

    /// The null array reply: RESP2 `*-1`, RESP3 `_`.
    #[inline]
    pub fn null_array(self) -> &'static [u8] {
        match self {
            Protocol::Resp2 => b"*-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        }
    }
}
