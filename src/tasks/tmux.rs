//! The tmux driver: hitl's task sessions live on a tmux server of their own (socket
//! `hitl`, in `$TMUX_TMPDIR` as tmux places sockets), so they never mix with the
//! user's sessions and `hitl task attach` finds them. Every call is one `tmux`
//! process with its arguments as a list: no shell, nothing a task's text could break
//! out of.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

/// The name of hitl's tmux server socket (`tmux -L hitl`).
pub const SOCKET: &str = "hitl";

/// A pane size that every agent's screen fits and that stays the same whoever
/// attaches (seed 002 leaves it to tmux's 80×24, where Claude Code wraps everything).
pub const PANE_COLUMNS: u16 = 220;
/// See [`PANE_COLUMNS`].
pub const PANE_ROWS: u16 = 50;

/// hitl's tmux server.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: String,
}

impl Default for Tmux {
    fn default() -> Self {
        Tmux {
            socket: SOCKET.to_string(),
        }
    }
}

/// What a new session runs, and where.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// The session's name.
    pub name: &'a str,
    /// The folder it starts in.
    pub dir: &'a Path,
    /// The program and its arguments.
    pub command: &'a [String],
    /// Variables set for it.
    pub env: &'a [(String, String)],
}

impl Tmux {
    /// The server on socket `socket` (tests use their own).
    pub fn on_socket(socket: impl Into<String>) -> Tmux {
        Tmux {
            socket: socket.into(),
        }
    }

    /// A `tmux` command on hitl's server. Claude Code's nesting variables are taken
    /// out: a server this starts passes its environment to every session, and an
    /// agent started inside another's would think itself nested.
    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-L").arg(&self.socket);
        for name in super::nesting::inherited() {
            c.env_remove(name);
        }
        c.stdin(Stdio::null());
        c
    }

    /// Runs `args`; its stdout, or its stderr as the error.
    fn run(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command()
            .args(args)
            .output()
            .context("running tmux (is it installed?)")?;
        if !out.status.success() {
            bail!(
                "tmux {}: {}",
                args.first().unwrap_or(&""),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Whether session `name` exists.
    pub fn has_session(&self, name: &str) -> bool {
        self.command()
            .args(["has-session", "-t", &exact(name)])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The sessions on the server (none when it does not run).
    pub fn sessions(&self) -> Vec<String> {
        self.run(&["list-sessions", "-F", "#{session_name}"])
            .map(|out| out.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Starts a detached session of [`PANE_COLUMNS`]×[`PANE_ROWS`] running
    /// `s.command` in `s.dir`, with `s.env` set (Claude Code's nesting variables removed). The
    /// session stays when the program exits, so its last screen can be read.
    pub fn new_session(&self, s: &NewSession) -> Result<()> {
        if s.command.is_empty() {
            bail!("no command to run in session {}", s.name);
        }
        let (cols, rows) = (PANE_COLUMNS.to_string(), PANE_ROWS.to_string());
        let dir = s.dir.to_string_lossy();
        let mut args: Vec<String> = [
            "new-session",
            "-d",
            "-s",
            s.name,
            "-x",
            &cols,
            "-y",
            &rows,
            "-c",
            &dir,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        for (k, v) in s.env {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        // The program itself, through env(1): the nesting variables out even on a
        // server that was started with them.
        args.push("--".into());
        args.push("env".into());
        for name in super::nesting::inherited() {
            args.push("-u".into());
            args.push(name);
        }
        args.extend(s.command.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs)
            .with_context(|| format!("starting tmux session {}", s.name))?;
        // Fixed size whoever attaches, and the pane kept when the agent exits.
        let window = pane(s.name);
        self.run(&["set-option", "-w", "-t", &window, "window-size", "manual"])?;
        self.run(&["set-option", "-w", "-t", &window, "remain-on-exit", "on"])?;
        Ok(())
    }

    /// Types `text` into session `name` as one bracketed paste (the agent sees pasted
    /// text, newlines and all, never keys to act on), then presses Enter after
    /// `pause`: a terminal app that reads the paste and the Enter in one go takes the
    /// Enter as part of the paste.
    pub fn paste_and_enter(&self, name: &str, text: &str, pause: Duration) -> Result<()> {
        let buffer = format!("hitl-{name}");
        let mut child = self
            .command()
            .args(["load-buffer", "-b", &buffer, "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running tmux load-buffer")?;
        child
            .stdin
            .take()
            .context("tmux load-buffer's stdin")?
            .write_all(text.as_bytes())
            .context("writing the task to tmux")?;
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "tmux load-buffer: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let pane = pane(name);
        self.run(&["paste-buffer", "-p", "-d", "-b", &buffer, "-t", &pane])
            .with_context(|| format!("pasting into session {name}"))?;
        std::thread::sleep(pause);
        self.send_keys(name, &["Enter"])
    }

    /// Presses `keys` (tmux key names: `Enter`, `Escape`, `C-c`) in session `name`.
    pub fn send_keys(&self, name: &str, keys: &[&str]) -> Result<()> {
        let pane = pane(name);
        let mut args = vec!["send-keys", "-t", &pane];
        args.extend_from_slice(keys);
        self.run(&args)
            .with_context(|| format!("sending keys to session {name}"))?;
        Ok(())
    }

    /// The last `lines` lines of session `name`'s pane, as shown (wrapped lines
    /// joined), trailing blank lines dropped.
    pub fn capture(&self, name: &str, lines: usize) -> Result<String> {
        let start = format!("-{lines}");
        let pane = pane(name);
        let text = self.run(&["capture-pane", "-p", "-J", "-t", &pane, "-S", &start])?;
        Ok(text.trim_end().to_string())
    }

    /// Whether the program in session `name`'s pane has exited (the pane is kept:
    /// `remain-on-exit`).
    pub fn pane_dead(&self, name: &str) -> bool {
        let pane = pane(name);
        self.run(&["display-message", "-p", "-t", &pane, "#{pane_dead}"])
            .map(|s| s.trim() == "1")
            .unwrap_or(true)
    }

    /// Session `name`'s pane id (`%3`), what `$TMUX_PANE` says inside it.
    pub fn pane_id(&self, name: &str) -> Result<String> {
        let pane = pane(name);
        Ok(self
            .run(&["display-message", "-p", "-t", &pane, "#{pane_id}"])?
            .trim()
            .to_string())
    }

    /// Ends session `name` (nothing when it is gone).
    pub fn kill_session(&self, name: &str) {
        let _ = self.run(&["kill-session", "-t", &exact(name)]);
    }

    /// The command that attaches a terminal to session `name`.
    pub fn attach_command(&self, name: &str) -> Command {
        let mut c = self.command();
        c.stdin(Stdio::inherit())
            .args(["attach-session", "-t", &exact(name)]);
        c
    }
}

/// A target naming session `name` exactly (tmux otherwise takes a prefix or a
/// pattern).
fn exact(name: &str) -> String {
    format!("={name}")
}

/// The active pane of session `name`'s only window.
fn pane(name: &str) -> String {
    format!("={name}:")
}
