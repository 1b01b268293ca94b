//! `hitl token [--asker]`: prints the API token, or the ask-only token agents run as
//! another OS user are given (made on first use, mode 0600, in the user config
//! folder).

use anyhow::{Context, Result};

use crate::config::Paths;

/// Prints the token (`asker`: the ask-only one).
pub fn run(asker: bool) -> Result<()> {
    let dir = Paths::from_env().config_dir;
    let token = if asker {
        crate::server::load_or_create_asker_token(&dir).context("making the ask-only token")?
    } else {
        // The master token answers everything: not for an agent's shell.
        super::human::only_a_human("`hitl token`")?;
        crate::server::load_or_create_token(&dir).context("making the API token")?
    };
    println!("{token}");
    Ok(())
}
