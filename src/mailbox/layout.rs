//! A run's folders and files (seed 003's layout), made and found.
//!
//! ```text
//! RUN/                    0700, a unique name
//!   transcript.log        every agent's `[time] [AGENT:name] [EVENT] message` lines
//!   master.diff           the change being worked on
//!   state.json            shared state
//!   .hitl/                hitl's own: run.json (agents, timeout), tmp/, report.json
//!   AGENT/                one per agent (seed: narrator, scribe)
//!     status              planning | executing | idle | working | done | error
//!     pid                 optional: "PID [START_TIME]" of the agent's process
//!     question, answer    a question for the user, and its answer
//!     inbox/request       the one request for this agent (taken by `recv`)
//!     outbox/result       the one result of this agent (taken by `result`)
//! ```
//!
//! Names starting with `.` are hitl's (temp files, a taken request, a question being
//! answered): the seed's scripts never look at them.

use std::{
    fs,
    os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The most bytes hitl reads of any mailbox file (a question with a plan in it).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The run's own settings and facts, in `.hitl/run.json` (absent for a run made by
/// the seed's own trampoline: every default then holds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The agents named at `init`, in order.
    #[serde(default)]
    pub agents: Vec<String>,
    /// When it was made, in milliseconds since 1970.
    #[serde(default)]
    pub created_ms: i64,
    /// Seconds the run may take, not counting time spent waiting for the user
    /// (`None`: [`DEFAULT_RUN_TIMEOUT`]; 0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// Seconds an agent's status may go unchanged before it counts as gone (`None`:
    /// not watched this way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_s: Option<u64>,
    /// The project whose listener relays it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<PathBuf>,
}

/// The run timeout of seed 003's trampoline.
pub const DEFAULT_RUN_TIMEOUT: u64 = 600;

/// One run's folder.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Run {
    /// Its folder (absolute).
    pub dir: PathBuf,
}

/// One agent's mailbox in a run: `RUN/AGENT/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mailbox {
    /// The run.
    pub run: Run,
    /// The agent's name (its folder's).
    pub agent: String,
}

/// Whether `dir` is a folder only this user can write (owned by them, not writable
/// by group or others): the relay follows no other. A run matched by a pattern in
/// `/tmp` could be another user's, whose questions would pass for the user's agents'
/// and whose pid files would have the relay stop the user's processes.
pub fn private(dir: &Path) -> Result<(), String> {
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a folder", dir.display()));
    }
    if meta.uid() != crate::runtime::process::euid() {
        return Err(format!("{} belongs to another user", dir.display()));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!("{} can be written by other users", dir.display()));
    }
    Ok(())
}

/// Whether `name` can be an agent's folder: a plain name, not hitl's own.
pub fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl Run {
    /// The run at `dir`, which must be a folder.
    pub fn open(dir: &Path) -> Result<Run> {
        let dir = std::path::absolute(dir).with_context(|| format!("reading {}", dir.display()))?;
        let meta = fs::symlink_metadata(&dir)
            .with_context(|| format!("{} is not a mailbox run", dir.display()))?;
        if !meta.is_dir() {
            bail!("{} is not a folder", dir.display());
        }
        Ok(Run { dir })
    }

    /// Its name: the folder's.
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// `transcript.log`.
    pub fn transcript(&self) -> PathBuf {
        self.dir.join("transcript.log")
    }
    /// `state.json`.
    pub fn state_file(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    /// `.hitl/`: hitl's own files.
    pub fn own_dir(&self) -> PathBuf {
        self.dir.join(".hitl")
    }
    /// `.hitl/tmp/`: where files are written before being renamed into place.
    pub fn tmp(&self) -> PathBuf {
        self.own_dir().join("tmp")
    }
    /// `.hitl/run.json`.
    pub fn meta_file(&self) -> PathBuf {
        self.own_dir().join("run.json")
    }
    /// `.hitl/report.json`: how the run ended, written by the relay.
    pub fn report_file(&self) -> PathBuf {
        self.own_dir().join("report.json")
    }

    /// Makes `.hitl/tmp/` if it is not there (a run the seed's trampoline made).
    pub fn ensure_tmp(&self) -> Result<PathBuf> {
        let tmp = self.tmp();
        if !tmp.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&tmp)
                .with_context(|| format!("creating {}", tmp.display()))?;
        }
        Ok(tmp)
    }

    /// Its settings (the defaults when it has none, or they do not read).
    pub fn meta(&self) -> RunMeta {
        crate::spool::read_untrusted(&self.meta_file(), MAX_FILE_BYTES)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Its agents: the folders in it that can be agents' (and are this user's
    /// alone to write, see [`private`]), sorted.
    pub fn agents(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| private(&e.path()).is_ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_agent_name(n))
            .collect();
        names.sort();
        names
    }

    /// Agent `name`'s mailbox, which must exist.
    pub fn mailbox(&self, name: &str) -> Result<Mailbox> {
        let mailbox = Mailbox {
            run: self.clone(),
            agent: name.to_string(),
        };
        if !is_agent_name(name) || !mailbox.dir().is_dir() {
            let agents = self.agents();
            bail!(
                "no agent {name:?} in run {} (its agents: {})",
                self.dir.display(),
                if agents.is_empty() {
                    "none".to_string()
                } else {
                    agents.join(", ")
                }
            );
        }
        Ok(mailbox)
    }
}

