//! Settings and where things live.
//!
//! Layers, later wins: built-in defaults < user `config.toml` < project
//! `.helpers/config.toml` < environment < command-line flags. Flags are applied by the
//! commands; this module merges the rest into one validated [`Settings`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::protocol::{DEFAULT_MAX_QUESTION_BYTES, Priority};

/// Per-user folders: config (`config.toml`, `token`) and data (`hitl.db`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `$XDG_CONFIG_HOME/hitl`, or `$HITL_HOME`.
    pub config_dir: PathBuf,
    /// `$XDG_DATA_HOME/hitl`, or `$HITL_HOME`.
    pub data_dir: PathBuf,
}

impl Paths {
    /// Reads `HITL_HOME`, then the XDG variables, then falls back to `~/.config` and
    /// `~/.local/share`.
    pub fn from_env() -> Paths {
        if let Some(home) = std::env::var_os("HITL_HOME").filter(|h| !h.is_empty()) {
            let home = PathBuf::from(home);
            return Paths {
                config_dir: home.clone(),
                data_dir: home,
            };
        }
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        let xdg = |var: &str, fallback: &str| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(fallback))
                .join("hitl")
        };
        Paths {
            config_dir: xdg("XDG_CONFIG_HOME", ".config"),
            data_dir: xdg("XDG_DATA_HOME", ".local/share"),
        }
    }

    /// The history database URL: `HITL_DB`, else `sqlite://DATA_DIR/hitl.db`.
    pub fn db_url(&self) -> String {
        std::env::var("HITL_DB")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("hitl.db").display()))
    }

    /// The user's `config.toml`.
    pub fn user_config(&self) -> PathBuf {
        self.config_dir.join("config.toml")
    }
}

/// Everything configurable, with defaults filled in.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// `[ask]`: the agent side.
    pub ask: AskSettings,
    /// `[listen]`: the broker.
    pub listen: ListenSettings,
    /// `[spool]`: the `.helpers/` files.
    pub spool: SpoolSettings,
    /// `[http]`: the HTTP API of `hitl listen` and `hitl serve`.
    pub http: HttpSettings,
    /// `[history]`: how much history is kept.
    pub history: HistorySettings,
    /// `[hook]`: what `hitl hook` asks the human about, and what it says unanswered.
    pub hook: HookSettings,
    /// `[tuning]`: the fast paths' switch.
    pub tuning: TuningSettings,
    /// `[tasks]`: the task runner (seed 002).
    pub tasks: TaskSettings,
    /// `[[webhooks]]`: where requests' news is posted (none unless configured; read
    /// from the user's settings only).
    pub webhooks: Vec<WebhookSettings>,
    /// `[client]`: how this user's commands reach servers (read from the user's
    /// settings only).
    pub client: ClientSettings,
    /// `[run]`: `hitl run`'s boundary (read from the user's settings only).
    pub run: RunSettings,
    /// `[telegram]`: a Telegram bot that asks in a chat when nobody is at the desk
    /// (none unless configured; read from the user's settings only).
    pub telegram: Option<TelegramSettings>,
    /// `[slack]`: a Slack app that asks in a channel when nobody is at the desk (none
    /// unless configured; read from the user's settings only).
    pub slack: Option<SlackSettings>,
    /// `[escalation]`: who a request reaches, when, and how it ends unanswered (read
    /// from the user's settings only).
    pub escalation: EscalationSettings,
}

/// `[slack]`: the app that asks (Socket Mode: it connects out, nothing connects in),
/// the channel it asks in, and who there may answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSettings {
    /// The app-level token with `connections:write` (`xapp-…`), for Socket Mode.
    pub app_token: String,
    /// The bot token (`xoxb-…`) with `chat:write`.
    pub bot_token: String,
    /// The channel it asks in, by id (`C0123456789`; the bot must be in it).
    pub channel: String,
    /// The members who may answer, by member id (`U0123456789`): nobody else can.
    pub approvers: Vec<String>,
    /// Your own member id: your presses count as you (this machine's user), not as
    /// a second person, for requests that need two people's approval.
    #[serde(default)]
    pub owner: Option<String>,
    /// The Web API's base (`https://slack.com/api/`, or `http://` to loopback).
    #[serde(default = "slack_api_url")]
    pub api_url: String,
}

fn slack_api_url() -> String {
    "https://slack.com/api/".into()
}

/// `[escalation]`: the ladder a request climbs while nobody answers it. The desk
/// first (every UI of the listener); after `away_after` seconds with nobody present,
/// the channels that reach you away from it (Web Push, Telegram); after
/// `teammate_after` seconds unanswered, a teammate's chat; at its deadline, its safe
/// default. `[escalation.normal]`, `.high` and `.urgent` change any of these for
/// requests of that priority.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EscalationSettings {
    /// Seconds a request waits with nobody present before it reaches you away from
    /// the desk.
    pub away_after: u64,
    /// Channels reached the moment a request is asked, whoever is present
    /// (`push`, `telegram`).
    pub at_once: Vec<String>,
    /// Seconds after a request was asked before it reaches `teammate` (never when
    /// unset).
    pub teammate_after: Option<u64>,
    /// Who the teammate step reaches: `telegram:CHAT_ID`, a chat the bot asks in
    /// (its members may answer, each a person of their own), or `slack:CHANNEL_ID`
    /// (where `[slack] approvers` answer).
    pub teammate: Vec<String>,
    /// What a request still unanswered at its deadline gets.
    pub at_deadline: AtDeadline,
    /// For normal requests.
    pub normal: LadderChanges,
    /// For high-priority requests.
    pub high: LadderChanges,
    /// For urgent requests.
    pub urgent: LadderChanges,
}

