//! How a request's fields are read when agents write them by hand: the forgiving
//! `deserialize_with` functions of [`Request`](super::Request)'s serde derive.
//!
//! Scripts write ids as numbers, timeouts as fractions, timestamps in any unit, and
//! `null` for "not given". Each reader here takes what such a script
//! means and refuses the rest with a message that says what the field must be, so
//! one serde derive reads every question file, every API body and every stored
//! request alike, and a new field needs nothing but its declaration.

use std::fmt;

use jiff::Timestamp;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::{Map, Value};

use super::{Origin, parse_timestamp};

/// `null` read as the type's default, as if the field were absent.
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// An id: a string, or a whole number some scripts write (`"id": 17`); `null` is
/// none (empty).
pub fn scalar_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Scalar;
    impl Visitor<'_> for Scalar {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or a whole number")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            // `17.0` is a whole number too, as JSON Schema's integers count it.
            // (2^64 itself is the first float past `u64::MAX`.)
            if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                Ok((v as u64).to_string())
            } else {
                Err(E::custom("must be a string or a whole number, 0 or more"))
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
        fn visit_none<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    d.deserialize_any(Scalar)
}

/// Options: strings, or numbers taken as their text (`[1, 2, 3]`); `null` is none.
pub fn option_texts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Text(String),
        Number(serde_json::Number),
    }
    let items = Option::<Vec<Text>>::deserialize(d)
        .map_err(|_| de::Error::custom("must be an array of strings"))?;
    Ok(items
        .unwrap_or_default()
        .into_iter()
        .map(|t| match t {
            Text::Text(s) => s,
            Text::Number(n) => n.to_string(),
        })
        .collect())
}

/// Seconds to wait: a number, a fraction rounding up; `null` is "not given". `0` stays `Some(0)`, "wait for ever", so that a way in with a
/// default of its own (the API's 300 s) can tell it from absent.
pub fn timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    const EXPECTED: &str = "must be a number of seconds, 0 or more";
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => Ok(Some(u)),
            (None, Some(f)) if f >= 0.0 && f.is_finite() && f <= u64::MAX as f64 => {
                Ok(Some(f.ceil() as u64))
            }
            _ => Err(de::Error::custom(EXPECTED)),
        },
        Some(_) => Err(de::Error::custom(EXPECTED)),
    }
}

/// How many people must approve: a whole number from 1 to 5 (`2` or `2.0`); `null`
/// is the default, 1.
pub fn approvals<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    const EXPECTED: &str = "approvals must be a whole number from 1 to 5";
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(1),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if (1.0..=5.0).contains(&f) && f.fract() == 0.0 => Ok(f as u32),
            _ => Err(de::Error::custom(EXPECTED)),
        },
        Some(_) => Err(de::Error::custom(EXPECTED)),
    }
}

/// A whole number of 1 or more, as JSON Schema's `integer` has it: `3` or `3.0`.
pub fn whole<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    const EXPECTED: &str = "must be a whole number, 1 or more";
    match Value::deserialize(d)? {
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) if u >= 1 => Ok(usize::try_from(u).unwrap_or(usize::MAX)),
            (None, Some(f)) if f >= 1.0 && f.is_finite() && f.fract() == 0.0 => {
                Ok(if f >= usize::MAX as f64 {
                    usize::MAX
                } else {
                    f as usize
                })
            }
            _ => Err(de::Error::custom(EXPECTED)),
        },
        _ => Err(de::Error::custom(EXPECTED)),
    }
}

/// When it was asked: RFC 3339, a zone-less ISO time (local), or a unix number in
/// seconds, milliseconds, microseconds or nanoseconds ([`parse_timestamp`]).
pub fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    struct Time;
    impl Visitor<'_> for Time {
        type Value = Timestamp;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an ISO-8601 string or a unix time")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
            // The canonical form first: no copy into a JSON value.
            v.parse::<Timestamp>().or_else(|_| read(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Timestamp, E> {
            read(Value::from(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Timestamp, E> {
            read(Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Timestamp, E> {
            read(Value::from(v))
        }
    }
    fn read<E: de::Error>(v: Value) -> Result<Timestamp, E> {
        parse_timestamp(&v).ok_or_else(|| E::custom("must be an ISO-8601 string or a unix time"))
    }
    d.deserialize_any(Time)
}

/// Free-form labels: an object; `null` is none; anything else is kept under the
/// key `metadata` rather than refused.
pub fn metadata<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Null => Map::new(),
        Value::Object(m) => m,
        other => Map::from_iter([("metadata".to_string(), other)]),
    })
}

/// What kind of asker wrote a file (`"source": "hook"`); the spool's own when it
/// does not say (a name this build does not know is not refused).
pub fn source<'de, D: Deserializer<'de>>(d: D) -> Result<Origin, D::Error> {
    Ok(match Option::<Value>::deserialize(d)? {
        Some(Value::String(s)) => Origin::parse(&s).unwrap_or_default(),
        _ => Origin::Spool,
    })
}

/// A name type read through its `FromStr`, which takes the aliases older agents
/// write and says what the name may be when it is none of them.
pub fn by_name<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: std::str::FromStr<Err = String>,
{
    struct Name<T>(std::marker::PhantomData<T>);
    impl<T: std::str::FromStr<Err = String>> Visitor<'_> for Name<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a name")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            v.parse().map_err(E::custom)
        }
    }
    d.deserialize_str(Name(std::marker::PhantomData))
}
