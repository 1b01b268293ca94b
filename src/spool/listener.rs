//! `.helpers/.listener.json`: how to reach the listener serving a project. Written by
//! `hitl listen` once it is ready, read by every command that wants the listener
//! (`hitl ask`'s no-listener hint, `answer`, `pending`, `status`, `agents`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Spool;

/// What a running listener says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListenerInfo {
    /// The file format's version.
    pub version: u32,
    /// The listener's process id.
    pub pid: u32,
    /// Its start time (clock ticks after boot), so a reused pid is not mistaken for it.
    pub start_time: Option<u64>,
    /// When it started.
    pub started_at: jiff::Timestamp,
    /// Every project it serves.
    pub projects: Vec<PathBuf>,
    /// Its HTTP API (`http://127.0.0.1:4000`), if it serves one.
    pub http: Option<String>,
    /// Reserved for a local socket.
    pub socket: Option<String>,
    /// When `http` is `https://`: the SHA-256 (hex) of the certificate the listener
    /// presents, which the user's own commands trust for that URL and no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_sha256: Option<String>,
    /// Who is at a UI to answer now (`[["terminal", 1], ["dashboard", 2]]`); empty:
    /// nobody, and hooks leave their calls to Claude Code (see `broker::presence`).
    #[serde(default)]
    pub present: Vec<(String, usize)>,
    /// The channels that reach a person away from the desk (`["telegram"]`): while
    /// one is up, hooks and MCP wait for an answer even with nobody present.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reachable: Vec<String>,
}

impl ListenerInfo {
    /// This process, serving `projects`, with HTTP at `http`.
    pub fn new(projects: &[PathBuf], http: Option<&str>) -> ListenerInfo {
        let me = crate::runtime::process::this_process();
        ListenerInfo {
            version: crate::protocol::VERSION,
            pid: me.pid,
            start_time: Some(me.start_time),
            started_at: jiff::Timestamp::now(),
            projects: projects.to_vec(),
            http: http.map(str::to_string),
            socket: None,
            tls_sha256: None,
            present: Vec::new(),
            reachable: Vec::new(),
        }
    }

    /// Whether a question asked now would reach a person: someone at one of its
    /// UIs, or a channel that reaches them elsewhere.
    pub fn someone_answers(&self) -> bool {
        !self.present.is_empty() || !self.reachable.is_empty()
    }

    /// Writes it into `spool` (atomically; not fsynced: it describes a live process).
    pub fn write(&self, spool: &Spool) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        spool.replace_file(&spool.listener_info_file(), &bytes)
    }

    /// The listener serving `spool`, if one runs: its file, checked against the
    /// process table (pid and start time), so a file left by a killed listener does
    /// not count.
    pub fn running(spool: &Spool) -> Option<ListenerInfo> {
        let bytes = super::read_untrusted(&spool.listener_info_file(), 1 << 20).ok()?;
        let info: ListenerInfo = serde_json::from_slice(&bytes).ok()?;
        if !crate::runtime::process::is_alive(info.pid, info.start_time) {
            return None;
        }
        if let (Some(url), Some(pin)) = (&info.http, &info.tls_sha256) {
            crate::runtime::tls::remember_pin(url, pin);
        }
        Some(info)
    }
}
