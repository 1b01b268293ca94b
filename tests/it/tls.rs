//! A listener serving https (`[http] tls_cert` / `tls_key`): reached by curl (OpenSSL,
//! a TLS stack hitl shares nothing with) trusting the test's CA, by the user's own
//! commands trusting exactly the certificate `.listener.json` names, never by plain
//! http; and settings that cannot be served stop it at start.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::{Command, Output},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::support::{Project, make_certificates, spawn_ask, wait_output};

/// `curl ARGS` (silent, failing on no status but showing the body), trusting `ca`.
fn curl(ca: &Path, args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(ca)
        .args(args)
        .output()
        .expect("curl runs")
}

/// The SHA-256 of a PEM certificate's DER, as openssl prints it, in hex.
fn fingerprint(dir: &Path, pem: &str) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in", pem])
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.trim()
        .rsplit('=')
        .next()
        .unwrap()
        .replace(':', "")
        .to_ascii_lowercase()
}

fn listener_info(p: &Project) -> Value {
    serde_json::from_slice(&std::fs::read(p.helpers().join(".listener.json")).unwrap()).unwrap()
}

/// Rewrites `.listener.json` with `key` set to `value`, as whatever runs as the user
/// (an agent among them) can.
fn rewrite_listener_info(p: &Project, key: &str, value: &str) {
    let mut info = listener_info(p);
    info[key] = Value::from(value);
    std::fs::write(
        p.helpers().join(".listener.json"),
        serde_json::to_vec(&info).unwrap(),
    )
    .unwrap();
}

/// `hitl doctor --json`'s check `name`.
fn doctor_check(p: &Project, name: &str) -> Value {
    let out = p.run(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("a {name} check: {report}"))
}

