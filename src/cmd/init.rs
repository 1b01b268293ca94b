//! `hitl init [DIR] [--force]`: lay out `.helpers/`, write commented settings and the
//! agent-side `scripts/ask-human.sh`. Idempotent: running it again changes nothing,
//! and a file the user edited is kept unless `--force` is given.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{config::PROJECT_CONFIG_TEMPLATE, spool::Spool};

/// The generated agent-side script.
pub const ASK_HUMAN_SCRIPT: &str = include_str!("ask-human.sh");

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Created,
    Unchanged,
    Replaced,
    KeptEdited,
}

fn place(path: &Path, content: &str, mode: u32, force: bool) -> Result<Outcome> {
    let outcome = match fs::read_to_string(path) {
        Ok(existing) if existing == content => Outcome::Unchanged,
        Ok(_) if !force => return Ok(Outcome::KeptEdited),
        Ok(_) => Outcome::Replaced,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Outcome::Created,
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if outcome != Outcome::Unchanged {
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::spool::write_atomic(dir, path, content.as_bytes(), true)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    Ok(outcome)
}

/// Initialises the project at `dir` (default: the current folder).
pub fn run(dir: Option<PathBuf>, force: bool) -> Result<()> {
    let dir = match dir {
        Some(d) => d,
        None => std::env::current_dir().context("reading the current folder")?,
    };
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))?;
    let spool = Spool::new(&dir);
    spool.ensure_layout()?;
    let files = [
        (spool.config_file(), PROJECT_CONFIG_TEMPLATE, 0o600),
        (dir.join("scripts/ask-human.sh"), ASK_HUMAN_SCRIPT, 0o755),
    ];
    for (path, content, mode) in files {
        let shown = path
            .strip_prefix(&dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        match place(&path, content, mode, force)? {
            Outcome::Created => eprintln!("created  {shown}"),
            Outcome::Replaced => eprintln!("replaced {shown} (--force)"),
            Outcome::Unchanged => eprintln!("ok       {shown}"),
            Outcome::KeptEdited => {
                eprintln!("kept     {shown} (edited; `hitl init --force` replaces it)")
            }
        }
    }
    eprintln!(
        "hitl: {} is ready. Start the broker with `hitl listen`; agents ask with \
         `hitl ask \"…\"` or scripts/ask-human.sh.",
        dir.display()
    );
    Ok(())
}
