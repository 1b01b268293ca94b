//! The escalation ladder: who a pending request reaches, and when.
//!
//! Every request is at the desk the moment it is queued (every UI of the listener
//! shows it). Then, while nobody answers:
//!
//! - **at once**: the channels `[escalation] at_once` names, whoever is present;
//! - **away**: once nobody has been present for `away_after` (or at once for a
//!   request that needs several people's approval, which the desk alone cannot
//!   give), the channels that reach you away from the desk (Web Push, Telegram);
//! - **teammate**: `teammate_after` after it was asked, whoever is present, the
//!   teammate's chat;
//! - **deadline**: with `at_deadline = "deny"`, an approval still unanswered is
//!   denied a moment before its asker's deadline, so the asker hears the denial
//!   rather than its own timeout.
//!
//! The ladder decides; the channels act. Each step is announced as
//! [`Change::Reached`] naming who it reaches, and each channel sends when it is
//! named; each step goes into the request's trail. Its time is a [`Clock`]: tokio's,
//! or one a test moves by hand.

use std::{collections::HashMap, sync::Arc, time::Duration};

use serde_json::json;
use tokio::sync::{broadcast::error::RecvError, watch};

use super::{BrokerHandle, Change, PendingRequest};
use crate::{
    config::{AtDeadline, EscalationSettings, Ladder},
    protocol::Reply,
    store::TrailStep,
};

/// Who a request's answer is credited to when the ladder gives its safe default.
pub const LADDER_RESPONDER: &str = "escalation";

/// How long before its asker's deadline the ladder denies an approval (at most a
/// quarter of its whole wait).
const DEADLINE_LEAD: Duration = Duration::from_secs(1);

/// A time on the ladder's clock, in milliseconds from its start (earlier ones are
/// negative: a request asked before the listener started).
type Ms = i64;

fn ms(d: Duration) -> Ms {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The ladder's time: tokio's, or a scripted one a test moves by hand.
#[derive(Clone)]
pub enum Clock {
    /// Tokio's clock, from when the ladder started.
    Real(tokio::time::Instant),
    /// The time its sender says, from zero.
    Scripted(watch::Receiver<Duration>),
}

impl Clock {
    /// Tokio's clock, from now.
    pub fn real() -> Clock {
        Clock::Real(tokio::time::Instant::now())
    }

    /// A clock at zero that moves only when the returned sender says.
    pub fn scripted() -> (watch::Sender<Duration>, Clock) {
        let (tx, rx) = watch::channel(Duration::ZERO);
        (tx, Clock::Scripted(rx))
    }

    fn now(&self) -> Ms {
        match self {
            Clock::Real(start) => ms(start.elapsed()),
            Clock::Scripted(rx) => ms(*rx.borrow()),
        }
    }

    /// Waits until `at` (for ever when `None`).
    async fn sleep_until(self, at: Option<Ms>) {
        let Some(at) = at else {
            return std::future::pending().await;
        };
        match self {
            Clock::Real(start) => {
                let at = Duration::from_millis(u64::try_from(at).unwrap_or_default());
                tokio::time::sleep_until(start + at).await;
            }
            Clock::Scripted(mut rx) => {
                while ms(*rx.borrow_and_update()) < at {
                    if rx.changed().await.is_err() {
                        return std::future::pending().await;
                    }
                }
            }
        }
    }
}

/// A step of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The channels named to reach a person whoever is present.
    AtOnce,
    /// Nobody is at the desk: the channels that reach you away from it.
    Away,
    /// Unanswered for long: a teammate.
    Teammate,
}

impl Step {
    /// Its name in the trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::AtOnce => "at once",
            Step::Away => "away",
            Step::Teammate => "teammate",
        }
    }
}

/// A request reached a step of the ladder.
#[derive(Debug, Clone)]
pub struct Reached {
    /// The request, as it is pending.
    pub pending: Arc<PendingRequest>,
    /// Which step.
    pub step: Step,
    /// Who it reaches now: channels (`push`, `telegram`) or teammates
    /// (`telegram:CHAT_ID`).
    pub reaches: Vec<String>,
}

impl Reached {
    /// Whether it reaches `who` (a channel's name, or a teammate).
    pub fn reaches(&self, who: &str) -> bool {
        self.reaches.iter().any(|r| r == who)
    }
}

/// Where one pending request is on its ladder.
struct Climb {
    pending: Arc<PendingRequest>,
    ladder: Ladder,
    /// When it was asked.
    asked: Ms,
    away_done: bool,
    teammate_done: bool,
    /// When the ladder gives its safe default, if it will.
    decide_at: Option<Ms>,
}

