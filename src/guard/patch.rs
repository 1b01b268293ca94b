//! Codex CLI's `apply_patch` tool, read for the files it writes: its edits reach the
//! hook as `tool_name: "apply_patch"` with the whole patch in `tool_input.command`,
//! one envelope that may add, change, delete and move any number of files.
//!
//! The guard checks every file the patch names as it checks a `Write` of that file.
//! A patch it cannot read whole names files it cannot know, so it is asked.

/// The files `patch` writes (added, changed, deleted, or moved to), in order, as
/// written in it; `None` when it is not a patch that can be read whole: no `*** Begin
/// Patch`, no file at all, a header naming none, or a `***` line of no known kind
/// (where Codex might read a header hitl does not).
pub fn written_files(patch: &str) -> Option<Vec<&str>> {
    const HEADERS: &[&str] = &[
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    const MARKS: &[&str] = &["*** Begin Patch", "*** End Patch", "*** End of File"];
    let mut lines = patch.lines().map(str::trim).skip_while(|l| l.is_empty());
    if lines.next() != Some("*** Begin Patch") {
        return None;
    }
    let mut files = Vec::new();
    // Every line is looked at as a header would be, context lines too: naming more
    // files than Codex writes only checks more.
    for line in lines {
        if !line.starts_with("***") || MARKS.contains(&line) {
            continue;
        }
        let path = HEADERS
            .iter()
            .find_map(|h| line.strip_prefix(h))
            .map(str::trim)
            .filter(|p| !p.is_empty())?;
        files.push(path);
    }
    (!files.is_empty()).then_some(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_a_patch_touches_is_named() {
        let patch = "*** Begin Patch\n\
                     *** Add File: notes/new.md\n+hello\n\
                     *** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@ fn main\n-a\n+b\n\
                     *** Delete File: /abs/old.txt\n\
                     *** End Patch\n";
        assert_eq!(
            written_files(patch).unwrap(),
            ["notes/new.md", "src/lib.rs", "src/core.rs", "/abs/old.txt"]
        );
    }

    #[test]
    fn a_context_line_that_looks_like_a_header_is_checked_too() {
        let patch = "*** Begin Patch\n*** Update File: a.md\n@@\n *** Update File: .helpers/config.toml\n+x\n*** End Patch";
        assert_eq!(
            written_files(patch).unwrap(),
            ["a.md", ".helpers/config.toml"]
        );
    }

    #[test]
    fn what_cannot_be_read_whole_is_not_read_at_all() {
        for patch in [
            "",
            "*** Add File: x\n+y\n",
            "*** Begin Patch\n*** End Patch\n",
            "*** Begin Patch\n*** Add File:   \n*** End Patch\n",
            "*** Begin Patch\n*** Add File: a\n***Update File: .helpers/config.toml\n*** End Patch\n",
            "*** Begin Patch\n*** Copy File: a\n*** End Patch\n",
        ] {
            assert_eq!(written_files(patch), None, "{patch:?}");
        }
    }
}
