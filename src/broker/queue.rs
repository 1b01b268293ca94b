//! Queue order: urgent before high before normal, then oldest first, then arrival order.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use jiff::Timestamp;

use crate::protocol::Priority;

/// A request's place in the queue. Sorting ascending gives answering order.
pub type QueueKey = (Reverse<Priority>, Timestamp, u64);

/// Pending requests in answering order, by their broker sequence numbers.
#[derive(Debug, Default)]
pub struct Queue {
    order: BTreeSet<QueueKey>,
}

impl Queue {
    /// The key of a request.
    pub fn key(priority: Priority, asked: Timestamp, seq: u64) -> QueueKey {
        (Reverse(priority), asked, seq)
    }

    /// Adds a request.
    pub fn insert(&mut self, key: QueueKey) {
        self.order.insert(key);
    }

    /// Removes a request.
    pub fn remove(&mut self, key: &QueueKey) {
        self.order.remove(key);
    }

    /// Sequence numbers in answering order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.iter().map(|k| k.2)
    }

    /// How many are pending.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgent_first_then_oldest() {
        let t = |s| Timestamp::from_second(s).unwrap();
        let mut q = Queue::default();
        q.insert(Queue::key(Priority::Normal, t(1), 1));
        q.insert(Queue::key(Priority::Urgent, t(5), 2));
        q.insert(Queue::key(Priority::High, t(3), 3));
        q.insert(Queue::key(Priority::High, t(2), 4));
        q.insert(Queue::key(Priority::Normal, t(1), 0));
        assert_eq!(q.iter().collect::<Vec<_>>(), vec![2, 4, 3, 0, 1]);
        q.remove(&Queue::key(Priority::Urgent, t(5), 2));
        assert_eq!(q.iter().next(), Some(4));
        assert_eq!(q.len(), 4);
    }
}
