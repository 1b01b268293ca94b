//! What a task cost, as the agent reports it: `claude -p --output-format stream-json`
//! ends with a `result` line (turns, tokens, `total_cost_usd`), `codex exec --json`
//! tells each turn's tokens, `gemini --output-format stream-json` ends with a
//! `result` line of `stats` (tokens, no turns: hitl counts its replies); an interactive Claude
//! Code writes every model reply, with its token counts, to its transcript (the path
//! its hooks give), but no cost.

use std::io::{BufRead, BufReader};
use std::path::Path;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Turns, tokens and cost of a task, where the agent reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskUsage {
    /// Model replies (Claude Code's `num_turns`).
    pub turns: u64,
    /// Input tokens, not counting the cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// What it cost in US dollars, as the agent reckons it (headless sessions only:
    /// an interactive Claude Code does not write it per turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Milliseconds spent waiting for the model, where reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_duration_ms: Option<u64>,
}

impl TaskUsage {
    /// `self` and `more` together (a task run twice: its work, then a reminder).
    pub fn add(&mut self, more: &TaskUsage) {
        self.turns += more.turns;
        self.input_tokens += more.input_tokens;
        self.output_tokens += more.output_tokens;
        self.cache_read_input_tokens += more.cache_read_input_tokens;
        self.cache_creation_input_tokens += more.cache_creation_input_tokens;
        self.cost_usd = match (self.cost_usd, more.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        self.api_duration_ms = match (self.api_duration_ms, more.api_duration_ms) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }

    /// Adds one reply's `usage` object.
    fn add_tokens(&mut self, usage: &Value) {
        let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        self.input_tokens += n("input_tokens");
        self.output_tokens += n("output_tokens");
        self.cache_read_input_tokens += n("cache_read_input_tokens");
        self.cache_creation_input_tokens += n("cache_creation_input_tokens");
    }
}

/// How a `claude -p --output-format stream-json` run ended, read from its output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamEnd {
    /// Claude Code's session id (to `--resume` it).
    pub session_id: Option<String>,
    /// The `result` line's figures, when the run got that far.
    pub usage: Option<TaskUsage>,
    /// Whether the run ended in an error (`is_error`).
    pub is_error: bool,
    /// The result's text (the last reply, or what went wrong).
    pub result: Option<String>,
    /// The HTTP status of a failed model call (`api_error_status`), e.g. 401.
    pub api_error_status: Option<u64>,
}

impl StreamEnd {
    /// Whether the run failed because the agent is not logged in (or its key is
    /// refused): the task needs a person to log in, not a retry.
    pub fn needs_login(&self) -> bool {
        if !self.is_error {
            return false;
        }
        if matches!(self.api_error_status, Some(401 | 403)) {
            return true;
        }
        let text = self.result.as_deref().unwrap_or("").to_ascii_lowercase();
        [
            "invalid api key",
            "/login",
            "not logged in",
            "authentication_error",
            "oauth token",
            "api key not valid",
        ]
        .iter()
        .any(|w| text.contains(w))
    }
}

/// Whether a stream-json line says the model API refused the agent's credentials
/// (Claude Code retries a 401 ten times over minutes, saying so each time).
pub fn refuses_login(line: &str) -> Option<String> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v.get("type").and_then(Value::as_str) != Some("system")
        || v.get("subtype").and_then(Value::as_str) != Some("api_retry")
    {
        return None;
    }
    let status = v.get("error_status").and_then(Value::as_u64);
    let error = v.get("error").and_then(Value::as_str).unwrap_or("");
    (matches!(status, Some(401 | 403)) || error.contains("authentication")).then(|| {
        format!(
            "the model API refuses its credentials ({} {error}): log it in, then retry the task",
            status.map_or_else(String::new, |s| s.to_string())
        )
    })
}

