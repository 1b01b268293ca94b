//! The runs a project's listener relays: `.helpers/mailboxes/NAME.json`, one per
//! run, written by `hitl mailbox init` (the listener watches the folder, so a run
//! is relayed the moment it is registered, and again after a restart).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::layout::Run;
use crate::spool::Spool;

/// One registration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The run's folder.
    pub dir: PathBuf,
    /// When it was registered, in milliseconds since 1970.
    #[serde(default)]
    pub registered_ms: i64,
}

/// `.helpers/mailboxes/`.
pub fn dir(spool: &Spool) -> PathBuf {
    spool.root().join("mailboxes")
}

/// The registration file of `run`.
pub fn entry_file(spool: &Spool, run: &Run) -> PathBuf {
    dir(spool).join(format!("{}.json", run.name()))
}

/// Registers `run` with `spool`'s listener.
pub fn register(spool: &Spool, run: &Run) -> Result<()> {
    let folder = dir(spool);
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    let entry = Entry {
        dir: run.dir.clone(),
        registered_ms: jiff::Timestamp::now().as_millisecond(),
    };
    let mut json = serde_json::to_vec_pretty(&entry)?;
    json.push(b'\n');
    crate::spool::write_atomic(&spool.tmp(), &entry_file(spool, run), &json, false)
        .with_context(|| format!("registering {}", run.dir.display()))
}

/// The run a registration names.
pub fn read_entry(path: &Path) -> Option<PathBuf> {
    let bytes = crate::spool::read_untrusted(path, 64 << 10).ok()?;
    let entry: Entry = serde_json::from_slice(&bytes).ok()?;
    entry.dir.is_absolute().then_some(entry.dir)
}

/// Every run registered with `spool` (whether its folder still exists or not), with
/// its registration file.
pub fn entries(spool: &Spool) -> Vec<(PathBuf, PathBuf)> {
    let mut found: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(dir(spool))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| read_entry(&p).map(|d| (d, p)))
        .collect();
    found.sort();
    found
}

/// The folders of the runs registered with `spool` that still exist.
pub fn runs(spool: &Spool) -> Vec<PathBuf> {
    entries(spool)
        .into_iter()
        .map(|(d, _)| d)
        .filter(|d| d.is_dir())
        .collect()
}