impl Climb {
    /// Follows `pending` from `now`, on the ladder's clock.
    fn new(pending: Arc<PendingRequest>, settings: &EscalationSettings, now: Ms) -> Climb {
        let r = &pending.request;
        let ladder = settings.ladder(r.priority);
        let wall = jiff::Timestamp::now();
        let asked = now - wall.duration_since(r.timestamp).as_millis() as Ms;
        let decide_at = match ladder.at_deadline {
            AtDeadline::Deny if r.kind.is_approval() => r.deadline().map(|d| {
                let left = d.duration_since(wall).as_millis() as Ms;
                let whole = r.timeout.map_or(left, |t| ms(Duration::from_secs(t)));
                now + left - ms(DEADLINE_LEAD).min(whole / 4)
            }),
            _ => None,
        };
        Climb {
            pending,
            ladder,
            asked,
            away_done: false,
            teammate_done: false,
            decide_at,
        }
    }

    /// When it reaches the away step: `away_after` after it was asked or nobody was
    /// left, whichever is later; `None` while someone is present. A request that
    /// needs several people's approval goes at once.
    fn away_at(&self, nobody_since: Option<Ms>) -> Option<Ms> {
        if self.away_done {
            return None;
        }
        if self.pending.request.approvals_needed() > 1 {
            return Some(self.asked);
        }
        Some(self.asked.max(nobody_since?) + ms(self.ladder.away_after))
    }

    fn teammate_at(&self) -> Option<Ms> {
        if self.teammate_done || self.ladder.teammate.is_empty() {
            return None;
        }
        Some(self.asked + ms(self.ladder.teammate_after?))
    }

