//! Draws the [`App`]: a tab line with the counts, the inbox (a list beside, or on
//! a narrow terminal above, the selected request's detail) or another view's
//! table, and a status line (notices, the filter, the keys). Everything an agent
//! wrote is drawn with its control characters made visible (`protocol::text`): a
//! question cannot move the cursor or recolour the screen.

use jiff::Timestamp;
use ratatui::{
    Frame,
    layout::{Constraint, Direction, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span, Text},
    widgets::{
        Block, Borders, Cell, Clear, List, ListItem, ListState, Paragraph, Row, Table, Wrap,
    },
};
use serde_json::Value;

use super::{
    app::{Answering, App, Draft, Editor, Mode, View},
    keys::HELP,
};
use crate::{
    broker::PendingRequest,
    protocol::{AnswerShape, Kind, Priority, text::visible},
};

/// Below this width the list sits above the detail instead of beside it.
const SIDE_BY_SIDE: u16 = 100;

/// Draws `app` as of `now`.
pub fn draw(f: &mut Frame, app: &App, now: Timestamp) {
    let area = f.area();
    let [tabs, body, status] = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(area);
    draw_tabs(f, app, tabs);
    match app.view {
        View::Inbox => draw_inbox(f, app, body, now),
        other => draw_table(f, app, other, body),
    }
    draw_status(f, app, status);
    match &app.mode {
        Mode::Help => draw_help(f, area),
        Mode::Web(link) => draw_web_link(f, area, link.as_deref()),
        _ => {}
    }
}

