//! Elicitation: an MCP server asking the user for input through Claude Code. `hitl
//! hook elicitation` asks it through hitl instead, so any hitl UI can answer: a form
//! (`requested_schema`, a flat object of primitives) becomes a `questions` request,
//! one question per field (an enum or a boolean as options, several for an array of
//! enum), and the human's answers go back as `content` of the field's own type. A
//! URL elicitation becomes an approval: approved is `accept`, denied `decline`.

use serde_json::{Map, Value, json};

use crate::protocol::{
    FormOption, FormQuestion,
    form::{SKIP, ValueRule, ValueType},
};

/// How the answers to an elicitation's questions become its `content`.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// The MCP server asking.
    pub server: String,
    /// What it says.
    pub message: String,
    /// The page to open, for a URL elicitation.
    pub url: Option<String>,
    fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    /// The property's name in `content`.
    name: String,
    /// The question asked for it (the answers are keyed by it).
    question: String,
    required: bool,
    kind: FieldKind,
}

#[derive(Debug, Clone, PartialEq)]
enum FieldKind {
    /// Text, with its schema's length and format, if any.
    Text(ValueRule),
    /// A number, with its schema's range.
    Number(ValueRule),
    /// A whole number, with its schema's range.
    Integer(ValueRule),
    Boolean,
    /// One of these (value, label).
    One(Vec<(Value, String)>),
    /// Some of these (value, label).
    Many(Vec<(Value, String)>),
}

impl Elicitation {
    /// Reads the hook input of an Elicitation event; why not, when it cannot be asked
    /// (then Claude Code's own dialog asks).
    pub fn read(input: &Value) -> Result<Elicitation, String> {
        let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("");
        let server = text("mcp_server_name").to_string();
        let message = text("message").to_string();
        if text("mode") == "url" || input.get("url").is_some_and(Value::is_string) {
            let url = text("url");
            if url.is_empty() {
                return Err("a URL elicitation without a URL".into());
            }
            return Ok(Elicitation {
                server,
                message,
                url: Some(url.to_string()),
                fields: Vec::new(),
            });
        }
        let schema = input
            .get("requested_schema")
            .or_else(|| input.get("requestedSchema"))
            .ok_or("no requested_schema")?;
        let properties = schema
            .get("properties")
            .and_then(Value::as_object)
            .ok_or("its requested_schema has no properties")?;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields: Vec<Field> = Vec::new();
        for (name, p) in properties {
            let kind = field_kind(p).ok_or_else(|| format!("field {name:?} is not a primitive"))?;
            let title = p
                .get("title")
                .and_then(Value::as_str)
                .filter(|t| !t.trim().is_empty())
                .unwrap_or(name);
            let mut question = match p.get("description").and_then(Value::as_str) {
                Some(d) if !d.trim().is_empty() => format!("{title} ({d})"),
                _ => title.to_string(),
            };
            if fields.iter().any(|f| f.question == question) {
                question = format!("{question} [{name}]");
            }
            fields.push(Field {
                name: name.clone(),
                question,
                required: required.contains(&name.as_str()),
                kind,
            });
        }
        if fields.is_empty() {
            return Err("its requested_schema asks for nothing".into());
        }
        Ok(Elicitation {
            server,
            message,
            url: None,
            fields,
        })
    }

    /// The questions to ask: one per field, in the schema's order.
    pub fn questions(&self) -> Vec<FormQuestion> {
        self.fields
            .iter()
            .map(|f| {
                let labels = |choices: &[(Value, String)]| {
                    choices
                        .iter()
                        .map(|(_, label)| FormOption {
                            label: label.clone(),
                            description: String::new(),
                        })
                        .collect()
                };
                let (options, multi_select) = match &f.kind {
                    FieldKind::Boolean => (
                        labels(&[(json!(true), "yes".into()), (json!(false), "no".into())]),
                        false,
                    ),
                    FieldKind::One(c) => (labels(c), false),
                    FieldKind::Many(c) => (labels(c), true),
                    _ => (Vec::new(), false),
                };
                let optional = if f.required { "" } else { " (optional)" };
                // The server's schema is the rule: a UI refuses what it would.
                let value = match &f.kind {
                    FieldKind::Text(r) | FieldKind::Number(r) | FieldKind::Integer(r) => r.clone(),
                    FieldKind::Boolean | FieldKind::One(_) | FieldKind::Many(_) => ValueRule {
                        kind: ValueType::Choice,
                        minimum: None,
                        maximum: None,
                        min_length: None,
                        max_length: None,
                        format: None,
                    },
                };
                FormQuestion {
                    question: format!("{}{optional}", f.question),
                    header: f.name.chars().take(12).collect(),
                    options,
                    multi_select,
                    optional: !f.required,
                    value: Some(value),
                }
            })
            .collect()
    }

    /// The `content` the answers (keyed by question text) make: each field's answer
    /// in its own type, optional ones answered with [`SKIP`] or nothing left out.
    /// Every answer fits its field by now (the broker refuses one that does not).
    pub fn content(&self, answers: &Map<String, Value>) -> Value {
        let questions = self.questions();
        let mut content = Map::new();
        for (f, q) in self.fields.iter().zip(&questions) {
            let Some(a) = answers.get(&q.question).and_then(Value::as_str) else {
                continue;
            };
            let a = a.trim();
            // Left out: an optional field answered "-" (in a terminal), or nothing
            // (a form's empty box).
            if !f.required && (a == SKIP || a.is_empty()) {
                continue;
            }
            let pick = |choices: &[(Value, String)], t: &str| {
                choices
                    .iter()
                    .find(|(_, label)| label == t)
                    .map_or_else(|| json!(t), |(v, _)| v.clone())
            };
            let value = match &f.kind {
                FieldKind::Text(_) => json!(a),
                FieldKind::Number(_) => a.parse::<f64>().map_or_else(|_| json!(a), |n| json!(n)),
                FieldKind::Integer(_) => a.parse::<i64>().map_or_else(|_| json!(a), |n| json!(n)),
                FieldKind::Boolean => match a.to_ascii_lowercase().as_str() {
                    "yes" | "y" | "true" => json!(true),
                    "no" | "n" | "false" => json!(false),
                    _ => json!(a),
                },
                FieldKind::One(c) => pick(c, a),
                FieldKind::Many(c) => Value::Array(
                    a.split(", ")
                        .filter(|t| !t.trim().is_empty())
                        .map(|t| pick(c, t.trim()))
                        .collect(),
                ),
            };
            content.insert(f.name.clone(), value);
        }
        Value::Object(content)
    }

