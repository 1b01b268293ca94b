//! `hitl doctor`: a project in order passes every check; each thing broken on
//! purpose (listener down, bad config, the token readable by others, PostgreSQL
//! unreachable, hitl missing from the PATH the hooks see) is reported with its fix.

use std::{os::unix::fs::PermissionsExt, process::Output};

use serde_json::Value;

use crate::support::{Project, hitl_bin};

/// `hitl doctor --json` with `HOME` in the project's temp folder and `path` as PATH.
fn doctor(p: &Project, path: &str, env: &[(&str, &str)]) -> (Output, Value) {
    let mut cmd = p.hitl();
    cmd.args(["doctor", "--json"])
        .env("HOME", p.tmp.path().join("user"))
        .env("PATH", path);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor printed no JSON ({e}): {out:?}"));
    (out, report)
}

/// The finding of `check`.
fn finding<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check)
        .unwrap_or_else(|| panic!("no {check} check: {report:#}"))
}

/// A PATH with the hitl under test on it, as an installed hitl would be.
fn path_with_hitl() -> String {
    let bin = hitl_bin();
    format!("{}:/usr/bin:/bin", bin.parent().unwrap().display())
}

#[test]
fn a_project_in_order_passes_and_each_broken_part_is_reported_with_its_fix() {
    let p = Project::new();
    let user_home = p.tmp.path().join("user");
    std::fs::create_dir_all(&user_home).unwrap();
    let out = p
        .hitl()
        .env("HOME", &user_home)
        // Installed on the PATH: the hooks run `hitl`, found there.
        .env("PATH", path_with_hitl())
        .args(["init", "--claude"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The token exists, as after a first `hitl listen`.
    std::fs::create_dir_all(&p.home).unwrap();
    let token = p.home.join("token");
    std::fs::write(&token, "secret\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();

    let mut listener = p.listen(&["--ui", "none", "--attended", "--http", "0"]);
    let (out, report) = doctor(&p, &path_with_hitl(), &[]);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["ok"], true);
    for c in report["checks"].as_array().unwrap() {
        // inotify counts every instance of this user's, other tests' included: a
        // busy machine may be warned of, never failed.
        match c["check"].as_str() {
            Some("inotify") => assert_ne!(c["status"], "fail", "{c:#}"),
            _ => assert_eq!(c["status"], "ok", "in order, yet: {c:#}"),
        }
    }
    assert!(
        finding(&report, "claude")["summary"]
            .as_str()
            .unwrap()
            .contains("settings.local.json")
    );
    // This machine (CI's too) can start agents inside a boundary.
    assert!(
        finding(&report, "boundary")["summary"]
            .as_str()
            .unwrap()
            .contains("hitl run")
    );
    assert!(
        finding(&report, "presence")["summary"]
            .as_str()
            .unwrap()
            .contains("attended")
    );

    // The listener killed: said, with how to start one.
    listener.child.kill().unwrap();
    listener.child.wait().unwrap();
    let (_, report) = doctor(&p, &path_with_hitl(), &[]);
    let l = finding(&report, "listener");
    assert_eq!(l["status"], "warn", "{l:#}");
    assert!(
        l["summary"].as_str().unwrap().contains("not running"),
        "{l:#}"
    );
    assert!(l["fix"].as_str().unwrap().contains("hitl listen"), "{l:#}");

    // hitl missing from the PATH the hooks run with: every hook does nothing.
    let (out, report) = doctor(&p, "/usr/bin:/bin", &[]);
    assert_eq!(out.status.code(), Some(1));
    let path = finding(&report, "path");
    assert_eq!(path["status"], "fail", "{path:#}");
    assert!(
        path["summary"]
            .as_str()
            .unwrap()
            .contains("not on the PATH"),
        "{path:#}"
    );
    assert!(
        path["fix"].as_str().unwrap().contains("install -m 755"),
        "{path:#}"
    );

    // The token readable by others.
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (out, report) = doctor(&p, &path_with_hitl(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let t = finding(&report, "token");
    assert_eq!(t["status"], "fail", "{t:#}");
    assert_eq!(t["fix"], format!("chmod 600 {}", token.display()));
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();

    // PostgreSQL that does not answer; then the real one.
    let (out, report) = doctor(
        &p,
        &path_with_hitl(),
        &[("HITL_DB", "postgres://127.0.0.1:1/test")],
    );
    assert_eq!(out.status.code(), Some(1));
    let s = finding(&report, "store");
    assert_eq!(s["status"], "fail", "{s:#}");
    assert!(
        s["fix"].as_str().unwrap().contains("start PostgreSQL"),
        "{s:#}"
    );
    let (_, report) = doctor(
        &p,
        &path_with_hitl(),
        &[("HITL_DB", "postgres://postgres@127.0.0.1:5432/test")],
    );
    let s = finding(&report, "store");
    assert_ne!(s["status"], "fail", "the real PostgreSQL answers: {s:#}");

    // A broken settings file: named, and the exit status says so.
    p.project_config("[hook]\nunanswered = \"ask\"\n[hook]\n");
    let (out, report) = doctor(&p, &path_with_hitl(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let c = finding(&report, "config");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert!(
        c["summary"].as_str().unwrap().contains("config.toml"),
        "{c:#}"
    );

    // The text form says the same, a line a check, with the fixes.
    let out = p
        .hitl()
        .arg("doctor")
        .env("HOME", &user_home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FAIL  config"), "{text}");
    assert!(text.contains("FAIL  path"), "{text}");
    assert!(text.contains("fix: "), "{text}");
}