impl Mailbox {
    /// The mailbox named by `DIR/AGENT` (a run's folder and an agent's name in it).
    pub fn parse(arg: &Path) -> Result<Mailbox> {
        let abs = std::path::absolute(arg).with_context(|| format!("reading {}", arg.display()))?;
        let (Some(run), Some(agent)) = (abs.parent(), abs.file_name()) else {
            bail!(
                "{} does not name an agent: give RUN_DIR/AGENT, e.g. /tmp/run/scribe",
                arg.display()
            );
        };
        let run = Run::open(run)?;
        run.mailbox(&agent.to_string_lossy())
    }

    /// `AGENT/`.
    pub fn dir(&self) -> PathBuf {
        self.run.dir.join(&self.agent)
    }
    /// `AGENT/question`.
    pub fn question(&self) -> PathBuf {
        self.dir().join("question")
    }
    /// `AGENT/answer`.
    pub fn answer(&self) -> PathBuf {
        self.dir().join("answer")
    }
    /// `AGENT/status`.
    pub fn status_file(&self) -> PathBuf {
        self.dir().join("status")
    }
    /// `AGENT/pid`.
    pub fn pid_file(&self) -> PathBuf {
        self.dir().join("pid")
    }
    /// `AGENT/inbox/`.
    pub fn inbox(&self) -> PathBuf {
        self.dir().join("inbox")
    }
    /// `AGENT/inbox/request`.
    pub fn request(&self) -> PathBuf {
        self.inbox().join("request")
    }
    /// `AGENT/inbox/.taken`: the request `recv` took and no `reply` has answered yet.
    pub fn taken_request(&self) -> PathBuf {
        self.inbox().join(".taken")
    }
    /// `AGENT/outbox/`.
    pub fn outbox(&self) -> PathBuf {
        self.dir().join("outbox")
    }
    /// `AGENT/outbox/result`.
    pub fn result(&self) -> PathBuf {
        self.outbox().join("result")
    }
    /// `AGENT/outbox/.taken`: the result `result` took, kept until the next `send`.
    pub fn taken_result(&self) -> PathBuf {
        self.outbox().join(".taken")
    }
    /// `AGENT/.asking`: the question `hitl mailbox ask` wrote, until it has the answer
    /// (so the same command run again waits for that answer instead of asking twice).
    pub fn asking(&self) -> PathBuf {
        self.dir().join(".asking")
    }
    /// `AGENT/.question.ID`: the question being answered as request `id` (renamed
    /// away first, so the agent's next question is never the one removed).
    pub fn answering(&self, id: &str) -> PathBuf {
        self.dir().join(format!(".question.{id}"))
    }

    /// Its status, trimmed (`None`: no status file).
    pub fn status(&self) -> Option<String> {
        let bytes = crate::spool::read_untrusted(&self.status_file(), 4096).ok()?;
        Some(String::from_utf8_lossy(&bytes).trim().to_string())
    }

