//! Desktop notifications on a desktop of the test's own: a session bus
//! (`dbus-daemon`), an X server (Xvfb) and a notification daemon (dunst); a new
//! request makes the `Notify` call `dbus-monitor` sees, with the agent and the
//! question.

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use crate::support::{Project, Xvfb, have, spawn_ask, wait_output};

/// Children killed when the test ends.
struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The first line `child` prints.
fn first_line(child: &mut Child) -> String {
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.trim().to_string()
}

#[test]
fn a_new_request_is_announced_on_the_desktop() {
    let needed = ["dbus-daemon", "dbus-monitor", "dbus-send", "Xvfb", "dunst"];
    if !needed.iter().all(|p| have(p)) {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have {needed:?} (tools/test-all installs them)"
        );
        eprintln!("skipped: {needed:?} are not all installed");
        return;
    }
    let mut children = Killed(Vec::new());
    let mut bus = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let address = first_line(&mut bus);
    children.0.push(bus);
    let x = Xvfb::start();
    let display = x.display.clone();
    let dunst = Command::new("dunst")
        .env("DISPLAY", &display)
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    children.0.push(dunst);
    // dunst has the notifications' name before the listener asks what it can show.
    let start = Instant::now();
    loop {
        let owned = Command::new("dbus-send")
            .args([
                &format!("--bus={address}"),
                "--print-reply",
                "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
                "string:org.freedesktop.Notifications",
            ])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("boolean true"));
        if owned {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "dunst never took org.freedesktop.Notifications"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut monitor = Command::new("dbus-monitor")
        .args([
            "--address",
            &address,
            "type='method_call',interface='org.freedesktop.Notifications',member='Notify'",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(String::new()));
    {
        let mut out = monitor.stdout.take().unwrap();
        let seen = seen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    children.0.push(monitor);

    let p = Project::new();
    let mut listen = p.hitl();
    listen
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .env("DISPLAY", &display)
        .args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _listener = crate::support::Listener::start(listen);
    let mut ask = spawn_ask(
        &p,
        &[
            "--timeout",
            "60",
            "--priority",
            "urgent",
            "Deploy the release now?",
        ],
    );
    let start = Instant::now();
    loop {
        let text = seen.lock().unwrap().clone();
        if text.contains("Deploy the release now?") {
            assert!(text.contains("member=Notify"), "{text}");
            assert!(text.contains("string \"hitl\""), "the app name: {text}");
            assert!(text.contains(" asks (text)"), "who asks what: {text}");
            // Urgent: critical urgency (byte 2).
            assert!(text.contains("\"urgency\""), "{text}");
            assert!(text.contains("byte 2"), "{text}");
            // dunst shows buttons: one opens the request in the dashboard.
            assert!(text.contains("string \"Answer in hitl\""), "{text}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no Notify call seen:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And with --no-notify, none.
    let id = p.pending()[0]["id"].as_str().unwrap().to_string();
    assert!(p.run(&["answer", &id, "yes"]).status.success());
    let _ = ask.wait();
    // The notification is in the request's record.
    crate::support::eventually(
        "the notification in the trail",
        Duration::from_secs(10),
        || {
            let shown = p.run(&["history", "--id", &id]);
            String::from_utf8_lossy(&shown.stdout)
                .contains("notified desktop   this desktop delivered")
        },
    );
    drop(_listener);
    let quiet = Project::new();
    let mut listen = quiet.hitl();
    listen
        .env("DBUS_SESSION_BUS_ADDRESS", &address)
        .args([
            "listen",
            "--ui",
            "none",
            "--no-notify",
            "--http",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let _quiet = crate::support::Listener::start(listen);
    let out = wait_output(
        spawn_ask(&quiet, &["--timeout", "1", "Not on the desktop?"]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!seen.lock().unwrap().contains("Not on the desktop?"));
}