#[test]
fn a_listener_with_a_certificate_serves_https_only_and_its_own_commands_trust_exactly_that_one() {
    let p = Project::new();
    let certs = p.home.join("tls");
    std::fs::create_dir_all(&certs).unwrap();
    make_certificates(&certs);
    // Relative paths: from hitl's config folder (HITL_HOME here).
    p.user_config(
        "[http]\ntls_cert = \"tls/trusted.pem\"\ntls_key = \"tls/trusted.key\"\nheader_timeout = 2\n",
    );
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let log = listener.log();
    let url = p.http_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert!(log.contains(&format!("HTTP API on {url}")), "{log}");
    let link = log
        .lines()
        .find_map(|l| l.strip_prefix("hitl: dashboard on "))
        .and_then(|l| l.split_whitespace().next())
        .expect("a login link")
        .to_string();
    assert!(link.starts_with(&format!("{url}/?code=")), "{link}");
    assert_eq!(
        listener_info(&p)["tls_sha256"],
        fingerprint(&certs, "trusted.pem"),
        "the listener names the certificate it presents"
    );

    // curl trusting the CA: served; by name too (the certificate is for localhost).
    let ca = certs.join("ca.pem");
    let health = curl(
        &ca,
        &[
            "-w",
            "%{http_code}",
            "-o",
            "/dev/null",
            &format!("{url}/healthz"),
        ],
    );
    assert_eq!(String::from_utf8_lossy(&health.stdout), "200", "{health:?}");
    let by_name = url.replace("127.0.0.1", "localhost");
    let health = curl(
        &ca,
        &[
            "-w",
            "%{http_code}",
            "-o",
            "/dev/null",
            &format!("{by_name}/healthz"),
        ],
    );
    assert_eq!(String::from_utf8_lossy(&health.stdout), "200", "{health:?}");
    // Trusting another CA: refused by curl, as a phone would refuse it.
    let other = curl(&certs.join("other-ca.pem"), &[&format!("{url}/healthz")]);
    assert!(!other.status.success(), "{other:?}");

    // The login link sets a cookie that is never sent in the clear.
    let login = curl(&ca, &["-i", &link]);
    let head = String::from_utf8_lossy(&login.stdout).to_ascii_lowercase();
    let cookie = head
        .lines()
        .find(|l| l.starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("a login cookie: {head}"));
    assert!(cookie.contains("; secure"), "{cookie}");
    assert!(cookie.contains("httponly"), "{cookie}");

    // Plain http to the https port: told what to do, in plain http.
    let plain = url.replace("https://", "http://");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .arg(format!("{plain}/healthz"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.ends_with("\n400"), "{said}");
    assert!(said.contains("speaks https only"), "{said}");

    // A client that connects and never says hello is cut within header_timeout.
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let opened = Instant::now();
    let mut byte = [0u8; 1];
    let read = idle.read(&mut byte);
    assert!(
        opened.elapsed() < Duration::from_secs(10) && !matches!(read, Ok(1)),
        "{read:?} after {:?}",
        opened.elapsed()
    );
    // Half a hello is cut too.
    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    half.set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let opened = Instant::now();
    let _ = half.read(&mut byte);
    assert!(
        opened.elapsed() < Duration::from_secs(10),
        "{:?}",
        opened.elapsed()
    );

    // The user's own commands reach it over https with no CA given: `hitl pending`
    // sees a question through it, `hitl answer` answers through it, `hitl dashboard`
    // mints a link on it.
    let asker = spawn_ask(&p, &["Over TLS?"]);
    let pending = p.wait_pending(1, Duration::from_secs(10));
    let id = pending[0]["id"].as_str().unwrap().to_string();
    let out = p
        .hitl()
        .args(["dashboard", "--json"])
        .env_remove("SSL_CERT_FILE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let minted: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        minted["url"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{url}/?code=")),
        "{minted}"
    );
    let out = p.run(&["answer", &id, "yes, encrypted"]);
    assert!(out.status.success(), "{out:?}");
    let asked = wait_output(asker, Duration::from_secs(10));
    assert_eq!(
        String::from_utf8_lossy(&asked.stdout).trim(),
        "yes, encrypted"
    );

    // `hitl doctor` reaches it too, and names the certificate.
    let listener_check = doctor_check(&p, "listener");
    assert_eq!(listener_check["status"], "ok", "{listener_check}");
    let tls = doctor_check(&p, "tls");
    assert_eq!(tls["status"], "ok", "{tls}");
    let sha = fingerprint(&certs, "trusted.pem");
    assert!(tls["summary"].as_str().unwrap().contains(&sha), "{tls}");

    // Renewed under the running listener (as certbot or `tailscale cert` do): first
    // a broken pair (the certificate written before its key), which is said and not
    // served, then a whole one, served from the next handshake and named in
    // `.listener.json`, which the user's commands follow.
    let old_sha = fingerprint(&certs, "trusted.pem");
    std::fs::copy(certs.join("untrusted.pem"), certs.join("trusted.pem")).unwrap();
    crate::support::eventually(
        "the half-renewed pair said",
        Duration::from_secs(15),
        || listener.log().contains("cannot be served"),
    );
    assert_eq!(listener_info(&p)["tls_sha256"], old_sha.as_str());
    let health = curl(
        &ca,
        &[
            "-w",
            "%{http_code}",
            "-o",
            "/dev/null",
            &format!("{url}/healthz"),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&health.stdout),
        "200",
        "the pair before still served"
    );
    std::fs::copy(certs.join("untrusted.key"), certs.join("trusted.key")).unwrap();
    let new_sha = fingerprint(&certs, "untrusted.pem");
    crate::support::eventually(
        "the renewed certificate named",
        Duration::from_secs(15),
        || listener_info(&p)["tls_sha256"] == new_sha.as_str(),
    );
    let renewed = curl(
        &certs.join("other-ca.pem"),
        &[
            "-w",
            "%{http_code}",
            "-o",
            "/dev/null",
            &format!("{url}/healthz"),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&renewed.stdout),
        "200",
        "{renewed:?}"
    );
    let out = p.run(&["dashboard", "--json"]);
    assert!(
        out.status.success(),
        "the commands trust the renewed one: {out:?}"
    );

    // A `.listener.json` naming another certificate: the commands refuse to talk to
    // whatever answers there, and say why.
    rewrite_listener_info(&p, "tls_sha256", &old_sha);
    let out = p.run(&["dashboard", "--json"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("certificate"), "{err}");
    drop(listener);
}

