//! A task's summary, `summaries/<task_id>.md` (seed 002's format), read into its parts:
//! what the agent says it did, the files it says matter, how its tests went and how
//! the task ended. Pure functions over text; the executor does the I/O.
//!
//! The format is markdown with `## ` sections (Objective, Accomplishments, Key
//! Deliverables, Test Results, Important Notes, Status). A section runs to the next
//! `#` or `##` heading or the end of the file (seed 002's own regex stops only at a
//! following `##`, and so misses the last section); headings inside code fences are
//! text, as a pane's output pasted into the summary often has them.

use serde::{Deserialize, Serialize};

/// The heading a summary is complete with (its last section, in seed 002's format).
pub const STATUS_HEADING: &str = "Status";

/// A summary, read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// What the task was, in the agent's words.
    pub objective: String,
    /// What it did, one item each.
    pub accomplishments: Vec<String>,
    /// The files it names as the task's result, in order.
    pub deliverables: Vec<Deliverable>,
    /// How its tests went.
    pub tests: TestResults,
    /// Caveats and recommendations, one item each.
    pub notes: Vec<String>,
    /// How the agent says the task ended.
    pub status: Outcome,
    /// Every section as written, in order (those above and any others, such as the
    /// fallback's Terminal Output).
    pub sections: Vec<Section>,
}

/// One `## ` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Section {
    /// Its heading, as written.
    pub title: String,
    /// Its text, without the heading and the blank lines around it.
    pub body: String,
}

/// A file the summary names under Key Deliverables: `` - `path` - description ``.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Deliverable {
    /// The path as written (relative to the workspace, if the agent kept to that).
    pub path: String,
    /// What the agent says it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// How a task ended, by its summary's Status (seed 002: ✅ COMPLETED, ⚠️ PARTIAL,
/// ❌ FAILED). Separate from the task's state: a task is completed (it ran to its
/// summary) with a partial outcome.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// ✅ COMPLETED.
    Completed,
    /// ⚠️ PARTIAL (also the fallback summary's, written when the agent wrote none).
    Partial,
    /// ❌ FAILED.
    Failed,
    /// The summary does not say.
    #[default]
    Unknown,
}

impl Outcome {
    /// Its name, as JSON has it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Partial => "partial",
            Outcome::Failed => "failed",
            Outcome::Unknown => "unknown",
        }
    }
}

/// What the Test Results section says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestResults {
    /// Its verdict: the first ✅, ⏭️ or ❌ (or, without one, its words).
    pub verdict: TestVerdict,
    /// How many passed, where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<u64>,
    /// How many failed, where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u64>,
}

/// A Test Results verdict.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TestVerdict {
    /// ✅: the tests passed.
    Passed,
    /// ⏭️: no tests ran (the section says why).
    Skipped,
    /// ❌: some failed.
    Failed,
    /// No Test Results section, or one that says none of these.
    #[default]
    Unknown,
}

/// Whether `text` is a whole summary: it has its Status section (the last one the
/// format asks for), so an agent that writes the file in pieces is not read half way.
pub fn is_complete(text: &str) -> bool {
    sections(text)
        .iter()
        .any(|s| key(&s.title) == key(STATUS_HEADING))
}

/// Reads a summary. Nothing in it is required: what is missing is left empty.
pub fn parse(text: &str) -> Summary {
    let sections = sections(text);
    let body = |names: &[&str]| {
        sections
            .iter()
            .find(|s| names.contains(&key(&s.title).as_str()))
            .map(|s| s.body.as_str())
    };
    Summary {
        objective: body(&["objective"]).unwrap_or_default().to_string(),
        accomplishments: body(&["accomplishments"]).map(items).unwrap_or_default(),
        deliverables: body(&["key deliverables", "deliverables"])
            .map(deliverables)
            .unwrap_or_default(),
        tests: body(&["test results", "tests"])
            .map(test_results)
            .unwrap_or_default(),
        notes: body(&["important notes", "notes"])
            .map(items)
            .unwrap_or_default(),
        status: body(&["status"]).map(outcome).unwrap_or_default(),
        sections,
    }
}

/// A heading as compared: lower case, without the spaces and a colon around it.
fn key(title: &str) -> String {
    title.trim().trim_end_matches(':').trim().to_lowercase()
}

/// The `## ` sections of `text`, in order. A `# ` heading ends one without starting
/// another; lines inside code fences are never headings.
pub fn sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    let mut in_fence = false;
    let close = |current: &mut Option<(String, Vec<&str>)>, out: &mut Vec<Section>| {
        if let Some((title, lines)) = current.take() {
            out.push(Section {
                title,
                body: lines.join("\n").trim_matches('\n').trim_end().to_string(),
            });
        }
    };
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        }
        if !in_fence && !trimmed.starts_with("```") && !trimmed.starts_with("~~~") {
            if let Some(title) = heading(line, 2) {
                close(&mut current, &mut out);
                current = Some((title.to_string(), Vec::new()));
                continue;
            }
            if heading(line, 1).is_some() {
                close(&mut current, &mut out);
                continue;
            }
        }
        if let Some((_, lines)) = &mut current {
            lines.push(line);
        }
    }
    close(&mut current, &mut out);
    out
}

