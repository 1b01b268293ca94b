//! Mailboxes (seed 003): plugin agents working in parallel in a run folder exchange
//! one request and one result at a time through `inbox/` and `outbox/`, and ask the
//! user through `question` and `answer` files. `keyvalue` reads and writes those
//! KEY=VALUE files.

pub mod keyvalue;
