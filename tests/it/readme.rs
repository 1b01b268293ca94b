//! The README's examples, run. Every shell block is run with bash, as a reader would
//! paste it, in a temp project with the `hitl` under test on the PATH; the JSON
//! blocks are compared with what `hitl init --claude` writes. (That every `hitl`
//! line parses is checked against clap itself in `src/main.rs`.)
//!
//! What a test cannot do as written is changed, each change said beside it: a
//! listener is stopped after a few seconds instead of running for ever, nothing is
//! built or installed, no browser is opened, the dashboard's port is the one the
//! listener got, `01a2…` is a real question's id.

use std::{
    path::Path,
    process::{Command, Output, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::support::{Project, checkout, eventually, hitl_bin, spawn_ask};

/// A fenced block of the README: its language and text.
struct Block {
    lang: String,
    text: String,
}

/// The README and the pages of `docs/` it leads to (the protocol's reference aside):
/// the user's documents, whose examples are run here.
pub(crate) fn documents() -> Vec<std::path::PathBuf> {
    let root = checkout();
    let mut pages: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| !p.ends_with("PROTOCOL.md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

/// The fenced blocks of every one of [`documents`].
fn blocks() -> Vec<Block> {
    let mut out = Vec::new();
    for page in documents() {
        out.extend(blocks_of(&std::fs::read_to_string(page).unwrap()));
    }
    out
}

fn blocks_of(readme: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for line in readme.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                open = Some(Block {
                    lang: lang.trim().to_string(),
                    text: String::new(),
                })
            }
            (Some(_), Some(_)) => out.push(open.take().unwrap()),
            (Some(b), None) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The shell block that contains `marker`.
pub(crate) fn shell_block(marker: &str) -> String {
    let found: Vec<Block> = blocks()
        .into_iter()
        .filter(|b| b.lang == "sh" && b.text.contains(marker))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one shell block of the README and docs/ has {marker:?}"
    );
    found.into_iter().next().unwrap().text
}

/// The same text with `from` made `to`, which must be there.
fn change(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.contains(from),
        "the README's block no longer has {from:?}:\n{text}"
    );
    text.replace(from, to)
}

/// A PATH with the hitl under test first, as `cargo install` would leave it.
pub(crate) fn path() -> String {
    format!(
        "{}:{}",
        hitl_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Runs `script` with bash (`set -e`: every command must succeed) in `dir`, with the
/// project's HITL_HOME and `home` as HOME.
fn bash(p: &Project, dir: &Path, home: &Path, script: &str) -> Output {
    Command::new("bash")
        .args(["-e", "-c", script])
        .current_dir(dir)
        .env("HITL_HOME", &p.home)
        .env("HOME", home)
        .env("PATH", path())
        .env("TMPDIR", p.tmp.path())
        .env_remove("HITL_DB")
        .env_remove("HITL_SERVER")
        .env_remove("HITL_AGENT_ID")
        .env_remove("HITL_AGENT_NAME")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A project whose listeners take a free port (the README's commands unchanged).
fn project() -> (Project, std::path::PathBuf) {
    let p = Project::new();
    p.user_config("[http]\nlisten_addr = \"127.0.0.1:0\"\n");
    let home = p.tmp.path().join("user");
    std::fs::create_dir_all(home.join("my-project")).unwrap();
    (p, home)
}

#[test]
fn the_set_up_and_the_tour_run_as_written() {
    let (p, home) = project();
    // The two commands: the listener runs until stopped (here after 3 s); no build.
    let setup = shell_block("cargo run --release -- init");
    let setup = change(&setup, "cargo run --release -- init", "hitl init");
    let setup = change(
        &setup,
        "cargo run --release -- listen",
        "timeout -s TERM 3 hitl listen",
    );
    let setup = setup.replace(
        "/tmp/hitl-demo",
        &p.tmp.path().join("demo").display().to_string(),
    );
    let out = bash(&p, &p.dir, &home, &setup);
    assert_eq!(
        out.status.code(),
        Some(124),
        "stopped by timeout: {}",
        text(&out)
    );
    assert!(text(&out).contains("hitl: ready"), "{}", text(&out));

    // The tour: nothing installed (the hitl under test is on the PATH), the demo
    // answers itself, the listener is stopped after 3 s.
    let tour = shell_block("hitl init --claude");
    // Installed with the versions tested (Cargo.lock), not the newest ones.
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for line in readme.lines().filter(|l| l.contains("cargo install")) {
        assert!(line.contains("--locked"), "without --locked: {line}");
    }
    let tour = change(&tour, "cargo install --locked --path .", "true");
    let tour = change(&tour, "hitl demo ", "hitl demo --auto-answer ");
    let tour = change(&tour, "hitl listen ", "timeout -s TERM 3 hitl listen ");
    let out = bash(&p, &p.dir, &home, &tour);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains("7 of 7 agents heard back"), "{all}");
    assert!(all.contains("hitl: ready"), "{all}");
    assert!(home.join("my-project/.helpers/config.toml").exists());
    assert!(home.join("my-project/.claude/settings.local.json").exists());
}

#[test]
fn the_ask_examples_run_against_a_listener() {
    let (p, home) = project();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "PostgreSQL"]);
    let block = shell_block("hitl ask \"Use PostgreSQL or MySQL?\"");
    let out = bash(&p, &p.dir, &home, &block);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "PostgreSQL",
            "yes",
            "Express",
            "approved",
            "1",
            "PostgreSQL",
            "Express"
        ],
        "{}",
        text(&out)
    );
}

/// What each `01a2…` of the answering block answers, in order.
enum Needs {
    Text,
    Approval,
    /// A call the guard asked, which offers an "always allow" rule.
    HookCall,
}

#[test]
fn the_answering_examples_run_against_real_questions() {
    let (p, home) = project();
    let _l = p.listen(&["--ui", "none", "--attended"]);
    let block = shell_block("hitl answer 01a2…");
    // One question for each `01a2…`, of the kind its line answers.
    let needs: Vec<Needs> = block
        .lines()
        .filter(|l| l.contains("01a2…"))
        .map(|l| {
            if l.contains("--always") {
                Needs::HookCall
            } else if l.contains("--deny") || l.contains("--approve") {
                Needs::Approval
            } else {
                Needs::Text
            }
        })
        .collect();
    assert!(needs.len() >= 3, "{block}");
    let mut askers = Vec::new();
    let mut ids = Vec::new();
    for (i, need) in needs.iter().enumerate() {
        let question = format!("README question {i}");
        let child = match need {
            Needs::Text => spawn_ask(&p, &["--timeout", "120", &question]),
            Needs::Approval => {
                spawn_ask(&p, &["--type", "approval", "--timeout", "120", &question])
            }
            Needs::HookCall => {
                let input = serde_json::json!({
                    "session_id": "readme", "transcript_path": "/dev/null",
                    "cwd": p.dir, "permission_mode": "default",
                    "hook_event_name": "PreToolUse", "tool_name": "Bash",
                    "tool_input": { "command": "git push --force origin main" },
                    "tool_use_id": "toolu_readme"
                });
                crate::hook::spawn_hook_as(&p, "pre-tool-use", &input, Some("readme"))
            }
        };
        let pending = p.wait_pending(i + 1, Duration::from_secs(10));
        let newest = pending
            .iter()
            .find(|q| !ids.contains(&q["id"].as_str().unwrap().to_string()))
            .unwrap();
        ids.push(newest["id"].as_str().unwrap().to_string());
        askers.push(child);
    }
    // Each `01a2…` is a real id's start, as people type them.
    let mut script = String::new();
    let mut next = ids.iter();
    for line in block.lines() {
        let line = match line.contains("01a2…") {
            true => line.replace("01a2…", &next.next().unwrap()[..12]),
            false => line.to_string(),
        };
        script.push_str(&line);
        script.push('\n');
    }
    // No browser in a test; no service installed for real; one shell of three.
    let script = change(&script, "hitl dashboard --open", "hitl dashboard");
    let script = change(
        &script,
        "hitl service install [DIR…]",
        "hitl service install --dry-run",
    );
    let script = change(&script, "hitl token [--asker]", "hitl token --asker");
    let script = change(
        &script,
        "hitl completions bash|zsh|fish",
        "hitl completions bash",
    );
    let script = change(
        &script,
        "hitl man | man -l -",
        "hitl man | wc -c >/dev/null",
    );
    let out = bash(&p, &p.dir, &home, &script);
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("answered") && all.contains("PostgreSQL"),
        "{all}"
    );
    assert!(
        all.contains("[Install]") || all.contains("WantedBy"),
        "the unit printed: {all}"
    );

    // Each asker heard what its line said.
    let outs: Vec<Output> = askers
        .into_iter()
        .map(|c| crate::support::wait_output(c, Duration::from_secs(10)))
        .collect();
    let first = String::from_utf8_lossy(&outs[0].stdout);
    assert_eq!(first, "PostgreSQL\n");
    assert_eq!(outs[1].status.code(), Some(1), "denied");
    let hook: Value = serde_json::from_slice(&outs[2].stdout).unwrap();
    assert_eq!(
        hook["hookSpecificOutput"]["permissionDecision"], "allow",
        "{hook}"
    );
    assert_eq!(outs[3].status.code(), Some(1), "cancelled");
    let rules = String::from_utf8_lossy(&p.run(&["rules"]).stdout).into_owned();
    assert!(rules.contains("git push --force origin main"), "{rules}");
}