/// The title of `line` if it is a markdown heading of exactly `level` (`## Title`).
fn heading(line: &str, level: usize) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if hashes != level {
        return None;
    }
    let rest = &line[level..];
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then(|| rest.trim())
}

/// The items of a list (`- item` or `* item`); a section without one is one item of
/// its whole text.
fn items(body: &str) -> Vec<String> {
    let listed: Vec<String> = body
        .lines()
        .filter_map(list_item)
        .map(str::to_string)
        .filter(|s| !s.is_empty())
        .collect();
    if listed.is_empty() && !body.trim().is_empty() {
        return vec![body.trim().to_string()];
    }
    listed
}

/// The text of a list item line, if it is one.
fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t.strip_prefix('-').or_else(|| t.strip_prefix('*'))?;
    (rest.is_empty() || rest.starts_with([' ', '\t', '`'])).then(|| rest.trim())
}

/// The Key Deliverables: each list item that starts with a path in backticks.
fn deliverables(body: &str) -> Vec<Deliverable> {
    body.lines()
        .filter_map(list_item)
        .filter_map(|item| {
            let rest = item.strip_prefix('`')?;
            let (path, after) = rest.split_once('`')?;
            if path.is_empty() {
                return None;
            }
            let description = after
                .trim_start()
                .trim_start_matches(['-', '–', '—', ':'])
                .trim();
            Some(Deliverable {
                path: path.to_string(),
                description: description.to_string(),
            })
        })
        .collect()
}

/// The Test Results: the first mark decides (✅ passed, ⏭️ skipped, ❌ failed), else
/// the words; counts where it gives them ("All 8 tests passed", "2 failed", "7/8").
fn test_results(body: &str) -> TestResults {
    let marks = [
        ('✅', TestVerdict::Passed),
        ('⏭', TestVerdict::Skipped),
        ('❌', TestVerdict::Failed),
    ];
    let by_mark = body
        .char_indices()
        .find_map(|(_, c)| marks.iter().find(|(m, _)| *m == c).map(|(_, v)| *v));
    let passed = count_before(body, &["passed", "passing"]).or_else(|| fraction(body));
    let failed = count_before(body, &["failed", "failing", "failures"]);
    let lower = body.to_lowercase();
    let verdict = by_mark.unwrap_or(if failed.is_some_and(|n| n > 0) {
        TestVerdict::Failed
    } else if lower.contains("no tests") || lower.contains("skipped") {
        TestVerdict::Skipped
    } else if passed.is_some() || lower.contains("passed") {
        TestVerdict::Passed
    } else {
        TestVerdict::Unknown
    });
    TestResults {
        verdict,
        passed,
        failed,
    }
}

/// The number just before one of `words` ("8 tests passed", "8 passed").
fn count_before(body: &str, words: &[&str]) -> Option<u64> {
    let tokens: Vec<String> = body
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | ':'))
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    tokens.iter().enumerate().find_map(|(i, t)| {
        if !words.iter().any(|w| t.trim_end_matches('.') == *w) {
            return None;
        }
        // "8 passed", or "8 tests passed".
        let back = |n: usize| i.checked_sub(n).and_then(|j| tokens[j].parse().ok());
        back(1).or_else(|| {
            tokens
                .get(i.checked_sub(1)?)
                .filter(|t| t.starts_with("test"))
                .and(back(2))
        })
    })
}

