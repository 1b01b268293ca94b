//! "Always allow this here": rules a human adds while approving a call (or with
//! `hitl rules add`), kept as `[hook] allow` in the project's `.helpers/config.toml`.
//! A call the policy would ask about, and every part of it that the policy flags
//! covered by a rule, is allowed without asking.
//!
//! Rules are written as Claude Code writes its permission rules:
//! `Bash(git push --force origin main)` allows that command exactly,
//! `Bash(npm publish:*)` any command starting with those words, and
//! `Edit(config/*.json)` writing files matching the glob, from the project's root
//! (or absolute); `Edit` rules cover every file-writing tool. A rule only ever lets
//! through what hitl would have asked about: it never widens Claude Code's own
//! permissions.

use std::{fmt, path::Path, str::FromStr};

use anyhow::{Context, Result, bail};
use nix::fcntl::{Flock, FlockArg};

/// Tools whose input names a file they write, and the field that names it.
pub(crate) const WRITING_TOOLS: &[(&str, &str)] = &[
    ("Edit", "file_path"),
    ("Write", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// One "always allow" rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// As written in the config, and as shown.
    text: String,
    what: Covers,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Covers {
    /// A shell command: this one (its words, spaces between them not counted), or
    /// any starting with these words when `prefix`.
    Command { words: String, prefix: bool },
    /// Files whose path matches the glob.
    Path { glob: String },
}

impl FromStr for Rule {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> Result<Rule> {
        let text = text.trim();
        let (tool, body) = text
            .strip_suffix(')')
            .and_then(|t| t.split_once('('))
            .with_context(|| {
                format!("rule {text:?} is not TOOL(…): like Bash(npm publish:*) or Edit(src/**)")
            })?;
        let body = body.trim();
        if body.is_empty() {
            bail!("rule {text:?} names nothing between its brackets");
        }
        let what = if tool == "Bash" {
            let (words, prefix) = match body.strip_suffix(":*") {
                Some(start) => (start, true),
                None => (body, false),
            };
            let words = words_of(words);
            if words.is_empty() {
                bail!("rule {text:?} names no command");
            }
            Covers::Command { words, prefix }
        } else if WRITING_TOOLS.iter().any(|(t, _)| *t == tool) {
            check_glob(body).with_context(|| format!("rule {text:?}"))?;
            Covers::Path {
                glob: body.to_string(),
            }
        } else {
            bail!(
                "rule {text:?}: rules name Bash commands or file writes (Edit, Write, MultiEdit, NotebookEdit), not {tool:?}"
            );
        };
        Ok(Rule {
            text: text.to_string(),
            what,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A command's words with one space between them.
fn words_of(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Rule {
    /// Whether it allows the simple command `part` (one command of a line, as the
    /// policy splits it).
    pub fn covers_command(&self, part: &str) -> bool {
        let Covers::Command { words, prefix } = &self.what else {
            return false;
        };
        let part = words_of(part);
        match part.strip_prefix(words.as_str()) {
            Some("") => true,
            // A prefix ends at a word's end: `git push:*` is not `git pushy`.
            Some(rest) => *prefix && rest.starts_with(' '),
            None => false,
        }
    }

    /// Its glob, if it is a file rule.
    pub fn path_glob(&self) -> Option<&str> {
        match &self.what {
            Covers::Path { glob } => Some(glob),
            Covers::Command { .. } => None,
        }
    }
}

/// The rules of `[hook] allow`, or the first that does not read.
pub fn parse_all(texts: &[String]) -> Result<Vec<Rule>> {
    texts
        .iter()
        .map(|t| t.parse().context("[hook] allow"))
        .collect()
}

/// The rule allowing `part` (a command the policy flagged) exactly, if one can say it.
pub fn for_command(part: &str) -> Option<String> {
    let words = words_of(part);
    // A command ending in ":*" would read back as a prefix.
    if words.is_empty() || words.ends_with(":*") {
        return None;
    }
    readable(format!("Bash({words})"))
}

/// The rule allowing writes to `path` (a protected file) and no other.
pub fn for_path(path: &str) -> Option<String> {
    readable(format!("Edit({})", escape_glob(path)))
}

/// `text`, if it reads back as a rule (a path with brackets may not).
fn readable(text: String) -> Option<String> {
    text.parse::<Rule>().ok().map(|r| r.text)
}

/// Whether `glob` reads as a glob.
fn check_glob(glob: &str) -> Result<()> {
    glob_matcher(glob.strip_prefix("~/").unwrap_or(glob)).map(drop)
}

/// A glob of `[hook]`'s settings (protected paths, safe deletes, `Edit` rules;
/// globset's syntax, `*` not crossing `/`) as a regex-lite matcher.
pub(crate) fn glob_matcher(glob: &str) -> Result<regex_lite::Regex> {
    let g = globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .build()?;
    // globset's regex asks for bytes mode (`(?-u)`); regex-lite has no Unicode mode
    // to leave.
    let re = g.regex();
    Ok(regex_lite::Regex::new(
        re.strip_prefix("(?-u)").unwrap_or(re),
    )?)
}

/// `path` as a glob matching only itself.
fn escape_glob(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '*' | '?' | '[' | ']' | '{' | '}' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// Adds `rule` to `[hook] allow` in the config file at `config` (made if missing),
/// keeping the rest of the file as it is, comments included. `false` when it was
/// there already.
pub fn add(config: &Path, rule: &Rule) -> Result<bool> {
    edit(config, |allow| {
        if allow
            .iter()
            .any(|v| v.as_str().is_some_and(|t| t.trim() == rule.text))
        {
            return false;
        }
        allow.push(rule.text.as_str());
        true
    })
}

/// Removes the rule written `text` (or numbered `text`, from 1, as `hitl rules`
/// lists them) from `[hook] allow` in `config`; the rule removed, if any.
pub fn remove(config: &Path, text: &str) -> Result<Option<String>> {
    let mut removed = None;
    edit(config, |allow| {
        let at = match text.trim().parse::<usize>() {
            Ok(n) if (1..=allow.len()).contains(&n) => Some(n - 1),
            _ => allow
                .iter()
                .position(|v| v.as_str().is_some_and(|t| t.trim() == text.trim())),
        };
        if let Some(i) = at {
            removed = allow.get(i).and_then(|v| v.as_str()).map(str::to_string);
            allow.remove(i);
        }
        removed.is_some()
    })?;
    Ok(removed)
}

/// Runs `change` on the `[hook] allow` array of `config` under a lock (two hooks
/// adding rules at once must not lose one), writing the file when it says it changed.
fn edit(config: &Path, change: impl FnOnce(&mut toml_edit::Array) -> bool) -> Result<bool> {
    let dir = config.parent().unwrap_or(Path::new("."));
    let lock_path = dir.join(".config.lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("opening {}", lock_path.display()))?;
    let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let mut doc = crate::config::toml_to_edit(config)?;
    let hook = doc
        .entry("hook")
        .or_insert_with(toml_edit::table)
        .as_table_like_mut()
        .with_context(|| format!("[hook] in {} is not a table", config.display()))?;
    let allow = hook
        .entry("allow")
        .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .with_context(|| format!("[hook] allow in {} is not a list", config.display()))?;
    if !change(allow) {
        return Ok(false);
    }
    allow.fmt();
    crate::spool::write_atomic(dir, config, doc.to_string().as_bytes(), true)
        .with_context(|| format!("writing {}", config.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(t: &str) -> Rule {
        t.parse().unwrap()
    }

    #[test]
    fn command_rules_match_exactly_or_by_whole_words() {
        let exact = rule("Bash(git push --force origin main)");
        assert!(exact.covers_command("git  push --force origin main"));
        assert!(!exact.covers_command("git push --force origin main2"));
        assert!(!exact.covers_command("git push --force origin main --tags"));
        let prefix = rule("Bash(npm publish:*)");
        assert!(prefix.covers_command("npm publish"));
        assert!(prefix.covers_command("npm publish --tag next"));
        assert!(!prefix.covers_command("npm publisher"));
        assert!(!prefix.covers_command("npm  install"));
        assert!(!rule("Edit(src/**)").covers_command("src"));
    }

    #[test]
    fn bad_rules_say_why() {
        for (text, says) in [
            ("Bash", "TOOL(…)"),
            ("Bash()", "nothing"),
            ("Bash(:*)", "no command"),
            ("Read(x)", "not \"Read\""),
            ("Edit(a[)", "rule"),
        ] {
            let e = format!("{:#}", text.parse::<Rule>().unwrap_err());
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn rules_offered_name_the_same_command_or_file_only() {
        assert_eq!(
            for_command("rm  -rf build/").unwrap(),
            "Bash(rm -rf build/)"
        );
        assert_eq!(for_command("echo a:*"), None);
        assert_eq!(for_path("conf/a*b.json").unwrap(), "Edit(conf/a[*]b.json)");
    }

    #[test]
    fn rules_are_added_once_and_removed_keeping_the_rest_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        let before =
            "# my settings\n[ask]\ntimeout = 30 # seconds\n\n[hook]\n# a comment\ntimeout = 60\n";
        std::fs::write(&config, before).unwrap();
        assert!(add(&config, &rule("Bash(make deploy)")).unwrap());
        assert!(!add(&config, &rule("Bash(make deploy)")).unwrap());
        assert!(add(&config, &rule("Edit(.env)")).unwrap());
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(
            text.starts_with("# my settings\n[ask]\ntimeout = 30 # seconds\n"),
            "{text}"
        );
        assert!(text.contains("# a comment\ntimeout = 60\n"), "{text}");
        let settings = crate::config::Settings::from_toml(&text).unwrap();
        assert_eq!(settings.hook.allow, ["Bash(make deploy)", "Edit(.env)"]);
        assert_eq!(remove(&config, "1").unwrap().unwrap(), "Bash(make deploy)");
        assert_eq!(
            remove(&config, "Edit(.env)").unwrap().unwrap(),
            "Edit(.env)"
        );
        assert_eq!(remove(&config, "Edit(.env)").unwrap(), None);
        let settings =
            crate::config::Settings::from_toml(&std::fs::read_to_string(&config).unwrap()).unwrap();
        assert!(settings.hook.allow.is_empty());
        // No file yet: made.
        let fresh = dir.path().join("new.toml");
        add(&fresh, &rule("Bash(x:*)")).unwrap();
        assert_eq!(
            crate::config::Settings::from_toml(&std::fs::read_to_string(&fresh).unwrap())
                .unwrap()
                .hook
                .allow,
            ["Bash(x:*)"]
        );
    }
}
