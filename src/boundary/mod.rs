//! `hitl run`'s boundary: the kernel keeps an agent, and everything it starts, out of
//! what decides for the human — hitl's files and secrets, the hooks' wiring, what
//! runs later as the user — instead of a check in the agent's own processes that the
//! agent could escape.
//!
//! `plan` works out what is read-only, writable, private and hidden; `enter` makes
//! it so (a mount namespace, Landlock's scopes, seccomp, no capabilities); `holds`
//! is how a process tells, by testing rather than by an environment variable an
//! agent could set, that it runs inside one; `macos` writes the `sandbox-exec`
//! profile of the same rules.

pub mod enter;
pub mod macos;
pub mod plan;

use std::path::Path;

pub use plan::{AgentHome, Bind, Inputs, Mask, Plan};

/// Whether this process runs inside a boundary that holds for `project`: its spool
/// folder is on a read-only mount (`EROFS`, which no file mode gives, even to root)
/// and hitl's token cannot be read. Two system calls: cheap enough for every hook.
pub fn holds(project: &Path, config_dir: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let spool_read_only = matches!(
        access(&project.join(crate::spool::HELPERS), AccessFlags::W_OK),
        Err(nix::errno::Errno::EROFS)
    );
    spool_read_only && access(&config_dir.join("token"), AccessFlags::F_OK).is_err()
}