impl Default for EscalationSettings {
    fn default() -> EscalationSettings {
        EscalationSettings {
            away_after: 0,
            at_once: Vec::new(),
            teammate_after: None,
            teammate: Vec::new(),
            at_deadline: AtDeadline::None,
            normal: LadderChanges::default(),
            high: LadderChanges::default(),
            urgent: LadderChanges::default(),
        }
    }
}

/// What a request still unanswered at its deadline gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AtDeadline {
    /// It times out as its asker said (a hook then does what `[hook] unanswered_*`
    /// says).
    #[default]
    None,
    /// Approvals and permissions are denied, a moment before the asker's deadline so
    /// that it hears the denial; other kinds time out.
    Deny,
}

/// `[escalation.PRIORITY]`: the ladder's settings that differ for one priority.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct LadderChanges {
    /// See [`EscalationSettings::away_after`].
    pub away_after: Option<u64>,
    /// See [`EscalationSettings::at_once`].
    pub at_once: Option<Vec<String>>,
    /// See [`EscalationSettings::teammate_after`].
    pub teammate_after: Option<u64>,
    /// See [`EscalationSettings::teammate`].
    pub teammate: Option<Vec<String>>,
    /// See [`EscalationSettings::at_deadline`].
    pub at_deadline: Option<AtDeadline>,
}

/// One priority's ladder, every setting filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ladder {
    /// How long a request waits with nobody present before it reaches you away.
    pub away_after: std::time::Duration,
    /// Channels reached at once, whoever is present.
    pub at_once: Vec<String>,
    /// How long after it was asked a request reaches the teammate, if ever.
    pub teammate_after: Option<std::time::Duration>,
    /// Who the teammate step reaches.
    pub teammate: Vec<String>,
    /// What it gets unanswered at its deadline.
    pub at_deadline: AtDeadline,
}

impl EscalationSettings {
    /// The ladder for requests of `priority`.
    pub fn ladder(&self, priority: crate::protocol::Priority) -> Ladder {
        use crate::protocol::Priority;
        let changes = match priority {
            Priority::Normal => &self.normal,
            Priority::High => &self.high,
            Priority::Urgent => &self.urgent,
        };
        let secs = std::time::Duration::from_secs;
        Ladder {
            away_after: secs(changes.away_after.unwrap_or(self.away_after)),
            at_once: changes
                .at_once
                .clone()
                .unwrap_or_else(|| self.at_once.clone()),
            teammate_after: changes.teammate_after.or(self.teammate_after).map(secs),
            teammate: changes
                .teammate
                .clone()
                .unwrap_or_else(|| self.teammate.clone()),
            at_deadline: changes.at_deadline.unwrap_or(self.at_deadline),
        }
    }

    /// Whether any ladder reaches `channel` (`telegram`, `slack`): at once, or a
    /// teammate there.
    pub fn names(&self, channel: &str) -> bool {
        let mut all = [&self.normal, &self.high, &self.urgent]
            .into_iter()
            .flat_map(|c| c.at_once.iter().chain(c.teammate.iter()).flatten())
            .chain(self.at_once.iter().chain(&self.teammate));
        all.any(|n| n.split(':').next() == Some(channel))
    }

    /// The teammates every ladder names on `channel` (`slack`), without its prefix.
    pub fn teammates(&self, channel: &str) -> Vec<String> {
        let mut found: Vec<String> = [
            Some(&self.teammate),
            self.normal.teammate.as_ref(),
            self.high.teammate.as_ref(),
            self.urgent.teammate.as_ref(),
        ]
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| Some(t.strip_prefix(channel)?.strip_prefix(':')?.to_string()))
        .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Refuses a ladder naming a channel there is none of, or a teammate that is no
    /// chat, saying which.
    pub fn validate(&self) -> Result<()> {
        let tables = [
            (
                "[escalation]",
                Some(&self.at_once),
                Some(&self.teammate),
                self.teammate_after,
            ),
            (
                "[escalation.normal]",
                self.normal.at_once.as_ref(),
                self.normal.teammate.as_ref(),
                self.normal.teammate_after,
            ),
            (
                "[escalation.high]",
                self.high.at_once.as_ref(),
                self.high.teammate.as_ref(),
                self.high.teammate_after,
            ),
            (
                "[escalation.urgent]",
                self.urgent.at_once.as_ref(),
                self.urgent.teammate.as_ref(),
                self.urgent.teammate_after,
            ),
        ];
        for (table, at_once, teammate, after) in tables {
            for channel in at_once.into_iter().flatten() {
                if !AWAY_CHANNELS.contains(&channel.as_str()) {
                    anyhow::bail!(
                        "{table} at_once: {channel:?} is not a channel (one of: {})",
                        AWAY_CHANNELS.join(", ")
                    );
                }
            }
            for who in teammate.into_iter().flatten() {
                let telegram = who
                    .strip_prefix("telegram:")
                    .is_some_and(|id| id.parse::<i64>().is_ok());
                let slack = who.strip_prefix("slack:").is_some_and(|id| {
                    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())
                });
                if !telegram && !slack {
                    anyhow::bail!(
                        "{table} teammate: {who:?} is not a chat (telegram:CHAT_ID, the chat's \
                         number, or slack:CHANNEL_ID)"
                    );
                }
            }
            if after.is_some_and(|s| s > 7 * 24 * 3600) {
                anyhow::bail!("{table} teammate_after: at most a week, in seconds");
            }
        }
        Ok(())
    }
}

