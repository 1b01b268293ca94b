//! `hitl dashboard`: a fresh one-time login link for the running broker's dashboard
//! (the one printed at start is spent once opened), printed or opened.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{
    api::client::Destination,
    spool::{ListenerInfo, Spool},
};

/// Where the broker is: `server`, else the project's running listener.
pub(crate) fn broker_url(
    dir: Option<&Path>,
    server: Option<String>,
) -> Result<(String, Destination)> {
    // HITL_SERVER may list several replicas, as `hitl ask` takes it: the first.
    if let Some(s) = server.as_deref().and_then(|s| s.split(',').next()) {
        return Ok((s.trim().to_string(), Destination::Given));
    }
    let spool = Spool::locate(dir)?;
    match ListenerInfo::running(&spool) {
        Some(ListenerInfo {
            http: Some(url), ..
        }) => Ok((url, Destination::Listener)),
        Some(_) => bail!(
            "the listener of {} serves no HTTP (it was started with --no-http)",
            spool.project().display()
        ),
        None => bail!(
            "no listener runs for {} (start one with `hitl listen`, or give --server URL)",
            spool.project().display()
        ),
    }
}

/// Prints (or opens, with `open`) a one-time login link.
pub async fn run(
    dir: Option<&Path>,
    server: Option<String>,
    open: bool,
    as_json: bool,
) -> Result<()> {
    let (url, to) = broker_url(dir, server)?;
    let client = crate::api::client::Client::new(&url, to)?;
    client.require_user("a dashboard login link")?;
    let (link, ttl) = client.login_link().await?;
    if as_json {
        println!(
            "{}",
            json!({ "url": link, "expires_in_seconds": ttl, "opened": open })
        );
    } else {
        println!("{link}");
        eprintln!("hitl: good once, for {} minutes", (ttl / 60).max(1));
    }
    if open {
        open_in_browser(&link)?;
    }
    Ok(())
}

/// Hands `link` to the desktop's browser opener.
fn open_in_browser(link: &str) -> Result<()> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(link)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("running {opener} (the link is above: open it by hand)"))?;
    Ok(())
}
