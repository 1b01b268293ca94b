//! Metrics over time, for the dashboard's charts: requests asked and ended per
//! interval, the queue's depth, how long answers took, and who asked most.
//!
//! Everything is counted by the database (`GROUP BY`), so a chart costs a handful of
//! rows whatever the size of history. Rows are picked by `asked_ms`, which is
//! indexed; when a request ended is kept as RFC 3339 text (`finished_at`), turned
//! into milliseconds by each backend's own date functions.

use anyhow::Result;
use serde::Serialize;
use sqlx::Row;

use super::{Backend, Store};

/// Time-to-answer bins: answered in under this many seconds; the last bin is open.
pub const ANSWER_BINS_S: [i64; 8] = [5, 15, 30, 60, 120, 300, 900, 3600];

/// What a chart asks for: `buckets` intervals of `bucket_ms` ending with the one
/// that holds `now_ms`.
#[derive(Debug, Clone, Copy)]
pub struct SeriesQuery {
    /// Now, in ms since the epoch.
    pub now_ms: i64,
    /// One interval's length.
    pub bucket_ms: i64,
    /// How many intervals.
    pub buckets: i64,
    /// Requests waiting now (the broker knows; the depth is walked back from it).
    pub pending_now: i64,
}

impl SeriesQuery {
    /// Where the first interval starts: intervals are aligned to their length, so
    /// a chart drawn twice a minute apart shows the same bars.
    pub fn since_ms(&self) -> i64 {
        (self.now_ms.div_euclid(self.bucket_ms) - (self.buckets - 1)) * self.bucket_ms
    }
}

/// One interval.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Its start, ms since the epoch.
    pub start_ms: i64,
    /// Requests asked in it.
    pub asked: i64,
    /// Requests answered in it.
    pub answered: i64,
    /// Requests that timed out in it.
    pub timed_out: i64,
    /// Requests that ended otherwise in it (cancelled, withdrawn, abandoned…).
    pub other: i64,
    /// Requests waiting at its end.
    pub depth: i64,
}

/// One agent's requests in the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentCounts {
    /// The agent's name.
    pub agent: String,
    /// Asked.
    pub asked: i64,
    /// Of those, answered.
    pub answered: i64,
    /// Timed out.
    pub timed_out: i64,
    /// Still waiting.
    pub pending: i64,
}

/// One time-to-answer bin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AnswerBin {
    /// Answered in under this many seconds (and at least the previous bin's);
    /// `None` for the last, open bin.
    pub under_seconds: Option<i64>,
    /// How many.
    pub count: i64,
}

/// The charts' numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Series {
    /// The intervals, oldest first.
    pub buckets: Vec<Bucket>,
    /// Time to answer of the requests answered in the window.
    pub time_to_answer: Vec<AnswerBin>,
    /// The agents that asked most in the window, most first (at most 12).
    pub agents: Vec<AgentCounts>,
}

/// At most this many agents in [`Series::agents`].
const TOP_AGENTS: i64 = 12;

impl Store {
    /// The numbers behind the dashboard's charts.
    pub async fn series(&self, q: &SeriesQuery) -> Result<Series> {
        let since = q.since_ms();
        let n = q.buckets.max(1) as usize;
        // A request that ended in the window may have been asked before it; one
        // window (and at least a day) back catches all but the longest waits.
        let span = q.bucket_ms * q.buckets;
        let asked_from = since - span.max(86_400_000);
        let finished_ms = match self.backend {
            Backend::Sqlite(..) => {
                "CAST((julianday(finished_at) - 2440587.5) * 86400000.0 AS INTEGER)"
            }
            Backend::Postgres(_) => {
                "CAST(EXTRACT(EPOCH FROM CAST(finished_at AS timestamptz)) * 1000 AS BIGINT)"
            }
        };
        let asked_sql = "SELECT (asked_ms - $1) / $2 AS b, COUNT(*) AS n
             FROM requests WHERE asked_ms >= $1 GROUP BY b";
        let ended_sql = format!(
            "SELECT (fin - $1) / $2 AS b, status, COUNT(*) AS n
             FROM (SELECT status, {finished_ms} AS fin FROM requests
                   WHERE status <> 'pending' AND asked_ms >= $3) t
             WHERE fin >= $1 GROUP BY b, status"
        );
        let mut bins = String::from("CAST(CASE");
        for (i, s) in ANSWER_BINS_S.iter().enumerate() {
            bins.push_str(&format!(" WHEN d < {} THEN {i}", s * 1000));
        }
        bins.push_str(&format!(" ELSE {} END AS BIGINT)", ANSWER_BINS_S.len()));
        let answer_sql = format!(
            "SELECT {bins} AS bin, COUNT(*) AS n
             FROM (SELECT fin - asked_ms AS d FROM
                     (SELECT asked_ms, {finished_ms} AS fin FROM requests
                      WHERE status = 'answered' AND asked_ms >= $2) t
                   WHERE fin >= $1) u
             GROUP BY bin"
        );
        let agents_sql = "SELECT agent_name, COUNT(*) AS asked,
                 SUM(CASE WHEN status = 'answered' THEN 1 ELSE 0 END) AS answered,
                 SUM(CASE WHEN status = 'timeout' THEN 1 ELSE 0 END) AS timed_out,
                 SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) AS pending
             FROM requests WHERE asked_ms >= $1
             GROUP BY agent_name ORDER BY asked DESC, agent_name LIMIT $2";

