//! The seeds' own agent scripts, extracted verbatim from `../shared/seeds/`, run
//! unmodified against `hitl listen`.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::support::{Project, eventually, seeds, wait_output};

/// The first ```bash block after `heading` in the seed file starting with `prefix`;
/// `None` when the seeds are not there (see [`seeds`]).
fn seed_script(prefix: &str, heading: &str) -> Option<String> {
    let seeds = seeds()?;
    let file = fs::read_dir(&seeds)
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .unwrap_or_else(|| panic!("no seed {prefix}_* in {}", seeds.display()))
        .path();
    let text = fs::read_to_string(&file).unwrap();
    let after = &text[text
        .find(heading)
        .unwrap_or_else(|| panic!("{heading:?} not in {}", file.display()))..];
    let start = after.find("```bash\n").expect("a bash block") + "```bash\n".len();
    let body = &after[start..];
    Some(body[..body.find("\n```").expect("the end of the bash block") + 1].to_string())
}

fn install(project: &Project, name: &str, script: &str) -> std::path::PathBuf {
    let path = project.dir.join("scripts").join(name);
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn run_script(
    project: &Project,
    script: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut c = Command::new(script);
    c.args(args)
        .current_dir(&project.dir)
        .env("HITL_HOME", &project.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    wait_output(c.spawn().unwrap(), Duration::from_secs(60))
}

#[test]
fn seed_001_script_text_yesno_select() {
    let Some(text) = seed_script("001_", "## Agent-Side Bash Script") else {
        return;
    };
    let p = Project::new();
    let script = install(&p, "seed001-ask-human.sh", &text);
    let _l = p.listen(&["--ui", "none", "--auto-answer", "PostgreSQL"]);

    let out = run_script(&p, &script, &["Should I use PostgreSQL or MySQL?"], &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "PostgreSQL\n");

    let out = run_script(
        &p,
        &script,
        &["Should I update all test files?", "yesno"],
        &[],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");

    let out = run_script(
        &p,
        &script,
        &["Which framework?", "select", "Express,Fastify,Koa"],
        &[],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Express\n");

    // The script removes its files; the broker recorded all three.
    eventually(
        "history has the three answers",
        Duration::from_secs(5),
        || {
            p.history()
                .iter()
                .filter(|h| h["status"] == "answered")
                .count()
                == 3
        },
    );
    let hist = p.history();
    assert!(
        hist.iter()
            .any(|h| h["type"] == "select" && h["answer"] == "Express"),
        "{hist:#?}"
    );
    assert_eq!(
        fs::read_dir(p.helpers().join("questions")).unwrap().count(),
        0
    );
}

#[test]
fn seed_001_script_refuses_without_listener() {
    let Some(text) = seed_script("001_", "## Agent-Side Bash Script") else {
        return;
    };
    let p = Project::new();
    let script = install(&p, "seed001-ask-human.sh", &text);
    let out = run_script(&p, &script, &["anyone?"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("listener not running"));
}

#[test]
fn seed_000_script_answer_and_timeout() {
    let Some(text) = seed_script("000_", "### Enhanced Ask-Human Script Template") else {
        return;
    };
    let p = Project::new();
    let script = install(&p, "seed000-ask-human.sh", &text);
    {
        let _l = p.listen(&["--ui", "none", "--auto-answer", "four"]);
        let out = run_script(&p, &script, &["What is 2+2?"], &[]);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "four\n");
        // The seed leaves no question and no queue marker behind.
        assert_eq!(
            fs::read_dir(p.helpers().join("questions")).unwrap().count(),
            0
        );
        eventually("queue marker removed", Duration::from_secs(5), || {
            fs::read_dir(p.helpers().join("queue"))
                .unwrap()
                .filter_map(Result::ok)
                .all(|e| !e.file_name().to_string_lossy().ends_with(".queue"))
        });
    }

    // Nobody answers: the script's own timeout withdraws the question, and the broker
    // takes it out of the queue.
    let _l = p.listen(&["--ui", "none"]);
    let start = Instant::now();
    let out = run_script(
        &p,
        &script,
        &["Quick question?"],
        &[("CLAUDE_HELPERS_TIMEOUT", "2")],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The seed counts whole seconds of `date +%s`, so it gives up after 1 to 2 s.
    assert!(start.elapsed() >= Duration::from_secs(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Timeout waiting for answer"));
    p.wait_pending(0, Duration::from_secs(5));
    eventually("history marks it withdrawn", Duration::from_secs(5), || {
        p.history()
            .iter()
            .any(|h| h["content"] == "Quick question?" && h["status"] == "withdrawn")
    });
}

/// claude-helpers 0.2.x (PyPI) writes `questions/<agent_id>.json` in place with `prompt`,
/// and polls for `answers/<agent_id>.json`, reading `answer`. Emulated with python3
/// doing exactly that: `json.dump` into the open file, then polling.
#[test]
fn claude_helpers_style_agent() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--auto-answer", "from hitl"]);
    let script = r#"
import json, os, sys, time
helpers = sys.argv[1]
agent = "agent_4242"
q = os.path.join(helpers, "questions", agent + ".json")
a = os.path.join(helpers, "answers", agent + ".json")
with open(q, "w") as f:
    json.dump({"type": "text", "agent_id": agent, "timestamp": time.time(),
               "prompt": "Привет? \"quoted\"", "timeout": 30, "metadata": {"k": 1}}, f)
deadline = time.time() + 30
while time.time() < deadline:
    if os.path.exists(a):
        try:
            with open(a) as f:
                print(json.load(f)["answer"])
            os.remove(a)
            os.remove(q)
            sys.exit(0)
        except (json.JSONDecodeError, KeyError):
            pass
    time.sleep(0.05)
sys.exit(2)
"#;
    for _ in 0..2 {
        // Twice: the same agent reuses the same file names.
        let out = Command::new("python3")
            .args(["-c", script])
            .arg(p.helpers())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "from hitl\n");
    }
    eventually("both recorded", Duration::from_secs(5), || {
        p.history()
            .iter()
            .filter(|h| h["content"] == "Привет? \"quoted\"" && h["status"] == "answered")
            .count()
            == 2
    });
}

/// In a clone on its own (no `../shared/seeds` beside it) a test that runs a seed's
/// script says SKIPPED and returns, so the test command works there; under
/// `CI=true` the same test fails. Run as this very test binary, with the checkout
/// moved to a folder that has nothing beside it.
#[test]
fn without_the_seeds_their_tests_say_skipped_and_ci_fails_them() {
    let alone = tempfile::tempdir().unwrap();
    let checkout = alone.path().join("hitl");
    fs::create_dir_all(&checkout).unwrap();
    let run = |ci: bool| {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["--exact", "seeds::seed_001_script_refuses_without_listener"])
            .env("CARGO_MANIFEST_DIR", &checkout)
            .stdin(Stdio::null());
        if ci {
            c.env("CI", "true");
        } else {
            c.env_remove("CI");
        }
        c.output().unwrap()
    };
    let out = run(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stderr.contains("SKIPPED seeds::seed_001_script_refuses_without_listener"),
        "{stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    let out = run(true);
    assert!(!out.status.success(), "CI=true needs the seeds: {out:?}");
}
