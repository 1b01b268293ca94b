//! The TUI's state and what each key does to it, with no terminal in sight: the
//! queue as the broker last said it, what is selected, what is being typed, the
//! notices of requests that left. `keys.rs` turns key presses into [`Action`]s,
//! [`App::act`] applies them and says what to send the broker; `draw.rs` draws it.

use std::{
    collections::VecDeque,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::{
    broker::PendingRequest,
    protocol::{AnswerShape, Reply, Status},
};

/// The views, in the order Tab goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Every pending request, most urgent first.
    Inbox,
    /// The agents: who asked, who works, who waits.
    Agents,
    /// Task sessions and their queues.
    Tasks,
    /// Requests that ended, newest first.
    History,
    /// The activity feed: hook events, task and mailbox events.
    Activity,
}

impl View {
    /// Every view, in tab order.
    pub const ALL: [View; 5] = [
        View::Inbox,
        View::Agents,
        View::Tasks,
        View::History,
        View::Activity,
    ];

    /// Its name on the tab line.
    pub fn title(self) -> &'static str {
        match self {
            View::Inbox => "Inbox",
            View::Agents => "Agents",
            View::Tasks => "Tasks",
            View::History => "History",
            View::Activity => "Activity",
        }
    }
}

/// A view's rows (agents, tasks, history, activity), as last read: cells of text,
/// drawn as a table under `header`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// The columns' names.
    pub header: Vec<String>,
    /// The rows, first shown first.
    pub rows: Vec<Vec<String>>,
    /// Said when there are no rows.
    pub empty: String,
}

/// A line of text being typed, with a cursor (a char index).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    /// The text.
    pub text: String,
    /// Where the cursor is, in chars.
    pub cursor: usize,
}

impl Editor {
    /// Inserts `c` at the cursor.
    pub fn insert(&mut self, c: char) {
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }
    /// Deletes the char before the cursor.
    pub fn backspace(&mut self) {
        if self.cursor == 0 {
            return;
        }
        let at = self.byte_at(self.cursor - 1);
        self.text.remove(at);
        self.cursor -= 1;
    }
    /// Moves the cursor by `by` chars.
    pub fn move_by(&mut self, by: isize) {
        let len = self.text.chars().count();
        self.cursor = self.cursor.saturating_add_signed(by).min(len);
    }
    /// Moves the cursor to the start or the end.
    pub fn home_end(&mut self, end: bool) {
        self.cursor = if end { self.text.chars().count() } else { 0 };
    }
    fn byte_at(&self, chars: usize) -> usize {
        self.text
            .char_indices()
            .nth(chars)
            .map_or(self.text.len(), |(i, _)| i)
    }
}

/// What is being answered, and how far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Draft {
    /// Text (or a number): Enter sends, Alt-Enter (or Ctrl-J) starts a new line.
    Text(Editor),
    /// Options, one (Enter sends the one under the cursor) or several (Space
    /// toggles, Enter sends those picked).
    Choice {
        /// Which option the cursor is on.
        cursor: usize,
        /// Which are picked (several only).
        picked: Vec<bool>,
    },
    /// An approval or a denial, with a comment typed before Enter sends it.
    Decision {
        /// Approve (true) or deny.
        approve: bool,
        /// Remember "always allow" (the rule the request offers).
        always: bool,
        /// The comment.
        comment: Editor,
    },
    /// A form: its questions one at a time, the answers so far kept.
    Form {
        /// The answers to the questions before this one.
        answers: Vec<String>,
        /// This question's answer being typed.
        editor: Editor,
    },
    /// Why it is declined: Enter cancels the request with this reason.
    Cancel(Editor),
}

/// The request being answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answering {
    /// Its id.
    pub id: String,
    /// What is typed.
    pub draft: Draft,
    /// Why the last try was not sent.
    pub error: Option<String>,
}

/// What the keys are doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Moving around, the single keys acting on the selected request.
    Browse,
    /// Answering one request.
    Answer(Answering),
    /// Typing the filter.
    Filter,
    /// The keys, shown.
    Help,
    /// A one-time dashboard login link, shown (`None`: this listener serves no HTTP).
    Web(Option<String>),
    /// Asking whether to stop the listener.
    Quit,
}

