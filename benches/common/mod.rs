//! What the benchmarks share: the binary they run ([`installed`]), a listener
//! started and its address read, the percentiles of a sample and how a row of them
//! is printed, with a target's verdict (MET or MISSED, never asserted).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub mod installed;
pub use installed::hitl;

/// Starts `listen` (a `hitl listen … --http 127.0.0.1:0` command) and returns it
/// once ready, with the address its HTTP API is on. Its later output is drained.
pub fn start_listener(listen: &mut Command) -> (Child, String) {
    let mut child = listen
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut base = None;
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("hitl: HTTP API on ") {
            base = rest.split_whitespace().next().map(str::to_string);
        }
        if line == "hitl: ready" {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    (child, base.expect("the listener's address"))
}

/// A sample's size and percentiles.
pub struct Stats {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The percentiles of `v` (not empty).
pub fn stats(v: &[f64]) -> Stats {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    Stats {
        n: v.len(),
        p50: at(0.5),
        p99: at(0.99),
        max: *v.last().unwrap(),
    }
}

/// One row: a name, its figures, and what they say.
pub fn row(name: &str, s: &Stats, verdict: &str) {
    println!(
        "{name:<44} n={:<4} p50 {:>9.3}  p99 {:>9.3}  max {:>9.3}  {verdict}",
        s.n, s.p50, s.p99, s.max
    );
}

/// A target's verdict.
pub fn met(ok: bool) -> &'static str {
    if ok { "MET" } else { "MISSED" }
}
