//! `hitl mailbox …`: seed 003's mailboxes without sleep loops. `init` makes a run
//! and registers it with the project's listener; the agents' commands (`ask`,
//! `send`, `recv`, `reply`, `result`, `status`, `log`, `state`) read and write its
//! files as `mailbox::agent` does; `list` and `gc` look after old runs.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result, bail};

use crate::{
    mailbox::{
        agent::{self, Got, NoValue, WaitSpec},
        keyvalue::{self, KeyValues},
        layout::{self, InitSpec, Mailbox, Run},
        question::{Ending, Question},
        registry, report,
    },
    spool::Spool,
};

/// Answered (or a request, a result, taken).
pub const EXIT_OK: u8 = 0;
/// Cancelled, withdrawn, or stopped by a signal.
pub const EXIT_CANCELLED: u8 = 1;
/// Nothing within `--timeout`.
pub const EXIT_TIMEOUT: u8 = 2;
/// Could not do it: bad arguments, no such run or agent.
pub const EXIT_CANNOT: u8 = 3;
/// `recv`, `result`: every other agent is done; nothing more will come.
pub const EXIT_PEERS_DONE: u8 = 4;
/// `recv`, `result`: an agent failed, or the run did.
pub const EXIT_FAILED: u8 = 5;

/// What `hitl mailbox` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum MailboxCommand {
    /// Make a run: its folders (transcript.log, master.diff,
    /// state.json, AGENT/status, AGENT/inbox/, AGENT/outbox/), private to this user,
    /// registered with the project's listener, which relays its questions. Prints
    /// the run's folder.
    Init {
        /// The run's folder (default: a new one under $XDG_RUNTIME_DIR/hitl/runs, or
        /// /tmp/hitl-UID/runs). It must not exist, or be empty.
        run: Option<PathBuf>,
        /// The agents, in order, the first the one that coordinates.
        #[arg(long, value_delimiter = ',', default_value = "narrator,scribe")]
        agents: Vec<String>,
        /// A key of state.json (VALUE read as JSON when it is JSON, else as text).
        #[arg(long = "state", value_name = "KEY=VALUE")]
        state: Vec<String>,
        /// The run fails after this long, not counting time spent waiting for the
        /// user (seconds, or 90s, 10m, 1h; 0: never; default 600).
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// An agent whose status has not been written for this long counts as gone.
        #[arg(long, value_name = "DURATION")]
        heartbeat: Option<String>,
        /// The start of a new run folder's name.
        #[arg(long, default_value = "run")]
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the user a question and wait for the answer (printed: the chosen
    /// option's text). Run again after being stopped, it waits for the same
    /// question's answer instead of asking twice. Exit: 0 answered, 1 cancelled,
    /// 2 timed out, 3 could not ask.
    Ask {
        /// The asking agent's mailbox: RUN_DIR/AGENT.
        mailbox: PathBuf,
        /// The question.
        #[arg(long)]
        context: String,
        /// An option (repeat; none: the user types an answer).
        #[arg(long = "option")]
        options: Vec<String>,
        /// A file whose text is shown with the question as its PLAN.
        #[arg(long, value_name = "FILE")]
        plan: Option<PathBuf>,
        /// Give up (and withdraw the question) after this long.
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Print JSON: answer ("Option N"), option (N), text, status.
        #[arg(long)]
        json: bool,
    },
    /// Send a request to an agent: its inbox/request. One at a time: the one before
    /// must have been taken.
    Send {
        /// The receiving agent's mailbox: RUN_DIR/AGENT.
        mailbox: PathBuf,
        /// The request's keys.
        #[arg(value_name = "KEY=VALUE", required = true)]
        pairs: Vec<String>,
    },
    /// Wait for a request and take it; prints it as KEY='VALUE' lines (for `eval`).
    /// Exit: 0 a request, 2 timed out, 4 every other agent is done, 5 one failed.
    Recv {
        /// This agent's mailbox: RUN_DIR/AGENT.
        mailbox: PathBuf,
        /// Give up after this long.
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reply to the request taken: this agent's outbox/result.
    Reply {
        /// This agent's mailbox: RUN_DIR/AGENT.
        mailbox: PathBuf,
        /// The result's keys.
        #[arg(value_name = "KEY=VALUE", required = true)]
        pairs: Vec<String>,
    },
    /// Wait for an agent's result and take it; prints it as KEY='VALUE' lines.
    /// Exit: 0 a result, 2 timed out, 4 the agent is done, 5 it failed.
    Result {
        /// The replying agent's mailbox: RUN_DIR/AGENT.
        mailbox: PathBuf,
        /// Give up after this long.
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print an agent's status, or set it (planning, executing, idle, working, done,
    /// error…).
    Status {
        /// The agent's mailbox: RUN_DIR/AGENT.
        mailbox: PathBuf,
        /// The new status.
        value: Option<String>,
        /// The agent's process: when it ends before the agent is done, the run
        /// fails.
        #[arg(long)]
        pid: Option<u32>,
    },
    /// Append a line to the run's transcript:
    /// `[YYYY-MM-DD HH:MM:SS] [AGENT:name] [EVENT] message`.
    Log {
        /// The run's folder.
        run: PathBuf,
        /// The agent.
        agent: String,
        /// The event (PLAN, COMMIT, ERROR…).
        event: String,
        /// The message.
        #[arg(required = true)]
        message: Vec<String>,
    },
    /// Print a key of the run's state.json, or set it (VALUE read as JSON when it is
    /// JSON, else as text).
    State {
        /// The run's folder.
        run: PathBuf,
        /// The key.
        key: String,
        /// The new value.
        value: Option<String>,
        /// Print the value as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the runs registered with this project: state, agents' statuses, age.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete the runs that ended (or stopped changing) longer ago than
    /// --older-than, with their registrations.
    Gc {
        /// Age (seconds, or 90s, 10m, 1h, 7d).
        #[arg(long, value_name = "DURATION", default_value = "7d")]
        older_than: String,
        /// Only say what would be deleted.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `hitl mailbox …`; returns the exit code.
pub fn run(project: Option<PathBuf>, command: MailboxCommand) -> Result<u8> {
    match command {
        MailboxCommand::Init {
            run,
            agents,
            state,
            timeout,
            heartbeat,
            name,
            json,
        } => init(project, run, agents, state, timeout, heartbeat, &name, json),
        MailboxCommand::Ask {
            mailbox,
            context,
            options,
            plan,
            timeout,
            json,
        } => ask(&mailbox, context, options, plan, timeout, json),
        MailboxCommand::Send { mailbox, pairs } => {
            let to = Mailbox::parse(&mailbox)?;
            agent::send(&to, &parse_pairs(&pairs)?)?;
            Ok(EXIT_OK)
        }
        MailboxCommand::Recv {
            mailbox,
            timeout,
            json,
        } => {
            let m = Mailbox::parse(&mailbox)?;
            let got = agent::recv(&m, wait_spec(timeout.as_deref())?)?;
            print_pairs(got, json)
        }
        MailboxCommand::Reply { mailbox, pairs } => {
            let m = Mailbox::parse(&mailbox)?;
            agent::reply(&m, &parse_pairs(&pairs)?)?;
            Ok(EXIT_OK)
        }
        MailboxCommand::Result {
            mailbox,
            timeout,
            json,
        } => {
            let m = Mailbox::parse(&mailbox)?;
            let got = agent::result(&m, wait_spec(timeout.as_deref())?)?;
            print_pairs(got, json)
        }
        MailboxCommand::Status {
            mailbox,
            value,
            pid,
        } => {
            let m = Mailbox::parse(&mailbox)?;
            match value {
                Some(v) => agent::set_status(&m, &v, pid)?,
                None => {
                    if pid.is_some() {
                        bail!("--pid goes with a new status");
                    }
                    match m.status() {
                        Some(s) => println!("{s}"),
                        None => bail!("{} has no status yet", m.agent),
                    }
                }
            }
            Ok(EXIT_OK)
        }
        MailboxCommand::Log {
            run,
            agent,
            event,
            message,
        } => {
            let run = Run::open(&run)?;
            agent::log(&run, &agent, &event, &message.join(" "))?;
            Ok(EXIT_OK)
        }
        MailboxCommand::State {
            run,
            key,
            value,
            json,
        } => {
            let run = Run::open(&run)?;
            match value {
                Some(v) => agent::state_set(&run, &key, json_or_text(&v))?,
                None => match agent::state_get(&run, &key)? {
                    Some(serde_json::Value::String(s)) if !json => println!("{s}"),
                    Some(v) => println!("{v}"),
                    None => bail!("state.json has no {key:?}"),
                },
            }
            Ok(EXIT_OK)
        }
        MailboxCommand::List { json } => list(project, json),
        MailboxCommand::Gc {
            older_than,
            dry_run,
            json,
        } => gc(project, &older_than, dry_run, json),
    }
}

/// A duration as people write it: seconds, or a number with s, m, h or d.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&t[..i], t[i..].trim()),
        None => (t, "s"),
    };
    let n: f64 = number
        .parse()
        .with_context(|| format!("{text:?} is not a duration (e.g. 30, 90s, 10m, 2h, 7d)"))?;
    let scale = match unit {
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => bail!("{text:?}: the unit is s, m, h or d"),
    };
    Ok(Duration::from_secs_f64(n * scale))
}

fn wait_spec(timeout: Option<&str>) -> Result<WaitSpec<'static>> {
    Ok(WaitSpec {
        timeout: timeout.map(parse_duration).transpose()?,
        signals: true,
        stop: Box::leak(Box::new(|| false)),
    })
}

fn parse_pairs(args: &[String]) -> Result<KeyValues> {
    let mut kv = KeyValues::new();
    for arg in args {
        let Some((k, v)) = arg.split_once('=') else {
            bail!("{arg:?} is not KEY=VALUE");
        };
        if !keyvalue::is_key(k) {
            bail!("{k:?} is not a shell variable name (letters, digits and _)");
        }
        kv.set(k, v);
    }
    Ok(kv)
}

fn json_or_text(v: &str) -> serde_json::Value {
    serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()))
}

/// The exit code and message of a wait that got nothing.
fn no_value(why: NoValue) -> u8 {
    let (code, text) = match why {
        NoValue::TimedOut => (EXIT_TIMEOUT, "nothing came in time".to_string()),
        NoValue::Interrupted(s) => (EXIT_CANCELLED, format!("interrupted ({s})")),
        NoValue::Kept(s) => (
            EXIT_CANCELLED,
            format!("stopped by {s}; run the same command again to go on waiting"),
        ),
        NoValue::PeersDone => (EXIT_PEERS_DONE, "every other agent is done".to_string()),
        NoValue::PeerFailed => (EXIT_FAILED, "the run failed".to_string()),
        NoValue::Stopped => (EXIT_CANCELLED, "stopped".to_string()),
    };
    eprintln!("hitl mailbox: {text}");
    code
}

fn print_pairs(got: Got<KeyValues>, json: bool) -> Result<u8> {
    let pairs = match got {
        Ok(p) => p,
        Err(why) => return Ok(no_value(why)),
    };
    if json {
        let map: serde_json::Map<String, serde_json::Value> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        println!("{}", serde_json::Value::Object(map));
    } else {
        print!("{}", pairs.to_text()?);
    }
    Ok(EXIT_OK)
}

#[allow(clippy::too_many_arguments)]
fn init(
    project: Option<PathBuf>,
    run: Option<PathBuf>,
    agents: Vec<String>,
    state: Vec<String>,
    timeout: Option<String>,
    heartbeat: Option<String>,
    name: &str,
    json: bool,
) -> Result<u8> {
    let spool = Spool::locate(project.as_deref()).ok();
    let dir = match run {
        Some(d) => d,
        None => {
            if !layout::is_agent_name(name) {
                bail!("--name {name:?}: letters, digits, '-', '_' and '.'");
            }
            layout::default_parent()?.join(layout::new_run_name(name))
        }
    };
    let mut extra = serde_json::Map::new();
    for s in &state {
        let Some((k, v)) = s.split_once('=') else {
            bail!("--state {s:?} is not KEY=VALUE");
        };
        extra.insert(k.to_string(), json_or_text(v));
    }
    let secs = |d: Option<String>| -> Result<Option<u64>> {
        Ok(d.map(|d| parse_duration(&d))
            .transpose()?
            .map(|d| d.as_secs()))
    };
    let run = layout::init(&InitSpec {
        dir,
        agents,
        state: extra,
        timeout_s: secs(timeout)?,
        heartbeat_s: secs(heartbeat)?,
        project: spool.as_ref().map(|s| s.project().to_path_buf()),
    })?;
    let registered = match &spool {
        Some(s) => {
            registry::register(s, &run)?;
            true
        }
        None => {
            eprintln!(
                "hitl mailbox: no hitl project here (or --dir): the run is not registered; \
                 relay it with `hitl listen --mailbox '{}'`",
                run.dir.display()
            );
            false
        }
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "dir": run.dir,
                "agents": run.agents(),
                "registered": registered,
            })
        );
    } else {
        println!("{}", run.dir.display());
    }
    Ok(EXIT_OK)
}

