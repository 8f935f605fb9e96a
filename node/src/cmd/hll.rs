//! HyperLogLog commands, in Redis's sparse and dense string formats.

use crate::registry::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];
