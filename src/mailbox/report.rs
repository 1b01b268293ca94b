//! How a run ended, as the relay writes it in `.hitl/report.json` once every agent
//! is done, or the run failed: what the seed's trampoline printed at the end
//! (`clean_branch`, the transcript), and what agents and `hitl mailbox list` read.

use serde::{Deserialize, Serialize};

use super::layout::{MAX_FILE_BYTES, Run};

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `done` or `failed`.
    pub state: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it ended, in milliseconds since 1970.
    pub ended_ms: i64,
    /// How long it ran, in seconds, and how much of that was spent waiting for the
    /// user.
    pub ran_s: f64,
    /// Seconds of `ran_s` spent waiting for the user.
    pub waited_s: f64,
    /// Each agent's last status.
    pub agents: serde_json::Map<String, serde_json::Value>,
    /// `state.json` at the end.
    pub state_json: serde_json::Value,
    /// `state.json`'s `clean_branch`, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_branch: Option<String>,
    /// The commits made on it since `base_commit`, newest first, when both are
    /// known and the run's project is a git repository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<String>,
    /// The transcript's last lines.
    pub transcript_tail: Vec<String>,
}

/// The report's state of a run that did not end well.
pub const FAILED: &str = "failed";
/// The report's state of a run whose agents are all done.
pub const DONE: &str = "done";

/// The run's report, if it has ended.
pub fn read(run: &Run) -> Option<Report> {
    let bytes = crate::spool::read_untrusted(&run.report_file(), MAX_FILE_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether the run has failed.
pub fn failed(run: &Run) -> bool {
    read(run).is_some_and(|r| r.state == FAILED)
}

/// How many transcript lines a report keeps.
const TAIL_LINES: usize = 20;

/// The last [`TAIL_LINES`] lines of the run's transcript.
pub fn transcript_tail(run: &Run) -> Vec<String> {
    let bytes =
        crate::spool::read_untrusted(&run.transcript(), MAX_FILE_BYTES * 8).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// The commits on `branch` since `base` in `project` (newest first, `hash subject`).
pub fn commits(project: &std::path::Path, base: &str, branch: &str) -> Vec<String> {
    let ok = |s: &str| !s.is_empty() && !s.starts_with('-') && !s.contains("..");
    if !ok(base) || !ok(branch) {
        return Vec::new();
    }
    std::process::Command::new("git")
        .arg("-C")
        .arg(project)
        .args(["log", "--format=%h %s", "--max-count=200"])
        .arg(format!("{base}..{branch}"))
        .arg("--")
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
