//! server commands (being written).

use crate::registry::CommandSpec;

/// This family's commands.
pub static COMMANDS: &[CommandSpec] = &[];
