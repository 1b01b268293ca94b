//! `hitl demo [--auto-answer]`: a throwaway project, a listener, and seven made-up
//! agents asking one question of each kind (text, yes/no, select, multi-select, an
//! approval with a diff, Claude Code's AskUserQuestion form, a plan) a few seconds
//! apart, so a new user sees every UI answer them within a minute: the terminal
//! prompt here, the dashboard (its link is printed), `hitl answer` elsewhere.
//! `--auto-answer` answers everything at once (for CI). Nothing of the user's is
//! touched: the project and its history live in a temp folder, removed at the end.
//!
//! Every part is the real thing, run as it would be: `hitl listen` and one `hitl ask`
//! per agent are processes of this binary.

use std::{
    os::unix::fs::DirBuilderExt,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::spool::{ListenerInfo, Spool};

/// `hitl demo`'s flags (their doc comments are its help text).
#[derive(Debug, Clone, clap::Args)]
pub struct DemoOptions {
    /// Answer every question at once (yes, the first option, approved): the demo
    /// runs to completion by itself, as in CI.
    #[arg(long)]
    pub auto_answer: bool,
    /// Seconds between one agent's question and the next (default: 4, or 0.2 with
    /// --auto-answer).
    #[arg(long, value_name = "S")]
    pub pace: Option<f64>,
    /// Keep the demo project (its folder is printed) instead of removing it.
    #[arg(long)]
    pub keep: bool,
}

/// One made-up agent and what it asks: `hitl ask` arguments.
struct Agent {
    name: &'static str,
    kind: &'static str,
    args: Vec<String>,
}

fn agents() -> Vec<Agent> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let edit = json!({
        "tool_name": "Edit",
        "tool_input": {
            "file_path": "src/server/config.rs",
            "old_string": "const REQUEST_TIMEOUT: u64 = 30;\nconst RETRIES: u32 = 0;",
            "new_string": "const REQUEST_TIMEOUT: u64 = 300;\nconst RETRIES: u32 = 3;"
        }
    });
    let plan = "# Move sessions to Redis\n\n1. Add a `SessionStore` trait with the current \
                in-memory store behind it.\n2. Write the Redis store (`redis` crate, pooled).\n\
                3. Switch over behind the `sessions.backend` setting.\n4. Load-test, then \
                make Redis the default.\n\n**Risk**: sessions are lost once at the switch.";
    let plan_context = json!({ "tool_name": "ExitPlanMode", "tool_input": { "plan": plan } });
    let questions = json!([
        { "question": "Which database should the new service use?", "header": "Database",
          "multiSelect": false,
          "options": [ { "label": "PostgreSQL", "description": "what the rest runs on" },
                       { "label": "SQLite", "description": "one file, no server" } ] },
        { "question": "Which features should ship first?", "header": "Features",
          "multiSelect": true,
          "options": [ { "label": "Search" }, { "label": "Export" }, { "label": "Sharing" } ] }
    ]);
    vec![
        Agent {
            name: "release-writer",
            kind: "text",
            args: s(&["What should this release be called?"]),
        },
        Agent {
            name: "db-migrator",
            kind: "yesno",
            args: s(&[
                "--type",
                "yesno",
                "--priority",
                "high",
                "Run the database migration on staging now?",
            ]),
        },
        Agent {
            name: "deployer",
            kind: "select",
            args: s(&[
                "--type",
                "select",
                "-o",
                "eu-west-1",
                "-o",
                "us-east-1",
                "-o",
                "ap-southeast-2",
                "Which region should the canary go to?",
            ]),
        },
        Agent {
            name: "ci-fixer",
            kind: "multiselect",
            args: s(&[
                "--type",
                "multiselect",
                "-o",
                "unit tests",
                "-o",
                "lint",
                "-o",
                "end-to-end tests",
                "Which checks should run before merging?",
            ]),
        },
        Agent {
            name: "refactorer",
            kind: "approval",
            args: vec![
                "--type".into(),
                "approval".into(),
                "--context".into(),
                edit.to_string(),
                "Edit src/server/config.rs: raise the timeout and retry failed requests?".into(),
            ],
        },
        Agent {
            name: "architect",
            kind: "questions",
            args: vec![
                "--questions".into(),
                questions.to_string(),
                "Two choices for the new service".into(),
            ],
        },
        Agent {
            name: "planner",
            kind: "plan",
            args: vec![
                "--type".into(),
                "approval".into(),
                "--context".into(),
                plan_context.to_string(),
                format!("Approve this plan?\n\n{plan}"),
            ],
        },
    ]
}

/// Stops the listener (SIGTERM: it removes its files) and waits for it.
struct ListenerProcess(Child);