/// The channels that reach a person away from the desk, by the names `[escalation]`
/// uses.
pub const AWAY_CHANNELS: &[&str] = &["push", "telegram", "slack"];

/// `[telegram]`: the bot that asks, the chat it asks in, who there may answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramSettings {
    /// The bot's token, from @BotFather (`123456:ABC…`).
    pub bot_token: String,
    /// The chat it asks in: your own chat with the bot (your user id), or a group's
    /// id (negative).
    pub chat_id: i64,
    /// Who in that chat may answer, by Telegram user id (empty: anyone in it; in
    /// your own chat with the bot, that is you).
    #[serde(default)]
    pub users: Vec<i64>,
    /// Your own Telegram user id, when `chat_id` is a group's: your presses there
    /// count as you, not as a second person, for requests that need two people's
    /// approval. (In your own chat with the bot, `chat_id` is you already.)
    #[serde(default)]
    pub owner: Option<i64>,
    /// The Bot API server: Telegram's own, or a self-hosted one (`https://`, or
    /// `http://` to loopback).
    #[serde(default = "telegram_api_url")]
    pub api_url: String,
}

fn telegram_api_url() -> String {
    "https://api.telegram.org".into()
}

/// `[run]` settings: what an agent started by `hitl run` may write besides the
/// project, temp folders and the usual caches.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct RunSettings {
    /// More folders (or files) the agent may write, like `~/.gradle` (`~/` is the
    /// home). What decides for the human stays read-only inside them.
    pub writable: Vec<String>,
}

/// The TOML file at `path` as a document to edit in place, its comments and layout
/// kept (empty when there is no such file), for the commands that change the user's
/// files (`hitl rules add`, Codex's hook trust).
pub fn toml_to_edit(path: &Path) -> Result<toml_edit::DocumentMut> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    text.parse()
        .with_context(|| format!("{} is not TOML", path.display()))
}

/// `path` with a leading `~/` (or `~` alone) read as `home`.
pub fn expand_home(path: &str, home: &Path) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if path == "~" => home.to_path_buf(),
        None => PathBuf::from(path),
    }
}

/// `[client]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ClientSettings {
    /// Servers that are the user's own (`https://hitl.example.com`, scheme, host
    /// and port compared): `--server` and `HITL_SERVER` present the user's token only
    /// to these (and to a project's own listener); any other server gets the
    /// ask-only token, which asks and waits but never answers.
    pub servers: Vec<String>,
}

/// One `[[webhooks]]` entry: a URL that is told of requests created, answered,
/// timed out or withdrawn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// Where to POST: `https://…`, or `http://` to loopback. Its host must be
    /// loopback or in `[http] delivery_hosts`, as for pushes.
    pub url: String,
    /// The body: `json` (hitl's own shape) or `slack` (`text` and `blocks`).
    #[serde(default)]
    pub format: WebhookFormat,
    /// Signs each body (HMAC-SHA256, `X-Hitl-Signature`) when set.
    #[serde(default)]
    pub secret: Option<String>,
    /// Which news: `created`, `answered`, `timeout`, `withdrawn` (default all).
    #[serde(default = "all_webhook_events")]
    pub events: Vec<String>,
    /// The dashboard's address as the receiver should link to it (default: the
    /// listener's own).
    #[serde(default)]
    pub dashboard_url: Option<String>,
}

/// A webhook body's shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    /// hitl's own JSON (documented in docs/PROTOCOL.md).
    #[default]
    Json,
    /// Slack's incoming-webhook shape: `text` and `blocks`.
    Slack,
}

/// The news a webhook is told of.
pub const WEBHOOK_EVENTS: [&str; 4] = ["created", "answered", "timeout", "withdrawn"];

fn all_webhook_events() -> Vec<String> {
    WEBHOOK_EVENTS.iter().map(|e| e.to_string()).collect()
}

/// `[tasks]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskSettings {
    /// Programs a task session may run, by file name or full path.
    pub agents: Vec<String>,
    /// Start them inside `hitl run`'s boundary (a session refuses to start where
    /// this machine cannot make one, rather than run without).
    pub boundary: bool,
}

impl Default for TaskSettings {
    fn default() -> TaskSettings {
        TaskSettings {
            agents: vec!["claude".to_string()],
            boundary: true,
        }
    }
}

/// `[tuning]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuningSettings {
    /// Take the fast paths (see [`crate::runtime::tuning`]); off, hitl takes the plain way
    /// everywhere, to tell whether a problem is theirs. `HITL_FAST_PATHS` wins.
    pub fast_paths: bool,
}

impl Default for TuningSettings {
    fn default() -> TuningSettings {
        TuningSettings { fast_paths: true }
    }
}

