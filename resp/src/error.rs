//! Protocol errors shared by the request parser and the frame parser.

/// A malformed request or frame.
///
/// `Display` gives exactly the text Redis sends after the `-ERR ` prefix, so
/// a server can reply with `-ERR {err}` and close the connection.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The `*<count>` line is not a valid count, or the count is too large.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// A `$<len>` line is not a valid length, is negative, or is too large.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An unauthenticated client announced more than 10 arguments.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// An unauthenticated client announced a bulk longer than 16384 bytes.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// A multibulk element does not start with `$`.
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0))]
    ExpectedDollar(u8),
    /// An inline request has no newline within the inline limit.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// A `*<count>` line has no CR within the inline limit.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCountString,
    /// A `$<len>` line has no CR within the inline limit.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCountString,
    /// An inline request has an unterminated quote or a closing quote
    /// followed by something other than whitespace.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// A line or a bulk payload is not terminated by CRLF.
    #[error("Protocol error: expected CRLF")]
    ExpectedCrlf,
    /// A frame starts with a byte that is not a RESP type.
    #[error("Protocol error: invalid frame type byte '{}'", char::from(*.0))]
    InvalidFrameType(u8),
    /// An integer frame does not hold a valid 64-bit integer.
    #[error("Protocol error: invalid integer")]
    InvalidInteger,
    /// A double frame does not hold a valid floating point number.
    #[error("Protocol error: invalid double")]
    InvalidDouble,
    /// A boolean frame is neither `#t` nor `#f`.
    #[error("Protocol error: invalid boolean")]
    InvalidBoolean,
    /// A big number frame holds something other than an optionally signed
    /// run of digits.
    #[error("Protocol error: invalid big number")]
    InvalidBigNumber,
    /// A verbatim string lacks the `fmt:` prefix.
    #[error("Protocol error: invalid verbatim string")]
    InvalidVerbatim,
    /// A `_` null frame carries data.
    #[error("Protocol error: invalid null")]
    InvalidNull,
    /// A frame line has no CRLF within the inline limit.
    #[error("Protocol error: too big line")]
    LineTooLong,
    /// Streamed strings or aggregates (`$?`, `*?`, ...) are not supported.
    #[error("Protocol error: streamed types are not supported")]
    StreamedNotSupported,
    /// Aggregates are nested deeper than the parser allows.
    #[error("Protocol error: nesting too deep")]
    NestingTooDeep,
}

#[cfg(test)]
mod tests {
    use super::ProtocolError as E;

    #[test]
    fn messages_match_redis() {
        let cases: &[(E, &str)] = &[
            (
                E::InvalidMultibulkLength,
                "Protocol error: invalid multibulk length",
            ),
            (E::InvalidBulkLength, "Protocol error: invalid bulk length"),
            (
                E::UnauthenticatedMultibulkLength,
                "Protocol error: unauthenticated multibulk length",
            ),
            (
                E::UnauthenticatedBulkLength,
                "Protocol error: unauthenticated bulk length",
            ),
            (
                E::ExpectedDollar(b'x'),
                "Protocol error: expected '$', got 'x'",
            ),
            (
                E::TooBigInlineRequest,
                "Protocol error: too big inline request",
            ),
            (
                E::TooBigMbulkCountString,
                "Protocol error: too big mbulk count string",
            ),
            (
                E::TooBigBulkCountString,
                "Protocol error: too big bulk count string",
            ),
            (
                E::UnbalancedQuotes,
                "Protocol error: unbalanced quotes in request",
            ),
            (E::ExpectedCrlf, "Protocol error: expected CRLF"),
            (
                E::InvalidFrameType(b'x'),
                "Protocol error: invalid frame type byte 'x'",
            ),
            (E::InvalidInteger, "Protocol error: invalid integer"),
            (E::InvalidDouble, "Protocol error: invalid double"),
            (E::InvalidBoolean, "Protocol error: invalid boolean"),
            (E::InvalidBigNumber, "Protocol error: invalid big number"),
            (
                E::InvalidVerbatim,
                "Protocol error: invalid verbatim string",
            ),
            (E::InvalidNull, "Protocol error: invalid null"),
            (E::LineTooLong, "Protocol error: too big line"),
            (
                E::StreamedNotSupported,
                "Protocol error: streamed types are not supported",
            ),
            (E::NestingTooDeep, "Protocol error: nesting too deep"),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), *text);
        }
    }
}
