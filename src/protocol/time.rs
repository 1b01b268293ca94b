//! Timestamps as agents write them: ISO-8601 with or without a zone, or a unix number in
//! seconds, milliseconds or nanoseconds (seed 001 writes `date +%s%N`).

use jiff::{Timestamp, civil::DateTime, tz::TimeZone};
use serde_json::Value;

/// The current time.
pub fn now() -> Timestamp {
    Timestamp::now()
}

/// Reads a timestamp from a JSON value, or `None` when it is not one.
///
/// A number's unit is guessed from its size: below 1e11 it is seconds (until year 5138),
/// below 1e14 milliseconds, below 1e17 microseconds, else nanoseconds. A zone-less ISO
/// string is taken as local time, which is what `date -Iseconds`-less scripts mean.
pub fn parse_timestamp(value: &Value) -> Option<Timestamp> {
    match value {
        Value::Number(n) => {
            let f = n.as_f64()?;
            if !f.is_finite() || f < 0.0 {
                return None;
            }
            let nanos: i128 = if f < 1e11 {
                (f * 1e9) as i128
            } else if f < 1e14 {
                (f * 1e6) as i128
            } else if f < 1e17 {
                (f * 1e3) as i128
            } else {
                // Exact for integers: f64 loses the last digits of a nanosecond count.
                n.as_u64().map(i128::from).unwrap_or(f as i128)
            };
            Timestamp::from_nanosecond(nanos).ok()
        }
        Value::String(s) => parse_str(s.trim()),
        _ => None,
    }
}

fn parse_str(s: &str) -> Option<Timestamp> {
    if let Ok(ts) = s.parse::<Timestamp>() {
        return Some(ts);
    }
    if let Ok(n) = s.parse::<f64>() {
        return parse_timestamp(&serde_json::json!(n));
    }
    // Python's `datetime.isoformat()` without a zone, possibly with a space separator.
    let dt: DateTime = s.replacen(' ', "T", 1).parse().ok()?;
    dt.to_zoned(TimeZone::system()).ok().map(|z| z.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_of_every_unit_agree() {
        let secs = parse_timestamp(&json!(1738339200)).unwrap();
        assert_eq!(parse_timestamp(&json!(1738339200000u64)).unwrap(), secs);
        assert_eq!(parse_timestamp(&json!(1738339200000000u64)).unwrap(), secs);
        assert_eq!(
            parse_timestamp(&json!(1738339200000000000u64)).unwrap(),
            secs
        );
        assert_eq!(parse_timestamp(&json!("1738339200")).unwrap(), secs);
    }

    #[test]
    fn iso_strings_with_and_without_zone() {
        let z = parse_timestamp(&json!("2025-01-31T16:00:00Z")).unwrap();
        assert_eq!(z.as_second(), 1738339200);
        assert!(parse_timestamp(&json!("2025-01-31T16:00:00+03:00")).is_some());
        assert!(parse_timestamp(&json!("2024-01-01T00:00:00")).is_some());
        assert!(parse_timestamp(&json!("2024-01-01 00:00:00.123456")).is_some());
        assert!(parse_timestamp(&json!("yesterday")).is_none());
        assert!(parse_timestamp(&json!(true)).is_none());
        assert!(parse_timestamp(&json!(-5)).is_none());
    }
}