/// `[hook]` settings: the policy of `hitl hook`, Claude Code's hook handler. A tool
/// call no rule names gets no opinion (Claude Code's own permissions apply).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HookSettings {
    /// Tools that always ask the human (answered remotely: AskUserQuestion's choices,
    /// ExitPlanMode's plan).
    pub decision_tools: Vec<String>,
    /// Globs of files whose writing (Edit, Write, MultiEdit, NotebookEdit) asks first.
    /// A glob without `/` matches a file name at any depth; one with `/` matches the
    /// path from the project's root (`**` for any folders), or an absolute path.
    pub protected_paths: Vec<String>,
    /// The user's own regular expressions of shell commands that ask first, matched
    /// against each command a line runs as the shell reads it (quotes removed,
    /// wrappers like `sudo` and `env` taken off, nested lines and substitutions
    /// included). hitl's own checks judge commands by meaning whatever this says.
    pub dangerous_commands: Vec<String>,
    /// Globs of paths that may be deleted recursively without asking: absolute
    /// (`/tmp/?*`, `~/` for the home) or from the project's root (`target/**`).
    /// Every other recursive delete asks.
    pub safe_deletes: Vec<String>,
    /// Every PermissionRequest (Claude Code about to show its permission dialog) is
    /// asked through hitl, answerable from any of its UIs.
    pub permission_requests: bool,
    /// Every Elicitation (an MCP server asking the user for input through Claude
    /// Code) is asked through hitl: a form, answered from any of its UIs.
    pub elicitations: bool,
    /// Seconds to wait for the human, unless `timeouts` names the tool.
    pub timeout: u64,
    /// Seconds to wait per tool name.
    pub timeouts: std::collections::BTreeMap<String, u64>,
    /// The request type asked per tool name (seed 004's `hitl_types`): `approval`
    /// (the default for a tool call) or `permission`. AskUserQuestion is always asked
    /// as its questions, and a PermissionRequest as a permission.
    pub types: std::collections::BTreeMap<String, crate::protocol::Kind>,
    /// How many different people must approve a call of the tool that hitl asks
    /// about (2 to 5; one when the tool is not named): two people's approval. No
    /// "always allow" rule passes such a call, and none is offered on it.
    pub approvals: std::collections::BTreeMap<String, u8>,
    /// When no human answers (no listener runs, nobody is at any of its UIs, the
    /// listener stopped or the last person left while the hook waited, or no answer
    /// in time), for a protected file or a dangerous command: "ask" (Claude Code's
    /// own prompt, the default), "deny" (for unattended runs, where nobody would see
    /// that prompt) or "none" (no opinion).
    pub unanswered_dangerous: Unanswered,
    /// The same for everything else asked (decision tools, permission requests).
    pub unanswered_other: Unanswered,
    /// "Always allow" rules: calls these cover are allowed without asking (see
    /// `guard::rules`; `hitl rules` lists, adds and removes them).
    pub allow: Vec<String>,
    /// Build and test commands you trust (`"cargo test"`, `"npm run lint"`): where
    /// Claude Code asks nobody (`bypassPermissions`, `dontAsk`, `auto`), a Bash call
    /// passes unasked only when hitl proves every command in it harmless, and these
    /// (which run the project's own code) count as such, word for word from their
    /// start.
    pub trusted_tools: Vec<String>,
}

/// What `hitl hook` says when no human answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unanswered {
    /// Refuse the call.
    Deny,
    /// Leave it to Claude Code's own prompt.
    Ask,
    /// No opinion: Claude Code's permission settings decide.
    None,
}

/// Seed 004's protected files, and more.
pub const DEFAULT_PROTECTED_PATHS: &[&str] = &[
    ".env",
    ".env.*",
    "*.env",
    "**/package.json",
    "**/settings.json",
    "**/*.config.*",
    "**/CLAUDE.md",
    ".claude/**",
    "**/docker-compose*.yml",
    "**/Dockerfile*",
    "**/.gitlab-ci.yml",
    "**/.github/**",
    ".git/**",
    ".helpers/**",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ed25519*",
    "/etc/**",
    "~/.ssh/**",
    "~/.bashrc",
    "~/.profile",
    "~/.zshrc",
];

/// Paths whose trees may be deleted without asking: the insides of the temp
/// folders, and what a package manager or a tool makes again by itself
/// (installed dependencies, caches). Build output is not here: it may be all
/// there is of a release.
pub const DEFAULT_SAFE_DELETES: &[&str] = &[
    "/tmp/?*/**",
    "/tmp/?*",
    "/var/tmp/?*/**",
    "/var/tmp/?*",
    "**/node_modules",
    "**/node_modules/**",
    "**/__pycache__",
    "**/.pytest_cache",
    "**/.mypy_cache",
    "**/.ruff_cache",
];

impl Default for HookSettings {
    fn default() -> HookSettings {
        HookSettings {
            decision_tools: vec![
                "AskUserQuestion".into(),
                "ExitPlanMode".into(),
                "EnterPlanMode".into(),
            ],
            protected_paths: DEFAULT_PROTECTED_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            dangerous_commands: Vec::new(),
            safe_deletes: DEFAULT_SAFE_DELETES.iter().map(|s| s.to_string()).collect(),
            permission_requests: true,
            elicitations: true,
            timeout: 120,
            timeouts: [
                ("AskUserQuestion".to_string(), 300),
                ("EnterPlanMode".to_string(), 60),
            ]
            .into_iter()
            .collect(),
            types: Default::default(),
            approvals: Default::default(),
            unanswered_dangerous: Unanswered::Ask,
            unanswered_other: Unanswered::None,
            allow: Vec::new(),
            trusted_tools: Vec::new(),
        }
    }
}

impl HookSettings {
    /// Seconds to wait for the human about `tool`.
    pub fn timeout_for(&self, tool: &str) -> u64 {
        self.timeouts.get(tool).copied().unwrap_or(self.timeout)
    }

    /// How many people must approve a call of `tool` that hitl asks about.
    pub fn approvals_for(&self, tool: &str) -> u8 {
        self.approvals.get(tool).copied().unwrap_or(1).max(1)
    }
}

