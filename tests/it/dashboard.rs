//! The web dashboard in a real browser: Debian's headless Chromium driven over
//! WebDriver (chromedriver, fantoccini) against a real `hitl listen`, answering the
//! way a person would; each asker must receive exactly what was entered.
//!
//! Outside CI a machine without chromium and chromedriver skips these tests (and
//! says so); under `CI=true` they never skip.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::support::{Project, spawn_ask, wait_output};

/// A chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
    /// Its and its browsers' TMPDIR: their profiles, removed with it (a session not
    /// closed leaves its profile behind in the machine's /tmp otherwise).
    _tmp: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts chromedriver, or says why not (`None`: skip, outside CI only).
fn driver() -> Option<Driver> {
    let found = ["/usr/bin/chromedriver", "/usr/bin/chromium"]
        .iter()
        .all(|p| std::path::Path::new(p).exists());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must have chromium and chromium-driver (tools/test-all installs them)"
        );
        eprintln!("skipping the browser tests: no /usr/bin/chromium or /usr/bin/chromedriver");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new("/usr/bin/chromedriver")
        .arg(format!("--port={port}"))
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "chromedriver did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Driver {
        child,
        url,
        _tmp: tmp,
    })
}

/// A headless Chromium session.
async fn browser(driver: &Driver, width: u32, height: u32) -> Client {
    browser_in(driver, width, height, false).await
}

/// A headless Chromium session, its pages in the dark colour scheme when `dark`.
async fn browser_in(driver: &Driver, width: u32, height: u32, dark: bool) -> Client {
    browser_with(driver, width, height, dark, &[]).await
}

/// A headless Chromium session with `extra` command-line flags.
async fn browser_with(
    driver: &Driver,
    width: u32,
    height: u32,
    dark: bool,
    extra: &[String],
) -> Client {
    let mut args = vec![
        "--headless=new".to_string(),
        "--no-sandbox".into(),
        "--disable-dev-shm-usage".into(),
        "--disable-gpu".into(),
        format!("--window-size={width},{height}"),
    ];
    if dark {
        args.push("--force-dark-mode".into());
    }
    args.extend_from_slice(extra);
    let mut caps = serde_json::Map::new();
    let mut options = json!({ "binary": "/usr/bin/chromium", "args": args });
    if width < 500 {
        // A desktop window is never this narrow: a phone is emulated (its viewport,
        // touch and user agent).
        options["mobileEmulation"] = json!({
            "deviceMetrics": { "width": width, "height": height, "pixelRatio": 2, "touch": true }
        });
    }
    caps.insert("goog:chromeOptions".into(), options);
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a WebDriver session")
}

/// Waits for the element `css`.
async fn find(c: &Client, css: &str) -> fantoccini::elements::Element {
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
}

/// Waits until `css` matches nothing.
async fn gone(c: &Client, css: &str, within: Duration) {
    let start = Instant::now();
    while !c.find_all(Locator::Css(css)).await.unwrap().is_empty() {
        assert!(start.elapsed() < within, "{css} is still on the page");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Clicks `css` inside the card of `q`.
async fn click(c: &Client, q: &Value, css: &str) {
    find(c, &format!("{} {css}", card(q)))
        .await
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
}

/// The text of `css`, found again when the page redrew it meanwhile (the agents
/// table is rebuilt as the feed tells of changes).
async fn text_live(c: &Client, css: &str) -> String {
    let start = Instant::now();
    loop {
        match find(c, css).await.text().await {
            Ok(t) => return t,
            Err(e) if e.to_string().contains("stale element") => {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "{css} kept being redrawn"
                );
            }
            Err(e) => panic!("reading {css}: {e}"),
        }
    }
}

/// Clicks `css`, found again when the page redrew it between the find and the
/// click (a live view redraws its rows as the feed tells it of changes).
async fn click_live(c: &Client, css: &str) {
    let start = Instant::now();
    loop {
        match find(c, css).await.click().await {
            Ok(_) => return,
            Err(e) if e.to_string().contains("stale element") => {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "{css} kept being redrawn"
                );
            }
            Err(e) => panic!("clicking {css}: {e}"),
        }
    }
}

/// Types `text` into `css` inside the card of `q`.
async fn type_into(c: &Client, q: &Value, css: &str, text: &str) {
    find(c, &format!("{} {css}", card(q)))
        .await
        .send_keys(text)
        .await
        .unwrap_or_else(|e| panic!("typing into {css}: {e}"));
}

/// The card of the one pending request `q` (from `hitl pending --json`).
fn card(q: &Value) -> String {
    format!(".card[data-id=\"{}\"]", q["id"].as_str().unwrap())
}

fn login_url(p: &Project) -> String {
    format!("{}/?token={}", p.http_url(), p.token())
}

/// Runs `hitl ask ARGS` in the background and returns it with its question.
fn ask(p: &Project, args: &[&str]) -> (Child, Value) {
    let before = p.pending().len();
    let child = spawn_ask(p, args);
    let q = p
        .wait_pending(before + 1, Duration::from_secs(10))
        .pop()
        .unwrap();
    (child, q)
}

fn answer_of(child: Child) -> String {
    let out = wait_output(child, Duration::from_secs(20));
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_in_the_browser_and_the_inbox_stays_live() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 1280, 900).await;

    // Without the token: the login state, and no data.
    let (_pending_child, _) = ask(&p, &["--timeout", "60", "Hidden from strangers?"]);
    c.goto(&p.http_url()).await.unwrap();
    find(&c, "#login:not([hidden])").await;
    assert!(c.find_all(Locator::Css(".card")).await.unwrap().is_empty());
    assert!(!c.source().await.unwrap().contains("Hidden from strangers"));

    // The login link: the token goes into a cookie and out of the address bar.
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#inbox:not([hidden]) .card").await;
    assert!(!c.current_url().await.unwrap().as_str().contains("token"));

    // A text request, answered by typing.
    let (child, q) = ask(&p, &["--timeout", "60", "Name the release?"]);
    let input = find(&c, &format!("{} textarea", card(&q))).await;
    input.send_keys("Aurora 2").await.unwrap();
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(child), "Aurora 2\n");
    gone(&c, &card(&q), Duration::from_secs(1)).await;

    // A select, a multiselect.
    let (child, q) = ask(
        &p,
        &["--type", "select", "-o", "dev", "-o", "prod", "Where?"],
    );
    click(&c, &q, "button.option:nth-of-type(2)").await;
    assert_eq!(answer_of(child), "prod\n");
    let (child, q) = ask(
        &p,
        &[
            "--type",
            "multiselect",
            "-o",
            "a",
            "-o",
            "b",
            "-o",
            "c",
            "Which?",
        ],
    );
    for n in [1, 3] {
        click(&c, &q, &format!("label.check:nth-of-type({n}) input")).await;
    }
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(child), "a, c\n");

    // An approval denied with a comment.
    let (child, q) = ask(&p, &["--type", "approval", "--json", "Deploy to prod?"]);
    type_into(&c, &q, "input.comment", "not on a Friday").await;
    click(&c, &q, "button.deny").await;
    let out = wait_output(child, Duration::from_secs(20));
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (a["approved"].as_bool(), a["comment"].as_str()),
        (Some(false), Some("not on a Friday")),
        "{a}"
    );
    // Credited to the dashboard and the machine's user, not to "http".
    let by = a["responded_by"].as_str().unwrap();
    assert!(by.starts_with("dashboard:"), "{a}");

    // A form of questions with "Other".
    let form = r#"[{"question": "Which database?", "header": "DB", "options": [{"label": "PostgreSQL", "description": "in staging"}, {"label": "SQLite"}]},
                   {"question": "Which checks?", "multiSelect": true, "options": [{"label": "lint"}, {"label": "test"}]}]"#;
    let (child, q) = ask(&p, &["--questions", form, "--json", "Set-up"]);
    type_into(&c, &q, "fieldset:nth-of-type(1) input.other", "DuckDB").await;
    for n in [1, 2] {
        click(
            &c,
            &q,
            &format!("fieldset:nth-of-type(2) label.pick:nth-of-type({n}) input"),
        )
        .await;
    }
    click(&c, &q, "button.send").await;
    let out = wait_output(child, Duration::from_secs(20));
    let a: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        a["answers"],
        json!({ "Which database?": "DuckDB", "Which checks?": "lint, test" }),
        "{a}"
    );

    // Live: a request made while the page is open appears within a second; one
    // answered elsewhere leaves within a second, with why.
    let (child, q) = ask(&p, &["--timeout", "60", "Answered elsewhere?"]);
    let start = Instant::now();
    find(&c, &card(&q)).await;
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "appeared after {:?}",
        start.elapsed()
    );
    let out = p.run(&["answer", q["id"].as_str().unwrap(), "from the CLI"]);
    assert!(out.status.success(), "{out:?}");
    gone(&c, &card(&q), Duration::from_secs(1)).await;
    let note = find(
        &c,
        &format!(".ended-item[data-id=\"{}\"]", q["id"].as_str().unwrap()),
    )
    .await;
    assert!(
        note.text().await.unwrap().contains("answered by cli:"),
        "{:?}",
        note.text().await
    );
    assert_eq!(answer_of(child), "from the CLI\n");
    // One its asker stops waiting for (its own timeout) leaves too, saying so.
    let (child, q) = ask(&p, &["--timeout", "1", "Gone soon?"]);
    find(&c, &card(&q)).await;
    assert_eq!(
        wait_output(child, Duration::from_secs(10)).status.code(),
        Some(2)
    );
    gone(&c, &card(&q), Duration::from_secs(1)).await;
    let note = find(
        &c,
        &format!(".ended-item[data-id=\"{}\"]", q["id"].as_str().unwrap()),
    )
    .await;
    let said = note.text().await.unwrap();
    assert!(said.contains("withdrawn"), "{said}");

    // The tab title counts what waits (the hidden question from the start).
    assert_eq!(c.title().await.unwrap(), "(1) hitl");
    c.close().await.unwrap();
}

