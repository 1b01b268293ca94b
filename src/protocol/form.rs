//! Forms: several questions asked at once, each with options to pick (one, or
//! several) or an answer of the human's own ("Other"). The shape of Claude Code's
//! AskUserQuestion, so that its questions can be answered from any hitl UI and go
//! back as the `answers` map it reads: each question's text to the chosen label,
//! several labels joined by ", ", or the human's own text.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most questions one form holds.
pub const MAX_FORM_QUESTIONS: usize = 16;

/// One question of a form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormQuestion {
    /// The question, as the human reads it (and as the answers are keyed).
    pub question: String,
    /// A short label for it (AskUserQuestion's chip, at most 12 characters there).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub header: String,
    /// The options to pick from; none: free text only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<FormOption>,
    /// Whether several options may be picked (`multiSelect`, as Claude Code names it).
    #[serde(default, rename = "multiSelect")]
    pub multi_select: bool,
    /// Whether it may be left unanswered (an empty answer): an optional field of an
    /// MCP server's form. AskUserQuestion's questions all need an answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// What an answer must be, when the asker says (an MCP server's form field): one
    /// of the options only, or text of a type and range. Every UI refuses an answer
    /// that does not fit, saying why; none is sent. None: AskUserQuestion's rule, an
    /// option or any text of the human's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<ValueRule>,
}

/// What an answer to a form question must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValueRule {
    /// `choice` (its options only), `integer`, `number` or `text`.
    #[serde(rename = "type")]
    pub kind: ValueType,
    /// The least a number may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<serde_json::Number>,
    /// The most a number may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<serde_json::Number>,
    /// The fewest characters a text may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<usize>,
    /// The most characters a text may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    /// A text's format: `email`, `uri`, `date` or `date-time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// The kinds of [`ValueRule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ValueType {
    /// One (or, where several may be picked, some) of the options; no text of one's own.
    Choice,
    /// A whole number.
    Integer,
    /// A number.
    Number,
    /// Text.
    Text,
}

/// What answers an optional question by leaving it out, besides an empty answer.
pub const SKIP: &str = "-";

impl ValueRule {
    /// A number, whole or not, from `minimum` to `maximum` (each when given).
    pub fn number(
        minimum: Option<serde_json::Number>,
        maximum: Option<serde_json::Number>,
    ) -> ValueRule {
        ValueRule {
            kind: ValueType::Number,
            minimum,
            maximum,
            min_length: None,
            max_length: None,
            format: None,
        }
    }

    /// Why `answer` (already a chosen label or the human's own text) does not fit,
    /// if it does not; `options`: the labels a choice may be.
    pub fn check(&self, answer: &str, options: &[FormOption]) -> Result<(), String> {
        let range = |n: f64| -> Result<(), String> {
            if let Some(min) = self.minimum.as_ref().and_then(serde_json::Number::as_f64)
                && n < min
            {
                return Err(format!("{answer} is less than {min}, the least it may be"));
            }
            if let Some(max) = self.maximum.as_ref().and_then(serde_json::Number::as_f64)
                && n > max
            {
                return Err(format!("{answer} is more than {max}, the most it may be"));
            }
            Ok(())
        };
        match self.kind {
            ValueType::Choice => {
                let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
                for part in answer.split(", ") {
                    if !labels.contains(&part) {
                        return Err(format!(
                            "{part:?} is not one of its options ({})",
                            labels.join(", ")
                        ));
                    }
                }
                Ok(())
            }
            ValueType::Integer => match answer.parse::<i64>() {
                Ok(n) => range(n as f64),
                Err(_) => Err(format!("{answer:?} is not a whole number")),
            },
            ValueType::Number => match answer.parse::<f64>() {
                Ok(n) if n.is_finite() => range(n),
                _ => Err(format!("{answer:?} is not a number")),
            },
            ValueType::Text => {
                let n = answer.chars().count();
                if let Some(min) = self.min_length
                    && n < min
                {
                    return Err(format!("it has {n} characters; at least {min} are needed"));
                }
                if let Some(max) = self.max_length
                    && n > max
                {
                    return Err(format!("it has {n} characters; at most {max} are allowed"));
                }
                let fits = match self.format.as_deref() {
                    Some("email") => answer.split_once('@').is_some_and(|(a, b)| {
                        !a.is_empty() && b.contains('.') && !answer.contains(' ')
                    }),
                    Some("uri") => answer.split_once(':').is_some_and(|(scheme, rest)| {
                        !scheme.is_empty()
                            && scheme
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                            && !rest.is_empty()
                            && !answer.contains(' ')
                    }),
                    Some("date") => answer.parse::<jiff::civil::Date>().is_ok(),
                    Some("date-time") => answer.parse::<jiff::Timestamp>().is_ok(),
                    _ => true,
                };
                if fits {
                    Ok(())
                } else {
                    Err(format!(
                        "{answer:?} is not {}",
                        match self.format.as_deref() {
                            Some("email") => "an email address",
                            Some("uri") => "a URI (like https://example.com)",
                            Some("date") => "a date (like 2026-11-26)",
                            _ => "a date and time (like 2026-11-26T09:30:00Z)",
                        }
                    ))
                }
            }
        }
    }
}

