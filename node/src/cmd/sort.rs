//! SORT and SORT_RO.

use crate::registry::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];