    /// The next time something is due for it.
    fn next(&self, nobody_since: Option<Ms>) -> Option<Ms> {
        [
            self.away_at(nobody_since),
            self.teammate_at(),
            self.decide_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// Starts the ladder over `broker`'s requests, on `clock`. `away` names the
/// channels that run (`push`, `telegram`): the away step reaches those. Start it
/// after the channels, so that none misses a step.
pub fn start(
    broker: &BrokerHandle,
    settings: EscalationSettings,
    away: Vec<String>,
    clock: Clock,
) -> tokio::task::JoinHandle<()> {
    let mut changes = broker.subscribe();
    let broker = broker.clone();
    tokio::spawn(async move {
        let mut presence = broker.presence().watch();
        let mut nobody_since = presence.borrow_and_update().is_empty().then(|| clock.now());
        let mut climbs: HashMap<u64, Climb> = HashMap::new();
        for p in broker.pending().await {
            take(&broker, &settings, &mut climbs, p, clock.now());
        }
        loop {
            step_due(&broker, &away, &mut climbs, nobody_since, clock.now()).await;
            let next = climbs.values().filter_map(|c| c.next(nobody_since)).min();
            tokio::select! {
                change = changes.recv() => match change {
                    Ok(Change::Queued(p)) => take(&broker, &settings, &mut climbs, p, clock.now()),
                    Ok(Change::Updated(p)) => {
                        if let Some(c) = climbs.get_mut(&p.seq) {
                            c.pending = p;
                        }
                    }
                    Ok(Change::Finished(f)) => {
                        climbs.remove(&f.seq());
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!("escalation: {n} changes of the queue went by; reading it again");
                        let pending = broker.pending().await;
                        climbs.retain(|seq, _| pending.iter().any(|p| p.seq == *seq));
                        for p in pending {
                            take(&broker, &settings, &mut climbs, p, clock.now());
                        }
                    }
                    Err(RecvError::Closed) => return,
                },
                seen = presence.changed() => {
                    if seen.is_err() {
                        return;
                    }
                    let nobody = presence.borrow_and_update().is_empty();
                    nobody_since = match (nobody, nobody_since) {
                        (true, Some(since)) => Some(since),
                        (true, None) => Some(clock.now()),
                        (false, _) => None,
                    };
                }
                () = clock.clone().sleep_until(next) => {}
            }
        }
    })
}

/// Starts following `p` (once), and announces the channels it reaches at once.
fn take(
    broker: &BrokerHandle,
    settings: &EscalationSettings,
    climbs: &mut HashMap<u64, Climb>,
    p: Arc<PendingRequest>,
    now: Ms,
) {
    if climbs.contains_key(&p.seq) {
        return;
    }
    let climb = Climb::new(p, settings, now);
    if !climb.ladder.at_once.is_empty() {
        reach(
            broker,
            &climb.pending,
            Step::AtOnce,
            climb.ladder.at_once.clone(),
        );
    }
    climbs.insert(climb.pending.seq, climb);
}

/// Takes every request whose step is due up it.
async fn step_due(
    broker: &BrokerHandle,
    away: &[String],
    climbs: &mut HashMap<u64, Climb>,
    nobody_since: Option<Ms>,
    now: Ms,
) {
    let mut decide = Vec::new();
    for c in climbs.values_mut() {
        if c.away_at(nobody_since).is_some_and(|t| t <= now) {
            c.away_done = true;
            if !away.is_empty() {
                reach(broker, &c.pending, Step::Away, away.to_vec());
            }
        }
        if c.teammate_at().is_some_and(|t| t <= now) {
            c.teammate_done = true;
            reach(
                broker,
                &c.pending,
                Step::Teammate,
                c.ladder.teammate.clone(),
            );
        }
        if c.decide_at.is_some_and(|t| t <= now) {
            c.decide_at = None;
            decide.push(c.pending.clone());
        }
    }
    for p in decide {
        deny_at_deadline(broker, &p).await;
    }
}

/// Announces that `p` reached `step`, and notes it in its trail.
fn reach(broker: &BrokerHandle, p: &Arc<PendingRequest>, step: Step, reaches: Vec<String>) {
    broker.note_trail(TrailStep::now(
        &p.request.id,
        "escalated",
        "ladder",
        json!({ "step": step.as_str(), "reaches": reaches }),
    ));
    broker.announce(Change::Reached(Arc::new(Reached {
        pending: p.clone(),
        step,
        reaches,
    })));
}

/// Gives `p` its safe default: a denial, said to be the ladder's.
async fn deny_at_deadline(broker: &BrokerHandle, p: &PendingRequest) {
    let reply = Reply::Approval {
        approved: false,
        comment: Some(
            "nobody answered by its deadline: denied, the escalation ladder's safe default".into(),
        ),
        remember: None,
    };
    match broker.respond(p.seq, reply, LADDER_RESPONDER).await {
        Ok(_) => broker.note_trail(TrailStep::now(
            &p.request.id,
            "escalated",
            "ladder",
            json!({ "step": "deadline", "outcome": "denied" }),
        )),
        // Answered or withdrawn meanwhile: nothing to decide.
        Err(e) => tracing::debug!(
            "escalation: {} not denied at its deadline: {e}",
            p.request.id
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Kind, Priority, Request};

    fn pending(kind: Kind, priority: Priority, timeout: Option<u64>) -> Arc<PendingRequest> {
        let mut request = Request::new("a", "agent", kind, "q");
        request.priority = priority;
        request.timeout = timeout;
        Arc::new(PendingRequest::for_test(1, request))
    }

    #[test]
    fn each_priority_has_its_own_times() {
        let settings: EscalationSettings = toml::from_str(
            "away_after = 60\nteammate_after = 600\nteammate = [\"telegram:-5\"]\n\
             [urgent]\naway_after = 0\nteammate_after = 30\n",
        )
        .unwrap();
        let normal = Climb::new(pending(Kind::Text, Priority::Normal, None), &settings, 0);
        let urgent = Climb::new(pending(Kind::Text, Priority::Urgent, None), &settings, 0);
        assert!((-50..=0).contains(&normal.asked), "{}", normal.asked);
        assert_eq!(normal.away_at(None), None, "someone is present");
        let left = normal.asked - 5_000;
        assert_eq!(normal.away_at(Some(left)), Some(normal.asked + 60_000));
        let later = normal.asked + 5_000;
        assert_eq!(normal.away_at(Some(later)), Some(later + 60_000));
        assert_eq!(urgent.away_at(Some(left)), Some(urgent.asked));
        assert_eq!(normal.teammate_at(), Some(normal.asked + 600_000));
        assert_eq!(urgent.teammate_at(), Some(urgent.asked + 30_000));
        assert_eq!(normal.decide_at, None, "at_deadline is none");
    }

    #[test]
    fn only_approvals_with_a_deadline_are_decided_a_moment_before_it() {
        let settings: EscalationSettings = toml::from_str("at_deadline = \"deny\"").unwrap();
        let approval = Climb::new(
            pending(Kind::Approval, Priority::Normal, Some(10)),
            &settings,
            0,
        );
        let at = approval.decide_at.unwrap() - approval.asked;
        assert!((8_950..=9_000).contains(&at), "{at}");
        let short = Climb::new(
            pending(Kind::Permission, Priority::Normal, Some(2)),
            &settings,
            0,
        );
        let at = short.decide_at.unwrap() - short.asked;
        assert!((1_450..=1_500).contains(&at), "{at}");
        for (kind, timeout) in [(Kind::Text, Some(10)), (Kind::Approval, None)] {
            let climb = Climb::new(pending(kind, Priority::Normal, timeout), &settings, 0);
            assert_eq!(climb.decide_at, None);
        }
    }
}
