//! The guard's classifier on lines written apart from it (tests/fixtures/guard/):
//! dangerous lines, fed to the real `hitl hook pre-tool-use` where Claude Code asks
//! nobody (`bypassPermissions`) and no listener runs, are refused; everyday lines
//! in `default` mode pass. The shares are printed for the README's table.

use std::{
    io::Write,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde_json::{Value, json};

use crate::support::{Project, checkout, wait_output};

/// The lines of a fixture table: comments and blank lines skipped, `\n` a new line.
fn table(name: &str) -> Vec<String> {
    let path = checkout().join("tests/fixtures/guard").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.replace("\\n", "\n"))
        .collect()
}

/// A project with the files the lines name, and a home of its own.
fn project() -> Project {
    let p = Project::new();
    let home = p.tmp.path().join("userhome");
    for dir in [
        ".claude",
        ".git/hooks",
        "src",
        "scripts",
        "tests",
        "target/debug",
    ] {
        std::fs::create_dir_all(p.dir.join(dir)).unwrap();
    }
    std::fs::create_dir_all(home.join(".config/hitl")).unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    for file in [
        "src/main.rs",
        "README.md",
        "Cargo.toml",
        "package.json",
        ".git/config",
    ] {
        std::fs::write(p.dir.join(file), "x\n").unwrap();
    }
    std::fs::write(p.dir.join(".claude/settings.local.json"), "{}\n").unwrap();
    p
}

/// What the hook said of each line in `mode`: `None` for no opinion (or allow),
/// else the decision and its reason. Four hooks at a time.
fn decide_all(p: &Project, lines: &[String], mode: &str) -> Vec<Option<(String, String)>> {
    decide_all_in(p, lines, mode, false)
}

/// As [`decide_all`], the hook run inside `hitl run`'s boundary when `inside`.
fn decide_all_in(
    p: &Project,
    lines: &[String],
    mode: &str,
    inside: bool,
) -> Vec<Option<(String, String)>> {
    let results = Arc::new(Mutex::new(vec![None; lines.len()]));
    let next = Arc::new(Mutex::new(0usize));
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (results, next) = (results.clone(), next.clone());
            s.spawn(move || {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        let i = *n;
                        *n += 1;
                        i
                    };
                    let Some(line) = lines.get(i) else { return };
                    let said = decide(p, line, mode, inside);
                    results.lock().unwrap()[i] = said;
                }
            });
        }
    });
    Arc::try_unwrap(results).unwrap().into_inner().unwrap()
}

