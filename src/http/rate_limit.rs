//! A per-tenant token bucket: off by default; when on, a tenant over its rate gets 429 with
//! `Retry-After`, and other tenants are not slowed by it.

use crate::domain::TenantId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<TenantId, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl RateLimiter {
    /// `per_second` requests a second on average, `burst` at once; `None` when `per_second` is 0.
    pub fn new(per_second: f64, burst: u32) -> Option<Self> {
        (per_second > 0.0).then(|| Self {
            per_second,
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// Takes one token for `tenant`, or says how long until one is there.
    pub fn check(&self, tenant: &TenantId, now: Instant) -> Result<(), Duration> {
        // Keys are configured, so the map holds at most one bucket per configured tenant.
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let bucket = buckets.entry(tenant.clone()).or_insert(Bucket {
            tokens: self.burst,
            refilled: now,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            // A tiny rate makes this wait huge: never a panic.
            let wait = (1.0 - bucket.tokens) / self.per_second;
            Err(Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_gets_its_burst_then_its_rate_and_others_are_unaffected() {
        let limiter = RateLimiter::new(2.0, 3).unwrap();
        let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
        let start = Instant::now();
        for _ in 0..3 {
            assert!(limiter.check(&a, start).is_ok());
        }
        let wait = limiter.check(&a, start).unwrap_err();
        assert!(
            wait > Duration::from_millis(400) && wait <= Duration::from_millis(500),
            "{wait:?}"
        );
        assert!(limiter.check(&b, start).is_ok(), "b has its own bucket");
        assert!(
            limiter
                .check(&a, start + Duration::from_millis(500))
                .is_ok(),
            "refilled at 2/s"
        );
        assert!(
            limiter
                .check(&a, start + Duration::from_millis(500))
                .is_err()
        );
    }

    #[test]
    fn a_zero_rate_means_no_limit() {
        assert!(RateLimiter::new(0.0, 10).is_none());
    }

    #[test]
    fn a_tiny_rate_answers_a_long_wait_instead_of_panicking() {
        let limiter = RateLimiter::new(1e-300, 1).unwrap();
        let a = TenantId::parse("a").unwrap();
        let now = Instant::now();
        assert!(limiter.check(&a, now).is_ok());
        assert_eq!(limiter.check(&a, now).unwrap_err(), Duration::MAX);
    }
}