impl Drop for ListenerProcess {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

/// Removes the demo project unless it is to be kept.
struct Throwaway {
    dir: PathBuf,
    keep: bool,
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

extern "C" fn ignore(_: nix::libc::c_int) {}

/// Runs the demo; returns the exit status (0: every agent heard back).
pub fn run(opts: DemoOptions) -> Result<u8> {
    let exe = std::env::current_exe().context("finding this hitl binary")?;
    let dir = std::env::temp_dir().join(format!(
        "hitl-demo-{}",
        &uuid::Uuid::now_v7().simple().to_string()[20..]
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let project = Throwaway {
        dir: dir.clone(),
        keep: opts.keep,
    };
    let spool = Spool::new(&dir);
    spool.ensure_layout()?;
    // Ctrl-C stops the listener and withdraws the questions (they get it too, as
    // the terminal's foreground group); the demo itself stays to clean up.
    // SAFETY: the handler does nothing; exec resets it for the children.
    #[allow(unsafe_code)] // installing a signal handler is unsafe in nix's API
    unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGINT,
            nix::sys::signal::SigHandler::Handler(ignore),
        )
    }
    .context("catching Ctrl-C")?;

    eprintln!("hitl demo: a throwaway project in {}", dir.display());
    let mut listen = Command::new(&exe);
    listen
        .arg("listen")
        .arg(&dir)
        // A port of its own: a listener of the user's may hold the usual one, and
        // the port the user's listener keeps is not the demo's to change.
        .args(["--http", "127.0.0.1:0"])
        // Its own history, thrown away with it: the user's stays as it was.
        .env(
            "HITL_DB",
            format!("sqlite://{}", dir.join(".helpers/demo.db").display()),
        );
    if opts.auto_answer {
        listen
            .args(["--auto-answer", "Made by hitl demo", "--ui", "none"])
            .stdin(Stdio::null());
    } else {
        // The line prompt: the demo's own lines go to the same terminal, which a
        // full-screen inbox would have to itself.
        listen.args(["--ui", "terminal"]);
    }
    let listener = ListenerProcess(listen.spawn().context("starting hitl listen")?);
    wait_for_listener(&spool, Duration::from_secs(20))?;

    let agents = agents();
    let pace = Duration::from_secs_f64(
        opts.pace
            .unwrap_or(if opts.auto_answer { 0.2 } else { 4.0 })
            .clamp(0.0, 600.0),
    );
    if !opts.auto_answer {
        eprintln!(
            "hitl demo: {} agents ask one question each, {} s apart. Answer them at the \
             prompt below, in the dashboard (its link is above), or from another terminal: \
             hitl answer --dir {} ID TEXT. Ctrl-C ends the demo.",
            agents.len(),
            (pace.as_secs_f64() * 10.0).round() / 10.0,
            dir.display()
        );
    }
    let mut asking = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pace);
        }
        let child = Command::new(&exe)
            .arg("ask")
            .arg("--dir")
            .arg(&dir)
            .args(["--timeout", "900"])
            .args(&agent.args)
            .env("HITL_AGENT_ID", format!("demo-{}", agent.name))
            .env("HITL_AGENT_NAME", agent.name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting the {} agent", agent.name))?;
        asking.push((agent, child));
    }
    let mut heard = 0;
    let mut lines = Vec::new();
    for (agent, child) in asking {
        let out = child.wait_with_output()?;
        let answer = String::from_utf8_lossy(&out.stdout)
            .trim()
            .replace('\n', "; ");
        let said = match out.status.code() {
            Some(0) => {
                heard += 1;
                answer
            }
            // A denial prints itself (`denied: its reason`); a cancel says why on
            // stderr.
            Some(1) if !answer.is_empty() => {
                heard += 1;
                answer
            }
            Some(1) => {
                heard += 1;
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                format!("declined ({why})")
            }
            Some(2) => "no answer in time".into(),
            _ => "stopped before an answer".into(),
        };
        lines.push(format!("  {:<15} {:<12} {said}", agent.name, agent.kind));
    }
    drop(listener);
    println!("hitl demo: what each agent heard back");
    for l in &lines {
        println!("{l}");
    }
    let total = lines.len();
    if opts.keep {
        println!("The project stays in {}.", project.dir.display());
    }
    println!(
        "{heard} of {total} agents heard back. Next: `hitl init --claude` in a project of yours, then `hitl listen`."
    );
    Ok(if heard == total { 0 } else { 1 })
}

/// Waits until the listener says it serves `spool`, or fails with why.
fn wait_for_listener(spool: &Spool, within: Duration) -> Result<()> {
    let start = Instant::now();
    while ListenerInfo::running(spool).is_none() {
        if start.elapsed() > within {
            bail!(
                "the demo's listener did not start within {} s",
                within.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