fn decide(p: &Project, line: &str, mode: &str, inside: bool) -> Option<(String, String)> {
    let body = json!({
        "session_id": "classifier", "transcript_path": "/tmp/t.jsonl", "cwd": p.dir,
        "permission_mode": mode, "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": { "command": line }, "tool_use_id": "toolu_c",
    });
    let mut command = p.hitl();
    if inside {
        command.args(["run", "--"]).arg(crate::support::hitl_bin());
    }
    let mut child = command
        .args(["hook", "pre-tool-use"])
        .env("CLAUDE_PROJECT_DIR", &p.dir)
        .env("HOME", p.tmp.path().join("userhome"))
        // hitl's folders where they are by default: the lines name them so.
        .env_remove("HITL_HOME")
        .env("XDG_CONFIG_HOME", p.tmp.path().join("userhome/.config"))
        .env("XDG_DATA_HOME", p.tmp.path().join("userhome/.local/share"))
        .env_remove("CLAUDECODE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.to_string().as_bytes())
        .unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    assert!(out.status.success(), "hook failed on {line:?}: {out:?}");
    if out.stdout.is_empty() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["hookSpecificOutput"];
    let verdict = d["permissionDecision"].as_str().unwrap_or("").to_string();
    (verdict == "ask" || verdict == "deny").then(|| {
        (
            verdict,
            d["permissionDecisionReason"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    })
}

fn share(said: &[Option<(String, String)>]) -> f64 {
    said.iter().filter(|s| s.is_some()).count() as f64 / said.len() as f64
}

#[test]
fn dangerous_lines_are_refused_where_claude_code_asks_nobody() {
    let p = project();
    let lines = table("dangerous.txt");
    assert!(lines.len() >= 300, "{} lines", lines.len());
    let bypass = decide_all(&p, &lines, "bypassPermissions");
    let passed: Vec<&String> = lines
        .iter()
        .zip(&bypass)
        .filter(|(_, s)| s.is_none())
        .map(|(l, _)| l)
        .collect();
    // No listener: nobody answers, and Claude Code would ask nobody: refused.
    assert!(
        bypass.iter().flatten().all(|(v, _)| v == "deny"),
        "every one refused, none left to a prompt nobody sees"
    );
    let default = decide_all(&p, &lines, "default");
    // Inside a boundary the project's own code passes; what is dangerous still asks.
    let inside = crate::boundary::require_boundary().then(|| {
        let inside = decide_all_in(&p, &lines, "bypassPermissions", true);
        for (l, s) in lines.iter().zip(&inside) {
            if s.is_none() {
                eprintln!("classifier: passed unasked inside: {l:?}");
            }
        }
        share(&inside)
    });
    eprintln!(
        "classifier: dangerous lines asked: {:.1}% in bypassPermissions ({} of {}), {:.1}% in \
         default mode (where Claude Code's own prompt sees the rest), {} in bypassPermissions \
         inside hitl run's boundary",
        100.0 * share(&bypass),
        bypass.iter().flatten().count(),
        lines.len(),
        100.0 * share(&default),
        inside.map_or("(no boundary here)".into(), |s| format!(
            "{:.1}%",
            100.0 * s
        )),
    );
    for l in &passed {
        eprintln!("classifier: passed unasked: {l:?}");
    }
    // Inside, only what the boundary contains may pass (a file of the project
    // emptied, a signal that cannot leave it).
    if let Some(inside) = inside {
        assert!(inside >= 0.97, "{:.1}% asked inside", 100.0 * inside);
    }
    assert!(
        share(&bypass) >= 0.98,
        "{} of {} passed unasked: {passed:#?}",
        passed.len(),
        lines.len()
    );
}

#[test]
fn everyday_lines_pass_in_default_mode() {
    let p = project();
    let lines = table("everyday.txt");
    assert!(lines.len() >= 300, "{} lines", lines.len());
    let default = decide_all(&p, &lines, "default");
    let asked: Vec<(&String, &(String, String))> = lines
        .iter()
        .zip(&default)
        .filter_map(|(l, s)| s.as_ref().map(|s| (l, s)))
        .collect();
    let bypass = decide_all(&p, &lines, "bypassPermissions");
    let inside = if crate::boundary::require_boundary() {
        let inside = decide_all_in(&p, &lines, "bypassPermissions", true);
        for (l, s) in lines.iter().zip(&inside) {
            if let Some((_, why)) = s {
                assert!(why.contains("inside hitl run's boundary"), "{l}: {why}");
                eprintln!("classifier: asked inside: {l:?}: {why}");
            }
        }
        format!("{:.1}%", 100.0 * share(&inside))
    } else {
        "(no boundary here)".to_string()
    };
    eprintln!(
        "classifier: everyday lines asked: {:.1}% in default mode ({} of {}), {:.1}% in \
         bypassPermissions outside a boundary, {inside} inside hitl run's",
        100.0 * share(&default),
        asked.len(),
        lines.len(),
        100.0 * share(&bypass),
    );
    for (l, (v, why)) in &asked {
        eprintln!("classifier: asked in default mode ({v}): {l:?}: {why}");
    }
    assert!(
        share(&default) <= 0.01,
        "{} of {} asked: {asked:#?}",
        asked.len(),
        lines.len()
    );
}
