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

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn prio() -> impl Strategy<Value = Priority> {
            prop_oneof![
                Just(Priority::Normal),
                Just(Priority::High),
                Just(Priority::Urgent)
            ]
        }

        proptest! {
            /// Whatever arrives in whatever order, the queue yields the most urgent
            /// first, then the oldest, then the first to arrive.
            #[test]
            fn order_is_urgency_then_age(items in proptest::collection::vec((prio(), 0i64..50), 0..60)) {
                let mut q = Queue::default();
                for (seq, (p, t)) in items.iter().enumerate() {
                    q.insert(Queue::key(*p, Timestamp::from_second(*t).unwrap(), seq as u64));
                }
                let got: Vec<u64> = q.iter().collect();
                let mut want: Vec<u64> = (0..items.len() as u64).collect();
                want.sort_by_key(|&s| {
                    let (p, t) = items[s as usize];
                    (Reverse(p), t, s)
                });
                prop_assert_eq!(got, want);
            }
        }
    }
}
