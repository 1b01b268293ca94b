//! `hitl pending`, `hitl agents`, `hitl history`, `hitl status`: read-only views that
//! work from any terminal, with or without a listener: the spool and the history
//! database, plus what the project's listener holds that came another way (over HTTP).

use std::{collections::HashSet, path::PathBuf};

use anyhow::{Context, Result};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::{
    agents,
    api::RequestView,
    config::Paths,
    protocol::{Origin, Request, Variant},
    spool::{
        ListenerInfo, Spool,
        questions::{DEFAULT_MAX_QUESTION_BYTES, pending_questions},
    },
    store::{HistoryQuery, Search, Store},
};

fn age(t: Timestamp) -> String {
    let secs = Timestamp::now().duration_since(t).as_secs().max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat = crate::protocol::text::visible_line(s);
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat.into_owned()
    }
}

/// One pending request as the CLI lists it: a spool file of this project, or a
/// request the project's listener holds that came another way (HTTP, …).
struct Listed {
    /// The request (who asked is its [`Request::origin`]).
    request: Request,
    /// The spool question's file and format; `None` for one the listener holds.
    file: Option<(PathBuf, Variant)>,
}

/// Everything pending in the project, in answering order: its spool questions, and
/// the requests its listener holds that came another way (those it holds from the
/// spool are listed from their files). A listener that does not answer leaves the
/// spool's list, with a warning.
fn everything_pending(spool: &Spool) -> Vec<Listed> {
    let mut list: Vec<Listed> = pending_questions(spool, DEFAULT_MAX_QUESTION_BYTES)
        .into_iter()
        .map(|(path, q)| Listed {
            request: q.request,
            file: Some((path, q.variant)),
        })
        .collect();
    // The listener's own view of the spool's questions (hooks' included: they name
    // their project) is the files above; a request made another way is listed even
    // when a spool question shares its id (`hitl answer spool:ID` / `http:ID` tell
    // them apart).
    list.extend(
        held_by_listener(spool)
            .into_iter()
            .filter(|v| v.project.is_none())
            .map(|v| Listed {
                request: v.request,
                file: None,
            }),
    );
    list.sort_by(|a, b| {
        b.request
            .priority
            .cmp(&a.request.priority)
            .then(a.request.timestamp.cmp(&b.request.timestamp))
    });
    list
}

/// Every pending request of the project at `spool` (as `hitl pending` lists them),
/// each as `hitl answer` and `hitl cancel` name it (`spool:ID` or `http:ID`), with its
/// agent's id and name.
pub fn pending_names(spool: &Spool) -> Vec<(String, String, String)> {
    everything_pending(spool)
        .into_iter()
        .map(|l| {
            let place = if l.file.is_some() { "spool" } else { "http" };
            (
                format!("{place}:{}", l.request.id),
                l.request.agent_id,
                l.request.agent_name,
            )
        })
        .collect()
}

/// Asks the listener serving `spool` over its HTTP API: `call` with a client,
/// answered within [`LISTENER_WAIT`]. `None` when no listener serves HTTP; else its
/// URL and what it said.
fn ask_listener<T, F, Fut>(spool: &Spool, call: F) -> Option<(String, Result<T>)>
where
    F: FnOnce(crate::api::client::Client) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let url = ListenerInfo::running(spool).and_then(|l| l.http)?;
    let said = (|| {
        let client =
            crate::api::client::Client::new(&url, crate::api::client::Destination::Listener)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            tokio::time::timeout(LISTENER_WAIT, call(client))
                .await
                .map_err(|_| anyhow::anyhow!("no answer within {LISTENER_WAIT:?}"))?
        })
    })();
    Some((url, said))
}

/// The pending requests of the listener serving `spool`: over its HTTP API, or
/// from the list it keeps in the spool when it serves none (`--no-http`).
fn held_by_listener(spool: &Spool) -> Vec<RequestView> {
    let Some((url, listed)) = ask_listener(spool, |c| async move { c.pending().await }) else {
        // A listener without HTTP keeps the list in the spool instead.
        if ListenerInfo::running(spool).is_some() {
            return std::fs::read(spool.held_file())
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or_default();
        }
        return Vec::new();
    };
    listed.unwrap_or_else(|e| {
        eprintln!(
            "hitl: warning: the listener at {url} did not list its requests ({e:#}); \
             showing the spool's questions only"
        );
        Vec::new()
    })
}

