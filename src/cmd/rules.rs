//! `hitl rules`: the "always allow" rules of `hitl hook` (`[hook] allow`), listed,
//! added and removed in the project's `.helpers/config.toml`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{
    config::{self, Paths},
    guard::rules::{self, Rule},
    spool::Spool,
};

/// The rules in force and which file holds them (the project's config when it
/// sets `allow`, else the user's).
fn in_force(spool: &Spool) -> Result<(Vec<String>, std::path::PathBuf)> {
    let project = spool.config_file();
    let settings = config::load(&Paths::from_env(), Some(&project))?;
    let project_sets = std::fs::read_to_string(&project)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| {
            t.get("hook")
                .and_then(|h| h.as_table())
                .is_some_and(|h| h.contains_key("allow"))
        });
    let from = if project_sets || settings.hook.allow.is_empty() {
        project
    } else {
        Paths::from_env().user_config()
    };
    Ok((settings.hook.allow, from))
}

/// `hitl rules [list]`.
pub fn list(dir: Option<&Path>, as_json: bool) -> Result<()> {
    let spool = Spool::locate(dir)?;
    let (allow, from) = in_force(&spool)?;
    if as_json {
        let items: Vec<_> = allow
            .iter()
            .enumerate()
            .map(|(i, r)| json!({ "n": i + 1, "rule": r, "valid": r.parse::<Rule>().is_ok() }))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "file": from, "rules": items }))?
        );
        return Ok(());
    }
    if allow.is_empty() {
        println!(
            "No \"always allow\" rules in {}: every call the [hook] policy names is asked.",
            spool.project().display()
        );
        return Ok(());
    }
    println!("Always allowed here (from {}):", from.display());
    for (i, r) in allow.iter().enumerate() {
        match r.parse::<Rule>() {
            Ok(_) => println!("{:>3}. {r}", i + 1),
            Err(e) => println!("{:>3}. {r}   (not a rule: {e:#})", i + 1),
        }
    }
    Ok(())
}

/// `hitl rules add RULE`.
pub fn add(dir: Option<&Path>, text: &str, as_json: bool) -> Result<()> {
    let spool = Spool::locate(dir)?;
    let rule: Rule = text.parse()?;
    let file = spool.config_file();
    let added = rules::add(&file, &rule)?;
    if as_json {
        println!(
            "{}",
            json!({ "rule": rule.to_string(), "added": added, "file": file })
        );
    } else if added {
        println!("Added {rule} to {}.", file.display());
    } else {
        println!("{rule} is already in {}.", file.display());
    }
    Ok(())
}

/// `hitl rules remove RULE|N`.
pub fn remove(dir: Option<&Path>, text: &str, as_json: bool) -> Result<()> {
    let spool = Spool::locate(dir)?;
    let file = spool.config_file();
    let Some(removed) = rules::remove(&file, text)
        .with_context(|| format!("removing a rule from {}", file.display()))?
    else {
        bail!("no rule {text:?} in {} (see `hitl rules`)", file.display());
    };
    if as_json {
        println!(
            "{}",
            json!({ "rule": removed, "removed": true, "file": file })
        );
    } else {
        println!("Removed {removed} from {}.", file.display());
    }
    Ok(())
}