/// `[history]` settings: retention, applied hourly by the broker and by `hitl gc`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistorySettings {
    /// Ended requests and agent events older than this many days are deleted; 0
    /// keeps them for ever.
    pub keep_days: u64,
    /// When history's rows take more than this many MiB, the oldest ended ones are
    /// deleted until they fit; 0: no limit.
    pub max_mb: u64,
}

impl Default for HistorySettings {
    fn default() -> HistorySettings {
        // A quarter of answers to look back on; a size no laptop minds, which an
        // agent flooding the API reaches in minutes rather than filling the disk.
        HistorySettings {
            keep_days: 90,
            max_mb: 1024,
        }
    }
}

impl HistorySettings {
    /// As the store's retention policy.
    pub fn retention(&self) -> crate::store::Retention {
        crate::store::Retention {
            keep_days: self.keep_days,
            max_bytes: self.max_mb.saturating_mul(1 << 20),
        }
    }
}

/// `[http]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSettings {
    /// Where `hitl listen` serves HTTP ("off" for nowhere). If the port is taken, a
    /// free one is used and written to `.helpers/.listener.json`.
    pub listen_addr: String,
    /// Let loopback clients without the token create requests and poll their answers
    /// (seed 004's clients send no token). Off: the token is needed for everything.
    pub open_loopback: bool,
    /// Request bodies bigger than this many bytes are refused with 413.
    pub max_body_bytes: usize,
    /// Requests per second each client address may make (bursts of twice that);
    /// 0 turns the limit off.
    pub rate_limit: u32,
    /// Apply the rate limit to loopback clients too (off: local agents are trusted
    /// not to flood the broker they run beside).
    pub rate_limit_loopback: bool,
    /// Requests (and events) each caller may create per second, bursts of twice that,
    /// loopback included: each OS user and the token's holder have their own budget.
    /// 0 turns it off.
    pub create_rate_limit: u32,
    /// Origins allowed to call the API from a browser (CORS) and to open its
    /// WebSockets, besides the server's own: `http(s)://host[:port]` each, no
    /// wildcards. Empty: none.
    pub allowed_origins: Vec<String>,
    /// Names the server answers to besides loopback addresses, `localhost` and the
    /// address it is bound to (a `Host` naming anything else is refused: DNS
    /// rebinding). Bound beyond loopback with this empty, any name is answered.
    pub allowed_hosts: Vec<String>,
    /// Hosts besides loopback that answers may be delivered to (`responseWebSocketUrl`)
    /// and webhooks posted to; and push services besides the browsers' own that Web
    /// Push may go to (loopback included: named here, or not at all).
    pub delivery_hosts: Vec<String>,
    /// HTTP connections open at once; more are closed as they come (file descriptors
    /// are kept for the spool and the store whatever this says).
    pub max_connections: usize,
    /// Seconds a connection may take to send a request head, counted from when it
    /// opens or its last response went out: idle and slow (slowloris) clients are cut.
    pub header_timeout: u64,
    /// Seconds a request body may take to arrive after its head: a body sent a byte
    /// now and then is cut (408).
    pub body_timeout: u64,
    /// A PEM certificate chain (the server's own first): with `tls_key`, HTTP is
    /// served over TLS (https and wss) instead of plain. `~/` is the home folder; a
    /// relative path is taken from hitl's config folder. Read from the user's
    /// settings only.
    pub tls_cert: Option<String>,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub tls_key: Option<String>,
    /// The URL other devices reach this server by (`https://box.tail1234.ts.net`,
    /// through a tunnel or on the LAN), for `hitl pair`'s links; unset: the
    /// server's own. Read from the user's settings only.
    pub public_url: Option<String>,
}

/// Where a listener serves HTTP unless told otherwise.
pub const DEFAULT_LISTEN_ADDR: &str = "127.0.0.1:4000";

impl Default for HttpSettings {
    fn default() -> HttpSettings {
        HttpSettings {
            listen_addr: DEFAULT_LISTEN_ADDR.into(),
            open_loopback: true,
            max_body_bytes: 1024 * 1024,
            rate_limit: 50,
            rate_limit_loopback: false,
            create_rate_limit: 200,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            delivery_hosts: Vec::new(),
            max_connections: 512,
            header_timeout: 10,
            body_timeout: 30,
            tls_cert: None,
            tls_key: None,
            public_url: None,
        }
    }
}

impl HttpSettings {
    /// Refuses settings a server cannot honour safely, saying which and why: a
    /// wildcard or malformed origin (`*` would let every web page in), an empty or
    /// malformed host name.
    pub fn validate(&self) -> Result<()> {
        for origin in &self.allowed_origins {
            if origin.trim() == "*" {
                anyhow::bail!(
                    "[http] allowed_origins = [\"*\"] would let every web page use the API; \
                     list the origins instead, like \"http://localhost:5173\""
                );
            }
            if normalise_origin(origin).is_none() {
                anyhow::bail!(
                    "[http] allowed_origins: {origin:?} is not an origin; write \
                     scheme://host[:port], like \"http://localhost:5173\" (no path, no wildcard)"
                );
            }
        }
        if self.max_connections == 0 {
            anyhow::bail!("[http] max_connections must be at least 1");
        }
        if self.header_timeout == 0 || self.header_timeout > 3600 {
            anyhow::bail!("[http] header_timeout must be 1 to 3600 seconds");
        }
        if self.body_timeout == 0 || self.body_timeout > 3600 {
            anyhow::bail!("[http] body_timeout must be 1 to 3600 seconds");
        }
        if let Some(url) = &self.public_url
            && normalise_origin(url).is_none()
        {
            anyhow::bail!(
                "[http] public_url: {url:?} is not a URL of a server; write \
                 scheme://host[:port], like \"https://box.tail1234.ts.net\" (no path)"
            );
        }
        for host in &self.allowed_hosts {
            let ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            if !ok {
                anyhow::bail!(
                    "[http] allowed_hosts: {host:?} is not a host name (letters, digits, \
                     '.', '-' and '_'; no port, no wildcard)"
                );
            }
        }
        Ok(())
    }
}

