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
pub use request::{Args, Limits, RequestKind, RequestParser};

/// Which protocol a connection speaks (RESP2 default; RESP3 after `HELLO 3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3, negotiated with `HELLO 3`.
    Resp3,
}
