//! `hitl task session NAME --worktree BRANCH`: the session works in a git worktree
//! of its own on BRANCH (`<repository>/.worktrees/<NAME>`, made from the current
//! commit with a new branch if BRANCH does not exist), so agents in several sessions
//! change one repository without touching each other's files. `.worktrees/` is kept
//! out of the repository's status (`info/exclude`). Every git call is one process
//! with its arguments as a list.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The folder holding the sessions' worktrees, at the repository's top.
pub const FOLDER: &str = ".worktrees";

/// The worktree of session `session` on `branch` in the repository holding `repo`:
/// made if it is not there, adopted if it is (on any branch: it is the session's).
pub fn ensure(repo: &Path, session: &str, branch: &str) -> Result<PathBuf, String> {
    let top = git(repo, &["rev-parse", "--show-toplevel"]).map_err(|e| {
        format!(
            "--worktree needs a git repository: {} is not in one ({e})",
            repo.display()
        )
    })?;
    let top = PathBuf::from(top.trim());
    git(&top, &["check-ref-format", "--branch", branch])
        .map_err(|_| format!("{branch:?} is not a branch name git takes"))?;
    let path = top.join(FOLDER).join(session);
    if path.join(".git").exists() {
        return Ok(path);
    }
    let exists = git(
        &top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    let target = path.to_string_lossy().into_owned();
    let made = if exists {
        git(&top, &["worktree", "add", &target, branch])
    } else {
        git(&top, &["worktree", "add", "-b", branch, &target])
    };
    made.map_err(|e| format!("making the worktree {target} on {branch}: {e}"))?;
    super::prompt::exclude_in_git(&top, &[format!("/{FOLDER}/")]).map_err(|e| format!("{e:#}"))?;
    Ok(path)
}

/// Runs `git ARGS` in `dir`: its stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running git: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn a_session_gets_its_own_worktree_on_its_branch_and_keeps_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        run(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README"), "hi\n").unwrap();
        run(&repo, &["add", "."]);
        run(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "first",
            ],
        );
        let path = ensure(&repo.join("src"), "coder", "feature/x").unwrap();
        assert_eq!(path, repo.canonicalize().unwrap().join(".worktrees/coder"));
        assert_eq!(
            std::fs::read_to_string(path.join("README")).unwrap(),
            "hi\n"
        );
        let branch = git(&path, &["branch", "--show-current"]).unwrap();
        assert_eq!(branch.trim(), "feature/x");
        // Adopted the second time; the main checkout does not see it.
        assert_eq!(ensure(&repo, "coder", "feature/x").unwrap(), path);
        let status = git(&repo, &["status", "--porcelain"]).unwrap();
        assert_eq!(status, "", "{status}");
        // Context files written in the worktree stay out of its status too.
        crate::tasks::prompt::exclude_from_git(&path).unwrap();
        std::fs::write(path.join("CONTEXT.md"), "x").unwrap();
        assert_eq!(git(&path, &["status", "--porcelain"]).unwrap(), "");
        assert!(ensure(&repo, "other", "bad..name").is_err());
        assert!(
            ensure(tmp.path(), "x", "y")
                .unwrap_err()
                .contains("git repository")
        );
    }
}
