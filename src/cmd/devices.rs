//! `hitl pair` and `hitl devices`: clients of the listener's `/api/v1/pairings` and
//! `/api/v1/devices`. Pairing prints a single-use link (and, to a terminal, a QR code
//! of it, for a phone's camera) that logs one device in; `devices` lists the browsers
//! logged in and `devices revoke ID` ends one at once. Each takes the user's token,
//! and each refuses inside an agent's session (`main.rs`): a device is a way to answer.

use std::{io::IsTerminal, path::Path};

use anyhow::Result;
use serde_json::json;

use super::dashboard::broker_url;
use crate::api::client::Client;

/// The client of the project's listener (or `server`), with the user's token.
fn client(dir: Option<&Path>, server: Option<String>, what: &str) -> Result<Client> {
    let (url, to) = broker_url(dir, server)?;
    let client = Client::new(&url, to)?;
    client.require_user(what)?;
    Ok(client)
}

/// `hitl pair [--name NAME]`: a link that logs one device in, once.
pub async fn pair(
    dir: Option<&Path>,
    server: Option<String>,
    name: Option<String>,
    as_json: bool,
) -> Result<()> {
    let client = client(dir, server, "pairing a device")?;
    let pairing = client.pair(name.as_deref().unwrap_or("")).await?;
    if as_json {
        println!("{}", serde_json::to_string(&pairing)?);
        return Ok(());
    }
    if std::io::stdout().is_terminal() {
        println!("{}", qr_code(&pairing.url)?);
    }
    println!("{}", pairing.url);
    let minutes = (pairing.expires_in_seconds / 60).max(1);
    eprintln!(
        "hitl: open it on the device (scan the code, or send the link yourself): it logs that \
         one device in, once, within {minutes} minutes; `hitl devices` lists it after"
    );
    if pairing.url.starts_with("http://127.") || pairing.url.starts_with("http://localhost") {
        eprintln!(
            "hitl: this link is for this machine only: for a phone, serve https and set \
             [http] public_url (docs/answering.md)"
        );
    }
    Ok(())
}

/// `url` as a QR code of Unicode half blocks, light on dark (as most terminals are),
/// with its quiet zone.
fn qr_code(url: &str) -> Result<String> {
    use qrcode::render::unicode::Dense1x2;
    let code = qrcode::QrCode::new(url.as_bytes())?;
    Ok(code
        .render::<Dense1x2>()
        .dark_color(Dense1x2::Light)
        .light_color(Dense1x2::Dark)
        .quiet_zone(true)
        .build())
}

/// `hitl devices`: the devices logged in.
pub async fn list(dir: Option<&Path>, server: Option<String>, as_json: bool) -> Result<()> {
    let client = client(dir, server, "listing devices")?;
    let devices = client.devices().await?;
    if as_json {
        println!("{}", serde_json::to_string(&devices)?);
        return Ok(());
    }
    if devices.is_empty() {
        println!("No device is logged in (`hitl pair` logs one in).");
        return Ok(());
    }
    let now = jiff::Timestamp::now().as_second();
    println!(
        "{:<12}  {:<24}  {:<5}  {:<10}  FROM",
        "ID", "NAME", "BY", "LAST SEEN"
    );
    for d in devices {
        let ago = u64::try_from(now).unwrap_or(0).saturating_sub(d.last_seen);
        println!(
            "{:<12}  {:<24}  {:<5}  {:<10}  {}",
            d.id,
            d.name.chars().take(24).collect::<String>(),
            d.by,
            format!("{} ago", short_duration(ago)),
            d.from
        );
    }
    Ok(())
}

/// `hitl devices revoke ID`: ends a device's session at once.
pub async fn revoke(
    dir: Option<&Path>,
    server: Option<String>,
    id: &str,
    as_json: bool,
) -> Result<()> {
    let client = client(dir, server, "revoking a device")?;
    client.revoke_device(id).await?;
    if as_json {
        println!("{}", json!({ "revoked": id }));
    } else {
        println!("revoked {id}: its next request is refused and its open pages are cut off");
    }
    Ok(())
}

/// `s` seconds as people say it: `12s`, `5m`, `3h`, `2d`.
fn short_duration(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}
