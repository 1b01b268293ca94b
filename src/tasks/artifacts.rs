//! A task's artifacts (seed 002's selective extraction): its summary, then at most
//! four of the deliverables the summary names, five in all. Each path is resolved
//! inside the workspace as the kernel resolves it (no absolute path, no `..`, no
//! symlink that leads out), so an agent talked into naming `/etc/passwd` or
//! `../.ssh/id_ed25519` hands back nothing but a reason.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::summary::Deliverable;

/// The most deliverables returned beside the summary (seed 002: five artifacts in all).
pub const MAX_DELIVERABLES: usize = 4;

/// The largest file returned as an artifact, by default.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 20;

/// The files hitl writes into the workspace for each task: never a deliverable.
pub const CONTEXT_FILES: [&str; 3] = ["CONTEXT.md", "SPECS.md", "INSTRUCTIONS.md"];

/// Folders that hold what a build makes or fetches, never a deliverable.
const BUILD_OUTPUTS: [&str; 9] = [
    "target",
    "node_modules",
    "dist",
    "build",
    ".git",
    "__pycache__",
    ".venv",
    ".next",
    ".helpers",
];

/// One file returned with a task's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifact {
    /// Its path inside the workspace.
    pub path: String,
    /// What the summary says it is (empty for the summary itself).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its text, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A deliverable left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LeftOut {
    /// The path as the summary wrote it.
    pub path: String,
    /// Why it is not returned.
    pub reason: String,
}

/// What a task returns: its artifacts, and the deliverables left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Artifacts {
    /// The summary first, then the deliverables, in the summary's order.
    pub artifacts: Vec<Artifact>,
    /// Deliverables not returned, each with its reason (a missing file among them).
    pub left_out: Vec<LeftOut>,
}

/// The artifacts of task `task_id` in `workspace`: the summary at `summary_path`,
/// then the first [`MAX_DELIVERABLES`] of `deliverables` that may be returned.
pub fn collect(
    workspace: &Path,
    summary_path: &Path,
    deliverables: &[Deliverable],
    max_bytes: u64,
) -> Artifacts {
    let mut out = Artifacts::default();
    let root = match workspace.canonicalize() {
        Ok(r) => r,
        Err(e) => {
            out.left_out.extend(deliverables.iter().map(|d| LeftOut {
                path: d.path.clone(),
                reason: format!("the workspace cannot be read: {e}"),
            }));
            return out;
        }
    };
    if let Ok(a) = read(&root, summary_path, String::new(), u64::MAX) {
        out.artifacts.push(a);
    }
    for d in deliverables {
        let refused = |reason: String| LeftOut {
            path: d.path.clone(),
            reason,
        };
        if out.artifacts.len() > MAX_DELIVERABLES {
            out.left_out.push(refused(format!(
                "only {MAX_DELIVERABLES} deliverables are returned"
            )));
            continue;
        }
        let result =
            resolve(&root, &d.path).and_then(|p| read(&root, &p, d.description.clone(), max_bytes));
        match result {
            Ok(a) if out.artifacts.iter().any(|x| x.path == a.path) => {
                out.left_out.push(refused("named twice".into()))
            }
            Ok(a) => out.artifacts.push(a),
            Err(reason) => out.left_out.push(refused(reason)),
        }
    }
    out
}

