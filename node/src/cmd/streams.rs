//! Stream commands.

use crate::registry::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];
