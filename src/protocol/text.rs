//! Text from agents, made safe to show. A question, an agent's name or an option comes
//! from a process that may be prompt-injected: an escape sequence in it would move
//! the cursor, erase lines or retitle the terminal, and a bidirectional override
//! would reorder what the human reads, so a question could disguise what is being
//! approved. Every UI shows such characters as visible escapes instead.

use std::borrow::Cow;

/// Characters that reorder or break text on screen: Unicode bidi controls
/// ("Trojan Source": marks, embeddings, overrides, isolates, the Arabic letter
/// mark) and the line and paragraph separators, which some terminals and pages
/// break lines at. The dashboard hides the same set (`web/dom.js`).
fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every control character but newline and tab, and every bidi control,
/// written as a visible escape (`\u{1b}`). Borrowed when there is nothing to escape.
pub fn visible(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| (c.is_control() && c != '\n' && c != '\t') || reorders(c);
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`visible`] on one line: newlines and tabs become spaces too.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    match visible(text) {
        Cow::Borrowed(s) if !s.contains(['\n', '\t']) => Cow::Borrowed(s),
        s => Cow::Owned(s.replace(['\n', '\t'], " ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_not_run() {
        assert!(matches!(visible("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(
            visible("ok?\u{1b}[1A\u{1b}[2Krm -rf /\r\u{7}"),
            "ok?\\u{1b}[1A\\u{1b}[2Krm -rf /\\u{d}\\u{7}"
        );
        assert_eq!(visible("a\u{202e}txt.exe"), "a\\u{202e}txt.exe");
        assert_eq!(visible("\u{9b}31m"), "\\u{9b}31m", "the 8-bit CSI too");
        assert_eq!(
            visible("a\u{7f}b\u{85}c\u{2028}d\u{2029}e\u{61c}f\u{2067}g"),
            "a\\u{7f}b\\u{85}c\\u{2028}d\\u{2029}e\\u{61c}f\\u{2067}g",
            "DEL, C1, separators, the Arabic letter mark, isolates"
        );
        assert_eq!(visible_line("two\nlines\there"), "two lines here");
    }
}
