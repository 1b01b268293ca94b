//! Keeps a broker in step with the others that share its store.
//!
//! Requests made over HTTP live in the store, and any broker using that store may
//! answer them: several `hitl serve` replicas on one PostgreSQL, or several
//! `hitl listen` on one user's SQLite file. Each broker queues what the others create
//! and drops what they end, handing the answer to its own waiters. On PostgreSQL the
//! others' changes arrive at once by LISTEN/NOTIFY; everywhere, a periodic resync
//! reads the store, which also repairs anything a dropped connection missed. The
//! store's conditional settle makes sure only one broker ever ends a request.

use std::{collections::HashSet, time::Duration};

use tokio::task::JoinHandle;

use crate::{
    broker::BrokerHandle,
    protocol::Status,
    store::{ReplicaChange, Store},
};

/// How often the queue is compared with the store.
const RESYNC_EVERY: Duration = Duration::from_secs(2);

/// Follows the other brokers until the broker stops.
pub fn spawn(store: Store, broker: BrokerHandle) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut follow = match store.follow_replicas().await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(
                    "{e:#}; other replicas' changes are picked up every {RESYNC_EVERY:?}"
                );
                None
            }
        };
        let mut tick = tokio::time::interval(RESYNC_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let change = tokio::select! {
                c = async {
                    match follow.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => match c {
                    Some(c) => c,
                    None => { follow = None; continue; }
                },
                _ = tick.tick() => ReplicaChange::Resync,
            };
            let result = match change {
                ReplicaChange::Created(id) => admit(&store, &broker, &id).await,
                ReplicaChange::Settled(id) => drop_ended(&store, &broker, &id).await,
                ReplicaChange::Resync => resync(&store, &broker).await,
            };
            if let Err(e) = result {
                tracing::warn!("keeping in step with the store: {e:#}");
            }
        }
    })
}

async fn admit(store: &Store, broker: &BrokerHandle, id: &str) -> anyhow::Result<()> {
    if let Some(r) = store.find_request(id).await?
        && r.stored
        && r.status == Status::Pending
        && let Some(event_id) = r.event_id()
    {
        broker.admit_stored(r.request, event_id);
    }
    Ok(())
}

/// Admits a request the resync found, unless it is so new that the broker that made
/// it may not have queued it yet (the request's own broker queues it; a notice or the
/// next resync brings it here otherwise).
async fn admit_settled(store: &Store, broker: &BrokerHandle, id: &str) -> anyhow::Result<()> {
    if let Some(r) = store.find_request(id).await?
        && r.stored
        && r.status == Status::Pending
    {
        let age = jiff::Timestamp::now().duration_since(r.request.timestamp);
        if age < jiff::SignedDuration::try_from(RESYNC_EVERY)? {
            return Ok(());
        }
        if let Some(event_id) = r.event_id() {
            broker.admit_stored(r.request, event_id);
        }
    }
    Ok(())
}

async fn drop_ended(store: &Store, broker: &BrokerHandle, id: &str) -> anyhow::Result<()> {
    if let Some(r) = store.find_request(id).await?
        && r.stored
        && r.status != Status::Pending
    {
        broker.ended_elsewhere(id.to_string(), r.status, r.answer, r.reason);
    }
    Ok(())
}

async fn resync(store: &Store, broker: &BrokerHandle) -> anyhow::Result<()> {
    // The store first: a request made here after this read is in the queue but not in
    // `pending`, and `drop_ended` sees it is still pending and leaves it.
    let pending: HashSet<String> = store.pending_remote_ids().await?.into_iter().collect();
    let queued: HashSet<String> = broker.stored_ids().await.into_iter().collect();
    for id in queued.difference(&pending) {
        drop_ended(store, broker, id).await?;
    }
    for id in pending.difference(&queued) {
        admit_settled(store, broker, id).await?;
    }
    Ok(())
}