#[test]
fn tls_settings_that_cannot_be_served_stop_the_listener_at_start_saying_which_file() {
    let p = Project::new();
    let certs = p.tmp.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    make_certificates(&certs);
    let cert = certs.join("trusted.pem");
    let start = |config: String| -> String {
        p.user_config(&config);
        let mut c = p.hitl();
        c.args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let out = wait_output(c.spawn().unwrap(), Duration::from_secs(20));
        assert!(!out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = start(format!("[http]\ntls_cert = {cert:?}\n"));
    assert!(err.contains("tls_cert and tls_key go together"), "{err}");
    let err = start(format!(
        "[http]\ntls_cert = {cert:?}\ntls_key = {:?}\n",
        certs.join("untrusted.key")
    ));
    assert!(
        err.contains("trusted.pem") && err.contains("untrusted.key"),
        "{err}"
    );
    // `hitl doctor` finds it before a listener does.
    let tls = doctor_check(&p, "tls");
    assert_eq!(tls["status"], "fail", "{tls}");
    assert!(
        tls["summary"].as_str().unwrap().contains("untrusted.key"),
        "{tls}"
    );
    let err = start(format!(
        "[http]\ntls_cert = {:?}\ntls_key = {:?}\n",
        certs.join("missing.pem"),
        certs.join("trusted.key")
    ));
    assert!(err.contains("missing.pem"), "{err}");
    std::fs::write(certs.join("empty.pem"), "not a certificate\n").unwrap();
    let err = start(format!(
        "[http]\ntls_cert = {:?}\ntls_key = {:?}\n",
        certs.join("empty.pem"),
        certs.join("trusted.key")
    ));
    assert!(err.contains("holds no certificate"), "{err}");

    // A project's settings may not choose the listener's certificate: ignored, said.
    p.user_config("");
    p.project_config(&format!(
        "[http]\ntls_cert = {cert:?}\ntls_key = {:?}\n",
        certs.join("trusted.key")
    ));
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    assert!(p.http_url().starts_with("http://"), "{}", p.http_url());
    let log = listener.log();
    assert!(
        log.contains("[http] tls_cert is read from your user settings only"),
        "{log}"
    );
}

#[test]
fn a_request_relayed_by_a_tunnel_on_this_machine_needs_the_token_as_a_remote_one_does() {
    let p = Project::new();
    p.user_config("[http]\nallowed_hosts = [\"box.tail1234.ts.net\"]\n");
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let url = p.http_url();
    let create = |headers: &[&str]| -> String {
        let mut c = Command::new("curl");
        c.args([
            "-sS",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(["-H", "content-type: application/json"])
        .args([
            "-d",
            r#"{"type":"text","content":"Through the tunnel?","timeout":30}"#,
        ]);
        for h in headers {
            c.args(["-H", h]);
        }
        let out = c.arg(format!("{url}/api/v1/requests")).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // A program of the user's on this machine: no token needed (seed 004's clients).
    assert_eq!(create(&[]), "201");
    // The same connection's kind, but relayed: Tailscale's serve, cloudflared, nginx.
    assert_eq!(create(&["X-Forwarded-For: 100.64.0.7"]), "401");
    assert_eq!(create(&["Via: 1.1 cloudflared"]), "401");
    assert_eq!(create(&["Host: box.tail1234.ts.net"]), "401");
    let bearer = format!("Authorization: Bearer {}", p.token());
    assert_eq!(
        create(&[
            "Host: box.tail1234.ts.net",
            "X-Forwarded-For: 100.64.0.7",
            &bearer
        ]),
        "201"
    );
}

#[test]
fn a_listener_file_naming_another_machine_is_never_sent_the_users_token() {
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    // An agent (it runs as the user) rewrites the file to send the human's next
    // `hitl answer` or `hitl dashboard` somewhere of its own.
    rewrite_listener_info(&p, "http", "http://192.0.2.1:4000");
    let out = p.run(&["dashboard", "--json"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs your hitl token"), "{err}");
    assert!(err.contains("192.0.2.1"), "{err}");
}
