//! Responders: the ways a human (or a test) answers. Each one is an adapter over a
//! [`crate::broker::BrokerHandle`]; none of them touches the spool or another UI.

pub mod chat;
pub mod dialog;
pub mod notify;
pub mod slack;
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

/// Takes `name` (`telegram.lock`, `slack.lock`) in `config_dir` for this process,
/// held while the returned lock lives: `None` when another of the user's listeners
/// holds it. A chat's bot is run by one listener of the user: a Telegram bot's
/// updates go to one poller, and Slack spreads a Socket Mode app's presses over
/// every connection it holds.
pub fn take_channel(
    config_dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    use anyhow::Context;
    std::fs::create_dir_all(config_dir)
        .with_context(|| format!("making {}", config_dir.display()))?;
    let path = config_dir.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(anyhow::anyhow!("locking {}: {e}", path.display())),
    }
}
