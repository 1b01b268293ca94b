//! `hitl listen --ui dialog` on an X server of the test's own (Xvfb): real zenity
//! dialogs, typed into with xdotool as a person would; two questions at once come
//! one after the other; Cancel declines.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::support::{Project, Xvfb, have, spawn_ask, wait_output};

/// `xdotool ARGS` on `display`; its output.
fn xdotool(display: &str, args: &[&str]) -> String {
    let out = Command::new("xdotool")
        .env("DISPLAY", display)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits for a dialog of hitl's (its title starts "hitl: ") and focuses it; its
/// window id.
fn dialog(display: &str) -> String {
    let start = Instant::now();
    loop {
        let found = xdotool(display, &["search", "--onlyvisible", "--name", "^hitl: "]);
        if let Some(id) = found.lines().next().filter(|l| !l.is_empty()) {
            let id = id.to_string();
            xdotool(display, &["windowfocus", "--sync", &id]);
            // GTK takes keys once the window has mapped and taken the focus.
            while xdotool(display, &["getwindowfocus"]) != id {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "the dialog never took the focus"
                );
                xdotool(display, &["windowfocus", "--sync", &id]);
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_millis(500));
            return id;
        }
        // GTK's start takes seconds when the whole suite runs beside it.
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no hitl dialog appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until window `id` is gone.
fn closed(display: &str, id: &str) {
    let start = Instant::now();
    while xdotool(display, &["search", "--onlyvisible", "--name", "^hitl: "])
        .lines()
        .any(|l| l == id)
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the dialog stayed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn dialogs_are_real_zenity_windows_typed_into_and_cancelled() {
    let needed = ["Xvfb", "zenity", "xdotool"];
    if !needed.iter().all(|p| have(p)) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have {needed:?} (tools/test-all installs them)"
        );
        eprintln!("skipped: {needed:?} are not all installed");
        return;
    }
    let x = Xvfb::start();
    let display = x.display.clone();

    let p = Project::new();
    let mut listen = p.hitl();
    listen
        .env("DISPLAY", &display)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .args([
            "listen",
            "--ui",
            "dialog",
            "--no-notify",
            "--http",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _listener = crate::support::Listener::start(listen);

    // Two at once: the first dialog, then the second.
    let first = spawn_ask(&p, &["--timeout", "60", "Name the release?"]);
    p.wait_pending(1, Duration::from_secs(10));
    let second = spawn_ask(
        &p,
        &["--timeout", "60", "--type", "yesno", "Ship it today?"],
    );
    p.wait_pending(2, Duration::from_secs(10));
    let id = dialog(&display);
    xdotool(&display, &["type", "--delay", "30", "Aurora 3"]);
    xdotool(&display, &["key", "Return"]);
    let out = wait_output(first, Duration::from_secs(20));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Aurora 3\n",
        "{out:?}"
    );
    closed(&display, &id);

    // The yes/no dialog's Escape (its Cancel) declines: the asker is told so.
    dialog(&display);
    xdotool(&display, &["key", "Escape"]);
    let out = wait_output(second, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "cancelled: {out:?}");
    assert!(p.pending().is_empty());

    // An entry dialog's Cancel, and one answered elsewhere meanwhile, which closes.
    let third = spawn_ask(&p, &["--timeout", "60", "Cancel me?"]);
    let id = dialog(&display);
    xdotool(&display, &["key", "Escape"]);
    let out = wait_output(third, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "cancelled: {out:?}");
    closed(&display, &id);
    let fourth = spawn_ask(&p, &["--timeout", "60", "Answered elsewhere?"]);
    let id = dialog(&display);
    let q = p.pending()[0]["id"].as_str().unwrap().to_string();
    assert!(p.run(&["answer", &q, "from the CLI"]).status.success());
    closed(&display, &id);
    let out = wait_output(fourth, Duration::from_secs(20));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from the CLI\n");
}

#[test]
fn without_a_display_dialogs_fall_back_to_the_terminal_prompt_saying_why() {
    let p = Project::new();
    let mut listen = p.hitl();
    listen
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .args(["listen", "--ui", "dialog", "--no-notify", "--no-http"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let listener = crate::support::Listener::start(listen);
    assert!(listener.log().contains("no display"), "{}", listener.log());
    let asker = spawn_ask(&p, &["--timeout", "30", "Terminal instead?"]);
    listener.wait_stdout("Terminal instead?", Duration::from_secs(10));
    let mut listener = listener;
    std::io::Write::write_all(listener.child.stdin.as_mut().unwrap(), b"yes, here\n").unwrap();
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes, here\n");
}
