//! Desktop notifications: a new request is announced on the desktop (freedesktop
//! notifications over D-Bus; macOS's notification centre), saying which agent needs
//! what, the request's priority as the urgency, and, where the notification server
//! offers actions, a button that opens the dashboard at the request. On by default
//! where a desktop session is (`hitl listen --no-notify` turns it off); a machine
//! without one (a server, CI) gets none and says nothing.

use tokio::sync::broadcast::error::RecvError;

use super::ResponderContext;
use crate::{
    broker::{Change, PendingRequest},
    protocol::{Priority, text::visible_line},
};

/// Whether a desktop session is there to notify.
pub fn available() -> bool {
    if cfg!(target_os = "macos") {
        return true;
    }
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR")
            .is_some_and(|d| std::path::Path::new(&d).join("bus").exists())
}

/// The notification's title and text for `p`.
pub fn text_of(p: &PendingRequest) -> (String, String) {
    let r = &p.request;
    let title = format!("{} asks ({})", visible_line(&r.agent_name), r.kind);
    let mut body: String = visible_line(&r.content).chars().take(300).collect();
    if !r.options.is_empty() {
        let options: Vec<String> = r
            .options
            .iter()
            .take(5)
            .enumerate()
            .map(|(i, o)| format!("{}. {}", i + 1, visible_line(o)))
            .collect();
        body.push('\n');
        body.push_str(&options.join("  "));
    }
    (title, body)
}

/// Follows the broker, notifying each new request; `dashboard`: its address, for
/// the action that opens it.
pub fn start(context: ResponderContext, dashboard: Option<String>) -> tokio::task::JoinHandle<()> {
    let mut changes = context.broker.subscribe();
    tokio::spawn(async move {
        // Whether the server shows buttons (asked once).
        let actions = tokio::task::spawn_blocking(|| {
            notify_rust::get_capabilities()
                .map(|c| c.iter().any(|c| c == "actions"))
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        loop {
            match changes.recv().await {
                Ok(Change::Queued(p)) => {
                    let link = dashboard
                        .as_ref()
                        .filter(|_| actions)
                        .map(|d| format!("{d}/#request={}", p.request.id));
                    let broker = context.broker.clone();
                    tokio::task::spawn_blocking(move || show(&broker, &p, link));
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    })
}

/// Shows the notification of `p` (and waits for its button, if it has one); how it
/// went goes into its trail.
fn show(broker: &crate::broker::BrokerHandle, p: &PendingRequest, link: Option<String>) {
    let record = |outcome: Result<(), &str>| {
        broker.note_trail(crate::store::TrailStep::notified(
            &p.request.id,
            "desktop",
            "this desktop",
            outcome,
            serde_json::Value::Null,
        ));
    };
    let (title, body) = text_of(p);
    let mut n = notify_rust::Notification::new();
    n.appname("hitl").summary(&title).body(&body);
    #[cfg(all(unix, not(target_os = "macos")))]
    {
        n.urgency(match p.request.priority {
            Priority::Urgent => notify_rust::Urgency::Critical,
            Priority::High => notify_rust::Urgency::Normal,
            Priority::Normal => notify_rust::Urgency::Low,
        });
        if link.is_some() {
            n.action("default", "Answer in hitl");
        }
    }
    #[cfg(target_os = "macos")]
    let _ = (&link, Priority::Normal);
    match n.show() {
        Ok(_handle) => {
            record(Ok(()));
            #[cfg(all(unix, not(target_os = "macos")))]
            if let Some(link) = link {
                _handle.wait_for_action(|action| {
                    if action == "default" {
                        let _ = std::process::Command::new("xdg-open")
                            .arg(&link)
                            .stdin(std::process::Stdio::null())
                            .stdout(std::process::Stdio::null())
                            .stderr(std::process::Stdio::null())
                            .spawn();
                    }
                });
            }
        }
        Err(e) => {
            tracing::debug!("notifications: {e}");
            record(Err(&e.to_string()));
        }
    }
}
