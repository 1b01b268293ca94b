//! `hitl listen --ui tui` in a real tmux pane, driven with `tmux send-keys` as a
//! person would type, read back with `tmux capture-pane`: agents' questions answered
//! from the keyboard, one answered elsewhere leaving the screen with its reason,
//! a resize to 60×15 and back, a dashboard login link shown (`w`) and opened, and the
//! terminal given back on SIGTERM.

use std::{
    process::{Child, Command},
    time::{Duration, Instant},
};

use crate::support::{Project, Tmux, hitl_bin, spawn_ask, wait_output};

fn answer_of(child: Child) -> String {
    let out = wait_output(child, Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_tui_answers_from_the_keyboard_in_real_tmux_and_gives_the_terminal_back() {
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have tmux (tools/test-all installs it)"
        );
        return;
    }
    let p = Project::new();
    let tmux = Tmux::new(&p.tmp.path().join("tmux"), "tui");
    let stty = p.tmp.path().join("stty-after");
    let path = format!(
        "{}:{}",
        hitl_bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "tui",
        "-x",
        "120",
        "-y",
        "30",
        "-c",
        p.dir.to_str().unwrap(),
        &format!(
            "env HITL_HOME='{}' PATH='{path}' TERM=xterm-256color bash --norc --noprofile",
            p.home.display()
        ),
    ]);
    tmux.type_text(&format!(
        "hitl listen --ui tui --http 127.0.0.1:0; stty -a > {}; echo TUI-$((1+1))-EXITED",
        stty.display()
    ));
    tmux.keys(&["Enter"]);
    tmux.wait_for("Inbox (0)", Duration::from_secs(30));
    // The listener runs and says a person is present (the TUI).
    let info = p.helpers().join(".listener.json");
    crate::support::eventually("the listener's info", Duration::from_secs(10), || {
        std::fs::read_to_string(&info).is_ok_and(|t| t.contains("tui"))
    });

    // Text: Enter opens the editor, the answer is typed, Enter sends it.
    let asker = spawn_ask(&p, &["--timeout", "120", "Name the release?"]);
    tmux.wait_for("Name the release?", Duration::from_secs(10));
    tmux.keys(&["Enter"]);
    tmux.wait_for("Enter sends", Duration::from_secs(5));
    tmux.type_text("Aurora 2");
    tmux.keys(&["Enter"]);
    assert_eq!(answer_of(asker), "Aurora 2\n");

    // A select: its option's number.
    let asker = spawn_ask(
        &p,
        &[
            "--timeout",
            "120",
            "--type",
            "select",
            "-o",
            "dev",
            "-o",
            "prod",
            "Where to?",
        ],
    );
    tmux.wait_for("2) prod", Duration::from_secs(10));
    tmux.keys(&["2"]);
    assert_eq!(answer_of(asker), "prod\n");

    // An approval with a diff: denied, with a comment.
    let context = serde_json::json!({
        "tool_name": "Edit",
        "tool_input": {
            "file_path": "src/db.rs",
            "old_string": "let pool = connect();",
            "new_string": "let pool = connect_with_retry(3);",
        },
    });
    let asker = spawn_ask(
        &p,
        &[
            "--timeout",
            "120",
            "--type",
            "approval",
            "--json",
            "--context",
            &context.to_string(),
            "Apply this edit?",
        ],
    );
    let screen = tmux.wait_for(
        "+let pool = connect_with_retry(3);",
        Duration::from_secs(10),
    );
    assert!(screen.contains("-let pool = connect();"), "{screen}");
    tmux.keys(&["d"]);
    tmux.wait_for("Comment (optional)", Duration::from_secs(5));
    tmux.type_text("not on a Friday");
    tmux.keys(&["Enter"]);
    let out = wait_output(asker, Duration::from_secs(30));
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["approved"], false, "{a}");
    assert_eq!(a["comment"], "not on a Friday", "{a}");
    assert_eq!(a["responded_by"], "tui", "{a}");

    // Answered elsewhere: it leaves the screen, saying so, within a second.
    let asker = spawn_ask(&p, &["--timeout", "120", "Answered elsewhere?"]);
    tmux.wait_for("Answered elsewhere?", Duration::from_secs(10));
    let id = p.pending()[0]["id"].as_str().unwrap().to_string();
    let answered = Instant::now();
    assert!(p.run(&["answer", &id, "from the CLI"]).status.success());
    let screen = tmux.wait_for("answered by cli:", Duration::from_secs(1));
    assert!(answered.elapsed() < Duration::from_secs(1));
    assert!(screen.contains("Inbox (0)"), "{screen}");
    assert_eq!(answer_of(asker), "from the CLI\n");

    // 60×15: still usable; answered there; and back.
    tmux.run(&["resize-window", "-t", "tui", "-x", "60", "-y", "15"]);
    let asker = spawn_ask(
        &p,
        &["--timeout", "120", "--type", "yesno", "Small screen?"],
    );
    let screen = tmux.wait_for("Small screen?", Duration::from_secs(10));
    assert!(
        screen.lines().all(|l| l.chars().count() <= 60),
        "wider than the pane:\n{screen}"
    );
    tmux.keys(&["y"]);
    assert_eq!(answer_of(asker), "yes\n");
    tmux.run(&["resize-window", "-t", "tui", "-x", "120", "-y", "30"]);
    tmux.wait_for("Inbox (0)", Duration::from_secs(5));
    let screen = tmux.wait_gone("Small screen?", Duration::from_secs(5));
    let start = Instant::now();
    let mut screen = screen;
    while !screen.lines().any(|l| l.chars().count() > 100) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "not drawn at 120 columns again:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(25));
        screen = tmux.screen();
    }
    assert_eq!(screen.lines().count(), 30, "{screen}");

    // `w`: a dashboard login link, which logs a browser in, once.
    tmux.keys(&["w"]);
    let screen = tmux.wait_for("Web dashboard (any key closes)", Duration::from_secs(5));
    let link = screen
        .lines()
        .find_map(|l| {
            let at = l.find("http://")?;
            l[at..].split([' ', '│']).next()
        })
        .unwrap_or_else(|| panic!("no link on the screen:\n{screen}"))
        .to_string();
    assert!(link.contains("/?code="), "{link}");
    let opened = reqwest::blocking::get(&link).unwrap();
    assert_eq!(opened.status(), 200, "{link}");
    assert!(
        opened.headers().contains_key("set-cookie"),
        "the link logs the browser in"
    );
    let again = reqwest::blocking::get(&link).unwrap();
    assert!(!again.headers().contains_key("set-cookie"), "once");
    tmux.keys(&["Escape"]);
    tmux.wait_gone("Web dashboard (any key closes)", Duration::from_secs(5));

    // The help screen, then SIGTERM: the terminal is given back as it was.
    tmux.keys(&["?"]);
    tmux.wait_for("Keys (any key closes)", Duration::from_secs(5));
    tmux.keys(&["Escape"]);
    let info: serde_json::Value = serde_json::from_slice(&std::fs::read(&info).unwrap()).unwrap();
    let pid = info["pid"].as_i64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    // (The command line says `$((1+1))`: only the echo says 2.)
    let screen = tmux.wait_for("TUI-2-EXITED", Duration::from_secs(15));
    assert!(
        !screen.contains("Inbox ("),
        "the alternate screen is left:\n{screen}"
    );
    let modes = std::fs::read_to_string(&stty).unwrap();
    let words: Vec<&str> = modes.split([' ', ';', '\n']).collect();
    for mode in ["icanon", "echo", "icrnl", "opost", "isig"] {
        assert!(words.contains(&mode), "{mode} is not restored:\n{modes}");
    }
    // What the listener said while the TUI had the screen is in its log.
    let log = std::fs::read_to_string(p.helpers().join("listener.log")).unwrap();
    assert!(log.contains("hitl: ready"), "{log}");
}