/// How long the CLI's views wait for the listener.
const LISTENER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// `hitl pending`: what waits in the project (its spool and its listener), in
/// answering order. Outside a project (and without `--dir`): what waits in every
/// project the user's history knows of, and what listeners and servers hold.
pub fn pending(dir: Option<&PathBuf>, as_json: bool) -> Result<()> {
    let spool = match Spool::locate(dir.map(PathBuf::as_path)) {
        Ok(spool) => spool,
        Err(_) if dir.is_none() => return pending_everywhere(as_json),
        Err(e) => return Err(e),
    };
    let list = everything_pending(&spool);
    // Questions whose asker was stopped and left them for its next ask.
    let grace = crate::config::load(&Paths::from_env(), Some(&spool.config_file()))
        .map(|s| s.ask.keep_when_stopped)
        .unwrap_or_default();
    let kept_until = |l: &Listed| {
        l.file.as_ref()?;
        // Asked again by a live asker: no longer kept.
        let asker = l.request.asker?;
        if agents::is_alive(asker.pid, asker.start_time) {
            return None;
        }
        let since = crate::spool::kept::kept_since(&spool, &l.request)?;
        Timestamp::try_from(since + std::time::Duration::from_secs(grace)).ok()
    };
    if as_json {
        let items: Vec<_> = list
            .iter()
            .map(|l| listed_json(l, Some(spool.project()), kept_until(l)))
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if list.is_empty() {
        println!("No pending questions in {}.", spool.project().display());
        return Ok(());
    }
    print_listed(&list, kept_until);
    Ok(())
}

/// `hitl pending` outside a project: each project with pending questions in the
/// user's history, listed as inside it (its files and its listener), then the
/// requests that live in the store (made over HTTP, relayed mailboxes…) that no
/// project's listener listed.
fn pending_everywhere(as_json: bool) -> Result<()> {
    let url = Paths::from_env().db_url();
    let (projects, stored) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let store = Store::open(&url).await?;
            anyhow::Ok((
                store.pending_projects().await?,
                store.pending_remote().await?,
            ))
        })
        .with_context(|| {
            format!(
                "reading what is pending from {}",
                crate::store::redact_url(&url)
            )
        })?;
    let mut groups: Vec<(Option<PathBuf>, Vec<Listed>)> = Vec::new();
    let mut seen = HashSet::new();
    for project in projects {
        let Ok(spool) = Spool::locate(Some(std::path::Path::new(&project))) else {
            continue;
        };
        if spool.project() != std::path::Path::new(&project) {
            continue;
        }
        // A listener serving several projects lists what it holds in each.
        let list: Vec<Listed> = everything_pending(&spool)
            .into_iter()
            .filter(|l| seen.insert(l.request.id.clone()))
            .collect();
        if !list.is_empty() {
            groups.push((Some(spool.project().to_path_buf()), list));
        }
    }
    let elsewhere: Vec<Listed> = stored
        .into_iter()
        .filter(|(r, _)| !seen.contains(&r.id))
        .map(|(request, _)| Listed {
            request,
            file: None,
        })
        .collect();
    if !elsewhere.is_empty() {
        groups.push((None, elsewhere));
    }
    if as_json {
        let items: Vec<_> = groups
            .iter()
            .flat_map(|(project, list)| {
                list.iter()
                    .map(move |l| listed_json(l, project.as_deref(), None))
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if groups.is_empty() {
        println!(
            "Nothing is pending in any project your history knows of (in a project, `hitl pending` lists its own)."
        );
        return Ok(());
    }
    for (i, (project, list)) in groups.iter().enumerate() {
        if i > 0 {
            println!();
        }
        match project {
            Some(p) => println!("{}:", p.display()),
            None => println!("Held by a listener or server (made over HTTP, relayed, …):"),
        }
        print_listed(list, |_| None);
    }
    Ok(())
}

/// One pending request as `hitl pending --json` prints it.
fn listed_json(
    l: &Listed,
    project: Option<&std::path::Path>,
    kept_until: Option<Timestamp>,
) -> Value {
    let mut v = serde_json::to_value(&l.request).unwrap_or_default();
    v["origin"] = json!(l.request.origin);
    v["labels"] = json!(l.request.labels());
    if let Some((path, variant)) = &l.file {
        v["project"] = json!(project);
        v["file"] = json!(path);
        v["variant"] = json!(variant.as_str());
    }
    if let Some(until) = kept_until {
        v["kept_until"] = json!(until);
    }
    v
}

/// The table `hitl pending` prints.
fn print_listed(list: &[Listed], kept_until: impl Fn(&Listed) -> Option<Timestamp>) {
    // Ids as short as tell them apart: `hitl answer` takes any unique start.
    let ids: Vec<&str> = list.iter().map(|l| l.request.id.as_str()).collect();
    let width = ids
        .iter()
        .map(|id| crate::protocol::short_id(id, &ids).chars().count())
        .max()
        .unwrap_or(2)
        .clamp(2, 34);
    println!(
        "{:<width$} {:<16} {:<11} {:<6} {:<20} {:>5}  QUESTION",
        "ID", "LABELS", "TYPE", "ORIGIN", "AGENT", "AGE"
    );
    for l in list {
        let r = &l.request;
        // A request another OS user made says so first, whatever agent it names.
        let mut question = match r.created_by_other() {
            Some(who) => format!("[{who}] {}", r.content),
            None => r.content.clone(),
        };
        if kept_until(l).is_some() {
            question = format!("(asker gone, kept for when it asks again) {question}");
        }
        println!(
            "{:<width$} {:<16} {:<11} {:<6} {:<20} {:>5}  {}",
            one_line(crate::protocol::short_id(&r.id, &ids), 34),
            one_line(&r.labels().join(","), 16),
            r.kind.as_str(),
            l.request.origin.as_str(),
            one_line(&r.agent_name, 20),
            age(r.timestamp),
            one_line(&question, 80)
        );
    }
}

/// An agent asking another way than the spool (over HTTP, …), from what the
/// listener holds: waiting, by definition.
#[derive(Debug, serde::Serialize)]
struct RemoteAgent {
    agent_id: String,
    name: String,
    status: agents::AgentStatus,
    origin: Origin,
    pending: usize,
    last_seen: Timestamp,
    /// A mailbox agent's own status (planning, executing…).
    #[serde(skip_serializing_if = "Option::is_none")]
    mailbox_status: Option<String>,
    /// A mailbox agent's run.
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<PathBuf>,
}

/// The agents with requests pending at the listener other than spool files.
fn remote_agents(list: &[Listed]) -> Vec<RemoteAgent> {
    let mut out: Vec<RemoteAgent> = Vec::new();
    for l in list.iter().filter(|l| l.file.is_none()) {
        let r = &l.request;
        match out
            .iter_mut()
            .find(|a| a.agent_id == r.agent_id && a.origin == r.origin)
        {
            Some(a) => {
                a.pending += 1;
                a.last_seen = a.last_seen.max(r.timestamp);
            }
            None => out.push(RemoteAgent {
                agent_id: r.agent_id.clone(),
                name: r.agent_name.clone(),
                status: agents::AgentStatus::Waiting,
                origin: r.origin,
                pending: 1,
                last_seen: r.timestamp,
                mailbox_status: None,
                run: None,
            }),
        }
    }
    out
}

/// The project's agents: the registry's, with those waiting on a spool question marked
/// so, and those asking the listener another way.
fn agents_of(spool: &Spool, pending: &[Listed]) -> (Vec<agents::AgentRecord>, Vec<RemoteAgent>) {
    let waiting: HashSet<String> = pending
        .iter()
        .filter(|l| l.file.is_some())
        .map(|l| l.request.agent_id.clone())
        .collect();
    (agents::list_agents(spool, &waiting), remote_agents(pending))
}

/// The task sessions the project's listener runs (origin `task`): at work while a
/// task runs, gone when their tmux session is; their queued tasks as their count.
fn task_sessions(spool: &Spool) -> Vec<RemoteAgent> {
    let listed = ask_listener(spool, |c| async move {
        let (_, v) = c
            .call(
                reqwest::Method::GET,
                "/api/v1/task-sessions",
                None,
                "listing the task sessions",
            )
            .await?;
        anyhow::Ok(serde_json::from_value::<Vec<crate::tasks::SessionStatus>>(
            v,
        )?)
    });
    let sessions = match listed {
        Some((_, Ok(s))) => s,
        Some((url, Err(e))) => {
            tracing::debug!("no task sessions from {url}: {e:#}");
            Vec::new()
        }
        None => Vec::new(),
    };
    sessions
        .into_iter()
        .map(|s| RemoteAgent {
            agent_id: s.session.name.clone(),
            name: format!("{} ({})", s.session.name, s.session.command.join(" ")),
            status: match (s.alive, s.is_executing) {
                (false, _) => agents::AgentStatus::Gone,
                (true, true) => agents::AgentStatus::Working,
                (true, false) => agents::AgentStatus::Active,
            },
            origin: Origin::Task,
            pending: s.queued_tasks + usize::from(s.is_executing),
            last_seen: s.session.created_at,
            mailbox_status: None,
            run: None,
        })
        .collect()
}

/// The agents of the project's mailbox runs, each with the status it reported;
/// one already listed as waiting (a question of its in the queue) gains its status.
fn add_mailbox_agents(spool: &Spool, remote: &mut Vec<RemoteAgent>) {
    for a in crate::mailbox::roster::agents(spool) {
        if let Some(r) = remote
            .iter_mut()
            .find(|r| r.agent_id == a.agent_id && r.origin == Origin::Mailbox)
        {
            r.mailbox_status = a.mailbox_status;
            r.run = Some(a.run);
            continue;
        }
        remote.push(RemoteAgent {
            agent_id: a.agent_id,
            name: a.name,
            status: a.status,
            origin: Origin::Mailbox,
            pending: 0,
            last_seen: a.last_seen.unwrap_or_else(Timestamp::now),
            mailbox_status: a.mailbox_status,
            run: Some(a.run),
        });
    }
}

/// `hitl agents`: the agent registry with live status, the agents asking the
/// project's listener another way, and its task sessions.
pub fn agents(dir: Option<&PathBuf>, as_json: bool) -> Result<()> {
    let spool = Spool::locate(dir.map(PathBuf::as_path))?;
    let pending = everything_pending(&spool);
    let (list, mut remote) = agents_of(&spool, &pending);
    remote.extend(task_sessions(&spool));
    add_mailbox_agents(&spool, &mut remote);
    if as_json {
        let mut items: Vec<serde_json::Value> = list
            .iter()
            .map(|a| {
                let mut v = serde_json::to_value(a).unwrap_or_default();
                v["origin"] = json!(Origin::Spool);
                v
            })
            .collect();
        items.extend(remote.iter().map(|a| json!(a)));
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if list.is_empty() && remote.is_empty() {
        println!("No agents have asked in {} yet.", spool.project().display());
        return Ok(());
    }
    let status_name = |s: agents::AgentStatus| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    };
    let row =
        |id: &str, name: &str, status: &str, origin: &str, pid: &str, n: String, seen: &str| {
            println!(
                "{:<36} {:<20} {:<8} {:<6} {:>8} {:>9} {:>9}",
                one_line(id, 36),
                one_line(name, 20),
                status,
                origin,
                pid,
                n,
                seen
            )
        };
    row(
        "AGENT",
        "NAME",
        "STATUS",
        "ORIGIN",
        "PID",
        "QUESTIONS".into(),
        "LAST SEEN",
    );
    for a in list {
        let pid = a.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let status = status_name(a.status);
        let seen = age(a.last_seen);
        let n = a.questions_asked.to_string();
        row(
            &a.agent_id,
            &a.name,
            &status,
            Origin::Spool.as_str(),
            &pid,
            n,
            &seen,
        );
    }
    for a in remote {
        let status = a
            .mailbox_status
            .clone()
            .unwrap_or_else(|| status_name(a.status));
        let seen = age(a.last_seen);
        row(
            &a.agent_id,
            &a.name,
            &status,
            a.origin.as_str(),
            "-",
            a.pending.to_string(),
            &seen,
        );
    }
    Ok(())
}

/// `hitl history`: how questions ended, newest first.
pub async fn history(
    db: Option<String>,
    id: Option<String>,
    search: Option<String>,
    limit: i64,
    as_json: bool,
) -> Result<()> {
    let url = db.unwrap_or_else(|| Paths::from_env().db_url());
    let store = Store::open(&url).await?;
    let by_id = id.is_some();
    let search = Search::parse(search.as_deref().unwrap_or_default());
    let mut rows = store
        .history(&HistoryQuery {
            id: id.clone(),
            search: search.clone(),
            limit,
            ..HistoryQuery::default()
        })
        .await?;
    // Not an id: the start of one, as `hitl answer` takes it.
    if rows.is_empty()
        && let Some(start) = id.filter(|i| i.chars().count() >= 4)
    {
        rows = store
            .history(&HistoryQuery {
                id_prefix: Some(start.clone()),
                search: search.clone(),
                limit,
                ..HistoryQuery::default()
            })
            .await?;
        let ids: std::collections::BTreeSet<&str> = rows.iter().map(|h| h.id.as_str()).collect();
        let ids: Vec<&str> = ids.into_iter().collect();
        if ids.len() > 1 {
            let named = ids.join(", ");
            store.close().await;
            anyhow::bail!(
                "{start} starts {} requests' ids ({named}); give more of it",
                ids.len()
            );
        }
    }
    // One request asked for by its id: its trail too (each notification sent).
    let one = match rows.first() {
        Some(first) if by_id && rows.iter().all(|h| h.id == first.id) => Some(first.id.clone()),
        _ => None,
    };
    if let Some(id) = &one {
        let trail = store.trail(id).await?;
        for h in &mut rows {
            h.trail.clone_from(&trail);
        }
    }
    store.close().await;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if let (Some(_), Some(h)) = (&one, rows.first()) {
        print_decision(h);
        return Ok(());
    }
    if rows.is_empty() {
        if search.text.is_some() {
            println!("Nothing in history matches ({url}).");
        } else {
            println!("No history yet ({url}).");
        }
        return Ok(());
    }
    println!(
        "{:<34} {:<10} {:<16} {:<20} {:<30} {:<24}  ANSWER",
        "ID", "STATUS", "LABELS", "AGENT", "QUESTION", "ASKED"
    );
    for h in rows {
        let asked = h
            .asked_at
            .parse::<Timestamp>()
            .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string());
        println!(
            "{:<34} {:<10} {:<16} {:<20} {:<30} {:<24}  {}",
            h.id,
            h.status.as_str(),
            one_line(&h.labels.join(","), 16),
            one_line(&h.agent_name, 20),
            one_line(&h.content, 30),
            asked.unwrap_or(h.asked_at),
            one_line(
                h.answer.as_deref().or(h.reason.as_deref()).unwrap_or(""),
                40
            )
        );
    }
    Ok(())
}

/// One request's record, as `hitl history --id` shows it: the question, each step
/// of its trail, and how it ended.
fn print_decision(h: &crate::store::HistoryEntry) {
    let local = |ms: i64| {
        Timestamp::from_millisecond(ms)
            .map(|t| {
                t.to_zoned(jiff::tz::TimeZone::system())
                    .strftime("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default()
    };
    let asked = h
        .asked_at
        .parse::<Timestamp>()
        .map(|t| local(t.as_millisecond()))
        .unwrap_or_else(|_| h.asked_at.clone());
    println!("{} ({}, {})", h.id, h.kind.as_str(), h.priority.as_str());
    println!(
        "  {asked}  asked by {}: {}",
        one_line(&h.agent_name, 40),
        one_line(&h.content, 80)
    );
    for step in &h.trail {
        let d = &step.detail;
        let outcome = match (d["delivered"].as_bool(), d["error"].as_str()) {
            (Some(true), _) => "delivered".to_string(),
            (_, Some(e)) => format!("failed: {}", one_line(e, 60)),
            _ => d["outcome"].as_str().unwrap_or_default().to_string(),
        };
        let to = d["to"].as_str().unwrap_or_default();
        let by = d["by"].as_str().unwrap_or_default();
        // A step of the escalation ladder, and whom it reached.
        let rung = d["step"].as_str().unwrap_or_default();
        let reaches = d["reaches"]
            .as_array()
            .map(|r| {
                let names: Vec<&str> = r.iter().filter_map(|n| n.as_str()).collect();
                format!("-> {}", names.join(", "))
            })
            .unwrap_or_default();
        println!(
            "  {}  {} {:<9} {}",
            local(step.at_ms),
            step.step,
            step.surface,
            [rung, &reaches, to, by, &outcome]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let ended = h
        .finished_at
        .as_deref()
        .and_then(|f| f.parse::<Timestamp>().ok())
        .map(|t| local(t.as_millisecond()))
        .unwrap_or_default();
    match h.status {
        crate::protocol::Status::Pending => println!("  (pending)"),
        status => {
            let by = h
                .responded_by
                .as_deref()
                .map(|b| format!(" by {b}"))
                .unwrap_or_default();
            let what = h
                .answer
                .as_deref()
                .or(h.reason.as_deref())
                .map(|a| format!(": {}", one_line(a, 80)))
                .unwrap_or_default();
            let comment = h
                .answer_detail
                .as_ref()
                .and_then(|d| d["comment"].as_str())
                .map(|c| format!(" ({})", one_line(c, 80)))
                .unwrap_or_default();
            println!("  {ended}  {}{by}{what}{comment}", status.as_str());
        }
    }
}

/// `hitl status`: is a listener running, how much is waiting, where history lives.
pub fn status(dir: Option<&PathBuf>, as_json: bool) -> Result<()> {
    let spool = Spool::locate(dir.map(PathBuf::as_path))?;
    let pending = everything_pending(&spool);
    let (agents, remote) = agents_of(&spool, &pending);
    let listener = ListenerInfo::running(&spool);
    let mut by_origin: std::collections::BTreeMap<&str, usize> = Default::default();
    for l in &pending {
        *by_origin.entry(l.request.origin.as_str()).or_default() += 1;
    }
    let paths = Paths::from_env();
    let db = crate::store::redact_url(&paths.db_url());
    // Settings every hook and `hitl ask` read: broken ones are said here, and make
    // the status fail, since hooks step aside until they are fixed.
    let config_error = crate::config::load(&paths, Some(&spool.config_file()))
        .and_then(|s| crate::guard::policy::validate(&s.hook))
        .err()
        .map(|e| format!("{e:#}"));
    let broken = || match &config_error {
        Some(_) => Err(anyhow::anyhow!(
            "the settings are broken (said above); hooks leave every call to Claude Code \
             until they are fixed"
        )),
        None => Ok(()),
    };
    // How the listener's webhooks fare (while one runs, or ran last).
    let webhooks = crate::ui::webhooks::read_status(&spool);
    if as_json {
        let v = json!({
            "version": crate::protocol::VERSION,
            "project": spool.project(),
            "config_error": config_error,
            "listener": listener,
            "pending": pending.len(),
            "pending_by_origin": by_origin,
            "agents": agents.len() + remote.len(),
            "history": db,
            "webhooks": webhooks,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return broken();
    }
    println!("project:  {}", spool.project().display());
    if let Some(e) = &config_error {
        println!("config:   BROKEN: {e}");
    }
    match &listener {
        Some(info) => match &info.http {
            Some(url) => println!("listener: running (pid {}), HTTP API on {url}", info.pid),
            None => println!("listener: running (pid {})", info.pid),
        },
        None if spool.listener_pid_file().exists() => {
            println!(
                "listener: not running (stale .listener.pid; the next `hitl listen` reclaims it)"
            )
        }
        None => println!("listener: not running (start one with `hitl listen`)"),
    }
    if let Some(info) = &listener {
        match info.present.as_slice() {
            [] if !info.reachable.is_empty() => println!(
                "present:  nobody at the desk; reachable by {}",
                info.reachable.join(", ")
            ),
            [] => println!(
                "present:  nobody (hooks leave calls to Claude Code's own prompts; \
                 `hitl dashboard --open` or a terminal prompt takes them)"
            ),
            present => println!("present:  {}", crate::broker::presence::describe(present)),
        }
    }
    let origins: Vec<String> = by_origin.iter().map(|(o, n)| format!("{n} {o}")).collect();
    match origins.len() {
        0 | 1 => println!("pending:  {}", pending.len()),
        _ => println!("pending:  {} ({})", pending.len(), origins.join(", ")),
    }
    println!(
        "agents:   {} ({} waiting)",
        agents.len() + remote.len(),
        agents
            .iter()
            .filter(|a| a.status == agents::AgentStatus::Waiting)
            .count()
            + remote.len()
    );
    println!("history:  {db}");
    for w in webhooks.iter().flatten() {
        let last = match (&w.last_error, &w.last_error_at) {
            (Some(e), Some(at)) => format!("; last failure {at}: {e}"),
            _ => String::new(),
        };
        println!(
            "webhook:  {} {} delivered, {} failed{last}",
            w.url, w.delivered, w.failed
        );
    }
    broken()
}