    /// The agent's process, from its pid file ("PID [START_TIME]").
    pub fn process(&self) -> Option<(u32, Option<u64>)> {
        let bytes = crate::spool::read_untrusted(&self.pid_file(), 256).ok()?;
        let text = String::from_utf8_lossy(&bytes);
        let mut words = text.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        Some((pid, words.next().and_then(|w| w.parse().ok())))
    }
}

/// The agent id of agent `agent` of run `run` (its folder's name), as the relay
/// asks in its name and `hitl agents` lists it.
pub fn agent_id(run: &str, agent: &str) -> String {
    let id: String = format!("mailbox.{run}.{agent}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    id.chars().take(128).collect()
}

/// Where runs go when `init` is given no folder: `$XDG_RUNTIME_DIR/hitl/runs`, else
/// `$TMPDIR/hitl-UID/runs` (`/tmp` by default): the user's own, made 0700 and
/// refused if another user owns it (not inside the project: hitl's hooks guard
/// `.helpers/`, and agents write here).
pub fn default_parent() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| Path::new(d).is_dir()) {
        Some(d) => PathBuf::from(d).join("hitl"),
        None => std::env::temp_dir().join(format!("hitl-{}", crate::runtime::process::euid())),
    };
    let parent = base.join("runs");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&parent)
        .with_context(|| format!("creating {}", parent.display()))?;
    for dir in [&base, &parent] {
        let meta =
            fs::symlink_metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
        if !meta.is_dir() || meta.uid() != crate::runtime::process::euid() {
            bail!(
                "{} is not a folder of this user's; pass the run's folder to `hitl mailbox init`",
                dir.display()
            );
        }
        if meta.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .with_context(|| format!("setting the mode of {}", dir.display()))?;
        }
    }
    Ok(parent)
}

/// A new run's name: `PREFIX-YYYYMMDD-HHMMSS-XXXX` (random, so two runs started in
/// the same second do not collide as the seed's did).
pub fn new_run_name(prefix: &str) -> String {
    let now = jiff::Zoned::now();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{prefix}-{}-{}",
        now.strftime("%Y%m%d-%H%M%S"),
        &random[..6]
    )
}

/// What `init` makes.
#[derive(Debug, Clone)]
pub struct InitSpec {
    /// The run's folder (made; it must not exist, or be empty).
    pub dir: PathBuf,
    /// Its agents, the first the one that coordinates (the seed's narrator).
    pub agents: Vec<String>,
    /// Extra keys of `state.json`.
    pub state: serde_json::Map<String, serde_json::Value>,
    /// Run timeout (seconds; 0 none).
    pub timeout_s: Option<u64>,
    /// Heartbeat (seconds).
    pub heartbeat_s: Option<u64>,
    /// The project relaying it.
    pub project: Option<PathBuf>,
}

