//! Rate limiting: a token bucket per client address. A client over its rate gets 429
//! with `Retry-After`; everyone else is served as usual.

use std::{collections::HashMap, net::IpAddr, sync::Mutex, time::Instant};

use axum::http::StatusCode;

use super::error::ApiError;
use crate::config::HttpSettings;

/// Buckets are forgotten after this long unused, so the map cannot grow for ever.
const FORGET_AFTER_SECS: f64 = 600.0;

#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// Takes one request from `ip`'s bucket, or refuses it with 429.
    pub fn check(&self, ip: IpAddr, local: bool, s: &HttpSettings) -> Result<(), ApiError> {
        if s.rate_limit == 0 || (local && !s.rate_limit_loopback) {
            return Ok(());
        }
        let rate = f64::from(s.rate_limit);
        let burst = rate * 2.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > 10_000 {
            buckets.retain(|_, b| now.duration_since(b.at).as_secs_f64() < FORGET_AFTER_SECS);
        }
        let b = buckets.entry(ip).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - b.tokens) / rate).ceil().max(1.0) as u64;
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many requests from {ip}: at most {} per second",
                s.rate_limit
            ),
        );
        e.retry_after = Some(wait);
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_beyond_twice_the_rate_is_refused_with_a_wait() {
        let limiter = RateLimiter::default();
        let s = HttpSettings {
            rate_limit: 5,
            ..HttpSettings::default()
        };
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..10 {
            limiter.check(ip, false, &s).unwrap();
        }
        let e = limiter.check(ip, false, &s).unwrap_err();
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.retry_after, Some(1));
        // Loopback is exempt unless configured, and other clients are unaffected.
        limiter.check(ip, true, &s).unwrap();
        limiter
            .check("10.0.0.2".parse().unwrap(), false, &s)
            .unwrap();
    }
}
