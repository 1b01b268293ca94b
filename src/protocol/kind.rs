//! What a kind of question is, in one place: its names (and the aliases agents
//! write), whether it needs options, how a person's typed reply is read, which
//! replies fit it, how `--auto-answer` answers it, its prompt hint, its name in seed
//! 004's vocabulary, and the shape of its answer that UIs draw their controls from
//! ([`AnswerShape`]). A new kind is a variant here and an arm in each `match` below.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Reply, Request, form, form::ValueRule, lenient};

/// What kind of reply a question wants. Read by [`Kind::parse`], aliases and all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Free text.
    #[default]
    Text,
    /// "yes" or "no".
    Yesno,
    /// Exactly one of `options`.
    Select,
    /// Any subset of `options`.
    Multiselect,
    /// Approve or deny an action, with an optional comment.
    Approval,
    /// Allow or refuse a tool use (Claude Code permission), with an optional comment.
    Permission,
    /// Several questions at once (`questions`), each answered with options or the
    /// human's own text: Claude Code's AskUserQuestion.
    Questions,
    /// A number, whole or decimal, from the request's `minimum` to its `maximum`
    /// (each when given).
    Number,
}

impl Kind {
    /// Every kind, in the order help texts list them.
    pub const ALL: [Kind; 8] = [
        Kind::Text,
        Kind::Yesno,
        Kind::Select,
        Kind::Multiselect,
        Kind::Approval,
        Kind::Permission,
        Kind::Questions,
        Kind::Number,
    ];

