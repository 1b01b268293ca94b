//! Plain lines read without the shell parser: words of letters, digits and
//! `_./:,@%+=-`, joined by `|`, `&&`, `||` and `;`.
//!
//! Most lines an agent runs are like that (`cargo test --quiet && git status`).
//! brush's parser reads them too, but it has pathological inputs, so the shell
//! reader (`shell.rs`) runs it on a thread of its own under a budget, and the
//! thread costs a hook call a tenth of a millisecond. A plain line cannot be
//! pathological: it is read here in one linear pass, on the caller's thread, into
//! the very syntax tree brush would make of it, which the shell reader then walks
//! as it walks brush's. Anything else (quotes, `$`, globs, `~`, redirections,
//! assignments, reserved words, line breaks, a stray operator) is left to brush:
//! [`program`] says `None`.
//!
//! That both readers agree is checked on every line of the guard's corpora and on
//! thousands of generated ones (`shell.rs`'s tests), and on every plain line the
//! fuzzer makes (`fuzz/src/bin/shell_line.rs`).

use brush_parser::ast;

/// Words bash gives a meaning of their own where a command starts. A plain line
/// holding one anywhere is left to the parser.
const RESERVED: &[&str] = &[
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in",
    "select", "then", "time", "until", "while",
];

/// Whether `c` is a character of a plain word: one bash takes as itself, outside
/// quotes, wherever it stands in a word.
fn is_plain_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"_./:,@%+=-".contains(&c)
}

/// The operators between a plain line's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Pipe,
    And,
    Or,
    Sequence,
}

/// A token of a plain line.
#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Operator(Operator),
}

/// The tokens of `text`, or `None` when it is not a plain line.
fn tokens(text: &str) -> Option<Vec<Token<'_>>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        match c {
            b' ' | b'\t' => i += 1,
            b'|' if next == Some(b'|') => {
                out.push(Token::Operator(Operator::Or));
                i += 2;
            }
            // `|&` pipes standard error too: left to the parser.
            b'|' if next == Some(b'&') => return None,
            b'|' => {
                out.push(Token::Operator(Operator::Pipe));
                i += 1;
            }
            b'&' if next == Some(b'&') => {
                out.push(Token::Operator(Operator::And));
                i += 2;
            }
            // `;;` ends a case item.
            b';' if next == Some(b';') => return None,
            b';' => {
                out.push(Token::Operator(Operator::Sequence));
                i += 1;
            }
            c if is_plain_char(c) => {
                let start = i;
                while i < bytes.len() && is_plain_char(bytes[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                if RESERVED.contains(&word) || looks_like_assignment(word) {
                    return None;
                }
                out.push(Token::Word(word));
            }
            _ => return None,
        }
    }
    Some(out)
}

/// `NAME=…` or `NAME+=…`: an assignment where a command starts, and an argument
/// elsewhere (or both, after `export`); left to the parser wherever it stands.
fn looks_like_assignment(word: &str) -> bool {
    let Some(eq) = word.find('=') else {
        return false;
    };
    let name = word[..eq].strip_suffix('+').unwrap_or(&word[..eq]);
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The syntax tree brush would make of `text`, when it is a plain line.
pub fn program(text: &str) -> Option<ast::Program> {
    let mut items = Vec::new();
    let mut tokens = tokens(text)?.into_iter().peekable();
    // An empty line is the parser's to judge.
    tokens.peek()?;
    while tokens.peek().is_some() {
        let first = pipeline(&mut tokens)?;
        let mut additional = Vec::new();
        while let Some(token) = tokens.next() {
            match token {
                Token::Operator(Operator::And) => {
                    additional.push(ast::AndOr::And(pipeline(&mut tokens)?))
                }
                Token::Operator(Operator::Or) => {
                    additional.push(ast::AndOr::Or(pipeline(&mut tokens)?))
                }
                // A `;` ends the item (one ending the line too).
                Token::Operator(Operator::Sequence) => break,
                Token::Operator(Operator::Pipe) | Token::Word(_) => return None,
            }
        }
        items.push(ast::CompoundListItem(
            ast::AndOrList { first, additional },
            ast::SeparatorOperator::Sequence,
        ));
    }
    Some(ast::Program {
        complete_commands: vec![ast::CompoundList(items)],
    })
}

/// Commands joined by `|`: at least one, each of one word or more.
fn pipeline<'a>(
    tokens: &mut std::iter::Peekable<impl Iterator<Item = Token<'a>>>,
) -> Option<ast::Pipeline> {
    let mut seq = vec![simple(tokens)?];
    while tokens.peek() == Some(&Token::Operator(Operator::Pipe)) {
        tokens.next();
        seq.push(simple(tokens)?);
    }
    Some(ast::Pipeline {
        timed: None,
        bang: false,
        seq,
    })
}

/// A command of plain words: the first names it, the rest are its arguments.
fn simple<'a>(
    tokens: &mut std::iter::Peekable<impl Iterator<Item = Token<'a>>>,
) -> Option<ast::Command> {
    let mut words = Vec::new();
    while let Some(Token::Word(w)) = tokens.peek() {
        words.push(ast::Word {
            value: (*w).to_string(),
            loc: None,
        });
        tokens.next();
    }
    let mut words = words.into_iter();
    let name = words.next()?;
    let suffix: Vec<_> = words.map(ast::CommandPrefixOrSuffixItem::Word).collect();
    Some(ast::Command::Simple(ast::SimpleCommand {
        prefix: None,
        word_or_name: Some(name),
        suffix: (!suffix.is_empty()).then_some(ast::CommandSuffix(suffix)),
    }))
}

/// Whether a word needs no reading: its text is what the command receives.
pub fn is_plain_word(raw: &str) -> bool {
    !raw.is_empty() && raw.bytes().all(is_plain_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_read_and_others_are_left_to_the_parser() {
        for plain in [
            "cargo test --quiet && git status",
            "git status --short && ls -la src | head",
            "a; b;",
            "a || b && c | d | e ; f",
            "make -j4 CC-x",
            "npm run build:prod -- --flag=1",
        ] {
            assert!(program(plain).is_some(), "{plain}");
        }
        for other in [
            "",
            "   ",
            ";",
            "a;;",
            "; a",
            "a && ",
            "a | | b",
            "a &",
            "a |& b",
            "X=1 a",
            "a X+=1",
            "export A=b",
            "if true; then a; fi",
            "time a",
            "a 'b'",
            "a \"b\"",
            "a $B",
            "a ~",
            "a *",
            "a > b",
            "a\nb",
            "a # c",
            "a\\ b",
            "{a,b}",
            "(a)",
            "a=",
        ] {
            assert!(program(other).is_none(), "{other:?}");
        }
    }

    #[test]
    fn words_that_look_like_assignments_only_where_a_name_precedes_the_equals() {
        assert!(looks_like_assignment("X=1"));
        assert!(looks_like_assignment("_x9+=1"));
        assert!(!looks_like_assignment("--x=1"));
        assert!(!looks_like_assignment("9x=1"));
        assert!(!looks_like_assignment("a.b=1"));
        assert!(!looks_like_assignment("=x"));
    }
}
