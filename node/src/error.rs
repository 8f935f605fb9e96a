//! Errors a command handler returns; each renders as the Redis error reply text.

use thiserror::Error;

/// A command failure, rendered as a RESP error (with its Redis prefix) on the connection.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// Wrong argument count for the named command.
    #[error("ERR wrong number of arguments for '{0}' command")]
    Arity(String),
    /// Generic syntax error.
    #[error("ERR syntax error")]
    Syntax,
    /// Operation against a key of another type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// An argument that must be an integer is not one.
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    /// An argument that must be a float is not one.
    #[error("ERR value is not a valid float")]
    NotFloat,
    /// Arithmetic overflow in INCR and friends.
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    /// The key does not exist (RENAME and friends).
    #[error("ERR no such key")]
    NoSuchKey,
    /// SELECT/MOVE/SWAPDB with a bad database index.
    #[error("ERR DB index is out of range")]
    DbIndex,
    /// Any other error; the text includes its prefix (`ERR ...`, `NOAUTH ...`).
    #[error("{0}")]
    Other(String),
}

impl CmdError {
    /// An `ERR <msg>` error.
    pub fn err(msg: impl std::fmt::Display) -> Self {
        CmdError::Other(format!("ERR {msg}"))
    }

    /// An error whose text already carries its prefix.
    pub fn raw(msg: impl Into<String>) -> Self {
        CmdError::Other(msg.into())
    }
}

/// What every command handler returns.
pub type CmdResult = Result<(), CmdError>;