    /// The name used on the wire and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Yesno => "yesno",
            Kind::Select => "select",
            Kind::Multiselect => "multiselect",
            Kind::Approval => "approval",
            Kind::Permission => "permission",
            Kind::Questions => "questions",
            Kind::Number => "number",
        }
    }

    /// Every name a kind is read by, its own first: the aliases older agents and
    /// seed 004 write. [`Kind::parse`] reads them, ignoring case and spaces around.
    pub const NAMES: &'static [(&'static str, Kind)] = &[
        ("text", Kind::Text),
        ("voice", Kind::Text),
        ("input", Kind::Text),
        ("question", Kind::Text),
        ("question_input", Kind::Text),
        ("yesno", Kind::Yesno),
        ("yes_no", Kind::Yesno),
        ("yes/no", Kind::Yesno),
        ("confirm", Kind::Yesno),
        ("bool", Kind::Yesno),
        ("boolean", Kind::Yesno),
        ("select", Kind::Select),
        ("choice", Kind::Select),
        ("single", Kind::Select),
        ("radio", Kind::Select),
        ("multiselect", Kind::Multiselect),
        ("multi_select", Kind::Multiselect),
        ("multi", Kind::Multiselect),
        ("checkbox", Kind::Multiselect),
        ("choices", Kind::Multiselect),
        ("approval", Kind::Approval),
        ("approve", Kind::Approval),
        ("permission", Kind::Permission),
        ("questions", Kind::Questions),
        ("form", Kind::Questions),
        ("askuserquestion", Kind::Questions),
        ("number", Kind::Number),
        ("numeric", Kind::Number),
    ];

    /// Reads a kind name, accepting the aliases older agents write ([`Kind::NAMES`]).
    pub fn parse(s: &str) -> Option<Kind> {
        let s = s.trim();
        Kind::NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(s))
            .map(|&(_, k)| k)
    }

    /// True for the kinds whose answer is approve or deny.
    pub fn is_approval(self) -> bool {
        matches!(self, Kind::Approval | Kind::Permission)
    }

    /// True for the kinds that choose among options, and so need some.
    pub fn needs_options(self) -> bool {
        matches!(self, Kind::Select | Kind::Multiselect)
    }

    /// Whether an agent asks this kind with a question and options alone (MCP's
    /// `ask_human` offers these): not Claude Code's own permission, nor a form.
    pub fn asked_plainly(self) -> bool {
        !matches!(self, Kind::Permission | Kind::Questions)
    }

    /// The JSON Schema of a kind's name, for the kinds `which` picks: what tool
    /// schemas show an agent (the aliases are read but not offered).
    pub fn schema_of(which: fn(Kind) -> bool) -> schemars::Schema {
        let names: Vec<&str> = Kind::ALL
            .into_iter()
            .filter(|k| which(*k))
            .map(Kind::as_str)
            .collect();
        let described: Vec<String> = Kind::ALL
            .into_iter()
            .filter(|k| which(*k))
            .map(|k| format!("{k}: {}", k.takes()))
            .collect();
        schemars::json_schema!({
            "type": "string",
            "enum": names,
            "description": format!("The kind of answer wanted ({}).", described.join("; ")),
        })
    }

    /// What each kind asks of a request's other fields, as JSON Schema `if`/`then`
    /// rules of a body that asks: a choice needs its options (in the field named
    /// `options`: seed 004 calls them `choices`), a form its questions.
    pub fn body_rules(options: &str) -> Vec<serde_json::Value> {
        let named = |which: fn(Kind) -> bool| {
            let names: Vec<&str> = Kind::NAMES
                .iter()
                .filter(|(_, k)| which(*k))
                .map(|(n, _)| *n)
                .collect();
            serde_json::json!({ "required": ["type"],
                                "properties": { "type": { "anyOf": [{ "enum": names }, { "type": "null" }] } } })
        };
        let needs = |field: &str| {
            serde_json::json!({ "required": [field],
                                "properties": { field: { "type": "array", "minItems": 1 } } })
        };
        vec![
            serde_json::json!({ "if": named(Kind::needs_options), "then": needs(options) }),
            serde_json::json!({ "if": named(|k| k == Kind::Questions), "then": needs("questions") }),
        ]
    }

    /// What a reply to this kind is, as an error message says it.
    pub fn takes(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Yesno => "yes or no",
            Kind::Select => "one of its options",
            Kind::Multiselect => "some of its options",
            Kind::Approval | Kind::Permission => "approve or deny",
            Kind::Questions => "an answer to each of its questions",
            Kind::Number => "a number",
        }
    }

    /// Its name in seed 004's vocabulary (`humanInTheLoop.type`): `question` for
    /// text, `choice` for a select; the others keep their own.
    pub fn seed004_name(self) -> &'static str {
        match self {
            Kind::Text => "question",
            Kind::Select => "choice",
            k => k.as_str(),
        }
    }

    /// What a person types to answer this kind, as a prompt says it.
    pub fn prompt_hint(self) -> &'static str {
        match self {
            Kind::Text => "Answer",
            Kind::Yesno => "Answer [y/n]",
            Kind::Select => "Choose a number",
            Kind::Multiselect => "Choose numbers, separated by commas",
            Kind::Approval | Kind::Permission => "[a]pprove or [d]eny, then an optional comment",
            Kind::Questions => "Answer each question, one per line",
            Kind::Number => "Answer with a number",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Kind, String> {
        Kind::parse(s).ok_or_else(|| {
            let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown type {s:?}; expected one of: {}", names.join(", "))
        })
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        lenient::by_name(d)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The shape of a request's answer, as UIs draw their controls from it and fill
/// the respond body (`POST …/respond`): sent with every request a UI is shown
/// (`answer_shape`), so that no UI keeps a switch of its own on kind names. `field`
/// names the respond body's field the answer goes in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum AnswerShape {
    /// Text of the person's own, `value` saying what it must be when it must.
    Text {
        /// `response`.
        field: String,
        /// A number, or text of a length or format, when the request says so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<ValueRule>,
    },
    /// One of `options` (`many`: any number of them), each a button or a box.
    Choice {
        /// `response` (yes/no), `choice` (one) or `choices` (several, an array).
        field: String,
        /// What may be picked.
        options: Vec<String>,
        /// Whether several may be picked.
        many: bool,
    },
    /// Approve or deny, with an optional `comment`.
    Decision {
        /// `approved` or `permission`: true to approve.
        field: String,
        /// The rule "always allow this here" adds, when the request offers one
        /// (answered with `always: true` beside an approval).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        always: Option<String>,
    },
    /// An answer to each of the request's `questions` (each question's own options
    /// and `value` rule say how), sent as an object from question to answer.
    Form {
        /// `answers`.
        field: String,
    },
}

impl Request {
    /// The shape of this request's answer ([`AnswerShape`]).
    pub fn answer_shape(&self) -> AnswerShape {
        let field = |f: &str| f.to_string();
        match self.kind {
            Kind::Text => AnswerShape::Text {
                field: field("response"),
                value: None,
            },
            Kind::Yesno => AnswerShape::Choice {
                field: field("response"),
                options: vec!["yes".into(), "no".into()],
                many: false,
            },
            Kind::Select | Kind::Multiselect => AnswerShape::Choice {
                field: field(if self.kind == Kind::Select {
                    "choice"
                } else {
                    "choices"
                }),
                options: self.options.clone(),
                many: self.kind == Kind::Multiselect,
            },
            Kind::Approval | Kind::Permission => AnswerShape::Decision {
                field: field(if self.kind == Kind::Permission {
                    "permission"
                } else {
                    "approved"
                }),
                always: self.always_allow().map(str::to_string),
            },
            Kind::Questions => AnswerShape::Form {
                field: field("answers"),
            },
            Kind::Number => AnswerShape::Text {
                field: field("response"),
                value: Some(self.number_rule()),
            },
        }
    }

    /// What a `number` answer must be: a number within the request's range.
    fn number_rule(&self) -> ValueRule {
        ValueRule::number(self.minimum.clone(), self.maximum.clone())
    }

    /// Why its kind cannot be asked as it stands, if it cannot: a select or
    /// multiselect needs options, a `questions` request its questions.
    pub fn shape_error(&self) -> Option<String> {
        match self.kind {
            k if k.needs_options() && self.options.is_empty() => {
                Some(format!("a {k} question needs options"))
            }
            // Questions given are checked whatever the kind: a UI may show them.
            k if k == Kind::Questions || !self.questions.is_empty() => {
                form::check(&self.questions).err()
            }
            _ => None,
        }
    }

    /// Turns a human's typed reply into a [`Reply`] for this question, or says why it
    /// does not fit: "3" for the third option, "y"/"n" for yes/no, "a"/"d" (or
    /// approve/deny, optionally followed by a comment) for approvals.
    pub fn interpret(&self, typed: &str) -> Result<Reply, String> {
        let t = typed.trim();
        match self.kind {
            Kind::Text => Ok(Reply::Text(typed.to_string())),
            Kind::Number => {
                self.number_rule().check(t, &[])?;
                Ok(Reply::Text(t.to_string()))
            }
            Kind::Yesno => match t.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => Ok(Reply::Text("yes".into())),
                "n" | "no" | "false" | "0" => Ok(Reply::Text("no".into())),
                _ => Err(format!("{t:?} is not yes or no")),
            },
            Kind::Select => self.pick(t).map(|o| Reply::Text(o.to_string())),
            Kind::Multiselect => {
                if t.is_empty() {
                    return Ok(Reply::Choices(Vec::new()));
                }
                t.split(',')
                    .map(|part| self.pick(part.trim()).map(str::to_string))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Reply::Choices)
            }
            Kind::Questions => {
                // One answer per line, in the questions' order.
                let lines: Vec<&str> = typed.lines().collect();
                if lines.len() != self.questions.len() {
                    return Err(format!(
                        "{} answers for {} questions (one per line)",
                        lines.len(),
                        self.questions.len()
                    ));
                }
                self.questions
                    .iter()
                    .zip(lines)
                    .map(|(q, line)| q.interpret(line))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Reply::Answers)
            }
            Kind::Approval | Kind::Permission => {
                let (word, comment) = match t.split_once(char::is_whitespace) {
                    Some((w, c)) => (w, Some(c.trim().to_string()).filter(|c| !c.is_empty())),
                    None => (t, None),
                };
                let (approved, remember) = match word.to_ascii_lowercase().as_str() {
                    "a" | "y" | "yes" | "approve" | "approved" | "allow" | "ok" => (true, None),
                    "d" | "n" | "no" | "deny" | "denied" | "reject" | "refuse" => (false, None),
                    "always" => match self.always_allow() {
                        Some(rule) => (true, Some(rule.to_string())),
                        None => return Err("this request offers no rule to always allow".into()),
                    },
                    _ => return Err(format!("{word:?} is neither approve nor deny")),
                };
                Ok(Reply::Approval {
                    approved,
                    comment,
                    remember,
                })
            }
        }
    }

    /// Finds an option by its 1-based number or its text (exact, then ignoring case).
    fn pick(&self, t: &str) -> Result<&str, String> {
        if self.options.is_empty() {
            return Err("the question has no options".into());
        }
        if let Ok(n) = t.parse::<usize>()
            && (1..=self.options.len()).contains(&n)
        {
            return Ok(&self.options[n - 1]);
        }
        self.options
            .iter()
            .find(|o| o.as_str() == t)
            .or_else(|| self.options.iter().find(|o| o.eq_ignore_ascii_case(t)))
            .map(String::as_str)
            .ok_or_else(|| {
                format!(
                    "{t:?} is not one of the options (1-{} or its text)",
                    self.options.len()
                )
            })
    }

    /// The reply `--auto-answer TEXT` gives: TEXT for text, "yes", the first option,
    /// approval.
    pub fn auto_reply(&self, text: &str) -> Reply {
        match self.kind {
            Kind::Text => Reply::Text(text.to_string()),
            // The least it may be, else 0 (or the most, when that is below 0).
            Kind::Number => Reply::Text(match (&self.minimum, &self.maximum) {
                (Some(min), _) => min.to_string(),
                (None, Some(max)) if max.as_f64().is_some_and(|m| m < 0.0) => max.to_string(),
                _ => "0".into(),
            }),
            Kind::Yesno => Reply::Text("yes".into()),
            Kind::Select => Reply::Text(self.options.first().cloned().unwrap_or_default()),
            Kind::Multiselect => {
                Reply::Choices(self.options.first().cloned().into_iter().collect())
            }
            Kind::Approval | Kind::Permission => Reply::Approval {
                approved: true,
                comment: None,
                remember: None,
            },
            // Each question's first option, or TEXT where it has none.
            Kind::Questions => Reply::Answers(
                self.questions
                    .iter()
                    .map(|q| {
                        q.options
                            .first()
                            .map_or_else(|| text.to_string(), |o| o.label.clone())
                    })
                    .collect(),
            ),
        }
    }
}

