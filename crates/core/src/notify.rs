//! Rules for telling people what happened: when a lease counts as ending
//! soon, and how outgoing webhooks are retried.

/// A lease with this many minutes or fewer left is "ending soon" (one
/// notification, and the badge on the allocation page).
pub const LEASE_ENDING_SOON_MINUTES: i64 = 60;

/// How many times a webhook delivery is tried before it is given up.
pub const WEBHOOK_MAX_ATTEMPTS: u32 = 8;

/// Seconds to wait before the next try after `attempts` failed tries
/// (exponential from `base_s`, capped at one hour), or `None` once
/// [`WEBHOOK_MAX_ATTEMPTS`] tries have failed.
pub fn webhook_retry_delay_s(attempts: u32, base_s: u64) -> Option<u64> {
    if attempts == 0 || attempts >= WEBHOOK_MAX_ATTEMPTS {
        return None;
    }
    let factor = 1u64 << (attempts - 1).min(20);
    Some(base_s.max(1).saturating_mul(factor).min(3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_retries_back_off_and_give_up() {
        assert_eq!(webhook_retry_delay_s(0, 5), None);
        assert_eq!(webhook_retry_delay_s(1, 5), Some(5));
        assert_eq!(webhook_retry_delay_s(2, 5), Some(10));
        assert_eq!(webhook_retry_delay_s(3, 5), Some(20));
        assert_eq!(webhook_retry_delay_s(7, 100), Some(3600));
        assert_eq!(webhook_retry_delay_s(WEBHOOK_MAX_ATTEMPTS, 5), None);
        assert_eq!(webhook_retry_delay_s(1, 0), Some(1));
    }
}
