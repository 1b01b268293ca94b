//! Wire types shared by every transport: the canonical v1 question ([`Request`]) and
//! answer ([`Answer`]), and the readers for the older file formats agents already speak.
//!
//! This module owns *shapes*, not behaviour: it never touches the file system or the
//! broker. Parsing is total — any byte string yields either a request or a
//! [`ParseError`] that says what is wrong — because questions arrive from untrusted
//! scripts and a bad one must never take the broker down.

pub mod activity;
pub mod form;
mod id;
mod kind;
pub(crate) mod lenient;
mod origin;
mod request;
mod status;
pub mod text;
mod time;
mod variant;

pub use form::{FormOption, FormQuestion};
pub use id::{IdError, id_from, is_valid_id, short_id, validate_id};
pub use kind::{AnswerShape, Kind};
pub use origin::Origin;
/// The schemas of request fields that their types alone do not say, for every body that asks.
pub(crate) use request::body_schema;
pub use request::{
    Answer, AnswerStatus, Asker, CREATED_BY_USER, OTHER_USER_MAX_TIMEOUT_SECS, Priority, Reply,
    Request,
};
pub use status::Status;
pub use time::{now, parse_timestamp};
pub(crate) use variant::type_name as json_type_name;
pub use variant::{ParseError, ParsedQuestion, Variant, parse_question, parse_question_at};

/// Questions bigger than this many bytes are refused unless `[listen]
/// max_question_bytes` says otherwise.
pub const DEFAULT_MAX_QUESTION_BYTES: u64 = 1 << 20;

/// The longest a request may wait for its answer, in seconds (a week; 0 waits for
/// ever). Longer is almost surely a mistake, and deadlines far out overflow clocks.
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// Version written into every file and message this program produces.
pub const VERSION: u32 = 1;
