//! What the chat channels (Telegram, Slack) share: a button's meaning
//! (`h:{id}:{choice}`, the reply each choice gives), text made safe and cut to size,
//! and the line that says how a request ended.

use crate::{
    broker::{BrokerHandle, Finished, PendingRequest},
    protocol::{AnswerShape, Reply, Status, text::visible},
};

/// `text` safe in Telegram's HTML and Slack's mrkdwn alike: controls made visible,
/// `&`, `<`, `>` escaped (so no tag, mention or link is made of an agent's text).
pub fn escaped(text: &str) -> String {
    visible(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` cut to `max` characters, `…` at the cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

/// A button's data for `choice` of request `id`: `h:{id}:{choice}`, where `choice`
/// is `a` (approve), `d` (deny), `A` (approve and always allow) or an option's place.
pub fn button_data(id: &str, choice: &str) -> String {
    format!("h:{id}:{choice}")
}

/// A button's request id and choice, if the data is hitl's.
pub fn parse_button(data: &str) -> Option<(&str, &str)> {
    let mut parts = data.splitn(3, ':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("h"), Some(id), Some(choice)) => Some((id, choice)),
        _ => None,
    }
}

/// The request a button's `data` names, still pending, and its choice; or what to
/// tell the presser.
pub async fn pressed_request<'a>(
    broker: &BrokerHandle,
    data: &'a str,
) -> Result<(std::sync::Arc<PendingRequest>, &'a str), String> {
    let (id, choice) = parse_button(data).ok_or("That button is not hitl's.")?;
    let p = broker
        .find(id)
        .await
        .ok_or_else(|| "That request has ended.".to_string())?;
    Ok((p, choice))
}

/// The reply `choice` gives request `p`, and how to say it was given; or why it
/// gives none.
pub fn reply_for(p: &PendingRequest, choice: &str) -> Result<(Reply, String), String> {
    let approval = |approved: bool, remember: Option<String>| Reply::Approval {
        approved,
        comment: None,
        remember,
    };
    match (&p.answer_shape, choice) {
        (AnswerShape::Decision { .. }, "a") => Ok((approval(true, None), "Approved.".into())),
        (AnswerShape::Decision { .. }, "d") => Ok((approval(false, None), "Denied.".into())),
        (
            AnswerShape::Decision {
                always: Some(rule), ..
            },
            "A",
        ) => Ok((
            approval(true, Some(rule.clone())),
            format!("Approved, and always allowed: {rule}"),
        )),
        (
            AnswerShape::Choice {
                options,
                many: false,
                ..
            },
            n,
        ) => {
            let option = n
                .parse::<usize>()
                .ok()
                .and_then(|i| options.get(i))
                .ok_or("No such option.")?;
            Ok((p.request.interpret(option)?, format!("Answered: {option}")))
        }
        _ => Err("That button does not answer this request.".into()),
    }
}

/// How `f` ended, in a line for its messages: what (in `bold`), by whom, the
/// comment or why, when.
pub fn outcome(f: &Finished, bold: impl Fn(&str) -> String) -> String {
    let when = jiff::Zoned::now().strftime("%H:%M").to_string();
    let by = f
        .answer
        .as_ref()
        .map(|a| format!(" by {}", escaped(&a.responded_by)))
        .unwrap_or_default();
    let what = match (f.status, &f.answer) {
        (Status::Answered, Some(a)) => match a.approved {
            Some(true) => "✅ Approved".to_string(),
            Some(false) => "❌ Denied".to_string(),
            None => format!("Answered: {}", escaped(&cut(&a.content, 200))),
        },
        (Status::Timeout, _) => "⌛ Nobody answered in time".to_string(),
        (s, _) => format!("Ended: {}", s.as_str()),
    };
    let why = f
        .answer
        .as_ref()
        .and_then(|a| a.comment.as_deref())
        .or(f.reason.as_deref().filter(|_| f.answer.is_none()))
        .map(|c| format!(" ({})", escaped(&cut(c, 200))))
        .unwrap_or_default();
    format!("{}{by}{why} at {when}", bold(&what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_cut() {
        assert_eq!(escaped("<b>&x\u{1b}"), "&lt;b&gt;&amp;x\\u{1b}");
        assert_eq!(escaped("<!channel>"), "&lt;!channel&gt;");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
    }

    #[test]
    fn buttons_name_their_request_and_choice() {
        let data = button_data("0190e7a2", "A");
        assert_eq!(parse_button(&data), Some(("0190e7a2", "A")));
        assert_eq!(parse_button("x:1:a"), None);
        assert_eq!(parse_button("h:1"), None);
    }
}