fn draw_tabs(f: &mut Frame, app: &App, area: Rect) {
    let urgent = app
        .requests
        .iter()
        .filter(|p| p.request.priority == Priority::Urgent)
        .count();
    let mut spans = vec![Span::styled(
        " hitl ",
        Style::new().add_modifier(Modifier::BOLD),
    )];
    for v in View::ALL {
        let title = match v {
            View::Inbox => format!("Inbox ({})", app.requests.len()),
            v => v.title().to_string(),
        };
        let style = if v == app.view {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::new()
        };
        spans.push(Span::raw(" "));
        spans.push(Span::styled(format!(" {title} "), style));
    }
    if urgent > 0 {
        spans.push(Span::styled(
            format!("  {urgent} urgent"),
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    }
    let style = if app.flash.is_some() {
        Style::new().bg(Color::Yellow).fg(Color::Black)
    } else {
        Style::new()
    };
    f.render_widget(Paragraph::new(Line::from(spans)).style(style), area);
}

/// How long ago `then` was, shortly.
fn age(then: Timestamp, now: Timestamp) -> String {
    let s = now.duration_since(then).as_secs().max(0);
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn priority_mark(p: Priority) -> Span<'static> {
    match p {
        Priority::Urgent => Span::styled(
            "!! ",
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        ),
        Priority::High => Span::styled("!  ", Style::new().fg(Color::Yellow)),
        Priority::Normal => Span::raw("   "),
    }
}

fn draw_inbox(f: &mut Frame, app: &App, area: Rect, now: Timestamp) {
    let visible = app.visible();
    if visible.is_empty() {
        let text = if app.requests.is_empty() {
            "No questions waiting. Agents' questions appear here the moment they ask."
        } else {
            "No question matches the filter (Esc clears it)."
        };
        let block = Block::default().borders(Borders::ALL).title(" Inbox ");
        f.render_widget(
            Paragraph::new(text).block(block).wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let direction = if area.width >= SIDE_BY_SIDE {
        Direction::Horizontal
    } else {
        Direction::Vertical
    };
    let split = if direction == Direction::Horizontal {
        [Constraint::Percentage(42), Constraint::Percentage(58)]
    } else {
        let list = (visible.len() as u16 + 2).min(area.height / 3).max(3);
        [Constraint::Length(list), Constraint::Min(3)]
    };
    let [list_area, detail_area] = Layout::default()
        .direction(direction)
        .constraints(split)
        .areas(area);
    let current = app.current();
    let items: Vec<ListItem> = visible
        .iter()
        .map(|p| {
            let r = &p.request;
            let first = r.content.lines().next().unwrap_or_default();
            ListItem::new(Line::from(vec![
                Span::styled(
                    format!("{:>4} ", age(r.timestamp, now)),
                    Style::new().fg(Color::DarkGray),
                ),
                priority_mark(r.priority),
                Span::styled(
                    format!("{} ", visible_short(&r.agent_name, 18)),
                    Style::new().fg(Color::Cyan),
                ),
                Span::styled(format!("{} ", r.kind), Style::new().fg(Color::DarkGray)),
                Span::raw(visible_short(first, 200)),
            ]))
        })
        .collect();
    let selected = current.and_then(|c| visible.iter().position(|p| p.seq == c.seq));
    let mut state = ListState::default().with_selected(selected);
    let list = List::new(items)
        .block(Block::default().borders(Borders::ALL).title(" Inbox "))
        .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    f.render_stateful_widget(list, list_area, &mut state);
    if let Some(p) = current {
        draw_detail(f, app, p, detail_area, now);
    }
}

/// `text` on one line, control characters visible, at most `max` characters.
fn visible_short(text: &str, max: usize) -> String {
    let line = crate::protocol::text::visible_line(text);
    if line.chars().count() <= max {
        return line.into_owned();
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn draw_detail(f: &mut Frame, app: &App, p: &PendingRequest, area: Rect, now: Timestamp) {
    let r = &p.request;
    let mut lines: Vec<Line> = Vec::new();
    let mut head = vec![
        Span::styled(
            visible_short(&r.agent_name, 60),
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "  {} · {} · asked {} ago",
            r.kind,
            p.origin.as_str(),
            age(r.timestamp, now)
        )),
    ];
    if !p.labels.is_empty() {
        head.push(Span::styled(
            format!("  ({})", visible_short(&p.labels.join(", "), 60)),
            Style::new().fg(Color::Yellow),
        ));
    }
    lines.push(Line::from(head));
    if let Some(who) = r.created_by_other() {
        lines.push(Line::styled(
            format!("asked by another OS user, {}", visible_short(who, 40)),
            Style::new().fg(Color::Red),
        ));
    }
    if p.kept_until.is_some() {
        lines.push(Line::styled(
            "its asker was stopped: kept for when it asks again",
            Style::new().fg(Color::DarkGray),
        ));
    }
    lines.push(Line::raw(""));
    for l in visible(&r.content).lines() {
        lines.push(Line::raw(l.to_string()));
    }
    context_lines(&r.context, &mut lines);
    lines.push(Line::raw(""));
    answer_lines(app, p, &mut lines);
    let title = format!(" {} ", r.id.chars().take(12).collect::<String>());
    let block = Block::default().borders(Borders::ALL).title(title);
    f.render_widget(
        Paragraph::new(Text::from(lines))
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// A request's context, drawn for what it is: a command, a change as a coloured
/// diff, a plan, or its fields.
fn context_lines(context: &Value, lines: &mut Vec<Line<'static>>) {
    let Some(fields) = context.as_object() else {
        if !context.is_null() {
            lines.push(Line::styled(
                visible_short(&context.to_string(), 400),
                Style::new().fg(Color::DarkGray),
            ));
        }
        return;
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|s| visible(s).into_owned());
    let dim = Style::new().fg(Color::DarkGray);
    if let Some(tool) = fields.get("tool_name").and_then(Value::as_str) {
        let input = fields.get("tool_input").cloned().unwrap_or(Value::Null);
        lines.push(Line::raw(""));
        match tool {
            "Bash" => {
                for l in text(input.get("command")).unwrap_or_default().lines() {
                    lines.push(Line::styled(
                        format!("$ {l}"),
                        Style::new().fg(Color::Yellow),
                    ));
                }
            }
            "ExitPlanMode" => {
                for l in text(input.get("plan")).unwrap_or_default().lines() {
                    lines.push(markdown_line(l));
                }
            }
            "AskUserQuestion" => {}
            _ => {
                if let Some(file) = ["file_path", "notebook_path", "path"]
                    .iter()
                    .find_map(|k| text(input.get(*k)))
                {
                    lines.push(Line::styled(
                        format!("{tool}: {file}"),
                        Style::new().add_modifier(Modifier::BOLD),
                    ));
                }
                let red = Style::new().fg(Color::Red);
                let green = Style::new().fg(Color::Green);
                for l in text(input.get("old_string")).unwrap_or_default().lines() {
                    lines.push(Line::styled(format!("-{l}"), red));
                }
                for key in ["new_string", "content"] {
                    for l in text(input.get(key)).unwrap_or_default().lines() {
                        lines.push(Line::styled(format!("+{l}"), green));
                    }
                }
            }
        }
        if let Some(why) = text(fields.get("why")) {
            lines.push(Line::styled(format!("why: {why}"), dim));
        }
        return;
    }
    lines.push(Line::raw(""));
    for (k, v) in fields.iter().take(8) {
        let value = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("{}: ", visible_short(k, 30)), dim),
            Span::raw(visible_short(&value, 300)),
        ]));
    }
}

/// One line of a Markdown plan: headings bold, list items with a bullet, code dim.
fn markdown_line(l: &str) -> Line<'static> {
    let t = l.trim_start();
    if let Some(h) = t.strip_prefix('#') {
        return Line::styled(
            h.trim_start_matches('#').trim().to_string(),
            Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
        );
    }
    if let Some(item) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        let indent = &l[..l.len() - t.len()];
        return Line::raw(format!("{indent}• {item}"));
    }
    if t.starts_with("```") || l.starts_with("    ") {
        return Line::styled(l.to_string(), Style::new().fg(Color::DarkGray));
    }
    Line::raw(l.to_string())
}

/// The answer part of the detail: the options, the editor, the keys that answer.
fn answer_lines(app: &App, p: &PendingRequest, lines: &mut Vec<Line<'static>>) {
    let answering = match &app.mode {
        Mode::Answer(a) if a.id == p.request.id => Some(a),
        _ => None,
    };
    let hint = Style::new().fg(Color::DarkGray);
    match (&p.answer_shape, answering.map(|a| &a.draft)) {
        (_, Some(Draft::Cancel(e))) => {
            lines.push(Line::raw("Decline to answer. Why (optional):"));
            lines.push(editor_line(e));
            lines.push(Line::styled("Enter declines · Esc back", hint));
        }
        (AnswerShape::Choice { options, many, .. }, draft) => {
            let (cursor, picked) = match draft {
                Some(Draft::Choice { cursor, picked }) => (Some(*cursor), picked.clone()),
                _ => (None, Vec::new()),
            };
            for (i, o) in options.iter().enumerate() {
                let tick = match (many, picked.get(i)) {
                    (true, Some(true)) => "[x] ",
                    (true, _) => "[ ] ",
                    _ => "",
                };
                let style = if cursor == Some(i) {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                lines.push(Line::styled(
                    format!("{}) {tick}{}", i + 1, visible_short(o, 200)),
                    style,
                ));
            }
            let keys = match (many, draft.is_some()) {
                (true, true) => "Space or 1-9 ticks · Enter sends the ticked · Esc back",
                (true, false) => "1-9 ticks · Enter to pick several",
                (false, true) => "↑↓ then Enter, or 1-9 · Esc back",
                (false, false) if p.request.kind == Kind::Yesno => "y or n · 1-2",
                (false, false) => "1-9 picks · Enter to choose with ↑↓",
            };
            lines.push(Line::styled(keys, hint));
        }
        (
            AnswerShape::Decision { always, .. },
            Some(Draft::Decision {
                approve,
                always: remember,
                comment,
            }),
        ) => {
            let verb = match (approve, remember) {
                (true, true) => "Approve, and always allow this here".to_string(),
                (true, false) => "Approve".to_string(),
                (false, _) => "Deny".to_string(),
            };
            if let (true, Some(rule)) = (remember, always) {
                lines.push(Line::styled(
                    format!("rule: {}", visible_short(rule, 100)),
                    hint,
                ));
            }
            lines.push(Line::raw(format!("{verb}. Comment (optional):")));
            lines.push(editor_line(comment));
            lines.push(Line::styled("Enter sends · Esc back", hint));
        }
        (AnswerShape::Decision { always, .. }, _) => {
            let keys = if always.is_some() {
                "a approve · d deny · A approve and always allow · x decline"
            } else {
                "a approve · d deny · x decline"
            };
            lines.push(Line::styled(keys, hint));
        }
        (AnswerShape::Form { .. }, draft) => {
            let done = match draft {
                Some(Draft::Form { answers, .. }) => answers.clone(),
                _ => Vec::new(),
            };
            for (i, q) in p.request.questions.iter().enumerate() {
                let header = if q.header.is_empty() {
                    String::new()
                } else {
                    format!("[{}] ", visible_short(&q.header, 20))
                };
                lines.push(Line::styled(
                    format!("Q{}. {header}{}", i + 1, visible_short(&q.question, 200)),
                    Style::new().add_modifier(Modifier::BOLD),
                ));
                for (n, o) in q.options.iter().enumerate() {
                    let what = if o.description.is_empty() {
                        String::new()
                    } else {
                        format!(" — {}", visible_short(&o.description, 100))
                    };
                    lines.push(Line::raw(format!(
                        "   {}) {}{what}",
                        n + 1,
                        visible_short(&o.label, 80)
                    )));
                }
                if let Some(a) = done.get(i) {
                    lines.push(Line::styled(
                        format!("   → {}", visible_short(a, 100)),
                        Style::new().fg(Color::Green),
                    ));
                }
            }
            match draft {
                Some(Draft::Form { answers, editor }) => {
                    lines.push(Line::raw(format!("Q{}:", answers.len() + 1)));
                    lines.push(editor_line(editor));
                    lines.push(Line::styled(
                        "a number or your own text · Enter next · Esc back",
                        hint,
                    ));
                }
                _ => lines.push(Line::styled("Enter to answer", hint)),
            }
        }
        (AnswerShape::Text { .. }, Some(Draft::Text(e))) => {
            for l in editor_text(e) {
                lines.push(l);
            }
            lines.push(Line::styled(
                "Enter sends · Alt-Enter new line · Esc back",
                hint,
            ));
        }
        (AnswerShape::Text { .. }, _) => {
            lines.push(Line::styled("Enter to answer · x decline", hint));
        }
    }
    if let Some(Answering { error: Some(e), .. }) = answering {
        lines.push(Line::styled(
            format!("not sent: {}", visible_short(e, 200)),
            Style::new().fg(Color::Red),
        ));
    }
}

/// An editor's one line, its cursor shown as a reversed cell.
fn editor_line(e: &Editor) -> Line<'static> {
    editor_text(e).into_iter().next().unwrap_or_default()
}

/// An editor's lines, the cursor shown as a reversed cell.
fn editor_text(e: &Editor) -> Vec<Line<'static>> {
    let cursor = Style::new().add_modifier(Modifier::REVERSED);
    let mut out = Vec::new();
    let mut spans = vec![Span::raw("> ")];
    let mut current = String::new();
    let mut drawn = false;
    for (i, c) in e.text.chars().chain(std::iter::once('\0')).enumerate() {
        if i == e.cursor {
            spans.push(Span::raw(std::mem::take(&mut current)));
            let shown = if c == '\n' || c == '\0' { ' ' } else { c };
            spans.push(Span::styled(shown.to_string(), cursor));
            drawn = true;
            if c == '\n' {
                out.push(Line::from(std::mem::replace(
                    &mut spans,
                    vec![Span::raw("  ")],
                )));
            }
            continue;
        }
        match c {
            '\0' => {}
            '\n' => {
                spans.push(Span::raw(std::mem::take(&mut current)));
                out.push(Line::from(std::mem::replace(
                    &mut spans,
                    vec![Span::raw("  ")],
                )));
            }
            c => current.push_str(&visible(&c.to_string())),
        }
    }
    spans.push(Span::raw(current));
    let _ = drawn;
    out.push(Line::from(spans));
    out
}