#[test]
fn the_http_examples_run_against_a_listener() {
    let (p, home) = project();
    let l = p.listen(&["--ui", "none", "--attended"]);
    let base = l.http_base();
    let host_port = base.trim_start_matches("http://");
    let block = shell_block("curl -s localhost:4000/events");
    // The port the listener got; the token where HITL_HOME keeps it; the ask waits
    // in the background to be answered below, as from another terminal.
    let script = block
        .replace("localhost:4000", host_port)
        .replace("http://127.0.0.1:4000", &base);
    let script = change(
        &script,
        "~/.config/hitl/token",
        &p.home.join("token").display().to_string(),
    );
    let ask_out = p.tmp.path().join("ask.out");
    let script = change(
        &script,
        "\"Deploy now?\"",
        &format!("\"Deploy now?\" >{} 2>&1 &", ask_out.display()),
    );
    let out = bash(&p, &p.dir, &home, &script);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"approved\":true"), "{stdout}");
    assert!(stdout.contains("\"comment\":\"ok\""), "{stdout}");

    let mut id = String::new();
    eventually("the ask is pending", Duration::from_secs(10), || {
        p.pending()
            .iter()
            .find(|q| q["content"] == "Deploy now?")
            .map(|q| id = q["id"].as_str().unwrap().to_string())
            .is_some()
    });
    assert!(p.run(&["answer", &id, "yes"]).status.success());
    eventually(
        "the ask printed its answer",
        Duration::from_secs(10),
        || std::fs::read_to_string(&ask_out).is_ok_and(|t| t == "yes\n"),
    );
}

