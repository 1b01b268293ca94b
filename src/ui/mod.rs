//! Responders: the ways a human (or a test) answers. Each one is an adapter over a
//! [`crate::broker::BrokerHandle`]; none of them touches the spool or another UI.

pub mod dialog;
pub mod notify;
pub mod telegram;
pub mod terminal;
pub mod tui;
pub mod webhooks;

/// What a responder is started with: the broker to answer through, and what a UI
/// shows besides the queue (history and the activity feed from the store, the task
/// runner's sessions and tasks).
#[derive(Clone)]
pub struct ResponderContext {
    /// The broker.
    pub broker: crate::broker::BrokerHandle,
    /// The store, for reads.
    pub store: crate::store::Store,
    /// The task runner, when tasks run here.
    pub tasks: Option<crate::tasks::runner::TaskHandle>,
    /// Mints a one-time link that logs a browser into the web dashboard, when this
    /// daemon serves HTTP.
    pub login_link: Option<LoginLink>,
}

/// A maker of one-time dashboard login links (the HTTP server's, handed to UIs
/// that show one).
pub type LoginLink = std::sync::Arc<dyn Fn() -> String + Send + Sync>;