/// `scheme://authority` in lower case without a trailing slash, if `origin` is an
/// http(s) origin and nothing more (no path, query, user or wildcard).
pub fn normalise_origin(origin: &str) -> Option<String> {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let rest = o
        .strip_prefix("http://")
        .or_else(|| o.strip_prefix("https://"))?;
    let bad = |c: char| matches!(c, '/' | '?' | '#' | '@' | '*' | ' ') || c.is_control();
    if rest.is_empty() || rest.contains(bad) {
        return None;
    }
    Some(o)
}

/// `[ask]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AskSettings {
    /// Seconds to wait for an answer; 0 waits for ever.
    pub timeout: u64,
    /// Priority of questions that do not say.
    pub priority: Priority,
    /// Seconds a question stays pending after its asker was stopped from outside
    /// (SIGTERM, SIGHUP: a tool's timeout, a closed terminal), for the same agent to
    /// ask it again and get the answer given meanwhile; 0 withdraws it at once.
    pub keep_when_stopped: u64,
}

/// `[listen]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListenSettings {
    /// Question files bigger than this are rejected.
    pub max_question_bytes: u64,
}

/// `[spool]` settings.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SpoolSettings {
    /// fsync questions, answers and their folders before telling anyone. Off by
    /// default: a spool file only matters while its asker can read it, a killed
    /// process leaves the page cache intact, and a power loss takes the asker with it.
    /// What the human said is recorded in the history store before its answer file is
    /// written, so a crash cannot lose it either way.
    pub fsync: bool,
}

impl Default for AskSettings {
    fn default() -> AskSettings {
        AskSettings {
            timeout: 300,
            priority: Priority::Normal,
            keep_when_stopped: 30 * 60,
        }
    }
}

impl Default for ListenSettings {
    fn default() -> ListenSettings {
        ListenSettings {
            max_question_bytes: DEFAULT_MAX_QUESTION_BYTES,
        }
    }
}

/// The commented defaults `hitl init` writes to `.helpers/config.toml`.
pub const PROJECT_CONFIG_TEMPLATE: &str = r#"# hitl project settings. Every key is optional: a value shown is its default, unless
# the line says "for example".
# Layers, later wins: defaults < ~/.config/hitl/config.toml < this file < HITL_* env < flags.

[ask]
# Seconds `hitl ask` and scripts/ask-human.sh wait for an answer; 0 waits for ever.
# timeout = 300
# Priority of questions that do not say: "normal", "high" or "urgent".
# priority = "normal"
# Seconds a question stays pending when its asker is stopped from outside (a tool's
# timeout, a closed terminal: SIGTERM or SIGHUP; Ctrl-C withdraws it): the same agent
# asking the same question again gets the answer given meanwhile. 0 withdraws at once.
# keep_when_stopped = 1800

[listen]
# Question files bigger than this many bytes are moved to .helpers/rejected/.
# max_question_bytes = 1048576

[spool]
# fsync question and answer files before the other side sees them. Off: renames stay
# atomic, a killed process loses nothing (the page cache outlives it), and answers are
# recorded in history before their file is written; on costs a few ms per question on
# a disk and only matters for a power loss, which takes the asker down too.
# fsync = false

[http]
# Where `hitl listen` serves the HTTP API ("off" for nowhere). Left at the default and
# held by another of your listeners, the project's own port (the same each run) is
# used; a port set here is kept: taken, the listener says by whom and stops.
# listen_addr = "127.0.0.1:4000"
# Loopback clients may create requests and poll their answers without the token.
# open_loopback = true
# Bodies over this many bytes are refused (413).
# max_body_bytes = 1048576
# Requests per second per client address (0: no limit), and whether loopback counts.
# rate_limit = 50
# rate_limit_loopback = false
# Requests and events each caller (each OS user, or the token's holder) may create per
# second, loopback included (0: no limit).
# create_rate_limit = 200
# Browser origins allowed to call the API and open its WebSockets, like
# "http://localhost:5173" (no wildcards).
# allowed_origins = []

# Names the server answers to besides 127.0.0.1, ::1, localhost and its own address.
# allowed_hosts = []
# Hosts besides loopback that answers may be pushed to (responseWebSocketUrl) and
# webhooks posted to; push services besides the browsers' own (Web Push).
# delivery_hosts = []
# HTTP connections open at once (more are closed as they come), and the seconds a
# connection may take to send a request head before it is cut (idle or slowloris).
# Another OS user (or a remote address) may hold an eighth of the connections, all of
# them together half. A request body must arrive within body_timeout seconds.
# max_connections = 512
# header_timeout = 10
# body_timeout = 30
# To serve https (a phone, another machine): tls_cert and tls_key, a PEM certificate
# chain and its key, and public_url, the URL devices reach it by, in your user
# settings only (docs/answering.md says how).

[tuning]
# Take the fast paths: commits on the caller's thread when the store is idle, SQLite's
# WAL written in one piece per commit, files made ahead of need, a signal that wakes a
# waiting asker. Off takes the plain way everywhere (HITL_FAST_PATHS=0 does the same),
# to tell whether a problem is theirs.
# fast_paths = true