/// Reads a stream-json output file: its session id, and its `result` lines (one per
/// run of the task, their figures summed; the last one's outcome).
pub fn read_stream(path: &Path) -> StreamEnd {
    let mut end = StreamEnd::default();
    let Ok(file) = std::fs::File::open(path) else {
        return end;
    };
    // Gemini CLI's model replies, counted as they begin: its result has no turns.
    let mut replies = 0;
    let mut replying = false;
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(id) = v.get("session_id").and_then(Value::as_str) {
            end.session_id = Some(id.to_string());
        }
        if let Some(stats) = gemini_stats(&v) {
            let n = |key: &str| stats.get(key).and_then(Value::as_u64);
            let cached = n("cached").unwrap_or(0);
            let usage = TaskUsage {
                turns: std::mem::take(&mut replies),
                // `input` is what the cache did not hold.
                input_tokens: n("input")
                    .unwrap_or_else(|| n("input_tokens").unwrap_or(0).saturating_sub(cached)),
                output_tokens: n("output_tokens").unwrap_or(0),
                cache_read_input_tokens: cached,
                ..TaskUsage::default()
            };
            end.usage.get_or_insert_with(TaskUsage::default).add(&usage);
            end.is_error = v.get("status").and_then(Value::as_str) != Some("success");
            end.result = v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string);
            replying = false;
            continue;
        }
        if let Some(assistant) = gemini_turn(&v) {
            if assistant && !replying {
                replies += 1;
            }
            replying = assistant;
            continue;
        }
        // Codex's `--json` events: its thread is what `codex exec resume` takes, and
        // each turn's tokens are told as it completes.
        match v.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                if let Some(id) = v.get("thread_id").and_then(Value::as_str) {
                    end.session_id = Some(id.to_string());
                }
                continue;
            }
            Some("turn.completed") => {
                let mut usage = TaskUsage {
                    turns: 1,
                    ..TaskUsage::default()
                };
                if let Some(u) = v.get("usage") {
                    usage.add_tokens(u);
                }
                end.usage.get_or_insert_with(TaskUsage::default).add(&usage);
                continue;
            }
            Some("turn.failed") => {
                end.is_error = true;
                end.result = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                continue;
            }
            _ => {}
        }
        if v.get("type").and_then(Value::as_str) != Some("result") {
            continue;
        }
        let mut usage = TaskUsage {
            turns: v.get("num_turns").and_then(Value::as_u64).unwrap_or(0),
            cost_usd: v.get("total_cost_usd").and_then(Value::as_f64),
            api_duration_ms: v.get("duration_api_ms").and_then(Value::as_u64),
            ..TaskUsage::default()
        };
        if let Some(u) = v.get("usage") {
            usage.add_tokens(u);
        }
        // A task's runs (its work, then the reminder) append to one stream.
        end.usage.get_or_insert_with(TaskUsage::default).add(&usage);
        end.is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        end.result = v.get("result").and_then(Value::as_str).map(str::to_string);
        end.api_error_status = v.get("api_error_status").and_then(Value::as_u64);
    }
    end
}

/// A Gemini CLI `result` line's `stats`.
fn gemini_stats(v: &Value) -> Option<&Value> {
    (v.get("type").and_then(Value::as_str) == Some("result"))
        .then(|| v.get("stats"))
        .flatten()
}

/// Whether a Gemini CLI event is the model's (a message of its, a tool it calls:
/// `Some(true)`) or not (the prompt, a tool's result: `Some(false)`); `None`: no
/// event of Gemini's turns.
fn gemini_turn(v: &Value) -> Option<bool> {
    match v.get("type").and_then(Value::as_str)? {
        "message" => Some(v.get("role").and_then(Value::as_str) == Some("assistant")),
        "tool_use" => Some(true),
        "tool_result" => Some(false),
        _ => None,
    }
}