impl Reply {
    /// Whether this reply answers `r`, or why not: the kind decides (text takes any
    /// text, yes/no takes "yes" or "no", a select one of its options, a multiselect
    /// some of them, an approval a decision). A cancel fits everything. Every
    /// responder's reply is checked here by the broker, whatever UI made it.
    pub fn fits(&self, r: &Request) -> Result<(), String> {
        let kind = r.kind;
        let is_option = |t: &str| r.options.is_empty() || r.options.iter().any(|o| o == t);
        match (self, kind) {
            (Reply::Cancel { .. }, _) => Ok(()),
            (Reply::Text(_), Kind::Text) => Ok(()),
            (Reply::Text(t), Kind::Number) => r.number_rule().check(t.trim(), &[]),
            (Reply::Text(t), Kind::Yesno) if t == "yes" || t == "no" => Ok(()),
            (Reply::Text(t), Kind::Yesno) => Err(format!("{t:?} is not yes or no")),
            (Reply::Text(t), Kind::Select) if is_option(t) => Ok(()),
            (Reply::Text(t), Kind::Select) => {
                Err(format!("{t:?} is not one of the options {:?}", r.options))
            }
            (Reply::Choices(c), Kind::Multiselect) => match c.iter().find(|c| !is_option(c)) {
                Some(bad) => Err(format!("{bad:?} is not one of the options {:?}", r.options)),
                None => Ok(()),
            },
            (
                Reply::Approval {
                    remember: Some(_), ..
                },
                k,
            ) if k.is_approval() && r.always_allow().is_none() => {
                Err("this request offers no rule to always allow".into())
            }
            (
                Reply::Approval {
                    approved: false,
                    remember: Some(_),
                    ..
                },
                _,
            ) => Err("\"always allow\" goes with an approval, not a denial".into()),
            (Reply::Approval { .. }, k) if k.is_approval() => Ok(()),
            (Reply::Answers(a), Kind::Questions) if a.len() != r.questions.len() => Err(format!(
                "{} answers for {} questions",
                a.len(),
                r.questions.len()
            )),
            (Reply::Answers(a), Kind::Questions) => {
                let unanswered = a
                    .iter()
                    .zip(&r.questions)
                    .position(|(a, q)| a.trim().is_empty() && !q.optional);
                if let Some(i) = unanswered {
                    return Err(format!("no answer to {:?}", r.questions[i].question));
                }
                // An answer of a type or range its question does not take is refused
                // here, whichever UI sent it.
                for (a, q) in a.iter().zip(&r.questions) {
                    q.fits(a)
                        .map_err(|why| format!("{:?}: {why}", q.question))?;
                }
                Ok(())
            }
            (_, k) => Err(format!("a {k} question takes {}", k.takes())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Priority;

    fn req(kind: Kind, options: &[&str]) -> Request {
        Request {
            id: "q1".into(),
            options: options.iter().map(|s| s.to_string()).collect(),
            timeout: Some(10),
            ..Request::new("a1", "A", kind, "?")
        }
    }

    #[test]
    fn every_kind_and_priority_reads_its_own_name() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
            assert!(Kind::NAMES.contains(&(k.as_str(), k)));
            let v = serde_json::to_value(k).unwrap();
            assert_eq!(serde_json::from_value::<Kind>(v).unwrap(), k);
        }
        for p in [Priority::Normal, Priority::High, Priority::Urgent] {
            assert_eq!(Priority::parse(p.as_str()), Some(p));
        }
        assert_eq!(Kind::parse(" Choice "), Some(Kind::Select));
        let e = serde_json::from_value::<Kind>(serde_json::json!("poem")).unwrap_err();
        assert!(
            e.to_string().contains("expected one of: text, yesno"),
            "{e}"
        );
    }

    #[test]
    fn interprets_replies_by_kind() {
        let s = req(Kind::Select, &["Express", "Fastify"]);
        assert_eq!(s.interpret("2"), Ok(Reply::Text("Fastify".into())));
        assert_eq!(s.interpret("express"), Ok(Reply::Text("Express".into())));
        assert!(s.interpret("3").is_err());
        let m = req(Kind::Multiselect, &["a", "b", "c"]);
        assert_eq!(
            m.interpret("1, c"),
            Ok(Reply::Choices(vec!["a".into(), "c".into()]))
        );
        let y = req(Kind::Yesno, &[]);
        assert_eq!(y.interpret(" Y "), Ok(Reply::Text("yes".into())));
        assert!(y.interpret("maybe").is_err());
        let a = req(Kind::Approval, &[]);
        assert_eq!(
            a.interpret("d not on main"),
            Ok(Reply::Approval {
                approved: false,
                comment: Some("not on main".into()),
                remember: None,
            })
        );
        let t = req(Kind::Text, &[]);
        assert_eq!(t.interpret("  kept  "), Ok(Reply::Text("  kept  ".into())));
    }

    #[test]
    fn every_kind_has_the_shape_its_replies_fit() {
        for k in Kind::ALL {
            let r = req(k, &["a", "b"]);
            let shape = serde_json::to_value(r.answer_shape()).unwrap();
            // The field a UI fills is one the respond body has.
            let field = shape["field"].as_str().unwrap();
            assert!(
                [
                    "response",
                    "choice",
                    "choices",
                    "approved",
                    "permission",
                    "answers"
                ]
                .contains(&field),
                "{k}: {shape}"
            );
        }
        assert_eq!(
            req(Kind::Yesno, &[]).answer_shape(),
            AnswerShape::Choice {
                field: "response".into(),
                options: vec!["yes".into(), "no".into()],
                many: false
            }
        );
        let mut a = req(Kind::Approval, &[]);
        a.context = serde_json::json!({ "always_allow": "Bash(npm test:*)" });
        assert!(matches!(a.answer_shape(),
            AnswerShape::Decision { field, always: Some(rule) } if field == "approved" && rule == "Bash(npm test:*)"));
        let offered = Kind::schema_of(Kind::asked_plainly);
        let names = offered.get("enum").unwrap();
        assert_eq!(
            names,
            &serde_json::json!([
                "text",
                "yesno",
                "select",
                "multiselect",
                "approval",
                "number"
            ])
        );
    }
}
