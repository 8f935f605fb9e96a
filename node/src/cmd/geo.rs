//! Geospatial commands: points stored as 52-bit geohash scores in sorted sets.

use crate::registry::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];