/// The stream-json output as lines a person reads (the replies' text, the tools
/// called), for `hitl task peek` and the fallback summary of a headless task.
pub fn render_stream(path: &Path) -> String {
    let Ok(file) = std::fs::File::open(path) else {
        return String::new();
    };
    let mut out = String::new();
    // Gemini CLI's reply, told in pieces (`delta`): one line once it ends.
    let mut reply = String::new();
    let flush = |reply: &mut String, out: &mut String| {
        if !reply.is_empty() {
            out.push_str(&format!("● {}\n", reply.trim_end()));
            reply.clear();
        }
    };
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) == Some("message")
            && v.get("role").and_then(Value::as_str) == Some("assistant")
        {
            reply.push_str(v.get("content").and_then(Value::as_str).unwrap_or(""));
            continue;
        }
        flush(&mut reply, &mut out);
        if gemini_stats(&v).is_some() {
            let status = v.get("status").and_then(Value::as_str).unwrap_or("result");
            let error = v.pointer("/error/message").and_then(Value::as_str);
            out.push_str(&format!("[{status}] {}\n", error.unwrap_or("")));
            continue;
        }
        match v.get("type").and_then(Value::as_str) {
            // Gemini CLI's tools, by Claude Code's names where it has them.
            Some("tool_use") => {
                let tool = v.get("tool_name").and_then(Value::as_str).unwrap_or("?");
                let name = crate::guard::claude_tool_name(tool).unwrap_or(tool);
                out.push_str(&format!("● {name}({})\n", shown_input(&v["parameters"])));
            }
            Some("tool_result") => {
                let text = v
                    .get("output")
                    .and_then(Value::as_str)
                    .or_else(|| v.pointer("/error/message").and_then(Value::as_str))
                    .unwrap_or("");
                out.push_str(&format!("  ⎿ {}\n", first_line(text)));
            }
            // Codex's `--json`: its replies and the commands it ran.
            Some("item.completed") => {
                let item = &v["item"];
                match item["type"].as_str() {
                    Some("agent_message") => {
                        let text = item["text"].as_str().unwrap_or("");
                        out.push_str(&format!("● {}\n", text.trim_end()));
                    }
                    Some("command_execution") => {
                        let command = item["command"].as_str().unwrap_or("");
                        out.push_str(&format!("● Bash({command})\n"));
                    }
                    _ => {}
                }
            }
            Some("assistant") => {
                for block in content(&v) {
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") => {
                            let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                            out.push_str(&format!("● {}\n", text.trim_end()));
                        }
                        Some("tool_use") => {
                            let name = block.get("name").and_then(Value::as_str).unwrap_or("?");
                            let input = block.get("input").unwrap_or(&Value::Null);
                            out.push_str(&format!("● {name}({})\n", shown_input(input)));
                        }
                        _ => {}
                    }
                }
            }
            Some("user") => {
                for block in content(&v) {
                    if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                        continue;
                    }
                    let text = match block.get("content") {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Array(parts)) => parts
                            .iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n"),
                        _ => String::new(),
                    };
                    out.push_str(&format!("  ⎿ {}\n", first_line(&text)));
                }
            }
            Some("result") => {
                let text = v.get("result").and_then(Value::as_str).unwrap_or("");
                let kind = v.get("subtype").and_then(Value::as_str).unwrap_or("result");
                out.push_str(&format!("[{kind}] {}\n", text.trim_end()));
            }
            _ => {}
        }
    }
    flush(&mut reply, &mut out);
    out
}

