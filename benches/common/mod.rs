//! What the benchmarks share: percentiles of a sample and how a row of them is
//! printed, with a target's verdict (MET or MISSED, never asserted).

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
