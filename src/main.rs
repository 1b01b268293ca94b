//! The `hitl` command line: parse flags, call into the library, map the outcome to an
//! exit code. Nothing else lives here.
//!
//! Exit codes: `hitl ask` 0 answered (approved), 1 cancelled or denied, 2 timed out,
//! 3 cannot ask (bad arguments, not initialised), 130 interrupted by Ctrl-C (question
//! withdrawn), 143/129 stopped by SIGTERM/SIGHUP (question kept for the same command).
//! Every other command: 0 success, 1 failure, 2 bad arguments.

#![deny(unsafe_code)]

use std::{io::Write, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

/// mimalloc for the daemons, glibc's malloc for the short-lived rest (see
/// `hitl::runtime::allocator`).
#[global_allocator]
static ALLOCATOR: hitl::runtime::allocator::ByRole = hitl::runtime::allocator::ByRole;
use hitl::claude::decision::{HookAgent, HookEvent};
use hitl::cmd::{
    answer::{AnswerOptions, AnswerWith},
    ask::{AskOptions, EXIT_CANNOT_ASK},
    listen::ListenOptions,
    serve::ServeOptions,
};

/// A human-in-the-loop broker for AI agents: one queue for every agent's questions
/// and approvals, answered from one place.
#[derive(Parser, Debug)]
#[command(name = "hitl", version, about, long_about = None, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `hitl --help`'s commands, in groups: the five a newcomer needs first, then the
/// rest by what they are for; each with a line of its own (`hitl help COMMAND` says
/// the rest). Every command is in exactly one group (a test checks).
const COMMAND_GROUPS: &[(&str, &[(&str, &str)])] = &[
    (
        "Start here",
        &[
            (
                "init",
                "Set up a project: .helpers/, its settings, scripts/ask-human.sh",
            ),
            (
                "listen",
                "Run the broker; answer in this terminal (a full-screen inbox)",
            ),
            ("ask", "Ask the human a question; the answer is printed"),
            ("pending", "List the questions waiting for an answer"),
            ("answer", "Answer a question from this terminal or a script"),
        ],
    ),
    (
        "Asking",
        &[
            (
                "hook",
                "Claude Code's hook handler: asks you before what needs you",
            ),
            ("mcp", "An MCP server on stdio whose tools ask you"),
        ],
    ),
    (
        "Answering",
        &[
            (
                "cancel",
                "Cancel a question (or --all): its asker stops waiting",
            ),
            ("dashboard", "A one-time login link for the web dashboard"),
            (
                "pair",
                "Log a phone or another device in: a QR code, good once",
            ),
            ("devices", "The devices logged in; revoke one at once"),
        ],
    ),
    (
        "Inspecting",
        &[
            ("status", "Is a listener running, how many questions wait"),
            ("agents", "The agents that have asked in this project"),
            ("history", "How past questions ended, newest first"),
            (
                "doctor",
                "Check everything hitl needs, each problem with its fix",
            ),
        ],
    ),
    (
        "Agents and tasks",
        &[
            ("rules", "The \"always allow\" rules of the hook"),
            ("run", "Start an agent inside a boundary the kernel keeps"),
            (
                "task",
                "Hand tasks to Claude Code sessions in tmux; get results",
            ),
            (
                "mailbox",
                "Agents in a run folder exchange work and ask you",
            ),
        ],
    ),
    (
        "Set-up",
        &[
            ("serve", "Run the broker for a shared host (HTTP only)"),
            (
                "service",
                "Run the listener as a user service (systemd, launchd)",
            ),
            ("token", "Print the API token, or the ask-only token"),
            ("completions", "Print shell completions"),
            ("man", "Print or install the manual pages"),
            ("gc", "Delete old history now"),
            ("demo", "A throwaway project where made-up agents ask you"),
        ],
    ),
];

/// The clap model with `hitl --help` listing [`COMMAND_GROUPS`] in place of clap's one
/// list.
fn cli_command() -> clap::Command {
    use clap::CommandFactory;
    use std::fmt::Write;
    let width = COMMAND_GROUPS
        .iter()
        .flat_map(|(_, cmds)| cmds.iter().map(|(name, _)| name.len()))
        .max()
        .unwrap_or(0);
    let mut groups = String::new();
    for (title, cmds) in COMMAND_GROUPS {
        let _ = writeln!(groups, "{title}:");
        for (name, what) in *cmds {
            let _ = writeln!(groups, "  {name:<width$}  {what}");
        }
        groups.push('\n');
    }
    Cli::command().help_template(format!(
        "{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{groups}Options:\n{{options}}\n\n\
         `hitl help COMMAND` (or `hitl COMMAND --help`) says all a command does.\n"
    ))
}

/// What `hitl rules` does.
#[derive(Subcommand, Debug)]
enum RulesAction {
    /// List the rules in force, numbered (the default).
    List,
    /// Add a rule to the project's config.
    Add {
        /// The rule, like 'Bash(npm publish:*)' or 'Edit(config/*.json)'.
        rule: String,
    },
    /// Remove a rule from the project's config, by its text or its number.
    Remove {
        /// The rule, or its number in `hitl rules`.
        rule: String,
    },
}

/// What `hitl service` does.
#[derive(Subcommand, Debug)]
enum ServiceAction {
    /// Write the unit and start it: `hitl listen --ui none` over the projects (answer
    /// in the dashboard), or `hitl serve` with --serve.
    Install(hitl::cmd::service::InstallOptions),
    /// Stop the service and remove its unit.
    Uninstall {
        /// Say what would be done; do nothing.
        #[arg(long)]
        dry_run: bool,
        /// The service manager (default: this system's).
        #[arg(long, value_enum)]
        manager: Option<hitl::cmd::service::Manager>,
    },
    /// Whether a unit is installed, what it runs, and whether it runs.
    Status {
        /// The service manager (default: this system's).
        #[arg(long, value_enum)]
        manager: Option<hitl::cmd::service::Manager>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// What `hitl devices` does besides listing.
#[derive(Subcommand, Debug)]
enum DevicesAction {
    /// End a device's session at once: its next request is refused, its open pages
    /// are cut off.
    Revoke {
        /// The device's id, as `hitl devices` lists it.
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Set up a project: .helpers/ (mode 0700), .helpers/config.toml, scripts/ask-human.sh.
    #[command(group(clap::ArgGroup::new("agent").args(["claude", "codex", "gemini"]).multiple(true)))]
    Init {
        /// Project folder (default: the current one).
        dir: Option<PathBuf>,
        /// Replace files that were edited since they were generated.
        #[arg(long)]
        force: bool,
        /// Also wire hitl into Claude Code: its hooks (every event) and MCP server
        /// (`hitl mcp`), keeping everything already there. For you only, by default:
        /// .claude/settings.local.json and this project's entry in ~/.claude.json.
        #[arg(long)]
        claude: bool,
        /// Also wire hitl into Codex CLI: its hooks in .codex/hooks.json (a dangerous
        /// shell command asked of you, the answer back to the model), trusted in
        /// $CODEX_HOME/config.toml so that Codex runs them. Codex loads a project's
        /// hooks once you trust the project; --user wires every project.
        #[arg(long)]
        codex: bool,
        /// Also wire hitl into Gemini CLI: its hooks in .gemini/settings.json (a
        /// dangerous shell command or write asked of you, a denial's reason back to
        /// the model). Gemini runs a project's hooks in a folder you trust; --user
        /// wires every project (~/.gemini/settings.json).
        #[arg(long)]
        gemini: bool,
        /// With --claude: into the files a team commits (.claude/settings.json and
        /// .mcp.json); the hooks do nothing where hitl is not installed.
        #[arg(long, requires = "claude", conflicts_with = "user")]
        shared: bool,
        /// With --claude, --codex or --gemini: into your settings for every project
        /// (~/.claude/settings.json and ~/.claude.json; $CODEX_HOME/hooks.json;
        /// ~/.gemini/settings.json).
        #[arg(long, requires = "agent")]
        user: bool,
        /// With --claude, --codex or --gemini: take hitl's hooks (and MCP server) out again (of
        /// the same files: add --shared or --user as when they were put in), and
        /// change nothing else (a file hitl changed and nothing else did is put back
        /// byte for byte).
        #[arg(long, requires = "agent")]
        remove: bool,
    },
    /// Run the broker: watch each project's .helpers/ and answer through a UI.
    Listen(ListenOptions),
    /// Run the broker for a shared host: HTTP only, no local UI or project spools.
    Serve(ServeOptions),
    /// Ask the human a question; print the answer on stdout.
    ///
    /// Exit status: 0 answered (approved), 1 cancelled or denied, 2 timed out,
    /// 3 cannot ask, 130 interrupted.
    Ask(AskOptions),
    /// Claude Code's hook handler: reads the hook's JSON on stdin, asks the human
    /// through the project's listener when the [hook] policy says so, and writes
    /// Claude Code's decision on stdout (nothing when it has no opinion).
    ///
    /// Always exits 0: the decision is in the JSON. Install it with `hitl init --claude`.
    Hook {
        /// Whose hook this is: Claude Code's (the default) or Codex's (installed by
        /// `hitl init --codex`).
        #[arg(long, value_enum, default_value_t)]
        agent: HookAgent,
        /// The hook event.
        #[arg(value_enum)]
        event: HookEvent,
    },
    /// List, add and remove the "always allow" rules of `hitl hook` ([hook] allow in
    /// .helpers/config.toml): calls they cover are allowed without asking.
    ///
    /// Bash(CMD) is that command exactly, Bash(CMD:*) any command starting with its
    /// words, Edit(GLOB) writing files matching GLOB from the project root.
    Rules {
        #[command(subcommand)]
        action: Option<RulesAction>,
        /// The project folder (default: the nearest one with .helpers/).
        #[arg(long, global = true)]
        dir: Option<PathBuf>,
        /// Print as JSON.
        #[arg(long, global = true)]
        json: bool,
    },
    /// An MCP server on stdio: tools ask_human, request_approval and
    /// permission_prompt ask through the project's listener.
    ///
    /// Install it with `hitl init --claude` (.mcp.json), or point any MCP client at
    /// `hitl mcp`. Stdout is the protocol; messages go to stderr.
    Mcp {
        /// The project whose listener is asked (default: CLAUDE_PROJECT_DIR, else the
        /// current folder).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Tasks: delegate work to Claude Code sessions in tmux, one task at
    /// a time per session, and get back each task's summary and deliverables.
    Task {
        /// The project whose listener runs the tasks.
        #[arg(long, global = true)]
        dir: Option<PathBuf>,
        #[command(subcommand)]
        action: hitl::cmd::task::TaskCommand,
    },
    /// Mailboxes: agents working in parallel in a run folder exchange
    /// requests and results and ask the user, without sleep loops; the listener
    /// relays their questions to every hitl UI.
    Mailbox {
        /// The project whose listener relays the runs.
        #[arg(long, global = true)]
        dir: Option<PathBuf>,
        #[command(subcommand)]
        action: hitl::cmd::mailbox::MailboxCommand,
    },
    /// List the questions waiting for an answer (outside a project: in every project
    /// your history knows of).
    Pending {
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Answer a question from this terminal or a script.
    Answer {
        /// The question's id (see `hitl pending`); `spool:ID` or `http:ID` when a
        /// spool question and a request made over HTTP share it.
        id: String,
        /// The answer: text, an option's number or text, y/n; for a questions
        /// request, one answer per question (each an option's number or label,
        /// numbers separated by commas where several may be picked, or your own text).
        #[arg(required_unless_present_any = ["approve", "deny"], conflicts_with_all = ["approve", "deny"],
              allow_negative_numbers = true)]
        text: Vec<String>,
        /// Approve an approval or permission request.
        #[arg(long, conflicts_with = "deny")]
        approve: bool,
        /// Deny an approval or permission request.
        #[arg(long)]
        deny: bool,
        /// A comment to go with --approve or --deny.
        #[arg(long, value_name = "C")]
        comment: Option<String>,
        /// With --approve: always allow calls like this one here from now on, by the
        /// rule the request offers (shown by `hitl pending --json` as
        /// context.always_allow) or by RULE (like 'Bash(npm publish:*)').
        #[arg(long, value_name = "RULE", num_args = 0..=1, default_missing_value = "", requires = "approve")]
        always: Option<String>,
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// History database URL.
        #[arg(long, env = "HITL_DB")]
        db: Option<String>,
        /// Print the answer written, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a question: its asker stops waiting (exit status 1).
    Cancel {
        /// The question's id; `spool:ID` or `http:ID` when two share it.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Every pending request of the project (as `hitl pending` lists them).
        #[arg(long)]
        all: bool,
        /// With --all: only this agent's (its id or its name).
        #[arg(long, requires = "all", value_name = "AGENT")]
        agent: Option<String>,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// History database URL.
        #[arg(long, env = "HITL_DB")]
        db: Option<String>,
    },
    /// List the agents that have asked in this project.
    Agents {
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show how past questions ended, newest first.
    History {
        /// Only this question (its id, or the start of one), shown as its record:
        /// each notification sent about it (push, Telegram, webhooks) and whether
        /// it was delivered, then how it ended, by whom and where.
        #[arg(long)]
        id: Option<String>,
        /// Only questions whose text, answer or agent name holds this (any case);
        /// `tag:NAME` only those tagged NAME.
        #[arg(long, value_name = "TEXT")]
        search: Option<String>,
        /// At most this many rows (0: all).
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// History database URL.
        #[arg(long, env = "HITL_DB")]
        db: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete old history now, as the [history] settings say (the broker does it hourly).
    Gc(hitl::cmd::gc::GcOptions),
    /// Print the API token (for `Authorization: Bearer`), or with --asker the
    /// ask-only token: it creates requests and reads their answers, nothing else
    /// (for agents run as another OS user).
    Token {
        /// The ask-only token.
        #[arg(long)]
        asker: bool,
    },
    /// Start an agent (claude, codex, gemini, a shell) inside a boundary the kernel
    /// keeps: hitl's files, secrets and hook wiring, git's hooks and your shell's
    /// start-up files cannot be changed or read by it or anything it starts. Exit
    /// status: the agent's; 125 no boundary could be made, 126 the agent could not
    /// start, 127 it was not found.
    Run(hitl::cmd::run::RunOptions),
    /// Print a one-time login link for the dashboard of the project's listener
    /// (the link printed at its start is spent once opened).
    Dashboard {
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The broker's URL (like http://127.0.0.1:4000) instead of the project's listener.
        #[arg(long, env = "HITL_SERVER")]
        server: Option<String>,
        /// Open the link in the desktop's browser too.
        #[arg(long)]
        open: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Log one device in to the dashboard (a phone): prints a link with a single-use
    /// code, and a QR code of it in a terminal. Set [http] public_url to the URL the
    /// device reaches the listener by (serve https for that: docs/answering.md).
    Pair {
        /// What to call the device in `hitl devices` (default: what its browser says).
        #[arg(long)]
        name: Option<String>,
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The broker's URL instead of the project's listener.
        #[arg(long, env = "HITL_SERVER")]
        server: Option<String>,
        /// Print JSON (`url`, `name`, `expires_in_seconds`).
        #[arg(long)]
        json: bool,
    },
    /// The devices logged in to the dashboard (by `hitl pair` or a login link): name,
    /// how, last seen and from where; `hitl devices revoke ID` ends one.
    Devices {
        #[command(subcommand)]
        action: Option<DevicesAction>,
        /// The project folder.
        #[arg(long, global = true)]
        dir: Option<PathBuf>,
        /// The broker's URL instead of the project's listener.
        #[arg(long, env = "HITL_SERVER", global = true)]
        server: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run the listener as a user service, started at login and restarted when it
    /// fails (a systemd user unit on Linux, a launchd agent on macOS).
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Print a shell's completions for hitl: `source <(hitl completions bash)`, or
    /// save them where the shell looks (bash: ~/.local/share/bash-completion/completions/hitl,
    /// zsh: a folder on $fpath as _hitl, fish: ~/.config/fish/completions/hitl.fish).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print hitl's manual pages (roff: hitl(1), then one per command):
    /// `hitl man | man -l -`; or write them as hitl.1, hitl-ask.1, … into a folder
    /// of $MANPATH (like ~/.local/share/man/man1).
    Man {
        /// Write the pages into this folder instead.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// A throwaway project where made-up agents ask one question of each kind, to
    /// see every UI answer them (--auto-answer runs it to the end by itself).
    Demo(hitl::cmd::demo::DemoOptions),
    /// Checks everything hitl needs (listener, presence, inotify, token and folder
    /// modes, port, history store, Claude Code's wiring, hitl on the PATH), each
    /// problem with its fix; exit 1 if something is broken.
    Doctor {
        /// The project folder (default: the nearest one with .helpers/).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Is a listener running, how many questions wait, where history lives.
    Status {
        /// The project folder.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    runtime_with(2)
}

fn runtime_with(workers: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?)
}

/// The runtime of `listen` and `serve`, sized for the store they will open.
fn daemon_runtime(db: &Option<String>) -> anyhow::Result<tokio::runtime::Runtime> {
    let db_url = db
        .clone()
        .unwrap_or_else(|| hitl::config::Paths::from_env().db_url());
    runtime_with(hitl::daemon::worker_threads(&db_url))
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Init {
            dir,
            force,
            claude,
            codex,
            gemini,
            shared,
            user,
            remove,
        } => {
            use hitl::cmd::init::{Claude, Other, Scope};
            if claude && remove {
                hitl::cmd::human::only_a_human("taking hitl's hooks out of Claude Code")?;
            }
            if codex || gemini && remove {
                // Trusting hooks is the user's to do, and so is taking them out.
                hitl::cmd::human::only_a_human("wiring hitl into Codex or Gemini CLI")?;
            }
            if force {
                // --force writes the settings' template over the project's own rules.
                hitl::cmd::human::only_a_human("`hitl init --force`")?;
            }
            let scope = match (shared, user) {
                (true, _) => Scope::Shared,
                (_, true) => Scope::User,
                _ => Scope::Local,
            };
            let claude = match (claude, remove) {
                (false, _) => Claude::No,
                (true, false) => Claude::Install(scope),
                (true, true) => Claude::Remove(scope),
            };
            let other = |wanted: bool| match (wanted, remove) {
                (false, _) => Other::No,
                (true, false) => Other::Install { user },
                (true, true) => Other::Remove { user },
            };
            hitl::cmd::init::run(dir, force, claude, other(codex), other(gemini))?
        }
        Command::Listen(opts) => {
            // A listener answers (its UI, --auto-answer, its dashboard's login link)
            // and takes the user's stored requests as its own.
            hitl::cmd::human::only_a_human("`hitl listen`")?;
            hitl::cmd::listen::unblock_stop_signals()?;
            daemon_runtime(&opts.db)?.block_on(hitl::cmd::listen::run(opts))?
        }
        Command::Serve(opts) => {
            hitl::cmd::human::only_a_human("`hitl serve`")?;
            hitl::cmd::listen::unblock_stop_signals()?;
            daemon_runtime(&opts.db)?.block_on(hitl::cmd::serve::run(opts))?
        }
        Command::Ask(opts) => return Ok(run_ask(opts)),
        // Before any thread starts: a user namespace is made by a process of one.
        Command::Run(opts) => return Ok(ExitCode::from(hitl::cmd::run::run(opts))),
        Command::Hook { event, agent } => return Ok(run_hook(event, agent)),
        Command::Mcp { dir } => hitl::claude::mcp::run(dir)?,
        Command::Task { dir, action } => {
            // 0-2 say how a task stands (`hitl task wait`); 3, that hitl could not ask.
            return Ok(match hitl::cmd::task::run(dir, action) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("hitl task: {e:#}");
                    ExitCode::from(hitl::cmd::task::EXIT_CANNOT_ASK)
                }
            });
        }
        Command::Mailbox { dir, action } => {
            // 0-5 say how a wait ended; 3 also that the command could not run.
            return Ok(match hitl::cmd::mailbox::run(dir, action) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("hitl mailbox: {e:#}");
                    ExitCode::from(hitl::cmd::mailbox::EXIT_CANNOT)
                }
            });
        }
        Command::Rules { action, dir, json } => {
            use hitl::cmd::rules;
            match action.unwrap_or(RulesAction::List) {
                RulesAction::List => rules::list(dir.as_deref(), json)?,
                RulesAction::Add { rule } => {
                    hitl::cmd::human::only_a_human("`hitl rules add`")?;
                    rules::add(dir.as_deref(), &rule, json)?
                }
                RulesAction::Remove { rule } => {
                    hitl::cmd::human::only_a_human("`hitl rules remove`")?;
                    rules::remove(dir.as_deref(), &rule, json)?
                }
            }
        }
        Command::Pending { dir, json } => hitl::cmd::inspect::pending(dir.as_ref(), json)?,
        Command::Answer {
            id,
            text,
            approve,
            deny,
            comment,
            always,
            dir,
            db,
            json,
        } => {
            hitl::cmd::human::only_a_human("answering a question")?;
            let with = match text {
                words if !words.is_empty() => AnswerWith::Text(words),
                _ => AnswerWith::Decision {
                    approve: approve && !deny,
                    comment,
                    always: always.map(|rule| Some(rule).filter(|r| !r.trim().is_empty())),
                },
            };
            runtime()?.block_on(hitl::cmd::answer::run(AnswerOptions {
                id,
                with,
                dir,
                db,
                json,
            }))?
        }
        Command::Cancel {
            id,
            all,
            agent,
            reason,
            dir,
            db,
        } => {
            hitl::cmd::human::only_a_human("cancelling a question")?;
            match id {
                Some(id) if !all => runtime()?.block_on(hitl::cmd::answer::run(AnswerOptions {
                    id,
                    with: AnswerWith::Cancel { reason },
                    dir,
                    db,
                    json: false,
                }))?,
                _ => runtime()?.block_on(hitl::cmd::answer::cancel_all(dir, agent, reason, db))?,
            }
        }
        Command::Agents { dir, json } => hitl::cmd::inspect::agents(dir.as_ref(), json)?,
        Command::History {
            id,
            search,
            limit,
            db,
            json,
        } => runtime()?.block_on(hitl::cmd::inspect::history(db, id, search, limit, json))?,
        Command::Status { dir, json } => hitl::cmd::inspect::status(dir.as_ref(), json)?,
        Command::Demo(opts) => {
            // Its listener shares the user's history store and prints a login link.
            hitl::cmd::human::only_a_human("`hitl demo`")?;
            return Ok(ExitCode::from(hitl::cmd::demo::run(opts)?));
        }
        Command::Doctor { dir, json } => {
            return Ok(ExitCode::from(hitl::cmd::doctor::run(dir, json)?));
        }
        Command::Gc(opts) => runtime()?.block_on(hitl::cmd::gc::run(opts))?,
        Command::Token { asker } => hitl::cmd::token::run(asker)?,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "hitl", &mut text);
            print_all(&text)?;
        }
        Command::Man { dir } => man_pages(dir)?,
        Command::Service { action } => match action {
            ServiceAction::Install(opts) => {
                hitl::cmd::human::only_a_human("`hitl service install`")?;
                hitl::cmd::service::install(opts)?
            }
            ServiceAction::Uninstall { dry_run, manager } => {
                hitl::cmd::service::uninstall(manager, dry_run)?
            }
            ServiceAction::Status { manager, json } => hitl::cmd::service::status(manager, json)?,
        },
        Command::Pair {
            name,
            dir,
            server,
            json,
        } => {
            hitl::cmd::human::only_a_human("`hitl pair` (a paired device answers questions)")?;
            runtime()?.block_on(hitl::cmd::devices::pair(dir.as_deref(), server, name, json))?
        }
        Command::Devices {
            action,
            dir,
            server,
            json,
        } => match action {
            None => {
                hitl::cmd::human::only_a_human("`hitl devices`")?;
                runtime()?.block_on(hitl::cmd::devices::list(dir.as_deref(), server, json))?
            }
            Some(DevicesAction::Revoke { id, json }) => {
                hitl::cmd::human::only_a_human("`hitl devices revoke`")?;
                runtime()?.block_on(hitl::cmd::devices::revoke(
                    dir.as_deref(),
                    server,
                    &id,
                    json,
                ))?
            }
        },
        Command::Dashboard {
            dir,
            server,
            open,
            json,
        } => {
            hitl::cmd::human::only_a_human("`hitl dashboard` (a login link answers questions)")?;
            runtime()?.block_on(hitl::cmd::dashboard::run(
                dir.as_deref(),
                server,
                open,
                json,
            ))?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `bytes` to stdout; a reader that stopped early (`| head`) is no error.
fn print_all(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// `hitl man`: hitl(1) and a page per command (hitl-ask(1), …), printed one after
/// the other or written into `dir`.
fn man_pages(dir: Option<PathBuf>) -> anyhow::Result<()> {
    use anyhow::Context;
    use clap::CommandFactory;
    let mut top = Cli::command();
    top.build();
    let mut pages = vec![("hitl".to_string(), top.clone())];
    for sub in top.get_subcommands().filter(|s| s.get_name() != "help") {
        // clap names commands with `&'static str`; this runs once, then exits.
        let name: &'static str = format!("hitl-{}", sub.get_name()).leak();
        pages.push((name.to_string(), sub.clone().name(name)));
    }
    let mut all = Vec::new();
    for (name, cmd) in pages {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        match &dir {
            Some(dir) => {
                let path = dir.join(format!("{name}.1"));
                std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(&path, &page))
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote    {}", path.display());
            }
            None => all.extend(page),
        }
    }
    print_all(&all)
}

/// The event and agent of `hitl hook EVENT` or `hitl hook --agent AGENT EVENT` when
/// those are the whole command line, read without clap: an agent runs the hook on
/// every tool call of every session, and building clap's model of every `hitl`
/// command is an eighth of such a start. Any other shape (another flag, `--help`, an
/// event or agent hitl does not know) goes through clap, so its help and errors are
/// the same.
fn hook_event(
    mut args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<(HookEvent, HookAgent)> {
    let (_, command, mut event) = (args.next()?, args.next()?, args.next()?);
    if command != "hook" {
        return None;
    }
    let mut agent = HookAgent::default();
    if event == "--agent" {
        agent = clap::ValueEnum::from_str(args.next()?.to_str()?, false).ok()?;
        event = args.next()?;
    }
    if args.next().is_some() {
        return None;
    }
    Some((
        clap::ValueEnum::from_str(event.to_str()?, false).ok()?,
        agent,
    ))
}

/// `hitl ask …` read by clap with the `ask` command alone: building the model of
/// every command (and dropping it) was a third of an ask's own work. `None` when
/// clap has anything to say (help, an error): the whole model then says it, as for
/// any other command.
fn ask_options(mut args: impl Iterator<Item = std::ffi::OsString>) -> Option<AskOptions> {
    use clap::{Args, FromArgMatches};
    let program = args.next()?;
    if args.next()? != "ask" {
        return None;
    }
    let ask = AskOptions::augment_args(clap::Command::new("ask").no_binary_name(false));
    let matches = ask
        .try_get_matches_from(std::iter::once(program).chain(args))
        .ok()?;
    AskOptions::from_arg_matches(&matches).ok()
}

/// Asks; an error is "cannot ask" (exit 3).
fn run_ask(opts: AskOptions) -> ExitCode {
    match hitl::cmd::ask::run(opts) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("hitl: cannot ask: {e:#}");
            ExitCode::from(EXIT_CANNOT_ASK)
        }
    }
}

/// Runs the hook. Stdout is Claude Code's: a failure is said on stderr and means no
/// opinion, and the exit status is 0 whatever happens.
fn run_hook(event: HookEvent, agent: HookAgent) -> ExitCode {
    if let Err(e) = hitl::claude::hook::run(event, agent) {
        eprintln!("hitl hook: {e:#}");
    }
    ExitCode::SUCCESS
}

/// Whether the command only reads and prints (or prints after its work is done),
/// so that being killed by a closed output loses nothing. Not the daemons, the
/// hook and MCP (stdout is their protocol), nor the commands that take something
/// and then print it (`ask`, `mailbox recv`, `task wait`): they handle a closed
/// output themselves.
fn only_prints(first: Option<&std::ffi::OsStr>, second: Option<&std::ffi::OsStr>) -> bool {
    let (Some(first), second) = (
        first.and_then(|f| f.to_str()),
        second.and_then(|s| s.to_str()),
    ) else {
        return false;
    };
    match first {
        "pending" | "agents" | "history" | "rules" | "token" | "completions" | "man" | "doctor"
        | "status" | "help" | "--help" | "-h" | "gc" | "dashboard" => true,
        "task" => matches!(
            second,
            None | Some("sessions" | "peek" | "list" | "status" | "result" | "help" | "--help")
        ),
        "mailbox" => matches!(
            second,
            None | Some("list" | "status" | "state" | "help" | "--help")
        ),
        "service" => matches!(second, None | Some("status" | "help" | "--help")),
        _ => false,
    }
}

fn main() -> ExitCode {
    // `hitl --version` alone: the same line clap prints, without building clap's
    // model of every command first (a start's floor, and what benchmarks compare
    // every other start with).
    let mut args = std::env::args_os().skip(1);
    let (first, second) = (args.next(), args.next());
    if second.is_none()
        && first
            .as_deref()
            .is_some_and(|a| a == "--version" || a == "-V")
    {
        return match writeln!(std::io::stdout(), "hitl {}", env!("CARGO_PKG_VERSION")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    hitl::runtime::logging::init(first.as_deref());
    if only_prints(first.as_deref(), second.as_deref()) {
        hitl::runtime::process::end_on_closed_output();
    }
    if let Some((event, agent)) = hook_event(std::env::args_os()) {
        return run_hook(event, agent);
    }
    if first.as_deref().is_some_and(|a| a == "ask")
        && let Some(opts) = ask_options(std::env::args_os())
    {
        return run_ask(opts);
    }
    let parsed = cli_command()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            let is_ask = std::env::args().nth(1).as_deref() == Some("ask");
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ if is_ask => ExitCode::from(EXIT_CANNOT_ASK),
                _ => ExitCode::from(2),
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hitl: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_groups_every_command_once() {
        use clap::CommandFactory;
        let mut grouped: Vec<&str> = COMMAND_GROUPS
            .iter()
            .flat_map(|(_, cmds)| cmds.iter().map(|(name, _)| *name))
            .collect();
        assert_eq!(COMMAND_GROUPS[0].1.len(), 5, "five to start with");
        grouped.sort_unstable();
        let mut commands: Vec<String> = Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        commands.sort_unstable();
        assert_eq!(grouped, commands, "every command in exactly one group");
        let help = cli_command().render_help().to_string();
        for (title, _) in COMMAND_GROUPS {
            assert!(help.contains(&format!("{title}:")), "{help}");
        }
        assert!(
            help.lines().all(|l| l.chars().count() <= 100),
            "fits 100 columns:\n{help}"
        );
    }
    use clap::ValueEnum;

    fn args(words: &[&str]) -> impl Iterator<Item = std::ffi::OsString> {
        words
            .iter()
            .map(std::ffi::OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// The hook's own reading of its command line agrees with clap's for every event,
    /// and leaves every other shape to clap.
    #[test]
    fn the_hook_command_line_is_read_as_clap_reads_it() {
        for event in HookEvent::value_variants() {
            let name = event.to_possible_value().unwrap().get_name().to_string();
            for agent in HookAgent::value_variants() {
                let agent_name = agent.to_possible_value().unwrap().get_name().to_string();
                let with_agent = [
                    "hitl",
                    "hook",
                    "--agent",
                    agent_name.as_str(),
                    name.as_str(),
                ];
                let without = ["hitl", "hook", name.as_str()];
                for words in [&with_agent[..], &without[..]] {
                    let expected = if words.len() == 3 {
                        HookAgent::Claude
                    } else {
                        *agent
                    };
                    assert_eq!(
                        hook_event(args(words)),
                        Some((*event, expected)),
                        "{words:?}"
                    );
                    match Cli::try_parse_from(words).unwrap().command {
                        Command::Hook {
                            event: by_clap,
                            agent: agent_by_clap,
                        } => assert_eq!((by_clap, agent_by_clap), (*event, expected)),
                        other => panic!("{other:?}"),
                    }
                }
            }
        }
        for words in [
            &["hitl", "hook"][..],
            &["hitl", "hook", "--help"],
            &["hitl", "hook", "Pre-Tool-Use"],
            &["hitl", "hook", "pre-tool-use", "extra"],
            &["hitl", "hook", "--agent", "gpt", "pre-tool-use"],
            &["hitl", "hook", "--agent", "codex"],
            &["hitl", "ask", "pre-tool-use"],
            &["hitl"],
        ] {
            assert_eq!(hook_event(args(words)), None, "{words:?}");
        }
    }

    /// `hitl ask`'s own reading agrees with the whole model's, and leaves help and
    /// errors to it.
    #[test]
    fn ask_is_read_as_the_whole_command_line_reads_it() {
        let lines: [&[&str]; 4] = [
            &["hitl", "ask", "Deploy?"],
            &[
                "hitl", "ask", "--type", "select", "-o", "a", "-o", "b", "Which", "one?",
            ],
            &[
                "hitl",
                "ask",
                "--timeout",
                "5",
                "--priority",
                "urgent",
                "--json",
                "-",
            ],
            &[
                "hitl",
                "ask",
                "--context",
                "{\"a\":1}",
                "--dir",
                "/tmp",
                "Q",
            ],
        ];
        for words in lines {
            let fast = ask_options(args(words)).expect("read");
            let Command::Ask(full) = Cli::try_parse_from(words).unwrap().command else {
                panic!("{words:?}")
            };
            assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{words:?}");
        }
        for words in [
            &["hitl", "ask"][..],
            &["hitl", "ask", "--help"],
            &["hitl", "ask", "--type", "sonnet", "Q"],
            &["hitl", "answer", "x", "y"],
        ] {
            assert!(ask_options(args(words)).is_none(), "{words:?}");
        }
    }

    /// The simple commands of a shell text, as word lists after quote removal: split
    /// at unquoted `&&`, `||`, `;`, `&`, newlines and ` | ` (a `|` inside a word, as
    /// in `bash|zsh|fish`, is the README's "one of"); comments dropped, `\`-newlines
    /// joined. Enough shell for the README's examples, nothing more.
    fn shell_commands(text: &str) -> Vec<Vec<String>> {
        let (mut commands, mut words, mut word) = (Vec::new(), Vec::new(), None::<String>);
        let mut chars = text.chars().peekable();
        let end_word = |words: &mut Vec<String>, word: &mut Option<String>| {
            if let Some(w) = word.take() {
                words.push(w);
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                '\'' | '"' => {
                    let w = word.get_or_insert_with(String::new);
                    for q in chars.by_ref() {
                        if q == c {
                            break;
                        }
                        w.push(q);
                    }
                }
                '#' if word.is_none() => {
                    while chars.peek().is_some_and(|&n| n != '\n') {
                        chars.next();
                    }
                }
                ' ' | '\t' => end_word(&mut words, &mut word),
                '\n' | ';' | '&' | '|' if c != '|' || word.is_none() => {
                    end_word(&mut words, &mut word);
                    if matches!(chars.peek(), Some('&' | '|')) {
                        chars.next();
                    }
                    if !words.is_empty() {
                        commands.push(std::mem::take(&mut words));
                    }
                }
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        end_word(&mut words, &mut word);
        if !words.is_empty() {
            commands.push(words);
        }
        commands
    }

    /// A README command line in each form it stands for: `[--x]` with and without
    /// the flag, `[DIR…]` without, `a|b|c` as each of them.
    fn forms(words: &[String]) -> Vec<Vec<String>> {
        let mut out = vec![Vec::new()];
        for w in words {
            let choices: Vec<Option<String>> =
                match w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                    Some(inner) if inner.starts_with("--") => vec![None, Some(inner.to_string())],
                    Some(_) => vec![None],
                    None if w.contains('|') && !w.starts_with('-') => {
                        w.split('|').map(|a| Some(a.to_string())).collect()
                    }
                    None => vec![Some(w.clone())],
                };
            out = out
                .into_iter()
                .flat_map(|form| {
                    choices.iter().map(move |c| {
                        let mut f = form.clone();
                        f.extend(c.clone());
                        f
                    })
                })
                .collect();
        }
        out
    }

    /// Every `hitl …` line in the README's shell examples (and `cargo run -- …`, the
    /// same commands) is one clap takes: no flag, command or value that is not there.
    /// (`tests/it/readme.rs` runs them.)
    #[test]
    fn every_hitl_command_in_the_readme_parses() {
        let readme = include_str!("../README.md");
        let mut checked = 0;
        let mut in_sh = false;
        let mut block = String::new();
        for line in readme.lines() {
            match (in_sh, line.trim_start()) {
                (false, "```sh") => in_sh = true,
                (true, "```") => {
                    in_sh = false;
                    for words in shell_commands(&std::mem::take(&mut block)) {
                        let words: Vec<String> = words
                            .into_iter()
                            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                            // The shell's own pid, as the shell would give it.
                            .map(|w| w.replace("$$", "4242"))
                            .collect();
                        let rest = match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                            ["hitl", ..] => &words[1..],
                            ["cargo", "run", "--release", "--", ..] => &words[4..],
                            _ => continue,
                        };
                        for form in forms(rest) {
                            let argv = std::iter::once("hitl".to_string()).chain(form);
                            if let Err(e) = Cli::try_parse_from(argv.clone()) {
                                panic!("README: `hitl {}` does not parse:\n{e}", rest.join(" "));
                            }
                            checked += 1;
                        }
                    }
                }
                (true, l) => {
                    block.push_str(l);
                    block.push('\n');
                }
                _ => {}
            }
        }
        assert!(checked >= 25, "only {checked} commands found in the README");
    }

    #[test]
    fn readme_shell_is_read_into_commands_and_forms() {
        let cmds = shell_commands("a 'b c' \"d\" # note\ne f \\\n  g && h | i\nj x|y [--z]\n");
        assert_eq!(
            cmds,
            vec![
                vec!["a", "b c", "d"],
                vec!["e", "f", "g"],
                vec!["h"],
                vec!["i"],
                vec!["j", "x|y", "[--z]"],
            ]
        );
        let forms = forms(&cmds[4]);
        assert_eq!(forms.len(), 4);
        assert!(forms.contains(&vec!["j".into(), "y".into(), "--z".into()]));
    }
}