/// Something a key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Select the next (1) or previous (-1) request, or row.
    Move(isize),
    /// Select the first or the last.
    Jump {
        /// The last (else the first).
        last: bool,
    },
    /// The next (or previous) view.
    NextView(bool),
    /// Answer the selected request: its editor, options or decision.
    Open,
    /// A single-key answer on the selected request: `y`/`n`, an option's number
    /// (a multiselect toggles it), `a`/`d`/`A` for approvals.
    Quick(char),
    /// Decline the selected request (its reason typed next).
    Decline,
    /// A key typed into the open editor.
    Type(char),
    /// A new line in a text answer.
    NewLine,
    /// Backspace.
    Backspace,
    /// The cursor left (-1) or right (1), in an editor; up and down in options.
    Cursor(isize),
    /// Home (false) or End (true) in an editor.
    HomeEnd(bool),
    /// Space in options: toggle the one under the cursor.
    Toggle,
    /// Enter: send, or the next question of a form.
    Submit,
    /// Esc: back to browsing (or clear the filter).
    Back,
    /// `/`: type the filter.
    Filter,
    /// `?`: the keys.
    Help,
    /// `w`: a link that logs a browser into the web dashboard.
    WebLink,
    /// `q`: stop the listener (asked first).
    Quit,
    /// `y` to the question whether to stop.
    ConfirmQuit,
}

/// What the app asks of the outside after an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Nothing.
    None,
    /// Send `reply` to request `seq`.
    Respond {
        /// The broker's handle on it.
        seq: u64,
        /// Its id, for the notice.
        id: String,
        /// The reply.
        reply: Reply,
    },
    /// Stop the listener.
    Quit,
    /// Show a new dashboard login link ([`Mode::Web`]).
    ShowWebLink,
}

/// A request that left the queue, said for a few seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// What is said.
    pub text: String,
    /// Until when.
    pub until: Instant,
}

/// How long a notice stays.
pub const NOTICE_FOR: Duration = Duration::from_secs(6);
/// How long the inbox flashes on a new request.
pub const FLASH_FOR: Duration = Duration::from_millis(700);

/// The TUI's state.
#[derive(Debug)]
pub struct App {
    /// The pending requests in answering order, as the broker last said.
    pub requests: Vec<Arc<PendingRequest>>,
    /// The selected request's id (kept across changes of the queue).
    pub selected: Option<String>,
    /// The view shown.
    pub view: View,
    /// What the keys do.
    pub mode: Mode,
    /// The filter: requests whose agent, question, kind or labels contain it.
    pub filter: Editor,
    /// Requests that left meanwhile, and other news, newest last.
    pub notices: VecDeque<Notice>,
    /// Since when a new request flashes the inbox.
    pub flash: Option<Instant>,
    /// The selected row of a view other than the inbox.
    pub row: usize,
    /// The other views' rows: agents, tasks, history, activity.
    pub tables: std::collections::HashMap<&'static str, Table>,
}

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

impl App {
    /// An empty inbox.
    pub fn new() -> App {
        App {
            requests: Vec::new(),
            selected: None,
            view: View::Inbox,
            mode: Mode::Browse,
            filter: Editor::default(),
            notices: VecDeque::new(),
            flash: None,
            row: 0,
            tables: std::collections::HashMap::new(),
        }
    }

    /// The rows of `view` (not the inbox), as last read.
    pub fn table(&self, view: View) -> Option<&Table> {
        self.tables.get(view.title())
    }

    /// Sets the rows of `view`.
    pub fn set_table(&mut self, view: View, table: Table) {
        self.tables.insert(view.title(), table);
    }

    /// The requests the filter lets through, in answering order.
    pub fn visible(&self) -> Vec<&Arc<PendingRequest>> {
        let needle = self.filter.text.to_lowercase();
        self.requests
            .iter()
            .filter(|p| needle.is_empty() || matches(p, &needle))
            .collect()
    }

    /// The selected request (the first visible one when none is).
    pub fn current(&self) -> Option<&Arc<PendingRequest>> {
        let visible = self.visible();
        self.selected
            .as_deref()
            .and_then(|id| visible.iter().find(|p| p.request.id == id).copied())
            .or_else(|| visible.first().copied())
    }