/// Types `text` into the history's field `css` and searches.
async fn search_history(c: &Client, css: &str, text: &str) {
    find(c, css).await.send_keys(text).await.unwrap();
    find(c, "#history-search button[type=submit]")
        .await
        .click()
        .await
        .unwrap();
}

/// Waits until the history's rows (their text; one gone stale reads as empty) are
/// as `done` wants them, and returns them.
async fn history_rows(c: &Client, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let start = Instant::now();
    loop {
        let mut rows = Vec::new();
        for e in c
            .find_all(Locator::Css("#history-rows .history-row"))
            .await
            .unwrap()
        {
            rows.push(e.text().await.unwrap_or_default());
        }
        if done(&rows) {
            return rows;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{rows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Askers killed when dropped.
struct Askers(Vec<Child>);

impl Drop for Askers {
    fn drop(&mut self) {
        for a in &mut self.0 {
            let _ = a.kill();
        }
    }
}

/// One request of each kind the inbox draws, waiting: text, yes/no, select (high),
/// multiselect, approval (urgent), a form of questions.
fn one_of_each(p: &Project) -> Askers {
    let form = r#"[{"question": "Which database?", "header": "DB", "options": [{"label": "PostgreSQL", "description": "already in staging"}, {"label": "SQLite", "description": "one file"}]}]"#;
    let kinds: [&[&str]; 6] = [
        &["--tag", "release", "Which name should the release have?"],
        &["--type", "yesno", "Ship it?"],
        &[
            "--type",
            "select",
            "-o",
            "staging",
            "-o",
            "production",
            "--priority",
            "high",
            "Deploy where?",
        ],
        &[
            "--type",
            "multiselect",
            "-o",
            "lint",
            "-o",
            "test",
            "Which checks?",
        ],
        &[
            "--type",
            "approval",
            "--priority",
            "urgent",
            "rm -rf build/ ?",
        ],
        &["--questions", form, "Set-up"],
    ];
    Askers(
        kinds
            .iter()
            .map(|args| {
                let mut all = vec!["--timeout", "120"];
                all.extend_from_slice(args);
                ask(p, &all).0
            })
            .collect(),
    )
}

/// Asserts nothing on the page is wider than the screen (`width` px).
async fn fits(c: &Client, width: u32, what: &str) {
    let wide = c
        .execute("return document.documentElement.scrollWidth", vec![])
        .await
        .unwrap();
    assert!(
        wide.as_u64().unwrap() <= u64::from(width),
        "{what}: {wide} px wide on a {width} px screen"
    );
}

/// Where screenshots go: `screenshots/` in the target folder, for a person to look at.
fn screenshot_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::support::checkout().join("target"));
    let dir = target.join("screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_at_desktop_and_phone_widths_in_light_and_dark() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let askers = one_of_each(&p);
    let dir = screenshot_dir();
    for (width, height, size) in [(1280, 900, "desktop"), (390, 844, "phone")] {
        for dark in [false, true] {
            let c = browser_in(&driver, width, height, dark).await;
            c.goto(&login_url(&p)).await.unwrap();
            find(&c, ".card:nth-of-type(6)").await;
            // Each card shows its request's labels (`Request::labels`): the
            // priorities that are not normal, and tags.
            let labels = c
                .execute(
                    "return [...document.querySelectorAll('.card .meta .label')].map(e => e.textContent)",
                    vec![],
                )
                .await
                .unwrap();
            assert_eq!(labels, serde_json::json!(["urgent", "high", "#release"]));
            // The page follows the colour scheme.
            let bg = c
                .execute(
                    "return getComputedStyle(document.body).backgroundColor",
                    vec![],
                )
                .await
                .unwrap();
            let is_dark = bg.as_str().unwrap() == "rgb(15, 18, 22)";
            assert_eq!(is_dark, dark, "{bg}");
            let png = c.screenshot().await.unwrap();
            let name = format!(
                "dashboard-{size}-{}.png",
                if dark { "dark" } else { "light" }
            );
            std::fs::write(dir.join(&name), &png).unwrap();
            assert!(png.starts_with(b"\x89PNG"), "{name} is a PNG");
            fits(&c, width, &name).await;
            // The charts, drawn at this width.
            find(&c, ".tab[data-view=metrics]")
                .await
                .click()
                .await
                .unwrap();
            find(&c, "#m-charts figure:nth-of-type(4) svg").await;
            let png = c.screenshot().await.unwrap();
            let name = format!("metrics-{size}-{}.png", if dark { "dark" } else { "light" });
            std::fs::write(dir.join(&name), &png).unwrap();
            fits(&c, width, &name).await;
            c.close().await.unwrap();
        }
    }
    eprintln!("dashboard screenshots in {}", dir.display());
    drop(askers);
}

/// Presses `keys` at whatever has the focus, as a keyboard would: each char down and
/// up, in order (`\u{e007}` is Enter, `\u{e009}` Control held for the next char).
async fn press(c: &Client, keys: &str) {
    use fantoccini::actions::{InputSource, KeyAction, KeyActions};
    let mut seq = KeyActions::new("keyboard".into());
    let mut held = None;
    for k in keys.chars() {
        if k == '\u{e009}' {
            seq = seq.then(KeyAction::Down { value: k });
            held = Some(k);
            continue;
        }
        seq = seq
            .then(KeyAction::Down { value: k })
            .then(KeyAction::Up { value: k });
        if let Some(h) = held.take() {
            seq = seq.then(KeyAction::Up { value: h });
        }
    }
    c.perform_actions(seq).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keyboard_alone_answers_and_the_page_rides_out_a_restart() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let listener = p.listen(&["--ui", "none", "--http", &addr]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#inbox:not([hidden])").await;

    let (text, tq) = ask(&p, &["--timeout", "60", "Typed by keyboard?"]);
    let (approval, aq) = ask(&p, &["--type", "approval", "--timeout", "60", "Ship it?"]);
    find(&c, &card(&aq)).await;
    // j: the first request; Enter: into its answer; type; Ctrl+Enter: sent.
    press(&c, "j\u{e007}by keys only\u{e009}\u{e007}").await;
    assert_eq!(answer_of(text), "by keys only\n");
    gone(&c, &card(&tq), Duration::from_secs(1)).await;
    // j, then a: approved.
    press(&c, "ja").await;
    let out = wait_output(approval, Duration::from_secs(20));
    assert!(out.status.success(), "approved: {out:?}");
    // ? shows the keys; Esc hides them.
    press(&c, "?").await;
    find(&c, "#help:not([hidden])").await;
    press(&c, "\u{e00c}").await;
    find(&c, "#help[hidden]").await;

    // The server restarts (same port): the page reconnects and shows what is new.
    listener.signal(nix::sys::signal::Signal::SIGKILL);
    let _again = p.listen(&["--ui", "none", "--http", &addr]);
    let (late, lq) = ask(&p, &["--timeout", "60", "After the restart?"]);
    let el = c
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(&card(&lq)))
        .await
        .expect("the page reconnected and shows the new request");
    el.find(Locator::Css("textarea"))
        .await
        .unwrap()
        .send_keys("still here")
        .await
        .unwrap();
    el.find(Locator::Css("button.send"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(answer_of(late), "still here\n");
    c.close().await.unwrap();
}

/// Runs `hitl hook pre-tool-use` for `tool` with `input`, as Claude Code would.
fn hook(p: &Project, tool: &str, input: Value) -> Child {
    let body = json!({
        "session_id": "b1c2d3e4-0000-4000-8000-000000000000", "cwd": p.dir,
        "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input,
        "tool_use_id": "toolu_browser",
    });
    crate::hook::spawn_hook_as(p, "pre-tool-use", &body, None)
}

fn decision_of(child: Child) -> Value {
    let out = wait_output(child, Duration::from_secs(20));
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["hookSpecificOutput"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_plans_edits_and_questions_are_shown_as_such_and_answered() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#inbox:not([hidden])").await;

    // A plan: rendered as Markdown, denied with a comment that goes back to Claude.
    let plan = "# Plan\n\n1. Split `broker/mod.rs`\n2. **Then** move the writer\n\n```sh\ncargo test\n```\n";
    let child = hook(&p, "ExitPlanMode", json!({ "plan": plan }));
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    find(&c, &format!("{} .markdown h3", card(&q))).await;
    let items = c
        .find_all(Locator::Css(&format!("{} .markdown ol li", card(&q))))
        .await
        .unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[1].text().await.unwrap(), "Then move the writer");
    find(&c, &format!("{} .markdown li code", card(&q))).await;
    type_into(&c, &q, "input.comment", "split the store first").await;
    click(&c, &q, "button.deny").await;
    let d = decision_of(child);
    assert_eq!(d["permissionDecision"], "deny", "{d}");
    assert!(
        d["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .ends_with(": split the store first"),
        "{d}"
    );

    // An edit of a protected file: its diff, approved.
    let child = hook(
        &p,
        "Edit",
        json!({ "file_path": p.dir.join("package.json"), "old_string": "\"version\": \"1.0.0\",\n\"private\": true",
                "new_string": "\"version\": \"2.0.0\",\n\"private\": true" }),
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let del = find(&c, &format!("{} .diff .del", card(&q))).await;
    assert_eq!(del.text().await.unwrap(), "-\"version\": \"1.0.0\",");
    find(&c, &format!("{} .diff .add", card(&q))).await;
    click(&c, &q, "button.approve").await;
    assert_eq!(decision_of(child)["permissionDecision"], "allow");

    // A whole file written: its diff folded to a box that scrolls, the buttons in
    // sight; "Show all" opens it.
    let content: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    let child = hook(
        &p,
        "Write",
        json!({ "file_path": p.dir.join("package.json"), "content": content }),
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let diff = find(&c, &format!("{} .diff.folded", card(&q))).await;
    let (_, _, _, folded) = diff.rectangle().await.unwrap();
    assert!(folded < 500.0, "folded to a box, not {folded} px");
    let unfold = find(&c, &format!("{} button.unfold", card(&q))).await;
    assert!(
        unfold.text().await.unwrap().contains("Show all"),
        "its label"
    );
    unfold.click().await.unwrap();
    let (_, _, _, open) = find(&c, &format!("{} .diff", card(&q)))
        .await
        .rectangle()
        .await
        .unwrap();
    assert!(open > folded * 2.0, "opened: {open} px after {folded}");
    click(&c, &q, "button.approve").await;
    assert_eq!(decision_of(child)["permissionDecision"], "allow");

    // AskUserQuestion: an option for one question, "Other" for the next.
    let child = hook(
        &p,
        "AskUserQuestion",
        json!({ "questions": [
            { "question": "Which framework?", "header": "UI", "multiSelect": false,
              "options": [{ "label": "React", "description": "JSX" }, { "label": "Vue", "description": "SFCs" }] },
            { "question": "Which tests?", "header": "Tests", "multiSelect": true,
              "options": [{ "label": "unit", "description": "" }, { "label": "e2e", "description": "" }] } ] }),
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    click(
        &c,
        &q,
        "fieldset:nth-of-type(1) label.pick:nth-of-type(2) input",
    )
    .await;
    type_into(
        &c,
        &q,
        "fieldset:nth-of-type(2) input.other",
        "property tests",
    )
    .await;
    click(&c, &q, "button.send").await;
    let d = decision_of(child);
    assert_eq!(d["permissionDecision"], "allow", "{d}");
    assert_eq!(
        d["updatedInput"]["answers"],
        json!({ "Which framework?": "Vue", "Which tests?": "property tests" })
    );

    // An MCP server's elicitation form: a choice, a number, an optional yes/no left
    // empty; the server gets each field in its own type, the empty one left out.
    let form = json!({
        "session_id": "b1c2d3e4-0000-4000-8000-000000000000", "cwd": p.dir,
        "hook_event_name": "Elicitation", "mcp_server_name": "deploy",
        "message": "Where to?", "mode": "form",
        "requested_schema": { "type": "object", "required": ["env", "replicas"], "properties": {
            "env": { "type": "string", "title": "Environment",
                     "oneOf": [{ "const": "prod", "title": "Production" }, { "const": "dev", "title": "Development" }] },
            "replicas": { "type": "integer" },
            "notify": { "type": "boolean", "title": "Tell the team?" } } }
    });
    let child = crate::hook::spawn_hook_as(&p, "elicitation", &form, None);
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let legend = find(&c, &format!("{} fieldset:nth-of-type(1) legend", card(&q))).await;
    assert_eq!(legend.text().await.unwrap(), "env: Environment");
    click(
        &c,
        &q,
        "fieldset:nth-of-type(1) label.pick:nth-of-type(1) input",
    )
    .await;
    type_into(&c, &q, "fieldset:nth-of-type(2) input.other", "3").await;
    click(&c, &q, "button.send").await;
    let out = wait_output(child, Duration::from_secs(20));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got["hookSpecificOutput"],
        json!({ "hookEventName": "Elicitation", "action": "accept",
                "content": { "env": "prod", "replicas": 3 } })
    );
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activity_feed_and_the_agents_follow_the_hooks() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#inbox:not([hidden])").await;
    let event = |name: &str, extra: Value| {
        let mut body = json!({ "session_id": "feed1234-0000-4000-8000-000000000000",
            "cwd": p.dir, "hook_event_name": name });
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let run = |arg: &str, body: Value| {
        let out = wait_output(
            crate::hook::spawn_hook_as(&p, arg, &body, None),
            Duration::from_secs(20),
        );
        assert!(out.status.success(), "{out:?}");
    };
    run(
        "user-prompt-submit",
        event("UserPromptSubmit", json!({ "prompt": "tidy the docs" })),
    );
    run(
        "pre-tool-use",
        event(
            "PreToolUse",
            json!({ "tool_name": "Bash", "tool_input": { "command": "ls docs" } }),
        ),
    );
    run("stop", event("Stop", json!({ "stop_hook_active": false })));

    find(&c, "button.tab[data-view=activity]")
        .await
        .click()
        .await
        .unwrap();
    // Live, newest first.
    let first = find(&c, "#events .event[data-type=Stop]").await;
    assert!(first.text().await.unwrap().contains("Claude feed1234"));
    let tool = find(&c, "#events .event[data-type=PreToolUse]").await;
    let text = tool.text().await.unwrap();
    assert!(
        text.contains("Bash ls docs") && text.contains("none"),
        "{text}"
    );
    // Filtered by event type.
    find(&c, "#f-type option[value=UserPromptSubmit]")
        .await
        .click()
        .await
        .unwrap();
    let shown = c.find_all(Locator::Css("#events .event")).await.unwrap();
    assert_eq!(shown.len(), 1);
    assert!(shown[0].text().await.unwrap().contains("tidy the docs"));

    // The agent, idle after its stop.
    find(&c, "button.tab[data-view=agents]")
        .await
        .click()
        .await
        .unwrap();
    let start = Instant::now();
    loop {
        // Found again each time: the table is redrawn as the agents change.
        let row = find(&c, "#agent-rows tr[data-agent=claude-feed1234]").await;
        let text = row.text().await.unwrap_or_default();
        if text.contains("idle") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        find(&c, "button.tab[data-view=agents]")
            .await
            .click()
            .await
            .unwrap();
    }

    // When it asks, its card shows what it did lately: the same event again and
    // again once, with how many times.
    for _ in 0..2 {
        run("stop", event("Stop", json!({ "stop_hook_active": false })));
    }
    find(&c, "button.tab[data-view=inbox]")
        .await
        .click()
        .await
        .unwrap();
    let asking = crate::hook::spawn_hook_as(
        &p,
        "pre-tool-use",
        &event(
            "PreToolUse",
            json!({ "tool_name": "Bash", "tool_input": { "command": "git push --force origin main" },
                    "tool_use_id": "toolu_recent" }),
        ),
        None,
    );
    let recent = find(&c, ".card .recent:not([hidden])").await;
    let text = recent.text().await.unwrap();
    assert!(
        text.contains("Lately:") && text.contains("Stop (×3)") && text.contains("Bash ls docs"),
        "{text}"
    );
    find(&c, ".card button.deny").await.click().await.unwrap();
    assert_eq!(decision_of(asking)["permissionDecision"], "deny");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_paged_from_the_server_and_searched() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&[
        "--ui",
        "none",
        "--auto-answer",
        "ok",
        "--http",
        "127.0.0.1:0",
    ]);
    for i in 0..55 {
        let question = format!("question number {i} about needle-{i}");
        let mut args = vec!["ask", question.as_str()];
        if i == 7 {
            args.extend(["--priority", "urgent", "--tag", "release"]);
        }
        let out = p.run(&args);
        assert!(out.status.success(), "{out:?}");
    }
    let out = p
        .hitl()
        .args(["ask", "from another agent"])
        .env("HITL_AGENT_ID", "other-agent")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    crate::support::eventually("history has all 56", Duration::from_secs(10), || {
        p.history().len() >= 56
    });
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "button.tab[data-view=history]")
        .await
        .click()
        .await
        .unwrap();
    let rows = history_rows(&c, |rows| !rows.is_empty()).await;
    assert_eq!(rows.len(), 50, "one page");
    assert!(rows[1].contains("needle-54"), "newest first: {rows:?}");
    find(&c, "#older:not([hidden])")
        .await
        .click()
        .await
        .unwrap();
    history_rows(&c, |rows| rows.len() == 56).await;
    // Searched by the server.
    search_history(&c, "#h-text", "needle-7 ").await;
    let rows = history_rows(&c, |rows| rows.len() == 1).await;
    assert!(
        rows[0].contains("needle-7") && rows[0].contains("→ ok"),
        "{rows:?}"
    );
    // With its labels.
    let label = find(&c, ".history-row .label").await.text().await.unwrap();
    assert_eq!(label, "urgent");
    // Filtered by agent (by the server too).
    find(&c, "#h-text").await.clear().await.unwrap();
    search_history(&c, "#h-agent", "other-agent").await;
    history_rows(&c, |rows| {
        rows.len() == 1 && rows[0].contains("from another agent")
    })
    .await;
    // Searched by tag.
    find(&c, "#h-agent").await.clear().await.unwrap();
    search_history(&c, "#h-text", "tag:RELEASE").await;
    history_rows(&c, |rows| rows.len() == 1 && rows[0].contains("needle-7")).await;
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_is_filtered_by_type_and_agent() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let (mut a, text) = ask(&p, &["--timeout", "60", "Plain question?"]);
    let (mut b, approval) = ask(
        &p,
        &["--type", "approval", "--timeout", "60", "Approve me?"],
    );
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, &card(&approval)).await;
    find(&c, "#i-type option[value=approval]")
        .await
        .click()
        .await
        .unwrap();
    gone(&c, &card(&text), Duration::from_secs(2)).await;
    find(&c, &card(&approval)).await;
    find(&c, "#i-type option[value='']")
        .await
        .click()
        .await
        .unwrap();
    find(&c, &card(&text)).await;
    // Both asked from this test's shell: one agent, both shown under it.
    let agent = text["agent_name"].as_str().unwrap();
    find(&c, &format!("#i-agent option[value='{agent}']"))
        .await
        .click()
        .await
        .unwrap();
    assert_eq!(c.find_all(Locator::Css(".card")).await.unwrap().len(), 2);
    c.close().await.unwrap();
    let _ = a.kill();
    let _ = b.kill();
}

/// The Metrics view's tiles, read at once (they are redrawn as the queue changes).
async fn tiles_of(c: &Client) -> Vec<String> {
    let tiles = c
        .execute(
            "return [...document.querySelectorAll('.tile')].map(t => t.innerText.replace(/\\n/g, ' '))",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(tiles).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_view_charts_what_the_queue_did() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    // Three asked: two answered, one timed out; then one left waiting.
    let mut done = Vec::new();
    for text in ["First?", "Second?"] {
        let (child, q) = ask(&p, &["--timeout", "60", text]);
        let out = p.run(&["answer", q["id"].as_str().unwrap(), "ok"]);
        assert!(out.status.success(), "{out:?}");
        done.push(child);
    }
    // Made over HTTP, the broker times it out (a file asker withdraws at its own
    // deadline instead).
    let http = reqwest::Client::new();
    let made: Value = http
        .post(format!("{}/api/v1/requests", p.http_url()))
        .bearer_auth(p.token())
        .json(&json!({ "content": "Too late?", "timeout": 1 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let waited: Value = http
        .get(format!(
            "{}/api/v1/requests/{}/wait?timeout=20",
            p.http_url(),
            made["id"].as_str().unwrap()
        ))
        .bearer_auth(p.token())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(waited["status"], "timeout", "{waited}");
    for child in done {
        assert_eq!(answer_of(child).trim(), "ok");
    }
    let (_waiting, _) = ask(&p, &["--timeout", "120", "Still there?"]);

    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, ".card").await;
    find(&c, ".tab[data-view=metrics]")
        .await
        .click()
        .await
        .unwrap();
    find(&c, "#m-charts figure:nth-of-type(4) svg").await;
    let tiles = tiles_of(&c).await;
    for want in [
        "1 Waiting now",
        "4 Asked",
        "2 Answered",
        "1 Timed out",
        "< 5s Median answer",
    ] {
        assert!(
            tiles.iter().any(|t| t == want),
            "no tile {want:?} in {tiles:?}"
        );
    }
    // Each chart says what it shows, for those who do not see it.
    let labels = c
        .execute(
            "return [...document.querySelectorAll('#m-charts svg')].map(s => s.getAttribute('aria-label'))",
            vec![],
        )
        .await
        .unwrap();
    let labels: Vec<String> = serde_json::from_value(labels).unwrap();
    assert!(
        labels[0].contains("4 asked, 2 answered, 1 timed out"),
        "{labels:?}"
    );
    assert!(labels[1].contains("1 now"), "{labels:?}");
    assert!(labels[2].contains("2 answered"), "{labels:?}");
    assert!(labels[3].contains("4"), "{labels:?}");
    // A new request while the view is open is counted without a reload.
    let (_another, _) = ask(&p, &["--timeout", "120", "And another?"]);
    let start = Instant::now();
    loop {
        let tiles = tiles_of(&c).await;
        if tiles.first().is_some_and(|t| t == "2 Waiting now") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "still {tiles:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.close().await.unwrap();
}

/// A stand-in for the browser's speech recognition (the real one needs a microphone
/// and the recogniser's servers): it "hears" its `heard` words when started.
const FAKE_RECOGNITION: &str = r#"
    window.SpeechRecognition = class extends EventTarget {
        start() {
            setTimeout(() => {
                const e = new Event("result");
                e.results = [[{ transcript: window.heard }]];
                this.dispatchEvent(e);
                this.dispatchEvent(new Event("end"));
            }, 20);
        }
        stop() { this.dispatchEvent(new Event("end")); }
    };"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dictation_fills_a_field_where_the_browser_can_and_is_absent_where_it_cannot() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#empty").await;

    // No speech recognition: no button.
    c.execute(
        "delete window.webkitSpeechRecognition; delete window.SpeechRecognition;",
        vec![],
    )
    .await
    .unwrap();
    let (plain, q) = ask(&p, &["--timeout", "60", "Typed only?"]);
    find(&c, &card(&q)).await;
    assert!(
        c.find_all(Locator::Css(&format!("{} .mic", card(&q))))
            .await
            .unwrap()
            .is_empty(),
        "a dictation button without speech recognition"
    );
    type_into(&c, &q, "textarea", "typed").await;
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(plain), "typed\n");

    // With it: the words follow what was typed; the comment of an approval too.
    c.execute(FAKE_RECOGNITION, vec![]).await.unwrap();
    let (spoken, q) = ask(&p, &["--timeout", "60", "Say it?"]);
    type_into(&c, &q, "textarea", "Well,").await;
    c.execute("window.heard = 'ship it on Friday'", vec![])
        .await
        .unwrap();
    click(&c, &q, "button.mic").await;
    let start = Instant::now();
    while find(&c, &format!("{} textarea", card(&q)))
        .await
        .prop("value")
        .await
        .unwrap()
        .as_deref()
        != Some("Well, ship it on Friday")
    {
        assert!(start.elapsed() < Duration::from_secs(5), "nothing dictated");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(spoken), "Well, ship it on Friday\n");

    let (approval, q) = ask(
        &p,
        &[
            "--type",
            "approval",
            "--json",
            "--timeout",
            "60",
            "Deploy now?",
        ],
    );
    c.execute("window.heard = 'not on a Friday'", vec![])
        .await
        .unwrap();
    click(&c, &q, "button.mic").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    click(&c, &q, "button.deny").await;
    let out = wait_output(approval, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "denied: {out:?}");
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["comment"], "not on a Friday", "{said}");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_the_microphone_is_narrower_than_the_field_it_fills() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 390, 844).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#empty").await;
    c.execute(FAKE_RECOGNITION, vec![]).await.unwrap();
    let form = r#"[{"question": "Which database?", "options": [{"label": "PostgreSQL"}, {"label": "SQLite"}]}]"#;
    let (_child, q) = ask(&p, &["--questions", form, "--timeout", "60", "Set-up"]);
    find(&c, &format!("{} .other-row .mic", card(&q))).await;
    let widths = c
        .execute(
            &format!(
                "const row = document.querySelector('{} .other-row'); \
                 return [row.querySelector('.other').getBoundingClientRect().width, \
                         row.querySelector('.mic').getBoundingClientRect().width];",
                card(&q)
            ),
            vec![],
        )
        .await
        .unwrap();
    let (field, mic) = (widths[0].as_f64().unwrap(), widths[1].as_f64().unwrap());
    assert!(
        mic < field / 2.0,
        "the microphone {mic}px, the field {field}px"
    );
    c.close().await.unwrap();
}

/// The one-time link `hitl listen` printed.
fn printed_link(listener: &crate::support::Listener) -> String {
    let log = listener.log();
    log.lines()
        .find_map(|l| l.strip_prefix("hitl: dashboard on "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no login link in:\n{log}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_logs_in_one_browser_once() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let link = printed_link(&listener);
    assert!(link.contains("/?code="), "{link}");
    assert!(
        !listener.log().contains(&p.token()),
        "the token itself is not printed"
    );
    let (_asker, _) = ask(&p, &["--timeout", "60", "Who may see me?"]);

    let first = browser(&driver, 1280, 900).await;
    first.goto(&link).await.unwrap();
    find(&first, "#inbox:not([hidden]) .card").await;
    assert!(!first.current_url().await.unwrap().as_str().contains("code"));
    // Logged in for the visit: a reload needs no link.
    first.refresh().await.unwrap();
    find(&first, "#inbox:not([hidden]) .card").await;

    // The same link again, in another browser: spent.
    let second = browser(&driver, 1280, 900).await;
    second.goto(&link).await.unwrap();
    find(&second, "#login:not([hidden])").await;
    assert!(!second.source().await.unwrap().contains("Who may see me"));

    // `hitl dashboard` makes another, good once too.
    let out = p.run(&["dashboard", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(made["expires_in_seconds"], 600);
    let fresh = made["url"].as_str().unwrap();
    assert!(fresh.starts_with(&p.http_url()), "{fresh}");
    second.goto(fresh).await.unwrap();
    find(&second, "#inbox:not([hidden]) .card").await;
    let third = browser(&driver, 1280, 900).await;
    third.goto(fresh).await.unwrap();
    find(&third, "#login:not([hidden])").await;
    for c in [first, second, third] {
        c.close().await.unwrap();
    }

    // Without a listener, it says so.
    drop(listener);
    let out = p.run(&["dashboard"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("no listener runs"), "{said}");
}

/// An accessibility audit of what the page shows now, in the browser: every control
/// has a name a screen reader can say; no text is below WCAG AA contrast against what
/// is behind it (4.5:1, or 3:1 for large text); nothing jumps the focus order
/// (tabindex > 0); every image-like element says what it shows. Returns the faults.
const AUDIT: &str = include_str!("audit.js");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_passes_an_accessibility_audit_in_light_and_dark() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let askers = one_of_each(&p);
    for dark in [false, true] {
        let c = browser_in(&driver, 1280, 900, dark).await;
        c.goto(&login_url(&p)).await.unwrap();
        find(&c, ".card:nth-of-type(6)").await;
        let theme = if dark { "dark" } else { "light" };
        for view in ["inbox", "agents", "tasks", "activity", "history", "metrics"] {
            find(&c, &format!(".tab[data-view={view}]"))
                .await
                .click()
                .await
                .unwrap();
            if view == "metrics" {
                find(&c, "#m-charts figure:nth-of-type(4) svg").await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            let faults = c.execute(AUDIT, vec![]).await.unwrap();
            let faults: Vec<String> = serde_json::from_value(faults).unwrap();
            assert!(faults.is_empty(), "{view}, {theme}:\n{}", faults.join("\n"));
        }
        c.close().await.unwrap();
    }
    drop(askers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_request_is_marked_and_cannot_pass_for_a_hook() {
    let Some(driver) = driver() else { return };
    assert!(
        nix::unistd::geteuid().is_root(),
        "this check asks as another OS user and needs root (CI runs as root)"
    );
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    // nobody asks in the name of the user's Claude Code session, as a hook would,
    // with a bidi override to turn the question round.
    let script = format!(
        "import json, urllib.request\n\
         body = json.dumps({{'content': 'Allow Bash: ls\\u202e /fr- mr', 'type': 'approval', \
         'origin': 'hook', 'agent_id': 'claude-1a2b3c4d', 'agent_name': 'Claude 1a2b3c4d (proj)'}}).encode()\n\
         req = urllib.request.Request('{}/api/v1/requests', data=body, headers={{'Content-Type': 'application/json'}})\n\
         print(urllib.request.urlopen(req).status)",
        p.http_url()
    );
    let out = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--", "python3", "-c", &script])
        .output()
        .expect("runuser (util-linux) runs a command as another user");
    assert!(out.status.success(), "{out:?}");
    let q = p.wait_pending(1, Duration::from_secs(10)).pop().unwrap();
    // Not a hook, not the user's agent.
    assert_eq!(q["origin"], "http", "{q}");
    assert!(
        q["agent_id"].as_str().unwrap().starts_with("uid65534"),
        "{q}"
    );
    assert!(
        q["agent_name"].as_str().unwrap().contains("[uid 65534"),
        "{q}"
    );
    let table = String::from_utf8(p.run(&["pending"]).stdout).unwrap();
    assert!(table.contains("[uid 65534"), "{table}");

    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    let warning = find(&c, &format!("{} .other-user-warning", card(&q)))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        warning.contains("another user of this machine") && warning.contains("uid 65534"),
        "{warning}"
    );
    let content = find(&c, &format!("{} .content", card(&q)))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        content.contains("\\u{202e}") && !content.contains('\u{202e}'),
        "{content:?}"
    );
    let origin = find(&c, &format!("{} .origin", card(&q)))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(origin, "http");
    c.close().await.unwrap();
}

/// An asker stopped from outside: its card says the question is kept for it, and
/// stops saying so when the agent asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_kept_for_a_stopped_asker_says_so() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let (a, q) = ask(&p, &["--timeout", "60", "Keep me?"]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, &card(&q)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let note = find(&c, &format!("{} .kept-note:not([hidden])", card(&q))).await;
    assert!(
        note.text()
            .await
            .unwrap()
            .starts_with("Asker gone, kept for when it asks again"),
        "its words"
    );
    // Asked again: the same card, no longer kept.
    let mut again = spawn_ask(&p, &["--timeout", "60", "Keep me?"]);
    find(&c, &format!("{} .kept-note[hidden]", card(&q))).await;
    assert_eq!(p.pending().len(), 1);
    let _ = again.kill();
    let _ = again.wait();
}

/// A number request is a number field with its range; a number outside it is refused
/// with the server's reason on the card, and one inside is the asker's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_number_request_is_answered_in_a_number_field_within_its_range() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    let (child, q) = ask(
        &p,
        &[
            "--type",
            "number",
            "--min",
            "1",
            "--max",
            "8",
            "--timeout",
            "60",
            "How many workers?",
        ],
    );
    let field = find(
        &c,
        &format!("{} input[type=number][min=\"1\"][max=\"8\"]", card(&q)),
    )
    .await;
    field.send_keys("9").await.unwrap();
    click(&c, &q, "button.send").await;
    let error = find(&c, &format!("{} .error", card(&q))).await;
    let start = Instant::now();
    loop {
        let said = error.text().await.unwrap();
        if said.contains("more than 8") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the card says {said:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    field.clear().await.unwrap();
    field.send_keys("3").await.unwrap();
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(child), "3\n");
    gone(&c, &card(&q), Duration::from_secs(5)).await;
}

/// The asker's own `--context` is on the card, as its fields (as the TUI shows it),
/// and a number question says its range in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_context_and_a_numbers_range_are_on_its_card() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    let (child, q) = ask(
        &p,
        &[
            "--type",
            "number",
            "--min",
            "1",
            "--max",
            "8",
            "--context",
            r#"{"branch":"release/2.1","jobs":[1,2],"why":"the <b>nightly</b> run"}"#,
            "--timeout",
            "60",
            "How many workers?",
        ],
    );
    let shown = find(&c, &format!("{} pre.context", card(&q)))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        shown, "branch: release/2.1\njobs: [1,2]\nwhy: the <b>nightly</b> run",
        "shown as text, one field a line"
    );
    let range = find(&c, &format!("{} .answer .range", card(&q)))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(range, "Answer with a number from 1 to 8.");
    let field = find(&c, &format!("{} input[type=number]", card(&q))).await;
    assert_eq!(
        field.attr("placeholder").await.unwrap().as_deref(),
        Some("a number from 1 to 8")
    );
    field.send_keys("4").await.unwrap();
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(child), "4\n");

    // Context that is not an object: shown as it is.
    let (child, q) = ask(
        &p,
        &["--context", r#""see PR 42""#, "--timeout", "60", "Merge?"],
    );
    let shown = find(&c, &format!("{} pre.context", card(&q)))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(shown, "see PR 42");
    type_into(&c, &q, "textarea", "yes").await;
    click(&c, &q, "button.send").await;
    assert_eq!(answer_of(child), "yes\n");
}

/// A stand-in agent for the Tasks view (the real Claude Code is driven in
/// tests/it/tasks.rs): it writes `out.txt` and the summary for each task typed in,
/// but works on a task saying "slow" until interrupted (C-c), and goes on after.
const TASK_AGENT: &str = r###"
import os, re, sys, time
print("stand-in agent ready", flush=True)
while True:
    try:
        line = sys.stdin.readline()
        if not line:
            break
        m = re.search(r"Task (task-[0-9a-f-]+): (.*)", line)
        if not m:
            continue
        task, what = m.groups()
        if "slow" in what:
            time.sleep(3600)
            continue
        with open("out.txt", "w") as f:
            f.write("made\n")
        text = ("# Task Completion Summary\n\n## Objective\n%s\n\n## Key Deliverables\n"
                "- `out.txt` - made\n\n## Test Results\n✅ 2 tests passed\n\n## Status\n"
                "✅ COMPLETED\n" % what)
        with open("summaries/.tmp", "w") as f:
            f.write(text)
        os.rename("summaries/.tmp", "summaries/%s.md" % task)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"###;

/// hitl's tmux server of one test, killed when dropped.
struct TmuxServer(std::path::PathBuf);

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .env("TMUX_TMPDIR", &self.0)
            .args(["-L", "hitl", "kill-server"])
            .output();
    }
}

/// The Tasks view: each session with its queue, live as tasks change; a task's
/// result with its artifacts; cancel and retry from the page; and the tasks'
/// changes in the activity feed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_view_shows_each_sessions_queue_and_cancels_and_retries() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    p.user_config("[tasks]\nagents = [\"python3\"]\n");
    let tmux = TmuxServer(p.tmp.path().join("tmux"));
    std::fs::create_dir_all(&tmux.0).unwrap();
    let mut cmd = p.hitl();
    cmd.env("TMUX_TMPDIR", &tmux.0)
        .args(["listen", "--ui", "none", "--http", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::piped());
    let _listener = crate::support::Listener::start(cmd);
    let ws = p.tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let agent = p.tmp.path().join("agent.py");
    std::fs::write(&agent, TASK_AGENT).unwrap();
    let task = |args: &[&str]| -> Value {
        let out = p
            .hitl()
            .arg("task")
            .args(args)
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "hitl task {args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let command = format!("python3 {}", agent.display());
    task(&[
        "session",
        "builder",
        "--workspace",
        ws.to_str().unwrap(),
        "--command",
        &command,
        "--interrupt-key",
        "C-c",
    ]);
    let id_of = |v: Value| v["task"]["id"].as_str().unwrap().to_string();
    let done = id_of(task(&["submit", "builder", "Make the output"]));
    let out = p
        .hitl()
        .args(["task", "wait", &done, "--timeout", "30"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let slow = id_of(task(&["submit", "builder", "A slow one"]));
    crate::support::eventually("the slow task at work", Duration::from_secs(10), || {
        task(&["status", &slow])["state"] == "working"
    });
    let queued = id_of(task(&["submit", "builder", "Waits its turn"]));

    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#inbox:not([hidden])").await;
    find(&c, ".tab[data-view=tasks]")
        .await
        .click()
        .await
        .unwrap();
    let row = |id: &str, state: &str| format!("tr[data-task=\"{id}\"][data-state=\"{state}\"]");
    let session = find(&c, "section[data-session=builder] h3").await;
    let heading = session.text().await.unwrap();
    assert!(
        heading.contains("working") && heading.contains("1 queued"),
        "{heading}"
    );
    let waiting = find(&c, &row(&queued, "submitted")).await;
    assert!(waiting.text().await.unwrap().contains("submitted (1)"));
    find(&c, &row(&slow, "working")).await;

    // The finished task's result: its summary read and its artifacts.
    click_live(&c, &format!("{} button.result", row(&done, "completed"))).await;
    let result = find(&c, ".task-result .artifact:nth-of-type(2)").await;
    assert!(result.text().await.unwrap().contains("out.txt"));
    let detail = find(&c, ".task-result td").await.text().await.unwrap();
    assert!(
        detail.contains("Make the output") && detail.contains("passed, 2 passed"),
        "{detail}"
    );

    // Cancel the waiting one, retry the finished one (queued behind the slow one),
    // then cancel the slow one: the retried one runs.
    click_live(&c, &format!("{} button.cancel", row(&queued, "submitted"))).await;
    find(&c, &row(&queued, "canceled")).await;
    assert_eq!(task(&["status", &queued])["state"], "canceled");
    click_live(&c, &format!("{} button.retry", row(&done, "completed"))).await;
    let start = Instant::now();
    let retried = loop {
        let list = task(&["list"]);
        let found = list
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["attempt"] == 1)
            .cloned();
        if let Some(t) = found {
            break t["id"].as_str().unwrap().to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no retry: {list:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    find(&c, &row(&retried, "submitted")).await;
    click_live(&c, &format!("{} button.cancel", row(&slow, "working"))).await;
    // The agent is given 5 s to stop; this one goes on without.
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(&row(&retried, "completed")))
        .await
        .expect("the retried task completed on the page");
    find(&c, &row(&slow, "canceled")).await;

    // Each change of state is in the activity feed.
    find(&c, ".tab[data-view=activity]")
        .await
        .click()
        .await
        .unwrap();
    let completed = find(&c, "#events .event[data-type=TaskCompleted]").await;
    let text = completed.text().await.unwrap();
    assert!(text.contains("builder"), "{text}");
    find(&c, "#events .event[data-type=TaskCanceled]").await;
    c.close().await.unwrap();
}

/// Issue 31: a sub-agent's mailbox round over MCP (the official Python SDK), and
/// its `mailbox_ask` answered here in the browser, the option chosen coming back
/// as the mailbox's "Option N".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_question_asked_over_mcp_is_answered_in_the_browser() {
    let Some(driver) = driver() else { return };
    if !crate::mcp::python_sdk() {
        return;
    }
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let run = p.tmp.path().join("run");
    assert!(
        p.run(&["mailbox", "init", run.to_str().unwrap()])
            .status
            .success()
    );
    let client = Command::new("python3")
        .arg(crate::support::checkout().join("tests/it/mcp_mailbox.py"))
        .arg(crate::support::hitl_bin())
        .arg(&p.dir)
        .arg(&run)
        .env("HITL_HOME", &p.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let q = p.wait_pending(1, Duration::from_secs(30)).pop().unwrap();
    assert_eq!(q["origin"], "mailbox", "{q:#}");
    let c = browser(&driver, 1280, 900).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, &card(&q)).await;
    // A link to the request (as webhooks send) focuses its card.
    let id = q["id"].as_str().unwrap();
    c.goto(&format!("{}/#request={id}", p.http_url()))
        .await
        .unwrap();
    let text = text_live(&c, &card(&q)).await;
    let mut focused = Value::Null;
    for _ in 0..100 {
        focused = c
            .execute("return document.activeElement.dataset.id || null", vec![])
            .await
            .unwrap();
        if focused == id {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(focused, id, "the linked card has the focus");
    assert!(
        text.contains("Created commit plan with 2 commits"),
        "{text}"
    );
    assert!(text.contains("2. docs"), "the plan is shown: {text}");
    // The run's agents, with the statuses they reported, in the Agents view.
    find(&c, ".tab[data-view=agents]")
        .await
        .click()
        .await
        .unwrap();
    let text = text_live(
        &c,
        &format!("tr[data-agent=\"{}\"]", q["agent_id"].as_str().unwrap()),
    )
    .await;
    assert!(
        text.contains("narrator") && text.contains("run run"),
        "{text}"
    );
    let scribe = text_live(&c, "tr[data-agent$=\".scribe\"]").await;
    assert!(scribe.contains("idle"), "{scribe}");
    find(&c, ".tab[data-view=inbox]")
        .await
        .click()
        .await
        .unwrap();
    click(&c, &q, "button.option:nth-of-type(2)").await;
    let out = wait_output(client, Duration::from_secs(30));
    assert!(out.status.success(), "{out:?}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    for tool in [
        "mailbox_ask",
        "mailbox_recv",
        "mailbox_reply",
        "mailbox_result",
        "mailbox_send",
        "mailbox_status",
    ] {
        assert!(
            r["tools"].as_array().unwrap().iter().any(|t| t == tool),
            "{r:#}"
        );
    }
    assert_eq!(
        r["recv"]["structured"]["request"]["DESCRIPTION"], "Add 'class' attributes",
        "{r:#}"
    );
    assert_eq!(
        r["recv"]["structured"]["request"]["COMMIT_NUMBER"], "1",
        "{r:#}"
    );
    assert_eq!(
        r["result"]["structured"]["result"]["COMMIT_HASH"], "abc123",
        "{r:#}"
    );
    assert_eq!(r["recv_empty"]["structured"]["status"], "timeout", "{r:#}");
    assert_eq!(r["status"]["structured"]["status"], "idle", "{r:#}");
    let ask = &r["ask"]["structured"];
    assert_eq!(r["ask"]["is_error"], false, "{r:#}");
    assert_eq!(ask["answer"], "Option 2", "{r:#}");
    assert_eq!(ask["text"], "Cancel and return to original branch", "{r:#}");
    assert!(!r["progress"].as_array().unwrap().is_empty(), "{r:#}");
    c.close().await.unwrap();
}

/// The base64 SHA-256 of a PEM certificate's public key (its SPKI), as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it: the browser trusts that key and
/// nothing else it would not trust anyway.
fn spki_sha256(cert: &std::path::Path) -> String {
    let script = format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64",
        cert.display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_a_phone_logs_in_with_the_printed_link_answers_and_follows_the_queue_live() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let certs = p.home.join("tls");
    std::fs::create_dir_all(&certs).unwrap();
    crate::support::make_certificates(&certs);
    p.user_config("[http]\ntls_cert = \"tls/trusted.pem\"\ntls_key = \"tls/trusted.key\"\n");
    let listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let link = printed_link(&listener);
    assert!(link.starts_with("https://127.0.0.1:"), "{link}");
    let trust = format!(
        "--ignore-certificate-errors-spki-list={}",
        spki_sha256(&certs.join("trusted.pem"))
    );
    let c = browser_with(&driver, 390, 844, false, &[trust]).await;
    c.goto(&link).await.unwrap();
    find(&c, "#inbox:not([hidden])").await;
    // An app a phone can install: its manifest, its icons, its service worker.
    let app = c
        .execute_async(
            "const done = arguments[0];
             (async () => {
               const reg = await navigator.serviceWorker.ready;
               const m = await (await fetch('/manifest.webmanifest')).json();
               const icons = await Promise.all(m.icons.map(async (i) => {
                 const r = await fetch(i.src);
                 return [i.sizes, r.status, r.headers.get('content-type')];
               }));
               done({ scope: reg.scope, display: m.display, start: m.start_url, icons });
             })().catch((e) => done({ error: String(e) }));",
            vec![],
        )
        .await
        .unwrap();
    let base = link.split("/?").next().unwrap();
    assert_eq!(app["scope"], format!("{base}/"), "{app}");
    assert_eq!(
        (&app["display"], &app["start"]),
        (&json!("standalone"), &json!("/"))
    );
    for size in ["192x192", "512x512"] {
        assert!(
            app["icons"]
                .as_array()
                .unwrap()
                .contains(&json!([size, 200, "image/png"])),
            "{app}"
        );
    }
    // Asked after the page loaded: it arrives over the page's wss:// stream.
    let (child, q) = ask(&p, &["--type", "approval", "Deploy from the phone?"]);
    find(&c, &card(&q)).await;
    fits(&c, 390, "an approval over https").await;
    click(&c, &q, "button.approve").await;
    let out = answer_of(child);
    assert!(out.starts_with("approved"), "{out}");
    // The cookie the link left is Secure: the page reads none of it, and a plain
    // http page of the same port gets nothing but the advice to use https.
    let cookies = c.get_all_cookies().await.unwrap();
    assert!(
        !cookies.is_empty() && cookies.iter().all(|k| k.secure() == Some(true)),
        "{cookies:?}"
    );
    c.close().await.unwrap();
}

/// Whether the element `css` shows all it holds: nothing past its right edge.
async fn shows_all(c: &Client, css: &str) -> bool {
    let js = format!(
        "const e = document.querySelector('{css}'); return e.scrollWidth <= e.clientWidth + 1"
    );
    c.execute(&js, vec![]).await.unwrap() == Value::Bool(true)
}

/// Asserts the element `css` lies within a `width` px screen, left to right.
async fn within_width(c: &Client, css: &str, width: u32) {
    let (x, _, w, _) = find(c, css).await.rectangle().await.unwrap();
    assert!(
        x >= 0.0 && x + w <= f64::from(width) + 0.5,
        "{css}: from {x} to {} px on a {width} px screen",
        x + w
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_phone_a_command_a_diff_and_a_plan_are_all_in_sight_and_answered() {
    let Some(driver) = driver() else { return };
    let p = Project::new();
    let _listener = p.listen(&["--ui", "none", "--http", "127.0.0.1:0"]);
    let c = browser(&driver, 390, 844).await;
    c.goto(&login_url(&p)).await.unwrap();
    find(&c, "#inbox:not([hidden])").await;

    // A long command whose last words are what matters: wrapped in full, never cut
    // or hidden past the edge of its box.
    let command = format!(
        "git status {} ; git push --force origin main",
        "--porcelain ".repeat(30)
    );
    let child = hook(&p, "Bash", json!({ "command": command }));
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    let shown = find(&c, &format!("{} pre.context", card(&q))).await;
    assert_eq!(shown.text().await.unwrap(), format!("$ {command}"));
    assert!(
        shows_all(&c, &format!("{} pre.context", card(&q))).await,
        "the whole command is in sight"
    );
    fits(&c, 390, "a long command").await;
    for button in ["button.approve", "button.deny"] {
        within_width(&c, &format!("{} {button}", card(&q)), 390).await;
    }
    type_into(&c, &q, "input.comment", "not to main").await;
    click(&c, &q, "button.deny").await;
    assert_eq!(decision_of(child)["permissionDecision"], "deny");

    // A file written whole: its diff folded, the card with its buttons within one
    // screen's height.
    let content: String = (1..=200)
        .map(|i| format!("line {i} of the new file\n"))
        .collect();
    let child = hook(
        &p,
        "Write",
        json!({ "file_path": p.dir.join("package.json"), "content": content }),
    );
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    find(&c, &format!("{} .diff.folded", card(&q))).await;
    let (_, _, _, height) = find(&c, &card(&q)).await.rectangle().await.unwrap();
    assert!(
        height < 844.0,
        "the card is {height} px high on an 844 px screen"
    );
    fits(&c, 390, "a folded diff").await;
    within_width(&c, &format!("{} button.approve", card(&q)), 390).await;
    click(&c, &q, "button.approve").await;
    assert_eq!(decision_of(child)["permissionDecision"], "allow");

    // A plan: its Markdown, within the width, approved.
    let plan = format!(
        "# Plan\n\n1. Move `{}` into the store\n2. Run the whole suite\n",
        "broker/requests.rs::Requests::begin_answer".repeat(2)
    );
    let child = hook(&p, "ExitPlanMode", json!({ "plan": plan }));
    let q = p.wait_pending(1, Duration::from_secs(10)).remove(0);
    find(&c, &format!("{} .markdown ol li", card(&q))).await;
    fits(&c, 390, "a plan").await;
    within_width(&c, &format!("{} .markdown", card(&q)), 390).await;
    click(&c, &q, "button.approve").await;
    assert_eq!(decision_of(child)["permissionDecision"], "allow");
    c.close().await.unwrap();
}