#[test]
fn the_json_blocks_are_what_init_writes() {
    let (p, home) = project();
    let out = p
        .hitl()
        .args(["init", "--claude", "--shared"])
        .env("HOME", &home)
        .env("PATH", path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(p.dir.join(".claude/settings.json")).unwrap(),
    )
    .unwrap();
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(p.dir.join(".mcp.json")).unwrap()).unwrap();
    let json: Vec<Value> = blocks()
        .into_iter()
        .filter(|b| b.lang == "json")
        .map(|b| serde_json::from_str(&b.text).unwrap_or_else(|e| panic!("{e}:\n{}", b.text)))
        .collect();
    let hooks = json.iter().find(|v| v.get("hooks").is_some()).unwrap();
    let mut named = Vec::new();
    for (event, shown) in hooks["hooks"].as_object().unwrap() {
        if event == "…" {
            // "A, B and C as PostToolUse": the same handler for each.
            let list = shown.as_str().unwrap().trim_end_matches(" as PostToolUse");
            for e in list.split(", ").flat_map(|e| e.split(" and ")) {
                let handler = &written["hooks"][e][0]["hooks"][0];
                assert_eq!(handler["timeout"], 10, "{e}: {handler}");
                named.push(e.to_string());
            }
            continue;
        }
        assert_eq!(&written["hooks"][event], shown, "{event}");
        named.push(event.clone());
    }
    let mut all: Vec<String> = written["hooks"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    all.sort();
    named.sort();
    assert_eq!(named, all, "the README names every hooked event");
    let server = json.iter().find(|v| v.get("mcpServers").is_some()).unwrap();
    assert_eq!(server["mcpServers"]["hitl"], mcp["mcpServers"]["hitl"]);
}

