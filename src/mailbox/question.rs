//! A mailbox question (`CONTEXT`, `OPTION_n`, anything else shown as context) and
//! its answer (`ANSWER=Option N`, as the seed's agents compare it), read and written.

use super::keyvalue::KeyValues;

/// A question file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// `CONTEXT`: the question itself.
    pub context: String,
    /// `OPTION_1`, `OPTION_2`… in their numbers' order.
    pub options: Vec<String>,
    /// Every other key (the seed's `PLAN`), in the file's order.
    pub details: Vec<(String, String)>,
}

/// The number of an `OPTION_n` key.
fn option_number(key: &str) -> Option<u32> {
    key.strip_prefix("OPTION_")?.parse().ok()
}

impl Question {
    /// Reads a question's pairs. Options are ordered by number (`OPTION_10` after
    /// `OPTION_9`); numbers skipped are not options.
    pub fn read(pairs: &KeyValues) -> Question {
        let mut options: Vec<(u32, String)> = Vec::new();
        let mut details = Vec::new();
        let mut context = String::new();
        for (key, value) in pairs.iter() {
            if key == "CONTEXT" {
                context = value.to_string();
            } else if let Some(n) = option_number(key) {
                options.push((n, value.to_string()));
            } else {
                details.push((key.to_string(), value.to_string()));
            }
        }
        options.sort_by_key(|(n, _)| *n);
        Question {
            context,
            options: options.into_iter().map(|(_, o)| o).collect(),
            details,
        }
    }

    /// Its pairs, for writing: `CONTEXT`, the details, then the options.
    pub fn pairs(&self) -> KeyValues {
        let mut kv = KeyValues::new();
        kv.set("CONTEXT", self.context.clone());
        for (k, v) in &self.details {
            kv.set(k, v.clone());
        }
        for (i, o) in self.options.iter().enumerate() {
            kv.set(&format!("OPTION_{}", i + 1), o.clone());
        }
        kv
    }

    /// What a person reads: the context, then each detail under its name.
    pub fn shown(&self) -> String {
        let mut text = if self.context.trim().is_empty() {
            "(the agent gave no CONTEXT)".to_string()
        } else {
            self.context.clone()
        };
        for (k, v) in &self.details {
            text.push_str(&format!("\n\n{k}:\n{v}"));
        }
        text
    }

    /// How `reply` (an answer's text) ends this question: the option it names (its
    /// text, or "Option N"), else the person's own text.
    pub fn ending_of(&self, reply: &str) -> Ending {
        if let Some(i) = self.options.iter().position(|o| o == reply) {
            return Ending::Chose {
                number: i + 1,
                text: reply.to_string(),
            };
        }
        if let Some(n) = reply
            .strip_prefix("Option ")
            .and_then(|n| n.trim().parse::<usize>().ok())
            .filter(|n| (1..=self.options.len()).contains(n))
        {
            return Ending::Chose {
                number: n,
                text: self.options[n - 1].clone(),
            };
        }
        Ending::Text(reply.to_string())
    }
}

/// How a question ended, as its answer file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Option `number` (from 1), whose text is `text`.
    Chose {
        /// From 1.
        number: usize,
        /// The option's text.
        text: String,
    },
    /// The person's own text (a question without options, or an answer of their own).
    Text(String),
    /// Nobody will answer: cancelled by the person, withdrawn, or the run ended.
    Cancelled(Option<String>),
    /// Nobody answered in time.
    Timeout,
}

impl Ending {
    /// The answer file: `ANSWER='Option N'` and the option's text as `ANSWER_TEXT`;
    /// without a choice, `ANSWER=''` and `STATUS` (`CANCELLED` or `TIMEOUT`), so the
    /// seed's wait loops end and a script can tell.
    pub fn pairs(&self) -> KeyValues {
        let mut kv = KeyValues::new();
        match self {
            Ending::Chose { number, text } => {
                kv.set("ANSWER", format!("Option {number}"));
                kv.set("ANSWER_TEXT", text.clone());
            }
            Ending::Text(text) => {
                kv.set("ANSWER", text.clone());
                kv.set("ANSWER_TEXT", text.clone());
            }
            Ending::Cancelled(reason) => {
                kv.set("ANSWER", "");
                kv.set("STATUS", "CANCELLED");
                if let Some(r) = reason {
                    kv.set("REASON", r.clone());
                }
            }
            Ending::Timeout => {
                kv.set("ANSWER", "");
                kv.set("STATUS", "TIMEOUT");
            }
        }
        kv
    }

