//! Answers outlive a stopped asker: `hitl ask` ended from outside (SIGTERM, SIGHUP:
//! a tool's timeout, a closed terminal) leaves its question pending for
//! `[ask] keep_when_stopped`; the same agent asking the same question again gets the
//! answer given meanwhile, or waits on the same question. Ctrl-C still withdraws.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{Project, eventually, spawn_ask, wait_output};

const QUESTION: &str = "Deploy the release to production?";

fn stop(child: &std::process::Child, sig: Signal) {
    kill(Pid::from_raw(child.id() as i32), sig).unwrap();
}

fn asked(p: &Project) -> Vec<Value> {
    p.history()
        .into_iter()
        .filter(|h| h["content"] == QUESTION)
        .collect()
}

#[test]
fn an_asker_stopped_by_sigterm_gets_the_answer_given_meanwhile_when_it_asks_again() {
    let p = Project::new();
    let _l = p.listen(&["--ui", "none", "--attended"]);
    let child = spawn_ask(&p, &["--timeout", "600", QUESTION]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();

    stop(&child, Signal::SIGTERM);
    let out = wait_output(child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(
        stderr.contains("question kept")
            && stderr.contains("run the same command again to get the answer"),
        "{stderr}"
    );
    // The listener notices the asker is gone (it looks every second) and keeps the
    // question instead of ending it.
    std::thread::sleep(Duration::from_millis(2500));
    let pending = p.pending();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0]["id"], id.as_str());
    assert!(pending[0]["kept_until"].is_string(), "{pending:#?}");
    let listed = String::from_utf8_lossy(&p.run(&["pending"]).stdout).into_owned();
    assert!(
        listed.contains("asker gone, kept for when it asks again"),
        "{listed}"
    );

    let out = p.run(&["answer", &id, "yes, go ahead"]);
    assert!(out.status.success(), "{out:?}");

    // The same agent asks the same question: the answer, at once, no second request.
    let again = spawn_ask(&p, &["--timeout", "600", QUESTION]);
    let out = wait_output(again, Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes, go ahead\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("answered while nobody waited"),
        "{out:?}"
    );
    p.wait_pending(0, Duration::from_secs(5));
    eventually("history has the answer", Duration::from_secs(5), || {
        asked(&p).iter().any(|h| h["status"] == "answered")
    });
    let asked = asked(&p);
    assert_eq!(asked.len(), 1, "one request, not two: {asked:#?}");
    assert_eq!(asked[0]["id"], id.as_str());
    // Asked a third time, it is a new question.
    let third = spawn_ask(&p, &["--timeout", "600", QUESTION]);
    let fresh = p.wait_pending(1, Duration::from_secs(10));
    assert_ne!(fresh[0]["id"], id.as_str());
    stop(&third, Signal::SIGINT);
    assert_eq!(
        wait_output(third, Duration::from_secs(10)).status.code(),
        Some(130)
    );
    p.wait_pending(0, Duration::from_secs(5));
}

#[test]
fn asking_again_while_it_waits_takes_the_same_question_over_and_sighup_keeps_it_too() {
    let p = Project::new();
    // A short grace: the question asked again must outlive it.
    p.project_config("[ask]\nkeep_when_stopped = 2\n");
    let _l = p.listen(&["--ui", "none", "--attended"]);
    let child = spawn_ask(&p, &["--type", "yesno", QUESTION]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    stop(&child, Signal::SIGHUP);
    let out = wait_output(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(128 + 1), "{out:?}");

    let again = spawn_ask(&p, &["--type", "yesno", QUESTION]);
    // Past the grace, and past the listener's look at the first asker: still the one
    // question, now waited on by the second asker.
    std::thread::sleep(Duration::from_secs(4));
    let pending = p.pending();
    assert_eq!(pending.len(), 1, "{pending:#?}");
    assert_eq!(pending[0]["id"], id.as_str());
    assert!(pending[0].get("kept_until").is_none(), "{pending:#?}");
    assert!(p.run(&["answer", &id, "yes"]).status.success());
    let out = wait_output(again, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is still pending"),
        "{out:?}"
    );
    eventually("history has the answer", Duration::from_secs(5), || {
        asked(&p).iter().any(|h| h["status"] == "answered")
    });
    assert_eq!(asked(&p).len(), 1);
    assert!(
        !p.helpers().join("kept").read_dir().unwrap().any(|_| true),
        "the marker is gone once the answer is taken"
    );
}

#[test]
fn a_kept_question_nobody_asks_again_is_withdrawn_after_the_grace_and_ctrl_c_withdraws_at_once() {
    let p = Project::new();
    p.project_config("[ask]\nkeep_when_stopped = 2\n");
    let _l = p.listen(&["--ui", "none", "--attended"]);
    let child = spawn_ask(&p, &[QUESTION]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    stop(&child, Signal::SIGTERM);
    wait_output(child, Duration::from_secs(10));
    p.wait_pending(0, Duration::from_secs(10));
    eventually("history says withdrawn", Duration::from_secs(5), || {
        asked(&p)
            .iter()
            .any(|h| h["id"] == id.as_str() && h["status"] == "withdrawn")
    });
    let entry = asked(&p);
    let why = entry[0].to_string();
    assert!(why.contains("did not ask again within 2 s"), "{why}");
    assert!(
        !p.helpers()
            .join("questions")
            .join(format!("{id}.json"))
            .exists()
    );

    // A person's Ctrl-C withdraws at once, kept for nobody.
    let child = spawn_ask(&p, &[QUESTION]);
    p.wait_pending(1, Duration::from_secs(10));
    stop(&child, Signal::SIGINT);
    let out = wait_output(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130));
    assert!(String::from_utf8_lossy(&out.stderr).contains("withdrawn"));
    assert!(p.pending().is_empty());
}