    /// The queue as the broker says it now. A new request flashes; the one being
    /// answered, if it left, is let go.
    pub fn set_requests(&mut self, requests: Vec<Arc<PendingRequest>>, now: Instant) {
        let new = requests
            .iter()
            .any(|p| !self.requests.iter().any(|q| q.seq == p.seq));
        if new && !requests.is_empty() {
            self.flash = Some(now);
        }
        self.requests = requests;
        if let Mode::Answer(a) = &self.mode
            && !self.requests.iter().any(|p| p.request.id == a.id)
        {
            self.mode = Mode::Browse;
        }
        if self.current().is_none() {
            self.selected = None;
        } else if self.selected.is_none() {
            self.selected = self.current().map(|p| p.request.id.clone());
        }
    }

    /// Request `id` (its question `question`) left the queue: `status`, by whom.
    pub fn left(&mut self, question: &str, status: Status, by: Option<&str>, now: Instant) {
        let what = crate::protocol::text::visible_line(question);
        let short: String = what.chars().take(60).collect();
        let by = by.map(|b| format!(" by {b}")).unwrap_or_default();
        self.notify(format!("{}{by}: {short}", status.as_str()), now);
    }

    /// Says `text` for a few seconds.
    pub fn notify(&mut self, text: String, now: Instant) {
        self.notices.push_back(Notice {
            text,
            until: now + NOTICE_FOR,
        });
        while self.notices.len() > 3 {
            self.notices.pop_front();
        }
    }

    /// Forgets what is no longer to be said.
    pub fn expire(&mut self, now: Instant) {
        self.notices.retain(|n| n.until > now);
        if self
            .flash
            .is_some_and(|f| now.duration_since(f) > FLASH_FOR)
        {
            self.flash = None;
        }
    }

    /// Applies `action`; says what to send.
    pub fn act(&mut self, action: Action) -> Effect {
        match (&mut self.mode, action) {
            (Mode::Help | Mode::Web(_), _) => {
                self.mode = Mode::Browse;
                Effect::None
            }
            (Mode::Quit, Action::ConfirmQuit) => Effect::Quit,
            (Mode::Quit, _) => {
                self.mode = Mode::Browse;
                Effect::None
            }
            (Mode::Filter, action) => {
                match action {
                    Action::Type(c) => self.filter.insert(c),
                    Action::Backspace => self.filter.backspace(),
                    Action::Cursor(by) => self.filter.move_by(by),
                    Action::HomeEnd(end) => self.filter.home_end(end),
                    Action::Back => {
                        self.filter = Editor::default();
                        self.mode = Mode::Browse;
                    }
                    Action::Submit => self.mode = Mode::Browse,
                    _ => {}
                }
                self.selected = self.current().map(|p| p.request.id.clone());
                Effect::None
            }
            (Mode::Answer(_), action) => self.answering(action),
            (Mode::Browse, action) => self.browsing(action),
        }
    }

    fn browsing(&mut self, action: Action) -> Effect {
        match action {
            Action::Move(by) => {
                if self.view == View::Inbox {
                    self.move_selection(by);
                } else {
                    self.row = self.row.saturating_add_signed(by);
                }
            }
            Action::Jump { last } => {
                if self.view == View::Inbox {
                    let visible = self.visible();
                    let pick = if last {
                        visible.last()
                    } else {
                        visible.first()
                    };
                    self.selected = pick.map(|p| p.request.id.clone());
                } else {
                    self.row = if last { usize::MAX } else { 0 };
                }
            }
            Action::NextView(forward) => {
                let at = View::ALL.iter().position(|v| *v == self.view).unwrap_or(0);
                let n = View::ALL.len();
                self.view = View::ALL[if forward {
                    (at + 1) % n
                } else {
                    (at + n - 1) % n
                }];
                self.row = 0;
            }
            Action::Filter => self.mode = Mode::Filter,
            Action::Help => self.mode = Mode::Help,
            Action::WebLink => return Effect::ShowWebLink,
            Action::Quit => self.mode = Mode::Quit,
            Action::Back => {
                self.filter = Editor::default();
            }
            Action::Open | Action::Submit if self.view == View::Inbox => self.open(),
            Action::Decline if self.view == View::Inbox => {
                if let Some(p) = self.current() {
                    let id = p.request.id.clone();
                    self.mode = Mode::Answer(Answering {
                        id,
                        draft: Draft::Cancel(Editor::default()),
                        error: None,
                    });
                }
            }
            Action::Quick(c) if self.view == View::Inbox => return self.quick(c),
            _ => {}
        }
        Effect::None
    }

