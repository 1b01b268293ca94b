//! Rate limiting with token buckets. Every request counts against its client address
//! (`[http] rate_limit`; loopback exempt unless `rate_limit_loopback`), and every
//! create against its caller (`[http] create_rate_limit`, loopback included: each OS
//! user, or the token's holder, has its own budget, so one cannot fill the store or
//! crowd out another's requests). A client over a rate gets 429 with `Retry-After`;
//! everyone else is served as usual.

use std::{collections::HashMap, net::IpAddr, sync::Mutex, time::Instant};

use axum::http::StatusCode;

use super::error::ApiError;
use crate::{config::HttpSettings, protocol::OTHER_USER_MAX_TIMEOUT_SECS};

/// Buckets are forgotten after this long unused, so the map cannot grow for ever.
const FORGET_AFTER_SECS: f64 = 600.0;

#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, Bucket>>,
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
        self.take(format!("ip {ip}"), s.rate_limit, || {
            format!(
                "too many requests from {ip}: at most {} per second",
                s.rate_limit
            )
        })
    }

    /// Takes one create from `caller`'s bucket (see [`super::auth::Caller::key_scope`]
    /// for who a caller is), or refuses it with 429.
    pub fn check_create(&self, caller: &str, s: &HttpSettings) -> Result<(), ApiError> {
        if s.create_rate_limit == 0 {
            return Ok(());
        }
        self.take(format!("create {caller}"), s.create_rate_limit, || {
            format!(
                "too many requests created: at most {} per second per user \
                 ([http] create_rate_limit)",
                s.create_rate_limit
            )
        })
    }

    fn take(
        &self,
        key: String,
        per_sec: u32,
        why: impl FnOnce() -> String,
    ) -> Result<(), ApiError> {
        let rate = f64::from(per_sec);
        let burst = rate * 2.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > 10_000 {
            buckets.retain(|_, b| now.duration_since(b.at).as_secs_f64() < FORGET_AFTER_SECS);
        }
        let b = buckets.entry(key).or_insert(Bucket {
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
        let mut e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, why());
        e.retry_after = Some(wait);
        Err(e)
    }
}

/// Pending requests another OS user may have at once.
pub const OTHER_USER_MAX_PENDING: usize = 100;
/// What another OS user's pending requests may weigh together (their JSON).
pub const OTHER_USER_MAX_PENDING_BYTES: usize = 8 << 20;

/// Lets `request`, made by another OS user, join the queue only within that user's
/// share (count and bytes), its timeout held to a day. The user's own requests are
/// not looked at here.
pub async fn other_users_share(
    broker: &crate::broker::BrokerHandle,
    request: &mut crate::protocol::Request,
) -> Result<(), ApiError> {
    let Some(who) = request.created_by_other().map(str::to_string) else {
        return Ok(());
    };
    request.timeout = Some(match request.timeout {
        Some(t) if t > 0 => t.min(OTHER_USER_MAX_TIMEOUT_SECS),
        _ => OTHER_USER_MAX_TIMEOUT_SECS,
    });
    let size = |r: &crate::protocol::Request| serde_json::to_vec(r).map_or(0, |v| v.len());
    let (mut count, mut bytes) = (1, size(request));
    for p in broker.pending().await {
        if p.request.created_by.as_deref() == Some(who.as_str()) {
            count += 1;
            bytes += size(&p.request);
        }
    }
    if count > OTHER_USER_MAX_PENDING || bytes > OTHER_USER_MAX_PENDING_BYTES {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "{who} has as many requests waiting as another user may: at most \
                 {OTHER_USER_MAX_PENDING}, {} MiB together",
                OTHER_USER_MAX_PENDING_BYTES >> 20
            ),
        ));
    }
    Ok(())
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

    #[test]
    fn creates_have_a_budget_per_caller() {
        let limiter = RateLimiter::default();
        let s = HttpSettings {
            create_rate_limit: 2,
            ..HttpSettings::default()
        };
        for _ in 0..4 {
            limiter.check_create("uid1000", &s).unwrap();
        }
        assert!(limiter.check_create("uid1000", &s).is_err());
        limiter.check_create("user", &s).unwrap();
    }
}