/// Every shell block is one of those run above (or the test command itself): a new
/// example in the README needs a test here.
#[test]
fn every_shell_block_of_the_readme_is_run() {
    let run_above = [
        "cargo run --release -- init",
        "hitl init --claude",
        "hitl ask \"Use PostgreSQL or MySQL?\"",
        "hitl answer 01a2…",
        "curl -s localhost:4000/events",
        // tests/it/tasks.rs, against the real Claude Code.
        "hitl task session coder",
        "hitl mailbox init --agents narrator,scribe",
        // The README's test command: it runs all of this.
        "tools/test-all",
    ];
    for b in blocks().iter().filter(|b| b.lang == "sh") {
        let n = run_above.iter().filter(|m| b.text.contains(*m)).count();
        assert_eq!(n, 1, "a README shell block no test here runs:\n{}", b.text);
    }
}

/// The mailbox example: a narrator asks, sends a request the scribe (in parallel)
/// takes and replies to, and the run ends done.
#[test]
fn the_mailbox_example_runs_against_a_listener() {
    let (p, home) = project();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "x"]);
    let block = shell_block("hitl mailbox init --agents narrator,scribe");
    let out = bash(
        &p,
        &p.dir,
        &home,
        &format!("unset XDG_RUNTIME_DIR\n{block}\necho \"chose: $choice\""),
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("chose: Proceed with this plan"),
        "{}",
        text(&out)
    );
    assert!(
        stdout.contains("narrator: done, scribe: done"),
        "{}",
        text(&out)
    );
}

/// The README is a newcomer's path: what hitl is, the two commands, the tour, and a
/// link to every page of `docs/`, each of which is there.
#[test]
fn the_readme_is_short_and_leads_to_every_page() {
    let root = checkout();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines; move detail to docs/"
    );
    for page in documents()
        .iter()
        .skip(1)
        .chain([&root.join("docs/PROTOCOL.md")])
    {
        let name = format!("(docs/{})", page.file_name().unwrap().to_string_lossy());
        assert!(readme.contains(&name), "the README does not link {name}");
    }
    for link in readme.split("](").skip(1) {
        let target = link.split(')').next().unwrap().split('#').next().unwrap();
        if !target.starts_with("http") {
            assert!(
                root.join(target).exists(),
                "the README links {target}, not there"
            );
        }
    }
}

/// The documents point inside the repository: a reader of a clone finds everything
/// they name.
#[test]
fn the_documents_and_the_code_point_nowhere_outside_the_repository() {
    let root = checkout();
    let mut files = documents();
    files.push(root.join("ARCHITECTURE.md"));
    files.push(root.join("docs/PROTOCOL.md"));
    let mut dirs = vec![root.join("src"), root.join("web")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for outside in ["../shared", "DESIGN.md"] {
            assert!(!text.contains(outside), "{} names {outside}", f.display());
        }
    }
    for named in ["ARCHITECTURE.md", "docs/PROTOCOL.md"] {
        assert!(root.join(named).exists(), "{named}");
    }
}

/// The README and every `--help` say what a thing is, never which design document
/// ("seed 003") it came from: a reader has only this repository.
#[test]
fn the_readme_and_every_help_name_things_not_seeds() {
    let names_a_seed = |text: &str| {
        let words: Vec<&str> = text.split_whitespace().collect();
        words.windows(2).any(|w| {
            w[0].trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .eq_ignore_ascii_case("seed")
                && w[1].starts_with(|c: char| c.is_ascii_digit())
                && w[1].len() >= 3
        })
    };
    for page in documents() {
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(!names_a_seed(&text), "{} names a seed", page.display());
    }
    let help = |args: &[&str]| {
        let out = std::process::Command::new(hitl_bin())
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "hitl {args:?} --help: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    // The commands a help lists, two spaces in, under "Commands:".
    let commands = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|c| c != "help")
            .collect()
    };
    let top = help(&[]);
    let mut checked = 1;
    assert!(!names_a_seed(&top), "hitl --help names a seed:\n{top}");
    // The top help lists its commands in groups ("Start here:", "Asking:", …).
    let grouped: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Start here:"))
        .take_while(|l| !l.starts_with("Options:"))
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(grouped.len() > 20, "{top}");
    for command in grouped {
        let text = help(&[&command]);
        assert!(
            !names_a_seed(&text),
            "hitl {command} --help names a seed:\n{text}"
        );
        checked += 1;
        for sub in commands(&text) {
            let text = help(&[&command, &sub]);
            assert!(
                !names_a_seed(&text),
                "hitl {command} {sub} --help names a seed:\n{text}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} helps read");
}
