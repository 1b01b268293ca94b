//! Where `tracing`'s events go.
//!
//! The daemons (`listen`, `serve`, `mcp`), and any command run with `HITL_LOG` set,
//! get tracing-subscriber's formatter with its filter. Every other `hitl` process
//! lives a few milliseconds and says what it has to say on stderr itself; setting up
//! that formatter was an eighth of such a start (a hook on every tool call pays it),
//! so those get [`Warnings`]: warnings and errors, one line each, nothing to set up.

use std::fmt::Write as _;

use tracing::{
    Event, Level, Metadata, Subscriber,
    field::{Field, Visit},
    span,
    subscriber::Interest,
};

/// Sets up logging for a process that runs `command` (`hitl COMMAND …`).
pub fn init(command: Option<&std::ffi::OsStr>) {
    let long_lived = command.is_some_and(|c| c == "listen" || c == "serve" || c == "mcp");
    if long_lived || std::env::var_os("HITL_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            // Colour codes only for a terminal: logs piped to a file or a supervisor
            // stay text.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_env("HITL_LOG")
                    .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
            )
            .init();
    } else {
        let _ = tracing::subscriber::set_global_default(Warnings);
    }
}

/// Warnings and errors on stderr, `hitl: warning: …`; nothing else is even built.
pub struct Warnings;

impl Subscriber for Warnings {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.is_event() && *meta.level() <= Level::WARN
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::WARN)
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = String::new();
        event.record(&mut Line(&mut line));
        let level = if *event.metadata().level() == Level::ERROR {
            "error"
        } else {
            "warning"
        };
        eprintln!("hitl: {level}: {line}");
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// An event's fields as one line: the message, then `name=value` for the rest.
struct Line<'a>(&'a mut String);

impl Visit for Line<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            self.0.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }
}