/// What a tool call is shown by: its file, command, pattern or address.
fn shown_input(input: &Value) -> &str {
    ["file_path", "command", "pattern", "url"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .unwrap_or("")
}

/// A tool's output as one line is shown: its first, cut to 200 characters.
fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

fn content(v: &Value) -> impl Iterator<Item = &Value> {
    v.pointer("/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The turns and tokens of the model replies an interactive Claude Code wrote to its
/// transcript (JSONL) at or after `since`. A reply is written once per content block,
/// each line with the same usage: counted once, by its request.
pub fn from_transcript(path: &Path, since: Timestamp) -> Option<TaskUsage> {
    let file = std::fs::File::open(path).ok()?;
    let mut usage = TaskUsage::default();
    let mut seen = std::collections::HashSet::new();
    for line in BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v.get("type").and_then(Value::as_str) != Some("assistant")
            || v.get("isSidechain").and_then(Value::as_bool) == Some(true)
        {
            continue;
        }
        let at = v
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<Timestamp>().ok());
        if at.is_none_or(|at| at < since) {
            continue;
        }
        let key = v
            .get("requestRef")
            .or_else(|| v.get("requestId"))
            .or_else(|| v.pointer("/message/id"))
            .map(Value::to_string)
            .unwrap_or_default();
        if !seen.insert(key) {
            continue;
        }
        usage.turns += 1;
        if let Some(u) = v.pointer("/message/usage") {
            usage.add_tokens(u);
        }
    }
    (usage.turns > 0).then_some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_result_gives_turns_tokens_and_cost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"type":"system","subtype":"init","session_id":"s-1"}"#,
                "\n",
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi"},{"type":"tool_use","name":"Write","input":{"file_path":"a.txt"}}]}}"#,
                "\n",
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"done"}]}}"#,
                "\nnot json\n",
                r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"total_cost_usd":0.5,"duration_api_ms":97,"session_id":"s-1","result":"Finished.","usage":{"input_tokens":30,"output_tokens":15,"cache_read_input_tokens":7}}"#,
                "\n"
            ),
        )
        .unwrap();
        let end = read_stream(&path);
        assert_eq!(end.session_id.as_deref(), Some("s-1"));
        let usage = end.usage.clone().unwrap();
        assert_eq!(
            (
                usage.turns,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_input_tokens
            ),
            (3, 30, 15, 7)
        );
        assert_eq!(usage.cost_usd, Some(0.5));
        assert!(!end.needs_login());
        let shown = render_stream(&path);
        assert_eq!(
            shown,
            "● Hi\n● Write(a.txt)\n  ⎿ done\n[success] Finished.\n"
        );
        // A second run (the reminder) appended: its figures are added.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text += r#"{"type":"result","is_error":false,"num_turns":1,"total_cost_usd":0.25,"usage":{"input_tokens":5,"output_tokens":1}}"#;
        std::fs::write(&path, text).unwrap();
        let both = read_stream(&path).usage.unwrap();
        assert_eq!(
            (both.turns, both.input_tokens, both.cost_usd),
            (4, 35, Some(0.75))
        );
    }

    #[test]
    fn a_gemini_stream_gives_its_replies_tokens_and_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stream.jsonl");
        std::fs::write(
            &path,
            [
                r#"{"type":"init","session_id":"g-1","model":"gemini-2.5-flash"}"#,
                r#"{"type":"message","role":"user","content":"Write it\n"}"#,
                r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"echo hi > f.txt"}}"#,
                r#"{"type":"tool_result","tool_id":"t1","status":"success","output":"hi\nmore"}"#,
                r#"{"type":"message","role":"assistant","content":"Done ","delta":true}"#,
                r#"{"type":"message","role":"assistant","content":"it.","delta":true}"#,
                r#"{"type":"result","status":"success","stats":{"total_tokens":14,"input_tokens":9,"output_tokens":5,"cached":3,"input":6,"tool_calls":1}}"#,
            ]
            .join("\n"),
        )
        .unwrap();
        let end = read_stream(&path);
        assert_eq!(end.session_id.as_deref(), Some("g-1"));
        assert!(!end.is_error);
        let usage = end.usage.unwrap();
        assert_eq!(
            (
                usage.turns,
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_input_tokens
            ),
            (2, 6, 5, 3)
        );
        assert_eq!(
            render_stream(&path),
            "● Bash(echo hi > f.txt)\n  ⎿ hi\n● Done it.\n[success] \n"
        );
        // A failed run: its error is the result.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text += "\n";
        text += r#"{"type":"result","status":"error","error":{"type":"FatalAuthenticationError","message":"API key not valid"},"stats":{"input_tokens":0,"output_tokens":0}}"#;
        std::fs::write(&path, text).unwrap();
        let end = read_stream(&path);
        assert!(end.is_error);
        assert_eq!(end.result.as_deref(), Some("API key not valid"));
        assert_eq!(end.usage.unwrap().turns, 2);
    }

    #[test]
    fn a_retried_401_is_a_login_to_do() {
        let line = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"error_status":401,"error":"authentication_failed"}"#;
        assert!(
            refuses_login(line)
                .unwrap()
                .contains("401 authentication_failed")
        );
        let busy =
            r#"{"type":"system","subtype":"api_retry","error_status":529,"error":"overloaded"}"#;
        assert_eq!(refuses_login(busy), None);
        assert_eq!(refuses_login("{\"type\":\"assistant\"}"), None);
    }

    #[test]
    fn a_refused_key_is_a_login_to_do() {
        let end = StreamEnd {
            is_error: true,
            api_error_status: Some(401),
            ..StreamEnd::default()
        };
        assert!(end.needs_login());
        let end = StreamEnd {
            is_error: true,
            result: Some("Invalid API key · Please run /login".into()),
            ..StreamEnd::default()
        };
        assert!(end.needs_login());
        let end = StreamEnd {
            is_error: true,
            result: Some("Overloaded".into()),
            api_error_status: Some(529),
            ..StreamEnd::default()
        };
        assert!(!end.needs_login());
    }

    #[test]
    fn transcript_replies_are_counted_once_each_from_the_tasks_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let line = |at: &str, req: &str, out: u64| {
            format!(
                r#"{{"type":"assistant","timestamp":"{at}","requestRef":"{req}","message":{{"id":"msg","usage":{{"input_tokens":10,"output_tokens":{out}}}}}}}"#
            )
        };
        let text = [
            line("2026-01-01T00:00:00Z", "r0", 100),
            line("2026-01-01T00:01:00Z", "r1", 5),
            line("2026-01-01T00:01:00Z", "r1", 5),
            r#"{"type":"user","timestamp":"2026-01-01T00:01:01Z"}"#.to_string(),
            line("2026-01-01T00:02:00Z", "r2", 6),
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let since: Timestamp = "2026-01-01T00:00:30Z".parse().unwrap();
        let usage = from_transcript(&path, since).unwrap();
        assert_eq!(
            (usage.turns, usage.input_tokens, usage.output_tokens),
            (2, 20, 11)
        );
        assert_eq!(usage.cost_usd, None);
    }
}