[tasks]
# Programs a task session may run (`hitl task session --command`), by name or path:
# a session types tasks into an agent with your rights, so only agents you name.
# agents = ["claude"]
# Start them inside `hitl run`'s boundary, where nothing they do can change hitl's
# files or read its secrets (a session refuses to start where this machine cannot
# make one; false runs them without).
# boundary = true

[run]
# `hitl run AGENT`: folders the agent may write besides the project, temp folders and
# the usual caches (~/.cache, ~/.cargo/registry, ~/.cargo/git, ~/.npm, Claude Code's
# state in ~/.claude). Read from your user settings only.
# writable = ["~/.gradle"]  # for example

[history]
# Ended requests and agent events older than this many days are deleted (0: never),
# then the oldest ended ones while history is over max_mb MiB (0: no limit). The
# broker applies this hourly; `hitl gc` applies it now.
# keep_days = 90
# max_mb = 1024

[hook]
# `hitl hook`, Claude Code's hook handler (`hitl init --claude` installs it). A tool
# call no rule names gets no opinion: Claude Code's own permission settings apply.
# Tools that always ask the human, answered from any hitl UI.
# decision_tools = ["AskUserQuestion", "ExitPlanMode", "EnterPlanMode"]
# Files whose writing asks first: a glob without "/" matches a file name anywhere,
# one with "/" the path from the project root ("**" for any folders) or an absolute
# path ("~/" for home). Setting the list replaces these defaults (hitl's own files,
# its hooks and your shell's start-up files are protected whatever it says):
# protected_paths = [
#   ".env", ".env.*", "*.env", "**/package.json", "**/settings.json", "**/*.config.*",
#   "**/CLAUDE.md", ".claude/**", "**/docker-compose*.yml", "**/Dockerfile*",
#   "**/.gitlab-ci.yml", "**/.github/**", ".git/**", ".helpers/**", "*.pem", "*.key",
#   "id_rsa*", "id_ed25519*", "/etc/**", "~/.ssh/**", "~/.bashrc", "~/.profile", "~/.zshrc",
# ]
# Shell commands are read as bash reads them and judged by what they do: recursive
# deletes of /, ~, the project or anything outside it, force pushes and other
# history rewrites, SQL that drops or deletes every row, disks formatted or written
# over, downloads run as code, code known only when it runs, chmod/chown -R on wide
# trees, hitl's answers and rules from an agent's shell, and shell writes (>, tee,
# sed -i, cp, mv, ln, dd, truncate) to protected files.
# Your own patterns besides (regular expressions, matched against each command a
# line runs, quotes removed and wrappers like sudo taken off):
# dangerous_commands = ['^terraform destroy']  # for example
# Paths rm -rf may delete without asking (absolute, or from the project root, like
# "target/**"); every other recursive delete asks. Setting the list replaces these:
# safe_deletes = [
#   "/tmp/?*/**", "/tmp/?*", "/var/tmp/?*/**", "/var/tmp/?*", "**/node_modules",
#   "**/node_modules/**", "**/__pycache__", "**/.pytest_cache", "**/.mypy_cache",
#   "**/.ruff_cache",
# ]
# Ask every PermissionRequest (Claude Code about to show its permission dialog).
# permission_requests = true
# Ask every Elicitation (an MCP server asking you for input) as a form.
# elicitations = true
# Seconds to wait for the human, and per tool.
# timeout = 120
# timeouts = { AskUserQuestion = 300, EnterPlanMode = 60 }  # for example
# The request type per tool: "approval" (the default) or "permission".
# types = { Bash = "permission" }  # for example
# How many people must approve a call of the tool that hitl asks about (2 to 5;
# the second is reached on Telegram or Slack). No "always allow" rule passes it.
# approvals = { Bash = 2 }  # for example
# When no human answers (no listener, nobody at its prompt or dashboard, no answer
# in time): "ask" (Claude Code's own prompt), "deny" (for unattended runs such as
# bypassPermissions or CI, where nobody sees that prompt) or "none" (no opinion);
# for protected files and dangerous commands, and for the rest.
# unanswered_dangerous = "ask"  # "deny" where Claude Code asks nobody
# unanswered_other = "none"
# "Always allow this here": calls these rules cover are allowed without asking.
# Added when you approve with "always", or by `hitl rules add`; `hitl rules` lists
# them. Bash(CMD) is that command exactly, Bash(CMD:*) any starting with its words,
# Edit(GLOB) writing matching files from the project root (any file-writing tool).
# allow = ["Bash(npm publish:*)", "Edit(config/*.json)"]  # for example
# Where Claude Code asks nobody (bypassPermissions, dontAsk, auto), a Bash call
# passes unasked only when hitl proves every command in it harmless (reading,
# listing, searching; see README). Builds and tests run the project's own code:
# name the ones you trust, matched word for word from their start.
# trusted_tools = ["cargo test", "cargo build", "npm test"]  # for example
"#;

impl Settings {
    /// One settings file's text as settings, as [`load`] reads each layer, with the
    /// checks a server makes at start.
    pub fn from_toml(text: &str) -> Result<Settings> {
        let table: toml::Table = text.parse().context("not TOML")?;
        let settings: Settings = toml::Value::Table(table)
            .try_into()
            .context("invalid settings")?;
        settings.http.validate()?;
        Ok(settings)
    }
}

