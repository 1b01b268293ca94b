//! Identifier rules. Ids become file names inside `.helpers/`, so the rule is strict:
//! `[A-Za-z0-9_.-]{1,128}`, and never `.` or `..`, so no id can name another folder.

use thiserror::Error;

/// Why an identifier was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum IdError {
    /// The id was empty.
    #[error("the id is empty")]
    Empty,
    /// The id was longer than 128 bytes.
    #[error("the id is {0} bytes long; at most 128 are allowed")]
    TooLong(usize),
    /// The id held a character outside `[A-Za-z0-9_.-]`.
    #[error("the id {0:?} holds {1:?}; only letters, digits, '_', '.' and '-' are allowed")]
    BadChar(String, char),
    /// The id was `.` or `..`.
    #[error("the id {0:?} names a folder")]
    Dots(String),
}

/// Checks `id` against the identifier rule, saying what is wrong when it fails.
pub fn validate_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > 128 {
        return Err(IdError::TooLong(id.len()));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(IdError::BadChar(shorten(id), c));
    }
    if id == "." || id == ".." {
        return Err(IdError::Dots(id.to_string()));
    }
    Ok(())
}

/// True when `id` passes [`validate_id`].
pub fn is_valid_id(id: &str) -> bool {
    validate_id(id).is_ok()
}

/// The shortest start of `id` no id in `others` begins with, for people to read and
/// type (`hitl answer` takes any unique start). At least 12 characters: hitl's own
/// ids (UUIDv7) begin with the millisecond they were made, so fewer would name
/// every question of the same minute.
pub fn short_id<'a>(id: &'a str, others: &[&str]) -> &'a str {
    const SHORTEST: usize = 12;
    let mut len = SHORTEST.min(id.len());
    while len < id.len()
        && (!id.is_char_boundary(len)
            || others.iter().any(|o| *o != id && o.starts_with(&id[..len])))
    {
        len += 1;
    }
    &id[..len]
}

/// An id made from any text, for names that arrive free-form (a process name, a
/// seed 004 `session_id`): characters outside the rule become `_`, at most `max`
/// (≤ 128) of them are kept, and nothing usable gives `fallback`.
pub fn id_from(text: &str, max: usize, fallback: &str) -> String {
    let id: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(max.min(128))
        .collect();
    if id.is_empty() || id == "." || id == ".." {
        fallback.to_string()
    } else {
        id
    }
}

fn shorten(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_id_is_twelve_characters_or_as_many_as_tell_it_apart() {
        let a = "01a2179bb83e7352b2af5849bc15fdcc";
        let b = "01a2179bb83e7999b2af5849bc15fdcc";
        assert_eq!(short_id(a, &[]), "01a2179bb83e");
        assert_eq!(short_id(a, &[a]), "01a2179bb83e");
        assert_eq!(short_id(a, &[a, b]), "01a2179bb83e73");
        assert_eq!(short_id("req-1", &["req-12"]), "req-1");
    }

    #[test]
    fn any_text_makes_an_id() {
        assert_eq!(id_from("../../etc/passwd", 128, "x"), ".._.._etc_passwd");
        assert_eq!(id_from("\u{1b}[2J", 128, "x"), "__2J");
        assert_eq!(id_from("..", 128, "x"), "x");
        assert_eq!(id_from("", 128, "x"), "x");
        assert_eq!(id_from(&"a".repeat(300), 500, "x").len(), 128);
        assert!(is_valid_id(&id_from("é ü", 128, "x")));
    }

    #[test]
    fn accepts_the_seed_id_shapes() {
        for id in [
            "1642678901234_abc12345",
            "agent_12345",
            "claude_1_2",
            "0192f0c1-7a3b-7c1d-9e2f-123456789abc",
            "a.b-c_d",
        ] {
            assert_eq!(validate_id(id), Ok(()), "{id}");
        }
    }

    #[test]
    fn refuses_escapes_and_junk() {
        assert_eq!(validate_id(""), Err(IdError::Empty));
        assert_eq!(validate_id(".."), Err(IdError::Dots("..".into())));
        assert!(matches!(validate_id("../x"), Err(IdError::BadChar(_, '/'))));
        assert!(matches!(validate_id("a b"), Err(IdError::BadChar(_, ' '))));
        assert!(matches!(validate_id("é"), Err(IdError::BadChar(_, 'é'))));
        assert_eq!(validate_id(&"a".repeat(129)), Err(IdError::TooLong(129)));
        assert_eq!(validate_id(&"a".repeat(128)), Ok(()));
    }
}
