//! Streams: entries keyed by (ms, seq) ids, consumer groups and their pending lists.

/// A stream value.
#[derive(Clone, Debug, Default)]
pub struct Stream {}

impl Stream {
    /// Redis encoding name, as OBJECT ENCODING reports it.
    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    /// Approximate heap bytes owned by the stream.
    pub fn heap_size(&self) -> usize {
        0
    }
}
