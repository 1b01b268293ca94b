//! `hitl pending`, `hitl agents`, `hitl history`, `hitl status`: read-only views that
//! work from any terminal, with or without a listener, straight from the spool and the
//! history database.

use std::{collections::HashSet, path::PathBuf};

use anyhow::Result;
use jiff::Timestamp;
use serde_json::json;

use crate::{
    agents,
    config::Paths,
    spool::{
        Spool,
        questions::{DEFAULT_MAX_QUESTION_BYTES, pending_questions},
    },
    store::{HistoryQuery, Store},
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
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// `hitl pending`: the questions waiting in the project, in answering order.
pub fn pending(dir: Option<&PathBuf>, as_json: bool) -> Result<()> {
    let spool = super::ask::find_project(dir)?;
    let list = pending_questions(&spool, DEFAULT_MAX_QUESTION_BYTES);
    if as_json {
        let items: Vec<_> = list
            .iter()
            .map(|(path, q)| {
                let mut v = serde_json::to_value(&q.request).unwrap_or_default();
                v["project"] = json!(spool.project());
                v["file"] = json!(path);
                v["variant"] = json!(q.variant.as_str());
                v
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    if list.is_empty() {
        println!("No pending questions in {}.", spool.project().display());
        return Ok(());
    }
    println!(
        "{:<34} {:<8} {:<11} {:<20} {:>5}  QUESTION",
        "ID", "PRIORITY", "TYPE", "AGENT", "AGE"
    );
    for (_, q) in &list {
        let r = &q.request;
        println!(
            "{:<34} {:<8} {:<11} {:<20} {:>5}  {}",
            r.id,
            r.priority,
            r.kind,
            one_line(&r.agent_name, 20),
            age(r.timestamp),
            one_line(&r.content, 60)
        );
    }
    Ok(())
}

/// `hitl agents`: the agent registry with live status.
pub fn agents(dir: Option<&PathBuf>, as_json: bool) -> Result<()> {
    let spool = super::ask::find_project(dir)?;
    let waiting: HashSet<String> = pending_questions(&spool, DEFAULT_MAX_QUESTION_BYTES)
        .into_iter()
        .map(|(_, q)| q.request.agent_id)
        .collect();
    let list = agents::list_agents(&spool, &waiting);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    if list.is_empty() {
        println!("No agents have asked in {} yet.", spool.project().display());
        return Ok(());
    }
    println!(
        "{:<36} {:<20} {:<8} {:>8} {:>9} {:>9}",
        "AGENT", "NAME", "STATUS", "PID", "QUESTIONS", "LAST SEEN"
    );
    for a in list {
        println!(
            "{:<36} {:<20} {:<8} {:>8} {:>9} {:>9}",
            one_line(&a.agent_id, 36),
            one_line(&a.name, 20),
            serde_json::to_value(a.status)?.as_str().unwrap_or(""),
            a.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            a.questions_asked,
            age(a.last_seen)
        );
    }
    Ok(())
}

/// `hitl history`: how questions ended, newest first.
pub async fn history(
    db: Option<String>,
    id: Option<String>,
    limit: i64,
    as_json: bool,
) -> Result<()> {
    let url = db.unwrap_or_else(|| Paths::from_env().db_url());
    let store = Store::open(&url).await?;
    let rows = store
        .history(&HistoryQuery {
            id,
            project: None,
            limit,
        })
        .await?;
    store.close().await;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("No history yet ({url}).");
        return Ok(());
    }
    println!(
        "{:<34} {:<10} {:<20} {:<30} {:<24}  ANSWER",
        "ID", "STATUS", "AGENT", "QUESTION", "ASKED"
    );
    for h in rows {
        let asked = h
            .asked_at
            .parse::<Timestamp>()
            .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string());
        println!(
            "{:<34} {:<10} {:<20} {:<30} {:<24}  {}",
            h.id,
            h.status,
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

/// Whether a listener serves `spool`, from `.listener.json` checked against the
/// process table (pid and start time).
pub fn listener_of(spool: &Spool) -> Option<serde_json::Value> {
    let bytes = std::fs::read(spool.listener_info_file()).ok()?;
    let info: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let pid = info.get("pid")?.as_u64()? as u32;
    let start = info.get("start_time").and_then(|s| s.as_u64());
    agents::is_alive(pid, start).then_some(info)
}

/// `hitl status`: is a listener running, how much is waiting, where history lives.
pub fn status(dir: Option<&PathBuf>, as_json: bool) -> Result<()> {
    let spool = super::ask::find_project(dir)?;
    let pending = pending_questions(&spool, DEFAULT_MAX_QUESTION_BYTES);
    let waiting: HashSet<String> = pending
        .iter()
        .map(|(_, q)| q.request.agent_id.clone())
        .collect();
    let agents = agents::list_agents(&spool, &waiting);
    let listener = listener_of(&spool);
    let db = crate::store::redact_url(&Paths::from_env().db_url());
    if as_json {
        let v = json!({
            "version": crate::protocol::VERSION,
            "project": spool.project(),
            "listener": listener,
            "pending": pending.len(),
            "agents": agents.len(),
            "history": db,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("project:  {}", spool.project().display());
    match &listener {
        Some(info) => match info["http"].as_str() {
            Some(url) => println!("listener: running (pid {}), HTTP API on {url}", info["pid"]),
            None => println!("listener: running (pid {})", info["pid"]),
        },
        None if spool.listener_pid_file().exists() => {
            println!(
                "listener: not running (stale .listener.pid; the next `hitl listen` reclaims it)"
            )
        }
        None => println!("listener: not running (start one with `hitl listen`)"),
    }
    println!("pending:  {}", pending.len());
    println!(
        "agents:   {} ({} waiting)",
        agents.len(),
        agents
            .iter()
            .filter(|a| a.status == agents::AgentStatus::Waiting)
            .count()
    );
    println!("history:  {db}");
    Ok(())
}