    fn move_selection(&mut self, by: isize) {
        let visible = self.visible();
        if visible.is_empty() {
            return;
        }
        let at = self
            .selected
            .as_deref()
            .and_then(|id| visible.iter().position(|p| p.request.id == id))
            .unwrap_or(0);
        let to = at.saturating_add_signed(by).min(visible.len() - 1);
        self.selected = Some(visible[to].request.id.clone());
    }

    /// Starts answering the selected request the way its answer is shaped.
    fn open(&mut self) {
        let Some(p) = self.current().cloned() else {
            return;
        };
        let draft = match &p.answer_shape {
            AnswerShape::Text { .. } => Draft::Text(Editor::default()),
            AnswerShape::Choice { options, many, .. } => Draft::Choice {
                cursor: 0,
                picked: if *many {
                    vec![false; options.len()]
                } else {
                    Vec::new()
                },
            },
            AnswerShape::Decision { .. } => Draft::Decision {
                approve: true,
                always: false,
                comment: Editor::default(),
            },
            AnswerShape::Form { .. } => Draft::Form {
                answers: Vec::new(),
                editor: Editor::default(),
            },
        };
        self.selected = Some(p.request.id.clone());
        self.mode = Mode::Answer(Answering {
            id: p.request.id.clone(),
            draft,
            error: None,
        });
    }

    /// A single key on the selected request while browsing.
    fn quick(&mut self, c: char) -> Effect {
        let Some(p) = self.current().cloned() else {
            return Effect::None;
        };
        match (&p.answer_shape, c) {
            (AnswerShape::Choice { options, many, .. }, '1'..='9') => {
                let n = c.to_digit(10).unwrap_or(0) as usize;
                if n == 0 || n > options.len() {
                    return Effect::None;
                }
                if *many {
                    self.open();
                    if let Mode::Answer(Answering {
                        draft: Draft::Choice { cursor, picked },
                        ..
                    }) = &mut self.mode
                    {
                        *cursor = n - 1;
                        picked[n - 1] = true;
                    }
                    return Effect::None;
                }
                self.send(&p, &n.to_string())
            }
            (AnswerShape::Choice { options, .. }, 'y' | 'n')
                if options.iter().any(|o| o == "yes") =>
            {
                self.send(&p, &c.to_string())
            }
            (AnswerShape::Decision { always, .. }, 'a' | 'd' | 'A') => {
                if c == 'A' && always.is_none() {
                    self.notify(
                        "this request offers no rule to always allow".into(),
                        Instant::now(),
                    );
                    return Effect::None;
                }
                self.selected = Some(p.request.id.clone());
                self.mode = Mode::Answer(Answering {
                    id: p.request.id.clone(),
                    draft: Draft::Decision {
                        approve: c != 'd',
                        always: c == 'A',
                        comment: Editor::default(),
                    },
                    error: None,
                });
                Effect::None
            }
            _ => Effect::None,
        }
    }

    /// The reply `typed` makes to `p`, sent; or why not, said.
    fn send(&mut self, p: &Arc<PendingRequest>, typed: &str) -> Effect {
        match p.request.interpret(typed) {
            Ok(reply) => self.respond(p, reply),
            Err(e) => {
                self.notify(e, Instant::now());
                Effect::None
            }
        }
    }

    fn respond(&mut self, p: &Arc<PendingRequest>, reply: Reply) -> Effect {
        self.mode = Mode::Browse;
        Effect::Respond {
            seq: p.seq,
            id: p.request.id.clone(),
            reply,
        }
    }