    /// Reads an answer file (the seed's own `ANSWER=Option 1` too).
    pub fn read(pairs: &KeyValues, question: Option<&Question>) -> Ending {
        match pairs.get("STATUS") {
            Some("CANCELLED") => return Ending::Cancelled(pairs.get("REASON").map(str::to_string)),
            Some("TIMEOUT") => return Ending::Timeout,
            _ => {}
        }
        let answer = pairs.get("ANSWER").unwrap_or_default();
        if let Some(q) = question {
            // "Option N" names the option by number, as hitl writes it (even when
            // some option's text is itself "Option M").
            if let Some(n) = answer
                .strip_prefix("Option ")
                .and_then(|n| n.trim().parse::<usize>().ok())
                .filter(|n| (1..=q.options.len()).contains(n))
            {
                return Ending::Chose {
                    number: n,
                    text: q.options[n - 1].clone(),
                };
            }
            return q.ending_of(answer);
        }
        match answer
            .strip_prefix("Option ")
            .and_then(|n| n.trim().parse::<usize>().ok())
        {
            Some(number) => Ending::Chose {
                number,
                text: pairs.get("ANSWER_TEXT").unwrap_or(answer).to_string(),
            },
            None => Ending::Text(answer.to_string()),
        }
    }

    /// The wire name of how it ended: `answered`, `cancelled`, `timeout`.
    pub fn status(&self) -> &'static str {
        match self {
            Ending::Chose { .. } | Ending::Text(_) => "answered",
            Ending::Cancelled(_) => "cancelled",
            Ending::Timeout => "timeout",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str = "CONTEXT=Created commit plan with 15 commits\n\
PLAN=1. models\n2. routes\n\
OPTION_1=Proceed with this plan\n\
OPTION_2=Cancel and return to original branch\n";

    #[test]
    fn the_seeds_question_reads_with_its_plan_as_a_detail() {
        let q = Question::read(&KeyValues::parse(SEED));
        assert_eq!(q.context, "Created commit plan with 15 commits");
        assert_eq!(
            q.options,
            [
                "Proceed with this plan",
                "Cancel and return to original branch"
            ]
        );
        assert_eq!(
            q.details,
            [("PLAN".to_string(), "1. models\n2. routes".to_string())]
        );
        assert!(q.shown().contains("PLAN:\n1. models\n2. routes"));
        assert_eq!(Question::read(&q.pairs()), q);
    }

    #[test]
    fn options_are_in_number_order() {
        let q = Question::read(&KeyValues::parse(
            "OPTION_10=ten\nOPTION_2=two\nOPTION_1=one\nCONTEXT=c\n",
        ));
        assert_eq!(q.options, ["one", "two", "ten"]);
    }

    #[test]
    fn answers_read_back_as_the_seed_compares_them() {
        let q = Question::read(&KeyValues::parse(SEED));
        let chose = q.ending_of("Cancel and return to original branch");
        let pairs = chose.pairs();
        assert_eq!(pairs.get("ANSWER"), Some("Option 2"));
        assert_eq!(Ending::read(&pairs, Some(&q)), chose);
        assert_eq!(Ending::read(&pairs, None), chose);
        assert_eq!(
            q.ending_of("Option 1").pairs().get("ANSWER"),
            Some("Option 1")
        );
        assert_eq!(
            q.ending_of("something else"),
            Ending::Text("something else".into())
        );
        let timeout = Ending::Timeout.pairs();
        assert_eq!(
            (timeout.get("ANSWER"), timeout.get("STATUS")),
            (Some(""), Some("TIMEOUT"))
        );
        assert_eq!(Ending::read(&timeout, Some(&q)), Ending::Timeout);
        // Options whose text looks like another's number keep their own.
        let tricky = Question {
            context: "c".into(),
            options: vec!["Option 2".into(), "Option 1".into()],
            details: vec![],
        };
        let chose = tricky.ending_of("Option 1");
        assert_eq!(
            chose,
            Ending::Chose {
                number: 2,
                text: "Option 1".into()
            }
        );
        assert_eq!(Ending::read(&chose.pairs(), Some(&tricky)), chose);
        // The seed's own unquoted answer.
        assert_eq!(
            Ending::read(&KeyValues::parse("ANSWER=Option 1\n"), None),
            Ending::Chose {
                number: 1,
                text: "Option 1".into()
            }
        );
    }
}