/// `path` inside the workspace `root` (canonical), or why it may not be returned.
fn resolve(root: &Path, path: &str) -> Result<PathBuf, String> {
    let rel = Path::new(path.trim());
    if rel.as_os_str().is_empty() {
        return Err("an empty path".into());
    }
    if rel.is_absolute() {
        return Err("an absolute path: deliverables are named inside the workspace".into());
    }
    if rel
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err("a path through `..` leads outside the workspace".into());
    }
    let full = root.join(rel);
    let real = match full.canonicalize() {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("no such file in the workspace".into());
        }
        Err(e) => return Err(format!("cannot be read: {e}")),
    };
    // A symlink anywhere on the way is followed as the kernel would, and judged by
    // where it lands.
    let inside = real
        .strip_prefix(root)
        .map_err(|_| "it leads outside the workspace (a symlink)".to_string())?;
    let first = inside
        .components()
        .next()
        .and_then(|c| c.as_os_str().to_str())
        .unwrap_or("");
    if inside.components().count() == 1 && CONTEXT_FILES.contains(&first) {
        return Err("a context file hitl wrote, not a deliverable".into());
    }
    if first == "summaries" {
        return Err("a summary: only the task's own is returned".into());
    }
    if let Some(c) = inside
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .find(|c| BUILD_OUTPUTS.contains(c))
    {
        return Err(format!("inside {c}/, which holds build outputs"));
    }
    Ok(real)
}

/// The artifact at `path` (inside `root`), if it is a file of at most `max_bytes`.
fn read(root: &Path, path: &Path, description: String, max_bytes: u64) -> Result<Artifact, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err("not a file".into());
    }
    if meta.len() > max_bytes {
        return Err(format!(
            "{} bytes, over the {max_bytes}-byte limit",
            meta.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot be read: {e}"))?;
    let shown = path
        .canonicalize()
        .ok()
        .and_then(|p| p.strip_prefix(root).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf());
    Ok(Artifact {
        path: shown.to_string_lossy().into_owned(),
        description,
        bytes: bytes.len() as u64,
        text: String::from_utf8(bytes).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deliverable(path: &str) -> Deliverable {
        Deliverable {
            path: path.into(),
            description: String::new(),
        }
    }

    #[test]
    fn only_files_inside_the_workspace_are_returned_at_most_four() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("summaries")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(ws.join("target")).unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::fs::write(ws.join("summaries/task-1.md"), "## Status\n✅ COMPLETED").unwrap();
        std::fs::write(ws.join("summaries/task-0.md"), "other").unwrap();
        std::fs::write(ws.join("CONTEXT.md"), "ctx").unwrap();
        std::fs::write(ws.join("target/app"), "bin").unwrap();
        std::fs::write(ws.join("big.bin"), vec![0u8; 2000]).unwrap();
        for i in 1..=5 {
            std::fs::write(ws.join(format!("src/f{i}.rs")), format!("// {i}")).unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        let names = [
            "../secret",
            "/etc/passwd",
            "link",
            "CONTEXT.md",
            "summaries/task-0.md",
            "target/app",
            "big.bin",
            "missing.rs",
            "src/f1.rs",
            "./src/f1.rs",
            "src/f2.rs",
            "src/f3.rs",
            "src/f4.rs",
            "src/f5.rs",
        ];
        let list: Vec<Deliverable> = names.iter().map(|n| deliverable(n)).collect();
        let got = collect(&ws, &ws.join("summaries/task-1.md"), &list, 1000);
        let paths: Vec<&str> = got.artifacts.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "summaries/task-1.md",
                "src/f1.rs",
                "src/f2.rs",
                "src/f3.rs",
                "src/f4.rs"
            ]
        );
        assert_eq!(got.artifacts[1].text.as_deref(), Some("// 1"));
        let reasons: Vec<(&str, &str)> = got
            .left_out
            .iter()
            .map(|l| (l.path.as_str(), l.reason.as_str()))
            .collect();
        let reason_of = |p: &str| reasons.iter().find(|r| r.0 == p).unwrap().1;
        assert!(reason_of("../secret").contains(".."));
        assert!(reason_of("/etc/passwd").contains("absolute"));
        assert!(reason_of("link").contains("outside"));
        assert!(reason_of("CONTEXT.md").contains("context file"));
        assert!(reason_of("summaries/task-0.md").contains("summary"));
        assert!(reason_of("target/app").contains("build outputs"));
        assert!(reason_of("big.bin").contains("limit"));
        assert!(reason_of("missing.rs").contains("no such file"));
        assert!(reason_of("./src/f1.rs").contains("twice"));
        assert!(reason_of("src/f5.rs").contains("only 4"));
    }
}