fn ask(
    mailbox: &Path,
    context: String,
    options: Vec<String>,
    plan: Option<PathBuf>,
    timeout: Option<String>,
    json: bool,
) -> Result<u8> {
    let m = Mailbox::parse(mailbox)?;
    let mut details = Vec::new();
    if let Some(p) = plan {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        details.push(("PLAN".to_string(), text.trim_end().to_string()));
    }
    let question = Question {
        context,
        options,
        details,
    };
    if let Some(project) = m.run.meta().project
        && crate::spool::ListenerInfo::running(&Spool::new(&project)).is_none()
    {
        eprintln!(
            "hitl mailbox: no hitl listener runs for {} to relay this question; it waits in {} \
             until one does (hitl listen there)",
            project.display(),
            m.question().display()
        );
    }
    let got = agent::ask(&m, &question, wait_spec(timeout.as_deref())?)?;
    let ending = match got {
        Ok(e) => e,
        Err(NoValue::TimedOut) => {
            eprintln!("hitl mailbox: no answer in time; question withdrawn");
            return Ok(EXIT_TIMEOUT);
        }
        Err(why) => return Ok(no_value(why)),
    };
    if json {
        let (answer, option, text) = match &ending {
            Ending::Chose { number, text } => {
                (format!("Option {number}"), Some(*number), text.clone())
            }
            Ending::Text(t) => (t.clone(), None, t.clone()),
            _ => (String::new(), None, String::new()),
        };
        println!(
            "{}",
            serde_json::json!({
                "status": ending.status(),
                "answer": answer,
                "option": option,
                "text": text,
            })
        );
    }
    Ok(match ending {
        Ending::Chose { text, .. } | Ending::Text(text) => {
            if !json {
                println!("{text}");
            }
            EXIT_OK
        }
        Ending::Cancelled(reason) => {
            eprintln!(
                "hitl mailbox: cancelled{}",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            );
            EXIT_CANCELLED
        }
        Ending::Timeout => {
            eprintln!("hitl mailbox: nobody answered in time");
            EXIT_TIMEOUT
        }
    })
}

