//! Seed 003's KEY=VALUE files (`question`, `answer`, `inbox/request`,
//! `outbox/result`), read without running anything and written so that a shell
//! reads them back exactly.
//!
//! The seed writes values unquoted (`ANSWER=Option 1`, `DESCRIPTION=Add class …`),
//! which bash's `source` would run as commands (`1`, `class`). hitl writes every
//! value in POSIX single quotes, a `'` inside as `'\''`: bash `source` and dash `.`
//! both read that back byte for byte, newlines, `$`, backticks and all (no `$'…'`,
//! which dash lacks). The reader takes what either side writes: the seed's unquoted
//! form literally (the rest of the line), single- and double-quoted values (a value
//! may span lines inside its quotes), `export KEY=…`, and a line with no `KEY=` as
//! the next line of the previous value (the seed's multi-line `PLAN=$(…)`). It never
//! expands or executes anything.

use std::fmt;

/// A KEY=VALUE file, read: its pairs in order (a key given twice keeps its last
/// value, in the first one's place, as sourcing it would leave it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyValues {
    pairs: Vec<(String, String)>,
}

/// Why a pair cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Not a shell variable name.
    #[error(
        "{0:?} is not a shell variable name (letters, digits and _, not starting with a digit)"
    )]
    BadKey(String),
    /// A NUL byte, which no shell variable can hold.
    #[error("the value of {0} holds a NUL byte, which no shell variable can hold")]
    Nul(String),
}

