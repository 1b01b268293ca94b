//! Webhooks posted to a receiver of the test's own: hitl's JSON and Slack's shape,
//! signed, retried after a 500, and a receiver that never answers delays no answer.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpListener,
    sync::{Arc, Mutex},
    time::Duration,
};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;

use crate::support::{Project, eventually, make_certificates, spawn_ask, wait_output};

/// One request the receiver took.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A receiver on a free loopback port: `/fail-once` answers its first post 500,
/// `/slow` answers nothing until released, the rest 200.
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Received>>>,
    release: Arc<Mutex<bool>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let release = Arc::new(Mutex::new(false));
        let (g, r) = (got.clone(), release.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (g, r) = (g.clone(), r.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                    let mut headers = Vec::new();
                    let mut length = 0;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.trim().split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                            headers.push((k.trim().to_string(), v.trim().to_string()));
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = reader.read_exact(&mut body);
                    let received = Received {
                        path: path.clone(),
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    };
                    let seen_before = {
                        let mut all = g.lock().unwrap();
                        let before = all.iter().filter(|x| x.path == path).count();
                        all.push(received);
                        before
                    };
                    if path == "/slow" {
                        while !*r.lock().unwrap() {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                    let status = if path == "/fail-once" && seen_before == 0 {
                        "500 Internal Server Error"
                    } else {
                        "200 OK"
                    };
                    let mut stream = stream;
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    );
                });
            }
        });
        Receiver { port, got, release }
    }

    fn at(&self, path: &str) -> Vec<Received> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        *self.release.lock().unwrap() = true;
    }
}

fn signed(secret: &str, stamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{stamp}.").as_bytes());
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

#[test]
fn webhooks_are_posted_signed_retried_and_never_delay_an_answer() {
    let receiver = Receiver::start();
    let base = format!("http://127.0.0.1:{}", receiver.port);
    let p = Project::new();
    p.user_config(&format!(
        "[[webhooks]]\nurl = \"{base}/fail-once\"\nsecret = \"s3cret\"\n\n\
         [[webhooks]]\nurl = \"{base}/slack\"\nformat = \"slack\"\nevents = [\"created\"]\n\n\
         [[webhooks]]\nurl = \"{base}/slow\"\nevents = [\"created\"]\n"
    ));
    // A project's settings may not add one.
    p.project_config("[[webhooks]]\nurl = \"http://127.0.0.1:1/leak\"\n");
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    assert!(
        listener.log().contains("read from your user settings only"),
        "{}",
        listener.log()
    );

    let asker = spawn_ask(
        &p,
        &[
            "--type",
            "select",
            "-o",
            "blue",
            "-o",
            "<green>",
            "Which colour?",
        ],
    );
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The slow receiver holds its post; the answer is not kept waiting for it.
    eventually("the slow receiver's post", Duration::from_secs(10), || {
        !receiver.at("/slow").is_empty()
    });
    assert!(p.run(&["answer", &id, "2"]).status.success());
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "<green>\n");
    assert_eq!(receiver.at("/slow").len(), 1, "still held, not retried yet");

    // hitl's JSON: created (refused once with a 500, then taken), then answered.
    eventually(
        "created, retried, and answered",
        Duration::from_secs(15),
        || receiver.at("/fail-once").len() >= 3,
    );
    let json = receiver.at("/fail-once");
    let created: Vec<&Received> = json
        .iter()
        .filter(|r| r.body["event"] == "request.created")
        .collect();
    assert_eq!(created.len(), 2, "{json:?}");
    assert_eq!(
        created[0].body, created[1].body,
        "the retry posts the same body"
    );
    assert_eq!(created[0].body["question"], "Which colour?");
    assert_eq!(created[0].body["options"][1], "<green>");
    let answered = json
        .iter()
        .find(|r| r.body["event"] == "request.answered")
        .expect("told of the answer");
    assert_eq!(answered.body["answer"]["text"], "<green>");
    assert!(
        answered.body["answer"]["responded_by"]
            .as_str()
            .unwrap()
            .starts_with("cli:"),
        "{}",
        answered.body
    );
    let url = created[0].body["url"].as_str().unwrap();
    assert!(url.ends_with(&format!("/#request={id}")), "{url}");
    for r in &json {
        let stamp = r.header("x-hitl-timestamp").unwrap();
        let body = serde_json::to_vec(&r.body).unwrap();
        assert_eq!(
            r.header("x-hitl-signature"),
            Some(signed("s3cret", stamp, &body).as_str()),
            "{r:?}"
        );
    }

    // Slack's shape: text and blocks, agent text escaped, a button to the request.
    let slack = receiver.at("/slack");
    assert_eq!(slack.len(), 1, "only created: {slack:?}");
    let s = &slack[0].body;
    assert!(s["text"].as_str().unwrap().contains("Which colour?"), "{s}");
    let blocks = s["blocks"].to_string();
    assert!(blocks.contains("&lt;green&gt;"), "{blocks}");
    assert!(blocks.contains("#request="), "{blocks}");
    assert!(slack[0].header("x-hitl-signature").is_none());
    assert!(receiver.at("/leak").is_empty());

    // `hitl status` says how each fared.
    let status = p.run(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains(&format!("webhook:  {base} ")), "{text}");
    let json: Value = serde_json::from_slice(&p.run(&["status", "--json"]).stdout).unwrap();
    let hooks = json["webhooks"].as_array().unwrap();
    assert_eq!(hooks[0]["delivered"], 2, "{json:#}");
    assert_eq!(hooks[0]["failed_tries"], 1, "{json:#}");
    assert!(
        hooks[0]["last_error"].as_str().unwrap().contains("500"),
        "{json:#}"
    );
    drop(receiver);
}

