//! Bitmap commands: bit-level operations on string values.

use crate::registry::CommandSpec;

/// The family's commands.
pub static COMMANDS: &[CommandSpec] = &[];
