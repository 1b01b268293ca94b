//! The human decides: the commands that answer, mint a login or hand out the token
//! refuse inside an agent's session; the user's token goes only to servers the
//! user's settings name; a listener never quietly gives its port to another user.

use std::{
    io::{BufRead, BufReader, Write},
    net::TcpListener,
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::support::{Project, hitl_bin};

#[test]
fn commands_that_answer_refuse_inside_an_agents_session() {
    let p = Project::new();
    let refused = |args: &[&str]| {
        let out = p.hitl().args(args).env("CLAUDECODE", "1").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("is for a human"),
            "{args:?} ran inside an agent's session: {out:?}"
        );
    };
    refused(&["dashboard", "--json"]);
    refused(&[
        "listen",
        "--auto-answer",
        "yes",
        "--ui",
        "none",
        "--no-http",
    ]);
    refused(&["listen", "--ui", "none"]);
    refused(&["serve", "--http", "127.0.0.1:0"]);
    refused(&["token"]);
    refused(&["service", "install", "--dry-run"]);
    refused(&["demo", "--auto-answer"]);
    refused(&["init", "--force"]);
    refused(&["answer", "abc", "yes"]);
    refused(&["rules", "add", "Bash(rm -rf:*)"]);
    // Unsetting the variable does not help: an ancestor started with it.
    let out = Command::new("sh")
        .args(["-c", "env -u CLAUDECODE \"$0\" dashboard --json; exit $?"])
        .arg(hitl_bin())
        .current_dir(&p.dir)
        .env("HITL_HOME", &p.home)
        .env("CLAUDECODE", "1")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is for a human"),
        "{out:?}"
    );
    // The ask-only token is for agents: it asks and waits, never answers.
    let out = p
        .hitl()
        .args(["token", "--asker"])
        .env("CLAUDECODE", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A server of the test's own that answers every request with `status` and keeps
/// the `Authorization` header of each.
struct FakeServer {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FakeServer {
    fn start(status: &'static str) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let keep = keep.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut authorization = String::from("(none)");
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if lower.starts_with("authorization:") {
                            authorization = line["authorization:".len()..].trim().to_string();
                        }
                        if let Some(n) = lower.strip_prefix("content-length:") {
                            length = n.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = std::io::Read::read_exact(&mut reader, &mut body);
                    keep.lock().unwrap().push(authorization);
                    let reply = "{\"error\":\"fake\"}";
                    let mut stream = stream;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{reply}",
                        reply.len()
                    );
                });
            }
        });
        FakeServer { url, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn token(p: &Project, asker: bool) -> String {
    let mut args = vec!["token"];
    if asker {
        args.push("--asker");
    }
    let out = p.run(&args);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_users_token_goes_only_to_servers_the_users_settings_name() {
    let p = Project::new();
    let master = token(&p, false);
    let asker = token(&p, true);
    let fake = FakeServer::start("503 Service Unavailable");

    // `hitl ask --server`, with the token in HITL_TOKEN too: the ask-only token.
    for handed in [None, Some(master.as_str())] {
        let mut ask = p.hitl();
        ask.args(["ask", "--server", &fake.url, "--timeout", "1", "Anyone?"]);
        if let Some(t) = handed {
            ask.env("HITL_TOKEN", t);
        }
        let out = ask.output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{out:?}");
    }
    let seen = fake.seen();
    assert!(!seen.is_empty(), "the fake server was asked");
    assert!(
        seen.iter().all(|a| a == &format!("Bearer {asker}")),
        "only the ask-only token: {seen:?}"
    );

    // `hitl dashboard --server` and `hitl answer` through HITL_SERVER need the
    // user's token: refused before anything is sent.
    let before = fake.seen().len();
    let out = p.run(&["dashboard", "--server", &fake.url, "--json"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("[client] servers"), "{err}");
    let out = p
        .hitl()
        .args(["answer", "0190aaaa", "yes"])
        .env("HITL_SERVER", &fake.url)
        .current_dir(p.tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(fake.seen().len(), before, "nothing sent: {:?}", fake.seen());
    assert!(!fake.seen().iter().any(|a| a.contains(&master)));

    // Named in the user's settings: the server is the user's own.
    p.user_config(&format!("[client]\nservers = [\"{}/\"]\n", fake.url));
    let out = p.run(&["dashboard", "--server", &fake.url, "--json"]);
    assert!(
        !out.status.success(),
        "the fake server answers 503: {out:?}"
    );
    assert_eq!(fake.seen().last(), Some(&format!("Bearer {master}")));

    // A project's settings cannot name one (agents can write them).
    p.user_config("");
    p.project_config(&format!("[client]\nservers = [\"{}\"]\n", fake.url));
    let out = p.run(&["dashboard", "--server", &fake.url, "--json"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("[client] servers"),
        "{out:?}"
    );
}

/// Runs Debian's `python3` (one `nobody` may run) holding a listening socket on a free loopback port as `nobody`;
/// the port and the process (killed when dropped). `None` when this test cannot
/// change user (not root).
fn port_held_by_nobody() -> Option<(u16, KillOnDrop)> {
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: another OS user's port is needed for this test"
        );
        eprintln!("SKIPPED: another user's port needs root to make");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &format!(
                "import socket,time,sys\ns=socket.socket()\ns.bind(('127.0.0.1',{port}))\n\
                 s.listen()\nprint('up',flush=True)\ntime.sleep(120)"
            ),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "up");
    Some((port, KillOnDrop(child)))
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `port` configured as `[http] listen_addr`, then given with `--http`: the listener
/// refuses both, its error saying each of `says`.
fn refused_configured_and_given(p: &Project, port: u16, says: &[&str]) {
    p.user_config(&format!("[http]\nlisten_addr = \"127.0.0.1:{port}\"\n"));
    let given = format!("127.0.0.1:{port}");
    for args in [
        vec!["listen", "--ui", "none"],
        vec!["listen", "--ui", "none", "--http", &given],
    ] {
        let out = p.run(&args);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(says.iter().all(|s| err.contains(s)), "{args:?}: {err}");
    }
}

#[test]
fn a_listener_never_gives_its_port_to_another_user_quietly() {
    let p = Project::new();
    // Held by the test itself (this user): a port the user chose, configured or
    // given, is kept or refused, saying by whom; never moved from.
    let own = TcpListener::bind("127.0.0.1:0").unwrap();
    let own_port = own.local_addr().unwrap().port();
    refused_configured_and_given(&p, own_port, &["is taken by user"]);
    drop(own);

    // Held by another OS user: refused, saying by whom, configured or given.
    let Some((port, _nobody)) = port_held_by_nobody() else {
        return;
    };
    refused_configured_and_given(&p, port, &["taken by user nobody", "python3"]);
    let out = p.run(&["doctor", "--json"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("taken by user nobody"), "{report}");
    // Any free port, when the user asks for it.
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    assert!(!p.http_url().ends_with(&format!(":{port}")));
}
