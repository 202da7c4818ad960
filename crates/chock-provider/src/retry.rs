//! When and how long to wait before sending a failed request again.
//!
//! A 408, 429 or 5xx (Anthropic's 529 included), a retryable error inside the stream (`overloaded_error`,
//! `server_error`, …) and a stream that broke before its terminal event (cut, stalled, or carrying a
//! malformed event: see `StreamFault`) are all tried again: the reply is requested from scratch, which is
//! safe because tools run only after a complete reply. The server's
//! `retry-after-ms` or `Retry-After` (seconds or an HTTP date) wins over the computed backoff.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;

/// How many times to try and how long to wait in between.
///
/// The default is 6 attempts with waits of about 2, 4, 8, 16 and 30 seconds (each shortened by up to a
/// quarter at random so that many clients do not retry in step): about a minute in all.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Requests sent at most, the first included.
    pub max_attempts: u32,
    /// The first computed wait.
    pub base_delay: Duration,
    /// The longest computed wait.
    pub max_delay: Duration,
    /// The longest server-requested wait honoured; a longer `Retry-After` ends the call with the error.
    pub max_retry_after: Duration,
    /// Whether to shorten computed waits at random (tests turn it off for exact waits).
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 6,
            base_delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// A policy that sends every request once.
    pub fn never() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The computed wait after `failed_attempt` (1-based) failed.
    pub fn backoff(&self, failed_attempt: u32) -> Duration {
        let exponent = failed_attempt.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1 << exponent)
            .min(self.max_delay);
        if self.jitter {
            full.mul_f64(rand::thread_rng().gen_range(0.75..=1.0))
        } else {
            full
        }
    }
}

/// Waits and tells the time. Injected so tests run a minute of retries instantly and can check each wait.
pub trait Sleeper: Send + Sync + fmt::Debug {
    /// Waits for `duration`.
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// The current wall-clock time (for `Retry-After` given as an HTTP date).
    fn now(&self) -> SystemTime;
}

/// The real clock: `tokio::time::sleep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(tokio::time::sleep(duration))
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Whether an HTTP status is worth another attempt (before `x-should-retry` and the body are considered).
pub(crate) fn status_is_retryable(status: u16) -> bool {
    status == 408 || status == 429 || (500..=599).contains(&status)
}

/// Error types or codes, in a stream or an error body, that a later attempt may not meet.
pub(crate) fn kind_is_retryable(kind: &str) -> bool {
    matches!(
        kind,
        "overloaded_error"
            | "api_error"
            | "rate_limit_error"
            | "timeout_error"
            | "server_error"
            | "rate_limit_exceeded"
            | "too_many_requests"
            | "internal_error"
            | "service_unavailable"
    )
}

/// The wait the server asked for: `retry-after-ms`, else `retry-after` in seconds or as an HTTP date.
pub(crate) fn server_wait(
    headers: &reqwest::header::HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(seconds(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| seconds(secs));
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A non-negative, finite number of seconds as a `Duration`, saturating: `Duration::from_secs_f64`
/// panics past `u64::MAX` seconds, and the number comes from a server. A saturated wait is longer than
/// any `max_retry_after`, so the call ends with the error instead of waiting.
fn seconds(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// Parses an IMF-fixdate (`Wed, 21 Oct 2015 07:28:00 GMT`), the only HTTP date form servers send today.
pub(crate) fn parse_http_date(value: &str) -> Option<SystemTime> {
    let mut parts = value.split_whitespace();
    let _weekday = parts.next()?.strip_suffix(',')?;
    let day: u32 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut clock = parts.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, s) = (clock.next()??, clock.next()??, clock.next()??);
    // The year bound keeps the day arithmetic below from overflowing on a hostile header.
    if parts.next()? != "GMT"
        || parts.next().is_some()
        || !(1970..=9999).contains(&year)
        || !(1..=31).contains(&day)
        || h > 23
        || m > 59
        || s > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = u64::try_from(days).ok()? * 86_400 + h * 3600 + m * 60 + s;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's civil-calendar arithmetic).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(month) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").expect("valid date");
        assert_eq!(
            t.duration_since(UNIX_EPOCH).expect("after epoch").as_secs(),
            1_445_412_480
        );
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT")
                .map(|t| t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())),
            Some(Some(784_111_777))
        );
        assert_eq!(parse_http_date("21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_http_date("Wed, 21 Foo 2015 07:28:00 GMT"), None);
        // A year that would overflow the day count is refused, not a panic.
        assert_eq!(
            parse_http_date("Wed, 21 Oct 9223372036854775807 07:28:00 GMT"),
            None
        );
    }

    #[test]
    fn server_wait_prefers_ms_then_seconds_then_date() {
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        let mut headers = HeaderMap::new();
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(server_wait(&headers, now), Some(Duration::from_secs(10)));
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(server_wait(&headers, now), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(
            server_wait(&headers, now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(server_wait(&HeaderMap::new(), now), None);
    }

    #[test]
    fn an_absurd_server_wait_saturates_instead_of_panicking() {
        let now = UNIX_EPOCH;
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("1e300"));
        assert_eq!(server_wait(&headers, now), Some(Duration::MAX));
        headers.insert("retry-after-ms", HeaderValue::from_static("1e308"));
        assert_eq!(server_wait(&headers, now), Some(Duration::MAX));
    }

    #[test]
    fn default_backoff_spans_about_a_minute() {
        let exact = RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        };
        let total: Duration = (1..exact.max_attempts).map(|n| exact.backoff(n)).sum();
        assert_eq!(total, Duration::from_secs(60));
        let jittered = RetryPolicy::default();
        for n in 1..6 {
            let wait = jittered.backoff(n);
            assert!(
                wait <= exact.backoff(n) && wait >= exact.backoff(n).mul_f64(0.75),
                "{n}: {wait:?}"
            );
        }
    }
}
