//! `hitl service install|uninstall|status`: the listener as a user service, started
//! at login and restarted when it fails: a systemd user unit on Linux, a launchd
//! agent on macOS. `--dry-run` prints what would be written and changes nothing.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};

use crate::spool::Spool;

/// The service manager a unit is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Manager {
    /// A systemd user unit (Linux).
    Systemd,
    /// A launchd agent (macOS).
    Launchd,
}

impl Manager {
    /// This system's.
    pub fn here() -> Manager {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// What `hitl service install` runs.
#[derive(Debug, Clone, clap::Args)]
pub struct InstallOptions {
    /// Project folders the listener serves (default: the current one).
    pub dirs: Vec<PathBuf>,
    /// Run `hitl serve --http ADDR` (a shared host, HTTP only) instead of a listener.
    #[arg(long, value_name = "ADDR", conflicts_with = "dirs")]
    pub serve: Option<String>,
    /// The history store (sqlite://PATH or postgres://…; default: the user's SQLite).
    #[arg(long)]
    pub db: Option<String>,
    /// Print the unit and where it would go; write nothing, start nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The service manager (default: this system's).
    #[arg(long, value_enum)]
    pub manager: Option<Manager>,
}

/// The unit's name (systemd) and label (launchd).
const SYSTEMD_UNIT: &str = "hitl.service";
const LAUNCHD_LABEL: &str = "dev.hitl.listener";

/// Where the unit of `manager` lives for this user.
fn unit_path(manager: Manager) -> Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set")?;
    Ok(match manager {
        Manager::Systemd => std::env::var_os("XDG_CONFIG_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".config"))
            .join("systemd/user")
            .join(SYSTEMD_UNIT),
        Manager::Launchd => home
            .join("Library/LaunchAgents")
            .join(format!("{LAUNCHD_LABEL}.plist")),
    })
}

/// The command line the service runs: this binary, `listen --ui none` over the
/// projects (nobody is at a service's terminal: the dashboard is where to answer),
/// or `serve`.
fn command_line(opts: &InstallOptions) -> Result<Vec<String>> {
    let me = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("finding the hitl binary")?;
    let mut args = vec![me.display().to_string()];
    match &opts.serve {
        Some(addr) => {
            crate::server::listen_address(addr)?;
            args.extend(["serve".into(), "--http".into(), addr.clone()]);
        }
        None => {
            args.extend(["listen".into(), "--ui".into(), "none".into()]);
            let dirs = if opts.dirs.is_empty() {
                vec![std::env::current_dir().context("reading the current folder")?]
            } else {
                opts.dirs.clone()
            };
            for d in dirs {
                let abs = std::fs::canonicalize(&d)
                    .with_context(|| format!("no such folder {}", d.display()))?;
                if !Spool::new(&abs).exists() {
                    bail!(
                        "{} is not initialised for hitl; run `hitl init {}` first",
                        abs.display(),
                        d.display()
                    );
                }
                args.push(abs.display().to_string());
            }
        }
    }
    if let Some(db) = &opts.db {
        args.extend(["--db".into(), db.clone()]);
    }
    Ok(args)
}

/// One argument as systemd reads `ExecStart=`: quoted when it must be, `%` doubled.
fn systemd_word(arg: &str) -> String {
    let escaped = arg
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('%', "%%");
    if escaped.is_empty() || escaped.contains(|c: char| c.is_whitespace() || c == ';') {
        format!("\"{escaped}\"")
    } else {
        escaped
    }
}

/// The systemd user unit for `args`.
pub fn systemd_unit(args: &[String]) -> String {
    let exec: Vec<String> = args.iter().map(|a| systemd_word(a)).collect();
    format!(
        "# Written by `hitl service install`; `hitl service uninstall` removes it.\n\
         [Unit]\n\
         Description=hitl: the human-in-the-loop broker for AI agents\n\
         After=network.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         # Its log goes to the journal: journalctl --user -u hitl\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" ")
    )
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The launchd agent for `args`, logging to `log`.
pub fn launchd_plist(args: &[String], log: &Path) -> String {
    let program: String = args
        .iter()
        .map(|a| format!("    <string>{}</string>\n", xml_escape(a)))
        .collect();
    let log = xml_escape(&log.display().to_string());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n  <string>{LAUNCHD_LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n  <array>\n{program}  </array>\n\
         \x20 <key>RunAtLoad</key>\n  <true/>\n\
         \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
         \x20 <key>StandardOutPath</key>\n  <string>{log}</string>\n\
         \x20 <key>StandardErrorPath</key>\n  <string>{log}</string>\n\
         </dict>\n\
         </plist>\n"
    )
}

/// Runs a service manager's command, saying what failed (it may be absent, or have
/// no user session, as in a container).
fn run(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// `hitl service install`.
pub fn install(opts: InstallOptions) -> Result<()> {
    let manager = opts.manager.unwrap_or_else(Manager::here);
    let path = unit_path(manager)?;
    let args = command_line(&opts)?;
    let text = match manager {
        Manager::Systemd => systemd_unit(&args),
        Manager::Launchd => {
            let home = path.ancestors().nth(3).unwrap_or(Path::new("/"));
            launchd_plist(&args, &home.join("Library/Logs/hitl.log"))
        }
    };
    if opts.dry_run {
        eprintln!(
            "hitl: would write {} (--dry-run: nothing written)",
            path.display()
        );
        print!("{text}");
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    crate::spool::write_atomic(dir, &path, text.as_bytes(), true)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote    {}", path.display());
    let started = match manager {
        Manager::Systemd => run("systemctl", &["--user", "daemon-reload"])
            .and_then(|()| run("systemctl", &["--user", "enable", "--now", SYSTEMD_UNIT])),
        Manager::Launchd => {
            let domain = format!("gui/{}", nix::unistd::getuid());
            run(
                "launchctl",
                &["bootstrap", &domain, &path.display().to_string()],
            )
        }
    };
    match started {
        Ok(()) => eprintln!("hitl: the service runs, and starts at every login"),
        Err(e) => eprintln!(
            "hitl: installed, not started ({e:#}); start it with: {}",
            match manager {
                Manager::Systemd => "systemctl --user enable --now hitl",
                Manager::Launchd =>
                    "launchctl bootstrap gui/$UID ~/Library/LaunchAgents/dev.hitl.listener.plist",
            }
        ),
    }
    Ok(())
}

/// `hitl service uninstall`.
pub fn uninstall(manager: Option<Manager>, dry_run: bool) -> Result<()> {
    let manager = manager.unwrap_or_else(Manager::here);
    let path = unit_path(manager)?;
    if !path.exists() {
        eprintln!("hitl: no service installed ({} is absent)", path.display());
        return Ok(());
    }
    if dry_run {
        eprintln!("hitl: would stop the service and remove {}", path.display());
        return Ok(());
    }
    // Stopped first (best effort: there may be no user session to ask).
    let stopped = match manager {
        Manager::Systemd => run("systemctl", &["--user", "disable", "--now", SYSTEMD_UNIT]),
        Manager::Launchd => run(
            "launchctl",
            &[
                "bootout",
                &format!("gui/{}/{LAUNCHD_LABEL}", nix::unistd::getuid()),
            ],
        ),
    };
    if let Err(e) = stopped {
        eprintln!("hitl: warning: {e:#}");
    }
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    if manager == Manager::Systemd {
        let _ = run("systemctl", &["--user", "daemon-reload"]);
    }
    eprintln!("removed  {}", path.display());
    Ok(())
}

/// `hitl service status`: whether a unit is installed, what it runs, and whether the
/// service manager says it runs. Fails when none is installed.
pub fn status(manager: Option<Manager>, json: bool) -> Result<()> {
    let manager = manager.unwrap_or_else(Manager::here);
    let path = unit_path(manager)?;
    let text = std::fs::read_to_string(&path).ok();
    let runs = match manager {
        Manager::Systemd => Command::new("systemctl")
            .args(["--user", "is-active", SYSTEMD_UNIT])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty()),
        Manager::Launchd => None,
    };
    let command = text.as_deref().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .map(str::to_string)
    });
    if json {
        let v = serde_json::json!({
            "manager": format!("{manager:?}").to_lowercase(),
            "unit": path,
            "installed": text.is_some(),
            "command": command,
            "state": runs,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        match &text {
            Some(_) => println!("installed: {}", path.display()),
            None => println!("installed: no ({} is absent)", path.display()),
        }
        if let Some(c) = &command {
            println!("runs:      {c}");
        }
        if let Some(s) = &runs {
            println!("state:     {s}");
        }
    }
    if text.is_none() {
        bail!("no hitl service is installed (`hitl service install` installs one)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_as_systemd_reads_them() {
        assert_eq!(systemd_word("/usr/bin/hitl"), "/usr/bin/hitl");
        assert_eq!(systemd_word("/home/a b"), "\"/home/a b\"");
        assert_eq!(systemd_word("100%"), "100%%");
        assert_eq!(systemd_word("say \"hi\""), "\"say \\\"hi\\\"\"");
        let unit = systemd_unit(&["/bin/hitl".into(), "listen".into(), "/p q".into()]);
        assert!(
            unit.contains("ExecStart=/bin/hitl listen \"/p q\"\n"),
            "{unit}"
        );
        assert!(unit.contains("Restart=on-failure"));
        let plist = launchd_plist(&["/bin/hitl".into(), "a&b".into()], Path::new("/l"));
        assert!(plist.contains("<string>a&amp;b</string>"), "{plist}");
    }
}