fn draw_table(f: &mut Frame, app: &App, view: View, area: Rect) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", view.title()));
    let Some(table) = app.table(view).filter(|t| !t.rows.is_empty()) else {
        let text = app
            .table(view)
            .map(|t| t.empty.clone())
            .unwrap_or_else(|| "Reading…".into());
        f.render_widget(
            Paragraph::new(text).block(block).wrap(Wrap { trim: true }),
            area,
        );
        return;
    };
    let columns = table.header.len().max(1);
    let widths: Vec<Constraint> = (0..columns)
        .map(|i| {
            if i + 1 == columns {
                Constraint::Min(10)
            } else {
                let widest = table
                    .rows
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .chain(std::iter::once(table.header[i].chars().count()))
                    .max()
                    .unwrap_or(4);
                Constraint::Length((widest as u16).min(28))
            }
        })
        .collect();
    let header = Row::new(table.header.iter().map(|h| Cell::from(h.clone())))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = table.rows.iter().map(|r| {
        Row::new(
            r.iter()
                .map(|c| Cell::from(visible_short(c, 300)))
                .collect::<Vec<_>>(),
        )
    });
    let selected = app.row.min(table.rows.len().saturating_sub(1));
    let mut state = ratatui::widgets::TableState::default().with_selected(Some(selected));
    let widget = Table::new(rows, widths)
        .header(header)
        .block(block)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED));
    f.render_stateful_widget(widget, area, &mut state);
}