/// Passes as a fraction, "7/8 passed".
fn fraction(body: &str) -> Option<u64> {
    body.split_whitespace().find_map(|t| {
        let (a, b) = t.split_once('/')?;
        let (a, _b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
        Some(a)
    })
}

/// The Status: the first of COMPLETED, PARTIAL and FAILED it says (its mark alone
/// counts too).
fn outcome(body: &str) -> Outcome {
    let upper = body.to_uppercase();
    let found = [
        ("COMPLETED", Outcome::Completed),
        ("COMPLETE", Outcome::Completed),
        ("✅", Outcome::Completed),
        ("PARTIAL", Outcome::Partial),
        ("⚠", Outcome::Partial),
        ("FAILED", Outcome::Failed),
        ("❌", Outcome::Failed),
    ]
    .into_iter()
    .filter_map(|(word, o)| upper.find(word).map(|at| (at, o)))
    .min_by_key(|(at, _)| *at);
    found.map_or(Outcome::Unknown, |(_, o)| o)
}

/// The most characters of the pane the fallback summary keeps (seed 002's).
pub const FALLBACK_PANE_CHARS: usize = 1000;
/// The most changed files the fallback summary names (seed 002's).
pub const FALLBACK_MAX_FILES: usize = 4;

/// The summary hitl writes for a task whose agent wrote none (seed 002's fallback,
/// word for word): the pane's last [`FALLBACK_PANE_CHARS`] characters, and up to
/// [`FALLBACK_MAX_FILES`] of the files changed since the task began.
pub fn fallback(task_id: &str, pane: &str, changed: &[String]) -> String {
    let skip = pane.chars().count().saturating_sub(FALLBACK_PANE_CHARS);
    let tail: String = pane.chars().skip(skip).collect();
    let files: Vec<String> = changed
        .iter()
        .take(FALLBACK_MAX_FILES)
        .map(|f| format!("- `{f}` - Generated file"))
        .collect();
    format!(
        "# Task Completion Summary\n\n\
         ## Objective\nTask {task_id}\n\n\
         ## Accomplishments\nClaude Code executed the task. See terminal output below.\n\n\
         ## Key Deliverables\n{}\n\n\
         ## Test Results\n⏭️ Status unknown (summary not created by Claude Code)\n\n\
         ## Terminal Output\n```\n{tail}\n```\n\n\
         ## Status\n⚠️ PARTIAL - Summary not created by Claude Code\n",
        files.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 002's example summary.
    const SEED_EXAMPLE: &str = "# Task Completion Summary

## Objective
Create a login button component with email/password validation

## Accomplishments
- Created reusable Button component in React with TypeScript
- Implemented form validation using yup schema

## Key Deliverables
- `src/components/Button.tsx` - Main button component
- `src/components/Button.test.tsx` - Unit tests (8 tests)

## Test Results
✅ All 8 tests passed
- Button renders correctly ✓

## Important Notes
- Component uses Material-UI as peer dependency

## Status
✅ COMPLETED
";

    #[test]
    fn the_seeds_example_is_read_section_by_section() {
        let s = parse(SEED_EXAMPLE);
        assert_eq!(
            s.objective,
            "Create a login button component with email/password validation"
        );
        assert_eq!(s.accomplishments.len(), 2);
        assert_eq!(
            s.deliverables,
            vec![
                Deliverable {
                    path: "src/components/Button.tsx".into(),
                    description: "Main button component".into()
                },
                Deliverable {
                    path: "src/components/Button.test.tsx".into(),
                    description: "Unit tests (8 tests)".into()
                },
            ]
        );
        assert_eq!(
            s.tests,
            TestResults {
                verdict: TestVerdict::Passed,
                passed: Some(8),
                failed: None
            }
        );
        assert_eq!(s.notes, ["Component uses Material-UI as peer dependency"]);
        assert_eq!(s.status, Outcome::Completed);
        assert!(is_complete(SEED_EXAMPLE));
        assert!(!is_complete(
            SEED_EXAMPLE.split("## Status").next().unwrap()
        ));
    }

    #[test]
    fn the_last_section_is_read_to_the_end_and_fences_hold_no_headings() {
        let text = "## Status\n⚠️ PARTIAL\n\n## Key Deliverables\n- `a.rs` - last\n- `b.rs`";
        let s = parse(text);
        assert_eq!(s.status, Outcome::Partial);
        let paths: Vec<&str> = s.deliverables.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["a.rs", "b.rs"]);
        let fenced = fallback(
            "task-1",
            "## not a heading\n$ cargo test",
            &["x.txt".into()],
        );
        let s = parse(&fenced);
        assert_eq!(s.status, Outcome::Partial);
        assert_eq!(s.tests.verdict, TestVerdict::Skipped);
        assert_eq!(s.deliverables[0].path, "x.txt");
        assert!(s.sections.iter().all(|x| x.title != "not a heading"));
        assert_eq!(s.sections.len(), 6);
    }

    #[test]
    fn test_results_and_statuses_are_read_by_mark_then_words() {
        let t = |body: &str| test_results(body);
        assert_eq!(
            t("❌ 3 tests failed, 5 passed").verdict,
            TestVerdict::Failed
        );
        assert_eq!(t("❌ 3 tests failed, 5 passed").failed, Some(3));
        assert_eq!(t("❌ 3 tests failed, 5 passed").passed, Some(5));
        assert_eq!(t("⏭️ No tests (docs only)").verdict, TestVerdict::Skipped);
        assert_eq!(t("7/8 passed").passed, Some(7));
        assert_eq!(t("nothing to say").verdict, TestVerdict::Unknown);
        assert_eq!(outcome("❌ FAILED: the build broke"), Outcome::Failed);
        assert_eq!(outcome("Completed."), Outcome::Completed);
        assert_eq!(outcome(""), Outcome::Unknown);
    }

    #[test]
    fn the_fallback_keeps_the_panes_tail_and_four_files() {
        let pane = "x".repeat(1500) + "END";
        let files: Vec<String> = (1..=6).map(|i| format!("f{i}")).collect();
        let text = fallback("task-9", &pane, &files);
        assert!(text.contains("Task task-9"));
        assert!(text.contains("⚠️ PARTIAL - Summary not created by Claude Code"));
        assert!(text.contains("⏭️ Status unknown"));
        let s = parse(&text);
        assert_eq!(s.deliverables.len(), 4);
        let out = &s
            .sections
            .iter()
            .find(|x| x.title == "Terminal Output")
            .unwrap()
            .body;
        assert_eq!(out.trim_matches('`').trim().chars().count(), 1000);
        assert!(out.contains("END"));
    }
}