        let mut out = Series {
            buckets: (0..n)
                .map(|i| Bucket {
                    start_ms: since + i as i64 * q.bucket_ms,
                    ..Bucket::default()
                })
                .collect(),
            time_to_answer: ANSWER_BINS_S
                .iter()
                .map(|s| Some(*s))
                .chain([None])
                .map(|under_seconds| AnswerBin {
                    under_seconds,
                    count: 0,
                })
                .collect(),
            agents: Vec::new(),
        };
        let slot = |b: i64| usize::try_from(b).ok().filter(|b| *b < n);
        with_pool!(self, |pool| {
            for r in sqlx::query(asked_sql)
                .bind(since)
                .bind(q.bucket_ms)
                .fetch_all(pool)
                .await?
            {
                if let Some(b) = slot(r.get("b")) {
                    out.buckets[b].asked += r.get::<i64, _>("n");
                }
            }
            for r in sqlx::query(sqlx::AssertSqlSafe(ended_sql.as_str()))
                .bind(since)
                .bind(q.bucket_ms)
                .bind(asked_from)
                .fetch_all(pool)
                .await?
            {
                let Some(b) = slot(r.get("b")) else { continue };
                let count: i64 = r.get("n");
                let bucket = &mut out.buckets[b];
                match r.get::<String, _>("status").as_str() {
                    "answered" => bucket.answered += count,
                    "timeout" => bucket.timed_out += count,
                    _ => bucket.other += count,
                }
            }
            for r in sqlx::query(sqlx::AssertSqlSafe(answer_sql.as_str()))
                .bind(since)
                .bind(asked_from)
                .fetch_all(pool)
                .await?
            {
                let bin: i64 = r.get("bin");
                if let Some(b) = out.time_to_answer.get_mut(bin as usize) {
                    b.count += r.get::<i64, _>("n");
                }
            }
            for r in sqlx::query(agents_sql)
                .bind(since)
                .bind(TOP_AGENTS)
                .fetch_all(pool)
                .await?
            {
                out.agents.push(AgentCounts {
                    agent: r.get("agent_name"),
                    asked: r.get("asked"),
                    answered: r.get("answered"),
                    timed_out: r.get("timed_out"),
                    pending: r.get("pending"),
                });
            }
            Ok::<_, anyhow::Error>(())
        })?;
        // The depth at each interval's end, walked back from now: before an interval
        // there were as many waiting as after it, less those asked in it, plus those
        // that ended in it.
        let mut depth = q.pending_now;
        for b in out.buckets.iter_mut().rev() {
            b.depth = depth.max(0);
            depth = depth - b.asked + b.answered + b.timed_out + b.other;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_aligned_and_end_with_now() {
        let q = SeriesQuery {
            now_ms: 10_500,
            bucket_ms: 1_000,
            buckets: 4,
            pending_now: 0,
        };
        assert_eq!(q.since_ms(), 7_000);
        // The last interval, [10 000, 11 000), holds now.
        assert!(q.since_ms() + 3 * 1_000 <= q.now_ms);
    }
}