/// Whether `key` is a shell variable name.
pub fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl KeyValues {
    /// Empty.
    pub fn new() -> KeyValues {
        KeyValues::default()
    }

    /// Reads `text` (never fails: what is not a pair is the previous value's next
    /// line, or, before the first pair, ignored).
    pub fn parse(text: &str) -> KeyValues {
        let mut kv = KeyValues::new();
        let mut lines = text.split('\n').peekable();
        // The key whose unquoted value the next bare line continues.
        let mut open: Option<String> = None;
        while let Some(line) = lines.next() {
            // A CR before the newline (a file from Windows) is not part of an
            // unquoted value; inside quotes it is, as a shell reads it.
            let unquoted = |s: &'_ str| s.strip_suffix('\r').unwrap_or(s).to_string();
            let Some((key, rest)) = split_pair(line) else {
                if let Some(key) = &open {
                    let value = kv.get_mut(key).expect("set when opened");
                    value.push('\n');
                    value.push_str(&unquoted(line));
                }
                continue;
            };
            // The value before this pair ends here: its trailing blank lines are the
            // file's, not its own.
            if let Some(before) = open.take() {
                trim_trailing_newlines(kv.get_mut(&before).expect("set when opened"));
            }
            match rest.chars().next() {
                Some('\'' | '"') => {
                    // Quoted, perhaps over several lines.
                    let mut source = rest.to_string();
                    let value = loop {
                        match unquote(&source) {
                            Some(v) => break v,
                            None => match lines.next() {
                                Some(next) => {
                                    source.push('\n');
                                    source.push_str(next);
                                }
                                // Unclosed at the end: what there is, literally.
                                None => break source[1..].to_string(),
                            },
                        }
                    };
                    kv.set(&key, value);
                    open = None;
                }
                _ => {
                    kv.set(&key, unquoted(rest));
                    open = Some(key);
                }
            }
        }
        // Nor are the file's last newlines.
        if let Some(key) = open {
            trim_trailing_newlines(kv.get_mut(&key).expect("set when opened"));
        }
        kv
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut String> {
        self.pairs
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Sets `key` (in its place if it is there, else last).
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.get_mut(key) {
            Some(v) => *v = value,
            None => self.pairs.push((key.to_string(), value)),
        }
    }

    /// The pairs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The file's text: each pair as `KEY='value'`, one per line (a value's own
    /// newlines inside its quotes).
    pub fn to_text(&self) -> Result<String, WriteError> {
        let mut out = String::new();
        for (k, v) in &self.pairs {
            if !is_key(k) {
                return Err(WriteError::BadKey(k.clone()));
            }
            if v.contains('\0') {
                return Err(WriteError::Nul(k.clone()));
            }
            out.push_str(k);
            out.push('=');
            out.push_str(&quote(v));
            out.push('\n');
        }
        Ok(out)
    }
}

impl fmt::Display for KeyValues {
    /// The pairs as `KEY=value` lines, for people.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in &self.pairs {
            writeln!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

fn trim_trailing_newlines(value: &mut String) {
    let kept = value.trim_end_matches('\n').len();
    value.truncate(kept);
}

/// `value` in POSIX single quotes, each `'` as `'\''`.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `KEY` and the rest of a `KEY=…` (or `export KEY=…`) line.
fn split_pair(line: &str) -> Option<(String, &str)> {
    let line = line.trim_start();
    let line = line
        .strip_prefix("export ")
        .map_or(line, |rest| rest.trim_start());
    let (key, rest) = line.split_once('=')?;
    is_key(key).then(|| (key.to_string(), rest))
}

/// The value a shell reads from `source` (which starts with a quote): the quoted
/// and bare pieces joined, up to the first unquoted blank; `None` while a quote is
/// still open.
fn unquote(source: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        // Inside double quotes a backslash escapes only these.
                        c @ ('"' | '\\' | '$' | '`') => out.push(c),
                        '\n' => {}
                        c => {
                            out.push('\\');
                            out.push(c);
                        }
                    },
                    c => out.push(c),
                }
            },
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => out.push(c),
                None => {}
            },
            c if c == ' ' || c == '\t' => break,
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_unquoted_files_are_read_literally() {
        let kv = KeyValues::parse(
            "CONTEXT=This commit is too large (18 files)\nOPTION_1=Split into 3 commits: models, controllers, routes\nOPTION_2=Split `x` $HOME\n",
        );
        assert_eq!(
            kv.get("CONTEXT"),
            Some("This commit is too large (18 files)")
        );
        assert_eq!(kv.get("OPTION_2"), Some("Split `x` $HOME"));
        assert_eq!(
            KeyValues::parse("ANSWER=Option 1").get("ANSWER"),
            Some("Option 1")
        );
    }

    #[test]
    fn a_bare_line_continues_the_value_before_it() {
        let kv = KeyValues::parse(
            "CONTEXT=Created commit plan with 15 commits\nPLAN=1. models\n2. controllers\n\n3. routes\nOPTION_1=Proceed\n",
        );
        assert_eq!(
            kv.get("PLAN"),
            Some("1. models\n2. controllers\n\n3. routes")
        );
        assert_eq!(kv.get("OPTION_1"), Some("Proceed"));
        assert_eq!(KeyValues::parse("# a comment\nK=v\n\n").get("K"), Some("v"));
    }

    #[test]
    fn quoted_values_are_read_as_a_shell_reads_them() {
        let kv = KeyValues::parse(
            "A='it'\\''s'\nB=\"say \\\"hi\\\" \\$HOME\"\nC='two\nlines'\nexport D='x' # note\nE=''\n",
        );
        assert_eq!(kv.get("A"), Some("it's"));
        assert_eq!(kv.get("B"), Some("say \"hi\" $HOME"));
        assert_eq!(kv.get("C"), Some("two\nlines"));
        assert_eq!(kv.get("D"), Some("x"));
        assert_eq!(kv.get("E"), Some(""));
        // Unclosed: what there is.
        assert_eq!(
            KeyValues::parse("F='open\nstill").get("F"),
            Some("open\nstill")
        );
        // CRLF: not part of an unquoted value; a CR inside quotes is kept.
        let crlf = KeyValues::parse("G=x\r\nH='a\r\nb'\r\n");
        assert_eq!(
            (crlf.get("G"), crlf.get("H")),
            (Some("x"), Some("a\r\nb\r"))
        );
        let again = KeyValues::parse(&crlf.to_text().unwrap());
        assert_eq!(again, crlf);
    }

    #[test]
    fn what_is_written_is_read_back_and_bad_keys_are_refused() {
        let mut kv = KeyValues::new();
        kv.set("ANSWER", "Option 1");
        kv.set("NOTE", "it's $HOME `x`\nand \"more\"\n");
        let text = kv.to_text().unwrap();
        assert_eq!(
            text,
            "ANSWER='Option 1'\nNOTE='it'\\''s $HOME `x`\nand \"more\"\n'\n"
        );
        assert_eq!(KeyValues::parse(&text), kv);
        let mut bad = KeyValues::new();
        bad.set("1X", "v");
        assert!(matches!(bad.to_text(), Err(WriteError::BadKey(_))));
        let mut nul = KeyValues::new();
        nul.set("K", "a\0b");
        assert!(matches!(nul.to_text(), Err(WriteError::Nul(_))));
        // A key given twice keeps its place and its last value.
        let twice = KeyValues::parse("A=1\nB=2\nA=3\n");
        assert_eq!(twice.iter().collect::<Vec<_>>(), [("A", "3"), ("B", "2")]);
    }

    proptest::proptest! {
        /// Whatever a file holds, what is read, written again, reads back the same
        /// (the fuzz target's property, in every test run).
        #[test]
        fn what_is_read_is_written_back_the_same(text in "((K|A_1|export B|# x| C)?=?['\"\\\\a $\\n\\r\\t`]{0,6}){0,12}") {
            let kv = KeyValues::parse(&text);
            if let Ok(again) = kv.to_text() {
                proptest::prop_assert_eq!(KeyValues::parse(&again), kv, "from {:?} wrote {:?}", text, again);
            }
        }
    }
}