/// One run, as `list` shows it.
#[derive(Debug, serde::Serialize)]
struct Listed {
    dir: PathBuf,
    /// `running`, `done`, `failed`, or `gone` (its folder was deleted).
    state: String,
    reason: Option<String>,
    agents: serde_json::Map<String, serde_json::Value>,
    /// Seconds since it last changed.
    idle_s: u64,
}

fn listed(dir: &Path) -> Listed {
    let Ok(run) = Run::open(dir) else {
        return Listed {
            dir: dir.to_path_buf(),
            state: "gone".into(),
            reason: None,
            agents: Default::default(),
            idle_s: 0,
        };
    };
    let report = report::read(&run);
    let agents = run
        .agents()
        .into_iter()
        .filter_map(|a| run.mailbox(&a).ok())
        .map(|m| (m.agent.clone(), m.status().into()))
        .collect();
    let newest = [run.dir.clone(), run.transcript(), run.report_file()]
        .into_iter()
        .chain(
            run.agents()
                .into_iter()
                .map(|a| run.dir.join(a).join("status")),
        )
        .filter_map(|p| std::fs::metadata(p).ok()?.modified().ok())
        .max();
    Listed {
        dir: run.dir.clone(),
        state: report
            .as_ref()
            .map_or_else(|| "running".to_string(), |r| r.state.clone()),
        reason: report.and_then(|r| r.reason),
        agents,
        idle_s: newest
            .and_then(|t| t.elapsed().ok())
            .map_or(0, |d| d.as_secs()),
    }
}

