//! Which key does what, by mode. `?` in the TUI shows [`HELP`], which says the
//! same; a test keeps the two in step.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::app::{Action, Answering, Draft, Mode};

/// The keys, as the help screen lists them: (keys, what they do).
pub const HELP: &[(&str, &str)] = &[
    ("j k ↑ ↓", "select the next or previous request (row)"),
    ("g G Home End", "the first or last"),
    (
        "Tab Shift-Tab",
        "next or previous view: inbox, agents, tasks, history, activity",
    ),
    ("Enter", "answer the selected request"),
    ("1-9", "pick that option (multi-select: tick it)"),
    ("y n", "yes or no"),
    ("a d", "approve or deny (a comment may follow; Enter sends)"),
    ("A", "approve and always allow calls like it here"),
    ("x", "decline to answer (a reason may follow; Enter sends)"),
    ("Space", "tick or untick the option under the cursor"),
    ("Alt-Enter Ctrl-J", "a new line in a text answer"),
    ("Esc", "back (clears the filter)"),
    ("/", "filter by agent, question, kind or label"),
    ("w", "a one-time login link for the web dashboard"),
    ("?", "these keys"),
    ("q", "stop hitl listen (asked first)"),
];

/// What `key` does in `mode`; `None`: nothing.
pub fn action(mode: &Mode, key: KeyEvent) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    match mode {
        Mode::Help | Mode::Web(_) => Some(Action::Back),
        Mode::Quit => Some(match key.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Action::ConfirmQuit,
            _ => Action::Back,
        }),
        Mode::Filter => editing(key, ctrl, false),
        Mode::Answer(Answering { draft, .. }) => match (draft, key.code) {
            (Draft::Choice { .. }, KeyCode::Char(' ')) => Some(Action::Toggle),
            (Draft::Choice { .. }, KeyCode::Up | KeyCode::Char('k')) => Some(Action::Move(-1)),
            (Draft::Choice { .. }, KeyCode::Down | KeyCode::Char('j')) => Some(Action::Move(1)),
            (Draft::Text(_), KeyCode::Enter) if alt => Some(Action::NewLine),
            (Draft::Text(_), KeyCode::Char('j')) if ctrl => Some(Action::NewLine),
            _ => editing(key, ctrl, true),
        },
        Mode::Browse => browsing(key, ctrl),
    }
}

/// A key in an editor (the filter, an answer).
fn editing(key: KeyEvent, ctrl: bool, answer: bool) -> Option<Action> {
    Some(match key.code {
        KeyCode::Esc => Action::Back,
        KeyCode::Enter => Action::Submit,
        KeyCode::Backspace => Action::Backspace,
        KeyCode::Left => Action::Cursor(-1),
        KeyCode::Right => Action::Cursor(1),
        KeyCode::Home => Action::HomeEnd(false),
        KeyCode::End => Action::HomeEnd(true),
        KeyCode::Up if answer => Action::Move(-1),
        KeyCode::Down if answer => Action::Move(1),
        KeyCode::Char('c') if ctrl => Action::Back,
        KeyCode::Char('a') if ctrl => Action::HomeEnd(false),
        KeyCode::Char('e') if ctrl => Action::HomeEnd(true),
        KeyCode::Char(c) if !ctrl => Action::Type(c),
        _ => return None,
    })
}

/// A key while moving around.
fn browsing(key: KeyEvent, ctrl: bool) -> Option<Action> {
    Some(match key.code {
        KeyCode::Char('c') if ctrl => Action::Quit,
        _ if ctrl => return None,
        KeyCode::Down | KeyCode::Char('j') => Action::Move(1),
        KeyCode::Up | KeyCode::Char('k') => Action::Move(-1),
        KeyCode::PageDown => Action::Move(10),
        KeyCode::PageUp => Action::Move(-10),
        KeyCode::Home | KeyCode::Char('g') => Action::Jump { last: false },
        KeyCode::End | KeyCode::Char('G') => Action::Jump { last: true },
        KeyCode::Tab => Action::NextView(true),
        KeyCode::BackTab => Action::NextView(false),
        KeyCode::Enter => Action::Open,
        KeyCode::Esc => Action::Back,
        KeyCode::Char('/') => Action::Filter,
        KeyCode::Char('?') => Action::Help,
        KeyCode::Char('w') => Action::WebLink,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('x') => Action::Decline,
        KeyCode::Char(c @ ('y' | 'n' | 'a' | 'd' | 'A' | '1'..='9')) => Action::Quick(c),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::tui::app::Editor;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn browsing_keys_move_switch_and_answer() {
        let m = Mode::Browse;
        assert_eq!(action(&m, key(KeyCode::Char('j'))), Some(Action::Move(1)));
        assert_eq!(action(&m, key(KeyCode::Up)), Some(Action::Move(-1)));
        assert_eq!(action(&m, key(KeyCode::Tab)), Some(Action::NextView(true)));
        assert_eq!(
            action(&m, key(KeyCode::BackTab)),
            Some(Action::NextView(false))
        );
        assert_eq!(
            action(&m, key(KeyCode::Char('3'))),
            Some(Action::Quick('3'))
        );
        assert_eq!(
            action(&m, key(KeyCode::Char('A'))),
            Some(Action::Quick('A'))
        );
        assert_eq!(action(&m, key(KeyCode::Enter)), Some(Action::Open));
        assert_eq!(action(&m, key(KeyCode::Char('/'))), Some(Action::Filter));
        assert_eq!(action(&m, key(KeyCode::Char('z'))), None);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(action(&m, ctrl_c), Some(Action::Quit));
    }

    #[test]
    fn in_an_answer_keys_type_and_space_ticks_options() {
        let text = Mode::Answer(Answering {
            id: "1".into(),
            draft: Draft::Text(Editor::default()),
            error: None,
        });
        assert_eq!(
            action(&text, key(KeyCode::Char('j'))),
            Some(Action::Type('j'))
        );
        assert_eq!(
            action(&text, key(KeyCode::Char(' '))),
            Some(Action::Type(' '))
        );
        let alt_enter = KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT);
        assert_eq!(action(&text, alt_enter), Some(Action::NewLine));
        assert_eq!(action(&text, key(KeyCode::Enter)), Some(Action::Submit));
        assert_eq!(action(&text, key(KeyCode::Esc)), Some(Action::Back));
        let choice = Mode::Answer(Answering {
            id: "1".into(),
            draft: Draft::Choice {
                cursor: 0,
                picked: vec![false; 3],
            },
            error: None,
        });
        assert_eq!(
            action(&choice, key(KeyCode::Char(' '))),
            Some(Action::Toggle)
        );
        assert_eq!(action(&choice, key(KeyCode::Down)), Some(Action::Move(1)));
        assert_eq!(
            action(&choice, key(KeyCode::Char('2'))),
            Some(Action::Type('2'))
        );
        assert_eq!(
            action(&Mode::Quit, key(KeyCode::Char('y'))),
            Some(Action::ConfirmQuit)
        );
        assert_eq!(
            action(&Mode::Quit, key(KeyCode::Char('n'))),
            Some(Action::Back)
        );
    }
}