fn read_table(path: &Path) -> Result<Option<toml::Table>> {
    match std::fs::read_to_string(path) {
        // The file `hitl init` writes sets nothing until someone uncomments a line:
        // every `hitl ask` reads it, and parsing it costs as much as the rest of the
        // settings' work.
        Ok(text) if sets_nothing(&text) => Ok(None),
        Ok(text) => Ok(Some(text.parse::<toml::Table>().with_context(|| {
            format!("reading settings from {}", path.display())
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// True when a TOML text holds nothing but comments, blank lines and plain `[table]`
/// headers, so that it means the defaults.
fn sets_nothing(text: &str) -> bool {
    text.lines().map(str::trim).all(|l| {
        l.is_empty()
            || l.starts_with('#')
            || (l.starts_with('[')
                && !l.starts_with("[[")
                && l.ends_with(']')
                && l[1..l.len() - 1]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    })
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

/// Loads the layered settings, with the project's settings file
/// (`.helpers/config.toml`) if there is a project.
pub fn load(paths: &Paths, project_config: Option<&Path>) -> Result<Settings> {
    let mut table = toml::Table::new();
    if let Some(t) = read_table(&paths.user_config())? {
        merge(&mut table, t);
    }
    if let Some(file) = project_config
        && let Some(mut t) = read_table(file)?
    {
        // A project's settings sit beside the agents that work in it: they may not
        // send the human's questions anywhere.
        for (key, shown) in [
            ("webhooks", "[[webhooks]]"),
            ("telegram", "[telegram]"),
            ("slack", "[slack]"),
            ("escalation", "[escalation]"),
            ("client", "[client]"),
            ("run", "[run]"),
        ] {
            if t.remove(key).is_some() {
                eprintln!(
                    "hitl: {}: {shown} is read from your user settings only ({}); ignored here",
                    file.display(),
                    paths.user_config().display()
                );
            }
        }
        // Nor say which key and certificate the user's listener presents.
        if let Some(toml::Value::Table(http)) = t.get_mut("http") {
            for key in ["tls_cert", "tls_key", "public_url"] {
                if http.remove(key).is_some() {
                    eprintln!(
                        "hitl: {}: [http] {key} is read from your user settings only ({}); \
                         ignored here",
                        file.display(),
                        paths.user_config().display()
                    );
                }
            }
        }
        merge(&mut table, t);
    }
    let mut settings: Settings = if table.is_empty() {
        // Nothing set: the defaults, without a pass of the deserializer over an empty
        // table (a tenth of a whole `hitl ask`'s own work, most of it first touches
        // of code no other step needs).
        Settings::default()
    } else {
        toml::Value::Table(table)
            .try_into()
            .context("invalid settings (see .helpers/config.toml for the keys)")?
    };
    if let Ok(t) = std::env::var("HITL_TIMEOUT") {
        settings.ask.timeout = t
            .trim()
            .parse()
            .with_context(|| format!("HITL_TIMEOUT={t:?} is not a number of seconds"))?;
    }
    crate::runtime::tuning::configure(settings.tuning.fast_paths);
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_parses_to_the_defaults() {
        let t: toml::Table = PROJECT_CONFIG_TEMPLATE.parse().unwrap();
        let s: Settings = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(s, Settings::default());
    }

    /// "A value shown is its default": every commented `key = value` of the
    /// template that is not an example, uncommented, gives the defaults (a list
    /// shown in part would drop the rest when uncommented).
    #[test]
    fn every_value_the_template_shows_is_the_default() {
        let mut text = String::new();
        let mut depth = 0i32;
        for line in PROJECT_CONFIG_TEMPLATE.lines() {
            let setting = line.strip_prefix("# ").filter(|rest| {
                depth > 0
                    || rest
                        .split_once(" = ")
                        .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            });
            match setting {
                Some(rest) if !rest.ends_with("# for example") => {
                    depth += rest.matches(['[', '{']).count() as i32
                        - rest.matches([']', '}']).count() as i32;
                    text.push_str(rest);
                }
                _ => text.push_str(line),
            }
            text.push('\n');
        }
        let shown: Settings = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(shown, Settings::default(), "{text}");
        assert!(text.contains("\nprotected_paths = ["), "{text}");
    }

    #[test]
    fn a_file_of_comments_and_headers_sets_nothing() {
        assert!(sets_nothing(PROJECT_CONFIG_TEMPLATE));
        assert!(sets_nothing("\n# x = 1\n[ask]\n  [http]  \n"));
        assert!(!sets_nothing("[ask]\ntimeout = 3\n"));
        assert!(!sets_nothing("[[ask]]\n"));
        assert!(!sets_nothing("[ask] # a comment after a header\n"));
        assert!(!sets_nothing("[ask\n"), "broken TOML is parsed, to say so");
    }

    #[test]
    fn project_overrides_user() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            config_dir: dir.path().join("cfg"),
            data_dir: dir.path().join("data"),
        };
        std::fs::create_dir_all(&paths.config_dir).unwrap();
        std::fs::write(
            paths.user_config(),
            "[ask]\ntimeout = 10\npriority = \"high\"\n",
        )
        .unwrap();
        let project = dir.path().join("config.toml");
        std::fs::write(&project, "[ask]\ntimeout = 20\n").unwrap();
        let s = load(&paths, Some(&project)).unwrap();
        assert_eq!(s.ask.timeout, 20);
        assert_eq!(s.ask.priority, Priority::High);
        std::fs::write(&project, "[ask]\ntimout = 20\n").unwrap();
        assert!(load(&paths, Some(&project)).is_err());
    }
}