#[test]
fn a_webhook_to_a_host_not_allowed_stops_the_listener_at_start_saying_why() {
    let p = Project::new();
    p.user_config("[[webhooks]]\nurl = \"https://example.com/hook\"\n");
    let out = p.run(&["listen", "--ui", "none", "--no-http"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("delivery_hosts"), "{err}");
}

/// An https receiver: Python's `http.server` behind its `ssl` module (OpenSSL, a TLS
/// implementation hitl shares nothing with), serving `cert` on a free loopback port.
/// Each post it takes is a JSON line (path, headers, body) on its stdout.
struct TlsReceiver {
    child: std::process::Child,
    port: u16,
    got: Arc<Mutex<Vec<Received>>>,
}

const TLS_RECEIVER: &str = r#"
import http.server, json, ssl, sys
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        print(json.dumps({"path": self.path, "headers": dict(self.headers.items()),
                          "body": body.decode()}), flush=True)
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

impl TlsReceiver {
    fn start(cert: &std::path::Path, key: &std::path::Path) -> TlsReceiver {
        let mut child = std::process::Command::new("python3")
            .args(["-c", TLS_RECEIVER])
            .arg(cert)
            .arg(key)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs the https receiver");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = lines
            .next()
            .expect("the receiver says its port")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let g = got.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).unwrap();
                g.lock().unwrap().push(Received {
                    path: v["path"].as_str().unwrap().to_string(),
                    headers: v["headers"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect(),
                    body: serde_json::from_str(v["body"].as_str().unwrap()).unwrap(),
                });
            }
        });
        TlsReceiver { child, port, got }
    }

    fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

impl Drop for TlsReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_webhook_over_https_is_delivered_to_a_ca_in_ssl_cert_file_and_an_untrusted_one_is_refused_and_said()
 {
    let p = Project::new();
    let certs = p.tmp.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_certificates(&certs);
    let trusted = TlsReceiver::start(&certs.join("trusted.pem"), &certs.join("trusted.key"));
    let untrusted = TlsReceiver::start(&certs.join("untrusted.pem"), &certs.join("untrusted.key"));
    // By name (localhost) and by address (127.0.0.1), both in the certificates.
    let good = format!("https://localhost:{}/hook", trusted.port);
    let bad = format!("https://127.0.0.1:{}/hook", untrusted.port);
    p.user_config(&format!(
        "[[webhooks]]\nurl = \"{good}\"\nsecret = \"s3cret\"\nevents = [\"created\"]\n\n\
         [[webhooks]]\nurl = \"{bad}\"\nevents = [\"created\"]\n"
    ));
    let mut listen = p.hitl();
    listen
        .args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
        .env("SSL_CERT_FILE", certs.join("ca.pem"))
        .env_remove("SSL_CERT_DIR");
    let listener = crate::support::Listener::start_command(listen);

    let asker = spawn_ask(&p, &["Ship it over TLS?"]);
    let id = p.wait_pending(1, Duration::from_secs(10))[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("the post over https", Duration::from_secs(10), || {
        !trusted.received().is_empty()
    });
    let got = &trusted.received()[0];
    assert_eq!(got.path, "/hook");
    assert_eq!(got.body["event"], "request.created");
    assert_eq!(got.body["question"], "Ship it over TLS?");
    let stamp = got.header("x-hitl-timestamp").unwrap();
    let body = serde_json::to_vec(&got.body).unwrap();
    assert_eq!(
        got.header("x-hitl-signature"),
        Some(signed("s3cret", stamp, &body).as_str())
    );

    // The receiver nobody vouches for: refused at its certificate, said, not retried.
    let status =
        || -> Value { serde_json::from_slice(&p.run(&["status", "--json"]).stdout).unwrap() };
    eventually("the refusal said", Duration::from_secs(10), || {
        status()["webhooks"][1]["failed"] == 1
    });
    let json = status();
    let refused = &json["webhooks"][1];
    let why = refused["last_error"].as_str().unwrap();
    assert!(why.contains("certificate"), "{json:#}");
    assert!(why.contains("SSL_CERT_FILE"), "{json:#}");
    assert!(
        !why.contains("/hook"),
        "a URL's path may be its secret: {json:#}"
    );
    assert_eq!(
        refused["failed_tries"], 1,
        "a refused certificate is not retried: {json:#}"
    );
    assert_eq!(refused["delivered"], 0, "{json:#}");
    assert!(untrusted.received().is_empty());
    assert_eq!(json["webhooks"][0]["delivered"], 1, "{json:#}");
    eventually("the listener's log says it", Duration::from_secs(5), || {
        listener.log().contains("gave up") && listener.log().contains("certificate")
    });

    assert!(p.run(&["answer", &id, "yes"]).status.success());
    let out = wait_output(asker, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "yes\n");
}

#[test]
fn an_https_webhook_with_no_ca_to_trust_stops_the_listener_at_start_saying_where_to_put_one() {
    let p = Project::new();
    p.user_config("[[webhooks]]\nurl = \"https://127.0.0.1:9/hook\"\n");
    let empty = p.tmp.path().join("no-cas.pem");
    std::fs::write(&empty, "").unwrap();
    let out = p
        .hitl()
        .args(["listen", "--ui", "none", "--no-http"])
        .env("SSL_CERT_FILE", &empty)
        .env_remove("SSL_CERT_DIR")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no CA certificate could be read from SSL_CERT_FILE="),
        "{err}"
    );
}