/// One option of a form question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormOption {
    /// What is picked, and what the answer says.
    pub label: String,
    /// What it means.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// What a form's questions may be, as JSON Schema (the create body's `questions`):
/// the rules [`check`] holds them to.
pub fn questions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    // Text with something in it besides whitespace.
    const NOT_BLANK: &str = r"\S";
    schemars::json_schema!({
        "type": "array",
        "maxItems": MAX_FORM_QUESTIONS,
        "items": {
            "type": "object",
            "required": ["question"],
            "properties": {
                "question": { "type": "string", "pattern": NOT_BLANK },
                "header": { "type": "string" },
                "options": { "type": "array", "items": {
                    "type": "object",
                    "required": ["label"],
                    "properties": {
                        "label": { "type": "string", "pattern": NOT_BLANK },
                        "description": { "type": "string" },
                    },
                } },
                "multiSelect": { "type": "boolean" },
                "optional": { "type": "boolean", "description": "It may be left unanswered (an empty answer)." },
            },
        },
    })
}

/// Why a form cannot be asked, if it cannot: no questions, too many, an empty
/// question text or option label.
pub fn check(questions: &[FormQuestion]) -> Result<(), String> {
    if questions.is_empty() {
        return Err("a questions request needs \"questions\" (one or more)".into());
    }
    if questions.len() > MAX_FORM_QUESTIONS {
        return Err(format!(
            "a questions request holds at most {MAX_FORM_QUESTIONS} questions, not {}",
            questions.len()
        ));
    }
    for (i, q) in questions.iter().enumerate() {
        if q.question.trim().is_empty() {
            return Err(format!("question {} has no text", i + 1));
        }
        if q.options.iter().any(|o| o.label.trim().is_empty()) {
            return Err(format!(
                "question {:?} has an option without a label",
                q.question
            ));
        }
    }
    Ok(())
}

impl FormQuestion {
    /// Turns what a human typed into this question's answer: option numbers
    /// (`2`, or `1,3` where several may be picked), option labels, or, when it is
    /// neither, the human's own answer.
    pub fn interpret(&self, typed: &str) -> Result<String, String> {
        let answer = self.read_typed(typed)?;
        self.fits(&answer)?;
        Ok(answer)
    }

    /// Why `answer` (as sent: a label, labels joined by ", ", or text) does not fit
    /// this question's [`ValueRule`], if it does not. An optional question's empty
    /// answer (or [`SKIP`]) always fits.
    pub fn fits(&self, answer: &str) -> Result<(), String> {
        let a = answer.trim();
        if self.optional && (a.is_empty() || a == SKIP) {
            return Ok(());
        }
        match &self.value {
            Some(rule) => rule.check(a, &self.options),
            None => Ok(()),
        }
    }

    fn read_typed(&self, typed: &str) -> Result<String, String> {
        let t = typed.trim();
        if t.is_empty() && self.optional {
            return Ok(String::new());
        }
        if t.is_empty() {
            return Err("an empty answer; pick an option or type your own".into());
        }
        let parts: Vec<&str> = t.split(',').map(str::trim).collect();
        let picked: Option<Vec<&str>> = parts.iter().map(|p| self.pick(p)).collect();
        match picked {
            Some(labels) if labels.len() > 1 && !self.multi_select => {
                Err("pick one option (or type your own answer)".into())
            }
            Some(labels) => Ok(labels.join(", ")),
            // Not all options: the whole line is the human's own answer ("Other").
            None => Ok(t.to_string()),
        }
    }

    /// An option by its 1-based number or its label (any case).
    fn pick(&self, t: &str) -> Option<&str> {
        if let Ok(n) = t.parse::<usize>() {
            return self
                .options
                .get(n.checked_sub(1)?)
                .map(|o| o.label.as_str());
        }
        self.options
            .iter()
            .find(|o| o.label.eq_ignore_ascii_case(t))
            .map(|o| o.label.as_str())
    }

    /// What a person types to answer it, as a prompt says it.
    pub fn prompt_hint(&self) -> &'static str {
        match (self.options.is_empty(), self.multi_select) {
            (true, _) => "Answer",
            (false, false) => "Choose a number, or type your own answer",
            (false, true) => "Choose numbers separated by commas, or type your own answer",
        }
    }
}

/// The answers as Claude Code's AskUserQuestion reads them: each question's text to
/// its answer.
pub fn answer_map(questions: &[FormQuestion], answers: &[String]) -> Map<String, Value> {
    questions
        .iter()
        .zip(answers)
        .map(|(q, a)| (q.question.clone(), Value::String(a.clone())))
        .collect()
}