fn draw_status(f: &mut Frame, app: &App, area: Rect) {
    let line = match &app.mode {
        Mode::Filter => {
            let mut line = editor_line(&app.filter);
            line.spans[0] = Span::raw("/");
            line
        }
        Mode::Quit => Line::styled(
            "Stop hitl listen? Questions wait for the next listener. y stops · any other key goes back",
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ),
        _ => match app.notices.back() {
            Some(n) => Line::styled(n.text.clone(), Style::new().fg(Color::Yellow)),
            None => {
                let filter = if app.filter.text.is_empty() {
                    String::new()
                } else {
                    format!("filter: {} · ", visible_short(&app.filter.text, 30))
                };
                Line::styled(
                    format!("{filter}Enter answer · Tab views · / filter · ? keys · q quit"),
                    Style::new().fg(Color::DarkGray),
                )
            }
        },
    };
    f.render_widget(Paragraph::new(line), area);
}

/// The dashboard login link `w` asked for, on a line of its own so that a terminal's
/// selection copies it whole.
fn draw_web_link(f: &mut Frame, area: Rect, link: Option<&str>) {
    let lines = match link {
        Some(link) => vec![
            Line::raw("Open this link in a browser on this machine:"),
            Line::raw(""),
            Line::styled(link.to_string(), Style::new().add_modifier(Modifier::BOLD)),
            Line::raw(""),
            Line::styled(
                "It logs one browser in, once, within 10 minutes. `hitl dashboard` makes another.",
                Style::new().fg(Color::DarkGray),
            ),
        ],
        None => vec![Line::raw(
            "No web dashboard: this listener serves no HTTP (it was started with --no-http).",
        )],
    };
    let width = area
        .width
        .saturating_sub(2)
        .min(link.map_or(0, |l| l.len() as u16 + 4).max(84));
    let height = (lines.len() as u16 + 2).min(area.height);
    draw_popup(
        f,
        area,
        (width, height),
        " Web dashboard (any key closes) ",
        lines,
    );
}

fn draw_help(f: &mut Frame, area: Rect) {
    let width = area.width.saturating_sub(4).min(76);
    let height = (HELP.len() as u16 + 4).min(area.height.saturating_sub(2));
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(
                    format!("{k:>17}  "),
                    Style::new().add_modifier(Modifier::BOLD),
                ),
                Span::raw(*what),
            ])
        })
        .collect();
    draw_popup(f, area, (width, height), " Keys (any key closes) ", lines);
}

/// `lines` in a bordered box of `size` (width, height) titled `title`, centred in
/// `area` over what is drawn there.
fn draw_popup(f: &mut Frame, area: Rect, size: (u16, u16), title: &str, lines: Vec<Line>) {
    let (width, height) = size;
    let rect = Rect {
        x: area.x + (area.width.saturating_sub(width)) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    };
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(lines)
            .block(Block::default().borders(Borders::ALL).title(title))
            .wrap(Wrap { trim: false }),
        rect,
    );
}