    /// A key while answering.
    fn answering(&mut self, action: Action) -> Effect {
        let Mode::Answer(answering) = &mut self.mode else {
            return Effect::None;
        };
        let Some(p) = self
            .requests
            .iter()
            .find(|p| p.request.id == answering.id)
            .cloned()
        else {
            self.mode = Mode::Browse;
            return Effect::None;
        };
        if action == Action::Back {
            self.mode = Mode::Browse;
            return Effect::None;
        }
        answering.error = None;
        let options = match &p.answer_shape {
            AnswerShape::Choice { options, .. } => options.len(),
            _ => 0,
        };
        let reply = match (&mut answering.draft, action) {
            (
                Draft::Text(e)
                | Draft::Cancel(e)
                | Draft::Form { editor: e, .. }
                | Draft::Decision { comment: e, .. },
                Action::Type(c) | Action::Quick(c),
            ) => {
                e.insert(c);
                None
            }
            (Draft::Text(e), Action::NewLine) => {
                e.insert('\n');
                None
            }
            (
                Draft::Text(e)
                | Draft::Cancel(e)
                | Draft::Form { editor: e, .. }
                | Draft::Decision { comment: e, .. },
                a,
            ) if matches!(
                a,
                Action::Backspace | Action::Cursor(_) | Action::HomeEnd(_)
            ) =>
            {
                match a {
                    Action::Backspace => e.backspace(),
                    Action::Cursor(by) => e.move_by(by),
                    Action::HomeEnd(end) => e.home_end(end),
                    _ => {}
                }
                None
            }
            (Draft::Choice { cursor, .. }, Action::Cursor(by) | Action::Move(by)) => {
                *cursor = cursor
                    .saturating_add_signed(by)
                    .min(options.saturating_sub(1));
                None
            }
            (Draft::Choice { cursor, picked }, Action::Toggle) => {
                if let Some(b) = picked.get_mut(*cursor) {
                    *b = !*b;
                }
                None
            }
            (Draft::Choice { cursor, picked }, Action::Type(c) | Action::Quick(c))
                if c.is_ascii_digit() =>
            {
                let n = c.to_digit(10).unwrap_or(0) as usize;
                if (1..=options).contains(&n) {
                    *cursor = n - 1;
                    if let Some(b) = picked.get_mut(n - 1) {
                        *b = !*b;
                    } else {
                        return self.answer_with(&p, Ok(n.to_string()));
                    }
                }
                None
            }
            (Draft::Text(e), Action::Submit) => Some(Ok(e.text.clone())),
            (Draft::Cancel(e), Action::Submit) => {
                let reason = e.text.trim().to_string();
                return self.respond(
                    &p,
                    Reply::Cancel {
                        reason: (!reason.is_empty()).then_some(reason),
                    },
                );
            }
            (Draft::Choice { cursor, picked }, Action::Submit) => {
                if picked.is_empty() {
                    Some(Ok((*cursor + 1).to_string()))
                } else {
                    let chosen: Vec<String> = picked
                        .iter()
                        .enumerate()
                        .filter(|(_, b)| **b)
                        .map(|(i, _)| (i + 1).to_string())
                        .collect();
                    Some(Ok(chosen.join(",")))
                }
            }
            (
                Draft::Decision {
                    approve,
                    always,
                    comment,
                },
                Action::Submit,
            ) => {
                let comment = comment.text.trim().to_string();
                let reply = Reply::Approval {
                    approved: *approve,
                    comment: (!comment.is_empty()).then_some(comment),
                    remember: always
                        .then(|| p.request.always_allow().map(str::to_string))
                        .flatten(),
                };
                return self.respond(&p, reply);
            }
            (Draft::Form { answers, editor }, Action::Submit) => {
                let i = answers.len();
                let Some(q) = p.request.questions.get(i) else {
                    return Effect::None;
                };
                match q.interpret(&editor.text) {
                    Ok(a) => {
                        answers.push(a);
                        *editor = Editor::default();
                        if answers.len() == p.request.questions.len() {
                            let all = std::mem::take(answers);
                            return self.respond(&p, Reply::Answers(all));
                        }
                    }
                    Err(e) => answering.error = Some(e),
                }
                None
            }
            _ => None,
        };
        match reply {
            Some(typed) => self.answer_with(&p, typed),
            None => Effect::None,
        }
    }

    /// Sends what was typed, or keeps the editor open with why not.
    fn answer_with(&mut self, p: &Arc<PendingRequest>, typed: Result<String, String>) -> Effect {
        match typed.and_then(|t| p.request.interpret(&t)) {
            Ok(reply) => self.respond(p, reply),
            Err(e) => {
                if let Mode::Answer(a) = &mut self.mode {
                    a.error = Some(e);
                }
                Effect::None
            }
        }
    }
}

/// Whether `p` matches the filter `needle` (lower case): its agent, question, kind,
/// labels or origin.
fn matches(p: &PendingRequest, needle: &str) -> bool {
    let r = &p.request;
    [
        r.agent_name.as_str(),
        r.content.as_str(),
        r.kind.as_str(),
        p.origin.as_str(),
    ]
    .iter()
    .any(|s| s.to_lowercase().contains(needle))
        || p.labels.iter().any(|l| l.to_lowercase().contains(needle))
}
