//! Every pending request the broker holds, and the one place that changes them: by
//! sequence number, in answering order ([`Queue`]), and by deadline. The rest of the
//! broker reads entries freely but changes them only through these methods, so an
//! entry, its place in the queue and its deadline never disagree.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use jiff::Timestamp;

use super::{PendingRequest, Place, Queue, QueueKey, spool::SpoolPlace};

/// A pending request as the broker holds it.
pub(super) struct Entry {
    /// What responders see.
    pub pending: Arc<PendingRequest>,
    /// Where it lives, and so its way back.
    pub place: Place,
    queue_key: QueueKey,
    /// When the broker times it out.
    pub deadline: Option<Timestamp>,
    /// An answer is being delivered; nothing else may end this request meanwhile.
    pub answering: bool,
}

impl Entry {
    /// Its question file, if it is a spool question.
    pub fn spool(&self) -> Option<&SpoolPlace> {
        match &self.place {
            Place::Spool(s) => Some(s),
            Place::Stored(_) => None,
        }
    }
}

/// The pending requests.
pub(super) struct Requests {
    entries: HashMap<u64, Entry>,
    queue: Queue,
    deadlines: BTreeSet<(Timestamp, u64)>,
    next_seq: u64,
}

impl Requests {
    pub fn new() -> Requests {
        Requests {
            entries: HashMap::new(),
            queue: Queue::default(),
            deadlines: BTreeSet::new(),
            next_seq: 1,
        }
    }

    /// Adds the request `make` builds with its new sequence number, living at
    /// `place`, timed out at `deadline`.
    pub fn add(
        &mut self,
        make: impl FnOnce(u64) -> PendingRequest,
        place: Place,
        deadline: Option<Timestamp>,
    ) -> Arc<PendingRequest> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let pending = Arc::new(make(seq));
        let r = &pending.request;
        let queue_key = Queue::key(r.priority, r.timestamp, seq);
        self.queue.insert(queue_key);
        if let Some(d) = deadline {
            self.deadlines.insert((d, seq));
        }
        let entry = Entry {
            pending: pending.clone(),
            place,
            queue_key,
            deadline,
            answering: false,
        };
        self.entries.insert(seq, entry);
        pending
    }

    /// Takes a request out for good.
    pub fn remove(&mut self, seq: u64) -> Option<Entry> {
        let entry = self.entries.remove(&seq)?;
        self.queue.remove(&entry.queue_key);
        if let Some(d) = entry.deadline {
            self.deadlines.remove(&(d, seq));
        }
        Some(entry)
    }

    pub fn get(&self, seq: u64) -> Option<&Entry> {
        self.entries.get(&seq)
    }

    /// Every entry, in no order.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// Every entry, in answering order.
    pub fn in_order(&self) -> impl Iterator<Item = &Entry> {
        self.queue.iter().filter_map(|seq| self.entries.get(&seq))
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Marks an answer as being delivered to `seq`, and returns it.
    pub fn begin_answer(&mut self, seq: u64) -> Option<&Entry> {
        let entry = self.entries.get_mut(&seq)?;
        entry.answering = true;
        Some(entry)
    }

    /// An answer could not be delivered: `seq` may be answered again.
    pub fn answer_failed(&mut self, seq: u64) {
        if let Some(entry) = self.entries.get_mut(&seq) {
            entry.answering = false;
        }
    }

    /// Times `seq` out at `deadline` instead (`None`: never).
    pub fn set_deadline(&mut self, seq: u64, deadline: Option<Timestamp>) {
        let Some(entry) = self.entries.get_mut(&seq) else {
            return;
        };
        if let Some(d) = entry.deadline.take() {
            self.deadlines.remove(&(d, seq));
        }
        entry.deadline = deadline;
        if let Some(d) = deadline {
            self.deadlines.insert((d, seq));
        }
    }

    /// The requests whose deadline has come by `now`.
    pub fn due(&self, now: Timestamp) -> Vec<u64> {
        self.deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, seq)| *seq)
            .collect()
    }

    /// Replaces what responders see of `seq` by `change`d copy, and returns it.
    pub fn change_view(
        &mut self,
        seq: u64,
        change: impl FnOnce(&mut PendingRequest),
    ) -> Option<Arc<PendingRequest>> {
        let entry = self.entries.get_mut(&seq)?;
        let mut p = PendingRequest::clone(&entry.pending);
        change(&mut p);
        entry.pending = Arc::new(p);
        Some(entry.pending.clone())
    }
}