/// Makes a run: the seed's layout for `spec.agents`, every folder 0700.
pub fn init(spec: &InitSpec) -> Result<Run> {
    if spec.agents.is_empty() {
        bail!("a run needs at least one agent (--agents narrator,scribe)");
    }
    let mut seen = std::collections::HashSet::new();
    for a in &spec.agents {
        if !is_agent_name(a) {
            bail!(
                "{a:?} cannot name an agent: letters, digits, '-', '_' and '.', not starting with '.'"
            );
        }
        if !seen.insert(a) {
            bail!("agent {a:?} is named twice");
        }
    }
    let dir = std::path::absolute(&spec.dir)
        .with_context(|| format!("reading {}", spec.dir.display()))?;
    match fs::symlink_metadata(&dir) {
        Ok(m) if !m.is_dir() => bail!("{} exists and is not a folder", dir.display()),
        Ok(m) if m.uid() != crate::runtime::process::euid() => {
            bail!("{} belongs to another user", dir.display())
        }
        Ok(_) => {
            if fs::read_dir(&dir)?.next().is_some() {
                bail!(
                    "{} is not empty; a run needs a folder of its own",
                    dir.display()
                );
            }
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
                .with_context(|| format!("setting the mode of {}", dir.display()))?;
        }
        Err(_) => {
            if let Some(parent) = dir.parent() {
                fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            // Not recursive: a folder someone made meanwhile is an error, not ours.
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("creating {}", dir.display()))?;
        }
    }
    let run = Run { dir };
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    builder.create(run.tmp())?;
    for agent in &spec.agents {
        let mailbox = Mailbox {
            run: run.clone(),
            agent: agent.clone(),
        };
        builder.create(mailbox.inbox())?;
        builder.create(mailbox.outbox())?;
        crate::spool::write_atomic(&run.tmp(), &mailbox.status_file(), b"starting\n", false)?;
    }
    let tmp = run.tmp();
    let created = jiff::Timestamp::now();
    let mut state = serde_json::Map::new();
    state.insert(
        "timestamp".into(),
        jiff::Zoned::now()
            .strftime("%Y%m%d-%H%M%S")
            .to_string()
            .into(),
    );
    state.insert("work_dir".into(), run.dir.display().to_string().into());
    if let Some(branch) = spec.project.as_deref().and_then(git_branch) {
        state.insert("original_branch".into(), branch.into());
    }
    state.extend(spec.state.clone());
    let mut json = serde_json::to_vec_pretty(&serde_json::Value::Object(state))?;
    json.push(b'\n');
    crate::spool::write_atomic(&tmp, &run.state_file(), &json, false)?;
    for empty in ["transcript.log", "master.diff"] {
        crate::spool::write_atomic(&tmp, &run.dir.join(empty), b"", false)?;
    }
    let meta = RunMeta {
        agents: spec.agents.clone(),
        created_ms: created.as_millisecond(),
        timeout_s: spec.timeout_s,
        heartbeat_s: spec.heartbeat_s,
        project: spec.project.clone(),
    };
    let mut json = serde_json::to_vec_pretty(&meta)?;
    json.push(b'\n');
    crate::spool::write_atomic(&tmp, &run.meta_file(), &json, false)?;
    Ok(run)
}

/// The branch checked out in `project`, if it is a git repository.
fn git_branch(project: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(project)
        .args(["rev-parse", "--abbrev-ref", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|b| !b.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_makes_the_seeds_layout_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let run = init(&InitSpec {
            dir: dir.clone(),
            agents: vec!["narrator".into(), "scribe".into()],
            state: serde_json::Map::from_iter([("total_commits".into(), 3.into())]),
            timeout_s: None,
            heartbeat_s: None,
            project: None,
        })
        .unwrap();
        for f in [
            "transcript.log",
            "master.diff",
            "state.json",
            "narrator/status",
            "scribe/status",
        ] {
            assert!(dir.join(f).is_file(), "{f}");
        }
        assert!(dir.join("scribe/inbox").is_dir() && dir.join("scribe/outbox").is_dir());
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(run.agents(), ["narrator", "scribe"]);
        let state: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("state.json")).unwrap()).unwrap();
        assert_eq!(state["total_commits"], 3);
        assert_eq!(run.meta().agents, ["narrator", "scribe"]);
        // A second run in the same folder is refused.
        let again = init(&InitSpec {
            dir,
            agents: vec!["a".into()],
            state: Default::default(),
            timeout_s: None,
            heartbeat_s: None,
            project: None,
        });
        assert!(again.unwrap_err().to_string().contains("not empty"));
    }

    #[test]
    fn a_mailbox_is_named_by_run_and_agent() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("scribe/inbox")).unwrap();
        let m = Mailbox::parse(&tmp.path().join("scribe")).unwrap();
        assert_eq!(m.agent, "scribe");
        let err = Mailbox::parse(&tmp.path().join("nobody")).unwrap_err();
        assert!(err.to_string().contains("its agents: scribe"), "{err}");
        assert!(!is_agent_name(".hitl") && !is_agent_name("a/b") && is_agent_name("scribe-2"));
    }

    #[test]
    fn agent_ids_are_valid_ids() {
        let id = agent_id("run 1/x", "scribe");
        assert_eq!(id, "mailbox.run_1_x.scribe");
        assert!(crate::protocol::is_valid_id(&id));
    }
}