fn list(project: Option<PathBuf>, json: bool) -> Result<u8> {
    let spool = Spool::locate(project.as_deref())?;
    let runs: Vec<Listed> = registry::entries(&spool)
        .into_iter()
        .map(|(d, _)| listed(&d))
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(EXIT_OK);
    }
    if runs.is_empty() {
        println!("no mailbox runs in {}", spool.project().display());
        return Ok(EXIT_OK);
    }
    for r in runs {
        let agents: Vec<String> = r
            .agents
            .iter()
            .map(|(a, s)| format!("{a}: {}", s.as_str().unwrap_or("-")))
            .collect();
        println!(
            "{:<8} {:>6}  {}  ({}){}",
            r.state,
            human_age(r.idle_s),
            r.dir.display(),
            agents.join(", "),
            r.reason.map(|x| format!(" — {x}")).unwrap_or_default()
        );
    }
    Ok(EXIT_OK)
}

fn human_age(s: u64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn gc(project: Option<PathBuf>, older_than: &str, dry_run: bool, json: bool) -> Result<u8> {
    let spool = Spool::locate(project.as_deref())?;
    let age = parse_duration(older_than)?;
    let mut deleted = Vec::new();
    for (dir, entry) in registry::entries(&spool) {
        let r = listed(&dir);
        // Old: nothing in it has changed for that long (a run still going writes its
        // statuses and transcript). One whose folder is gone leaves only its
        // registration.
        if r.state == "gone" || Duration::from_secs(r.idle_s) >= age {
            if !dry_run {
                if r.state != "gone" {
                    std::fs::remove_dir_all(&dir)
                        .with_context(|| format!("deleting {}", dir.display()))?;
                }
                let _ = std::fs::remove_file(&entry);
            }
            deleted.push(r);
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "dry_run": dry_run, "runs": deleted })
        );
    } else {
        let verb = if dry_run { "would delete" } else { "deleted" };
        println!("{verb} {} run(s)", deleted.len());
        for r in &deleted {
            println!("  {} ({})", r.dir.display(), r.state);
        }
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(
            parse_duration("7d").unwrap(),
            Duration::from_secs(7 * 86400)
        );
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3w").is_err());
    }
}
