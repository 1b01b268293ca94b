//! Asking through the spool, as any asker on this machine does: watch for the answer,
//! write the question, wait; on the asker's own deadline or a signal, withdraw the
//! question (remove its file) and look once more, since an answer written meanwhile
//! wins. `hitl ask` and `hitl hook` both ask this way, so a Claude Code hook costs no
//! more than a question from a script and outlives a restarted listener the same way.

use std::{
    ops::ControlFlow,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;

use super::{
    Spool, leave_answer_slot,
    questions::read_answer,
    wait::{AnswerWait, WaitOutcome},
    write_atomic_spared,
};
use crate::protocol::{Answer, Request};

/// How a question asked through the spool ended, for its asker.
#[derive(Debug)]
pub enum Asked {
    /// Its answer file: an answer, a cancel, or the broker's own timeout.
    Answered(Box<Answer>),
    /// The asker's deadline passed first; the question was withdrawn.
    TimedOut,
    /// A signal (SIGINT, SIGTERM, SIGHUP) stopped the wait; the question was withdrawn.
    Interrupted(Signal),
    /// SIGTERM or SIGHUP stopped the wait (the asker was ended from outside) and the
    /// question stays pending for the same agent's next ask ([`super::kept`]).
    Kept(Signal),
    /// The asker's tick said to stop; the question was withdrawn.
    GaveUp,
}

/// Asks `request` in `spool` and waits for its end. The wait gives up at the
/// request's own timeout (the broker times it out at the same moment, a little
/// later). `on_tick(n)` runs every `tick` while waiting, `n` counting from 1, and
/// may give up the wait. With `keep_when_stopped`, SIGTERM and SIGHUP leave the
/// question pending and marked as kept instead of withdrawing it; SIGINT (a person's
/// Ctrl-C) always withdraws.
/// Errors: the question could not be written, or its answer file could not be read.
pub fn ask(
    spool: &Spool,
    request: &Request,
    fsync: bool,
    keep_when_stopped: bool,
    tick: Duration,
    mut on_tick: impl FnMut(u64) -> ControlFlow<()>,
) -> Result<Asked> {
    let name = format!("{}.json", request.id);
    let question = spool.questions().join(&name);
    let answer_path = spool.answers().join(&name);

    // Watch before writing, so an answer that comes at once is not missed.
    let mut wait = AnswerWait::new(&spool.answers(), &name)
        .with_context(|| format!("watching {}", spool.answers().display()))?;
    let mut bytes = serde_json::to_vec_pretty(request)?;
    bytes.push(b'\n');
    // The answer's file is made now, while nobody waits on it; gone with the ask.
    let _slot = AnswerSlot(leave_answer_slot(&spool.tmp(), &answer_path));
    write_atomic_spared(&spool.tmp(), &question, &bytes, fsync)
        .with_context(|| format!("writing the question to {}", question.display()))?;
    let deadline = request
        .timeout
        .map(|t| Instant::now() + Duration::from_secs(t));
    let mut ticks = 0u64;
    let outcome = wait
        .wait(deadline, tick, || {
            ticks += 1;
            on_tick(ticks)
        })
        .context("waiting for the answer")?;

    let withdrawn = match outcome {
        WaitOutcome::Appeared => None,
        WaitOutcome::Interrupted(sig @ (Signal::SIGTERM | Signal::SIGHUP))
            if keep_when_stopped && super::kept::leave(spool, request).is_ok() =>
        {
            // An answer that came meanwhile is still the asker's to print.
            return Ok(match super::questions::read_answer(&answer_path) {
                Some(answer) => {
                    super::kept::forget(spool, request);
                    let _ = std::fs::remove_file(&question);
                    Asked::Answered(Box::new(answer))
                }
                None => Asked::Kept(sig),
            });
        }
        WaitOutcome::TimedOut => Some(Asked::TimedOut),
        WaitOutcome::Interrupted(sig) => Some(Asked::Interrupted(sig)),
        WaitOutcome::Stopped => Some(Asked::GaveUp),
    };
    if withdrawn.is_some() {
        // Withdraw first, then look once more: an answer written in the meantime wins.
        let _ = std::fs::remove_file(&question);
    }
    match read_answer_retrying(&answer_path, withdrawn.is_none()) {
        Some(answer) => {
            // The answer file stays as the slot's tombstone, so a late responder learns
            // it lost instead of answering again; the listener clears old ones.
            let _ = std::fs::remove_file(&question);
            Ok(Asked::Answered(Box::new(answer)))
        }
        None => withdrawn.with_context(|| {
            format!(
                "the answer file {} could not be read",
                answer_path.display()
            )
        }),
    }
}

/// The empty file an asker left for its answer ([`leave_answer_slot`]), removed when
/// the ask ends however it ends: a responder that wrote the answer moved it away
/// already, but an answer that came another way, a timeout or a withdrawal leave it.
struct AnswerSlot(Option<std::path::PathBuf>);

impl Drop for AnswerSlot {
    fn drop(&mut self) {
        if let Some(slot) = &self.0 {
            let _ = std::fs::remove_file(slot);
        }
    }
}

/// Reads the answer; our writers put whole files in place, but a foreign writer may
/// not, so a few short retries cover a file caught mid-write.
fn read_answer_retrying(path: &Path, expected: bool) -> Option<Answer> {
    let tries = if expected { 50 } else { 1 };
    for _ in 0..tries {
        if let Some(a) = read_answer(path) {
            return Some(a);
        }
        if !path.exists() && !expected {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}
