//! What a task says to the agent: the three context files written into the workspace
//! (CONTEXT.md, SPECS.md, INSTRUCTIONS.md) and the text typed into its session, with
//! seed 002's completion block naming the task's own summary file.

use std::path::Path;

use anyhow::{Context, Result};

use super::artifacts::CONTEXT_FILES;
use super::record::Task;

/// The longest instruction typed in; the whole of it is in INSTRUCTIONS.md.
const TYPED_INSTRUCTION_CHARS: usize = 2000;

/// `text` without control characters but newlines and tabs. A bracketed paste ends at
/// `ESC [201~`: an instruction carrying one would have its rest typed as keys, so no
/// escape (or any other control) ever reaches the pane.
pub fn without_controls(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// seed 002's completion block for task `id`: where its summary goes and what it
/// holds.
fn completion_block(id: &str) -> String {
    format!(
        "CRITICAL: When you complete this task, create a file named summaries/{id}.md with:

# Task Completion Summary

## Objective
[What was the task?]

## Accomplishments
- [Bullet point 1]
- [Bullet point 2]

## Key Deliverables
- `path/to/file1.ext` - Description of file 1
- `path/to/file2.ext` - Description of file 2
[List ONLY the essential files that should be returned as artifacts]

## Test Results
✅ All X tests passed
[OR] ⏭️ No tests (explanation)
[OR] ❌ X tests failed

## Important Notes
- [Any caveats, issues, or recommendations]

## Status
✅ COMPLETED [OR] ⚠️ PARTIAL [OR] ❌ FAILED

Do not proceed to other tasks until summaries/{id}.md is created."
    )
}

/// The text typed into the session for `task`. It starts with `Task <id>:` (a leading
/// `/`, `!` or `#` would switch Claude Code's input mode), names the three context
/// files, and ends with the completion block.
pub fn typed(task: &Task) -> String {
    let instruction: String = without_controls(task.instruction.trim())
        .chars()
        .take(TYPED_INSTRUCTION_CHARS)
        .collect();
    format!(
        "Task {}: {}\n\nRead CONTEXT.md, SPECS.md and INSTRUCTIONS.md for full details.\n\n{}",
        task.id,
        instruction.trim_end_matches('.'),
        completion_block(&task.id)
    )
}

/// The reminder typed when the agent stopped without its summary.
pub fn reminder(task: &Task) -> String {
    format!(
        "Task {id}: you stopped, but summaries/{id}.md does not exist yet. Finish the task, \
         then create summaries/{id}.md as described above.",
        id = task.id
    )
}

/// Writes CONTEXT.md, SPECS.md and INSTRUCTIONS.md for `task` into `workspace` (each
/// task's replace the last's), and makes `summaries/`.
pub fn write_context_files(workspace: &Path, task: &Task) -> Result<()> {
    std::fs::create_dir_all(workspace.join("summaries"))
        .with_context(|| format!("creating {}/summaries", workspace.display()))?;
    let context = format!(
        "# Context for task {id}\n\n- Task: {id}\n- Session: {session}\n- Priority: {priority}\n\
         - Submitted: {submitted}\n- Summary file: summaries/{id}.md\n\n{extra}\n",
        id = task.id,
        session = task.session,
        priority = task.priority.as_str(),
        submitted = task.submitted_at,
        extra = task
            .context
            .as_deref()
            .unwrap_or("No further context was given."),
    );
    let specs = format!(
        "# Specifications for task {}\n\n{}\n",
        task.id,
        task.specs
            .as_deref()
            .unwrap_or("No specifications were given beyond the instructions.")
    );
    let instructions = format!(
        "# Instructions for task {}\n\n{}\n\n{}\n",
        task.id,
        task.instruction.trim(),
        completion_block(&task.id)
    );
    for (name, text) in CONTEXT_FILES.iter().zip([context, specs, instructions]) {
        let path = workspace.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Adds the context files and `summaries/` to `.git/info/exclude` in a git
/// workspace, once: they are hitl's, never the project's.
pub fn exclude_from_git(workspace: &Path) -> Result<()> {
    let wanted: Vec<String> = CONTEXT_FILES
        .iter()
        .map(|f| format!("/{f}"))
        .chain(["/summaries/".to_string()])
        .collect();
    exclude_in_git(workspace, &wanted)
}

/// Adds `patterns` to the `info/exclude` of the git repository whose working tree
/// is `workspace` (a linked worktree's is its main repository's), if it is one.
pub fn exclude_in_git(workspace: &Path, patterns: &[String]) -> Result<()> {
    let Some(git) = git_dir(workspace) else {
        return Ok(());
    };
    let exclude = git.join("info").join("exclude");
    let have = std::fs::read_to_string(&exclude).unwrap_or_default();
    let wanted: Vec<&String> = patterns
        .iter()
        .filter(|line| !have.lines().any(|l| l.trim() == line.as_str()))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(git.join("info"))?;
    let mut text = have;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# hitl tasks\n");
    for line in wanted {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&exclude, text).with_context(|| format!("writing {}", exclude.display()))
}

/// The git directory whose `info/` serves the working tree `workspace`: `.git` in
/// it, or for a linked worktree (`.git` a file, `gitdir: …`) its repository's
/// common one.
fn git_dir(workspace: &Path) -> Option<std::path::PathBuf> {
    let git = workspace.join(".git");
    if git.is_dir() {
        return Some(git);
    }
    let pointer = std::fs::read_to_string(&git).ok()?;
    let own = workspace.join(pointer.trim().strip_prefix("gitdir:")?.trim());
    let common = std::fs::read_to_string(own.join("commondir")).ok();
    Some(match common {
        Some(c) => own.join(c.trim()),
        None => own,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typed_text_starts_with_the_task_and_carries_no_escape() {
        let task = Task {
            id: "task-1".into(),
            session: "s".into(),
            instruction: "/clear\x1b[201~ then rm -rf ~\x07".into(),
            priority: crate::protocol::Priority::Normal,
            context: None,
            specs: None,
            timeout_secs: 300,
            state: super::super::record::TaskState::Submitted,
            outcome: None,
            reason: None,
            submitted_at: jiff::Timestamp::UNIX_EPOCH,
            started_at: None,
            ended_at: None,
            waited_ms: 0,
            waiting_since: None,
            delivered: false,
            fallback_summary: false,
            seq: 1,
            attempt: 0,
            queue_key: None,
            usage: None,
        };
        let text = typed(&task);
        assert!(
            text.starts_with("Task task-1: /clear[201~ then rm -rf ~"),
            "{text}"
        );
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'));
        assert!(text.contains("create a file named summaries/task-1.md"));
        assert!(text.contains("CONTEXT.md, SPECS.md and INSTRUCTIONS.md"));

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/info")).unwrap();
        std::fs::write(dir.path().join(".git/info/exclude"), "*.log").unwrap();
        write_context_files(dir.path(), &task).unwrap();
        exclude_from_git(dir.path()).unwrap();
        exclude_from_git(dir.path()).unwrap();
        let exclude = std::fs::read_to_string(dir.path().join(".git/info/exclude")).unwrap();
        assert_eq!(exclude.matches("/CONTEXT.md").count(), 1, "{exclude}");
        assert!(exclude.starts_with("*.log\n") && exclude.contains("/summaries/"));
        assert!(dir.path().join("summaries").is_dir());
        assert!(
            std::fs::read_to_string(dir.path().join("INSTRUCTIONS.md"))
                .unwrap()
                .contains("rm -rf")
        );
    }
}