    /// The question's text: who asks, and what.
    pub fn summary(&self) -> String {
        let who = if self.server.is_empty() {
            "An MCP server".to_string()
        } else {
            format!("The MCP server {}", self.server)
        };
        match &self.url {
            Some(url) => format!(
                "{who} asks you to open {url}{}",
                if self.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", self.message)
                }
            ),
            None if self.message.is_empty() => format!("{who} asks for input"),
            None => format!("{who} asks: {}", self.message),
        }
    }
}

/// A property's kind, if it is one an elicitation may ask for.
fn field_kind(p: &Value) -> Option<FieldKind> {
    let choices = |p: &Value| -> Option<Vec<(Value, String)>> {
        if let Some(values) = p.get("enum").and_then(Value::as_array) {
            let names = p.get("enumNames").and_then(Value::as_array);
            return Some(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let label = names
                            .and_then(|n| n.get(i))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .unwrap_or_else(|| {
                                v.as_str().map_or_else(|| v.to_string(), str::to_string)
                            });
                        (v.clone(), label)
                    })
                    .collect(),
            );
        }
        let list = p.get("oneOf").or_else(|| p.get("anyOf"))?.as_array()?;
        Some(
            list.iter()
                .filter_map(|o| {
                    let v = o.get("const")?.clone();
                    let label = o
                        .get("title")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| {
                            v.as_str().map_or_else(|| v.to_string(), str::to_string)
                        });
                    Some((v, label))
                })
                .collect(),
        )
    };
    if let Some(c) = choices(p).filter(|c| !c.is_empty()) {
        return Some(FieldKind::One(c));
    }
    let number = |k: &str| p.get(k).and_then(Value::as_number).cloned();
    let length = |k: &str| {
        p.get(k)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    let rule = |kind| ValueRule {
        kind,
        minimum: number("minimum"),
        maximum: number("maximum"),
        min_length: length("minLength"),
        max_length: length("maxLength"),
        format: p
            .get("format")
            .and_then(Value::as_str)
            .filter(|f| matches!(*f, "email" | "uri" | "date" | "date-time"))
            .map(str::to_string),
    };
    match p.get("type").and_then(Value::as_str)? {
        "string" => Some(FieldKind::Text(rule(ValueType::Text))),
        "number" => Some(FieldKind::Number(rule(ValueType::Number))),
        "integer" => Some(FieldKind::Integer(rule(ValueType::Integer))),
        "boolean" => Some(FieldKind::Boolean),
        "array" => choices(p.get("items")?)
            .filter(|c| !c.is_empty())
            .map(FieldKind::Many),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> Value {
        json!({
            "hook_event_name": "Elicitation", "mcp_server_name": "deploy",
            "message": "Where to?", "mode": "form",
            "requested_schema": { "type": "object", "required": ["env", "replicas"], "properties": {
                "env": { "type": "string", "title": "Environment",
                         "oneOf": [{ "const": "prod", "title": "Production" }, { "const": "dev", "title": "Development" }] },
                "replicas": { "type": "integer", "description": "how many" },
                "dry_run": { "type": "boolean" },
                "regions": { "type": "array", "items": { "enum": ["eu", "us", "ap"] } },
                "note": { "type": "string" }
            } }
        })
    }

    #[test]
    fn a_form_becomes_questions_and_answers_its_content() {
        let e = Elicitation::read(&input()).unwrap();
        assert_eq!(e.summary(), "The MCP server deploy asks: Where to?");
        let qs = e.questions();
        let texts: Vec<&str> = qs.iter().map(|q| q.question.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Environment",
                "replicas (how many)",
                "dry_run (optional)",
                "regions (optional)",
                "note (optional)"
            ]
        );
        assert_eq!(qs[0].options[1].label, "Development");
        assert!(qs[3].multi_select);
        crate::protocol::form::check(&qs).unwrap();
        let answers: Map<String, Value> = qs
            .iter()
            .zip(["Development", "3", "yes", "eu, ap", ""])
            .map(|(q, a)| (q.question.clone(), json!(a)))
            .collect();
        assert_eq!(
            e.content(&answers),
            json!({ "env": "dev", "replicas": 3, "dry_run": true, "regions": ["eu", "ap"] })
        );
    }

    #[test]
    fn urls_are_approvals_and_nested_schemas_are_left_to_claude_code() {
        let e = Elicitation::read(&json!({ "mcp_server_name": "gh", "mode": "url",
            "url": "https://github.com/login/device", "message": "Sign in" }))
        .unwrap();
        assert_eq!(
            e.summary(),
            "The MCP server gh asks you to open https://github.com/login/device: Sign in"
        );
        let nested = json!({ "requested_schema": { "properties": { "a": { "type": "object" } } } });
        assert!(Elicitation::read(&nested).is_err());
        assert!(Elicitation::read(&json!({})).is_err());
    }
}