/// Answers from a map keyed by question text (Claude Code's shape), in the
/// questions' order; or which question it lacks. (A question asked twice in one form
/// gets the same answer both times: the map has one key for it.)
pub fn answers_from_map(
    questions: &[FormQuestion],
    map: &Map<String, Value>,
) -> Result<Vec<String>, String> {
    questions
        .iter()
        .map(|q| match map.get(&q.question) {
            Some(Value::String(a)) => Ok(a.clone()),
            Some(Value::Array(labels)) => Ok(labels
                .iter()
                .map(|l| l.as_str().map_or_else(|| l.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(", ")),
            Some(other) => Err(format!(
                "the answer to {:?} is {other}, not text",
                q.question
            )),
            None => Err(format!("no answer to {:?}", q.question)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(multi: bool) -> FormQuestion {
        FormQuestion {
            question: "Which framework?".into(),
            header: "Framework".into(),
            options: ["React", "Vue", "Svelte"]
                .into_iter()
                .map(|l| FormOption {
                    label: l.into(),
                    description: format!("{l} it is"),
                })
                .collect(),
            multi_select: multi,
            optional: false,
            value: None,
        }
    }

    #[test]
    fn a_typed_question_refuses_what_does_not_fit_and_says_why() {
        let rule = |kind, min: Option<i64>, max: Option<i64>| ValueRule {
            kind,
            minimum: min.map(Into::into),
            maximum: max.map(Into::into),
            min_length: None,
            max_length: None,
            format: None,
        };
        let typed = |value| FormQuestion {
            options: Vec::new(),
            value: Some(value),
            ..q(false)
        };
        let choice = FormQuestion {
            value: Some(rule(ValueType::Choice, None, None)),
            ..q(false)
        };
        assert_eq!(choice.interpret("2").unwrap(), "Vue");
        let why = choice.interpret("maybe").unwrap_err();
        assert!(why.contains("not one of its options"), "{why}");
        let replicas = typed(rule(ValueType::Integer, Some(1), Some(10)));
        assert_eq!(replicas.interpret(" 3 ").unwrap(), "3");
        assert!(
            replicas
                .interpret("three")
                .unwrap_err()
                .contains("whole number")
        );
        assert!(replicas.interpret("2.5").is_err());
        assert!(replicas.interpret("11").unwrap_err().contains("the most"));
        assert!(replicas.interpret("0").unwrap_err().contains("the least"));
        let ratio = typed(rule(ValueType::Number, None, Some(1)));
        assert!(ratio.interpret("0.5").is_ok());
        assert!(ratio.interpret("NaN").is_err() && ratio.interpret("1.5").is_err());
        let email = typed(ValueRule {
            format: Some("email".into()),
            max_length: Some(20),
            ..rule(ValueType::Text, None, None)
        });
        assert!(email.interpret("me@example.com").is_ok());
        assert!(email.interpret("maybe").unwrap_err().contains("email"));
        assert!(email.interpret("someone.long@example.com").is_err());
        // Left out: an optional question's empty answer or "-" fits any rule.
        let optional = FormQuestion {
            optional: true,
            ..replicas.clone()
        };
        assert!(optional.fits("").is_ok() && optional.fits(SKIP).is_ok());
        // A rule is said only where there is one.
        assert!(!serde_json::to_string(&q(false)).unwrap().contains("value"));
    }

    #[test]
    fn only_an_optional_question_takes_an_empty_answer() {
        assert!(q(false).interpret("  ").is_err());
        let optional = FormQuestion {
            optional: true,
            ..q(false)
        };
        assert_eq!(optional.interpret("  ").unwrap(), "");
        // Said only where it holds: AskUserQuestion's questions go back as they came.
        assert!(
            !serde_json::to_string(&q(false))
                .unwrap()
                .contains("optional")
        );
    }

    #[test]
    fn typed_answers_pick_options_by_number_or_label_or_are_the_humans_own() {
        assert_eq!(q(false).interpret("2").unwrap(), "Vue");
        assert_eq!(q(false).interpret(" svelte ").unwrap(), "Svelte");
        assert_eq!(q(true).interpret("1, 3").unwrap(), "React, Svelte");
        assert_eq!(q(true).interpret("vue,React").unwrap(), "Vue, React");
        assert!(q(false).interpret("1,3").is_err(), "one pick only");
        assert_eq!(q(false).interpret("Solid, maybe").unwrap(), "Solid, maybe");
        assert_eq!(
            q(false).interpret("7").unwrap(),
            "7",
            "no option 7: own text"
        );
        assert!(q(false).interpret("  ").is_err());
    }

    #[test]
    fn claude_codes_shape_reads_and_the_map_is_keyed_by_question() {
        let form: Vec<FormQuestion> = serde_json::from_value(serde_json::json!([
            { "question": "Which framework?", "header": "Framework", "multiSelect": true,
              "options": [{ "label": "React", "description": "…" }, { "label": "Vue", "description": "…" }] }
        ]))
        .unwrap();
        assert!(form[0].multi_select);
        check(&form).unwrap();
        let map = answer_map(&form, &["React, Vue".to_string()]);
        assert_eq!(map["Which framework?"], "React, Vue");
        assert_eq!(answers_from_map(&form, &map).unwrap(), ["React, Vue"]);
        assert!(answers_from_map(&form, &Map::new()).is_err());
        assert!(check(&[]).is_err());
    }
}
