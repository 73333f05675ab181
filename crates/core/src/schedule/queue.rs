//! The order in which queued requests are placed: priority first, then fair
//! share across tenants (the tenant using the smallest share of its quota in
//! the pool goes first), then age.

use serde::{Deserialize, Serialize};

/// One queued request, as the scheduler sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Allocation id (ties after age; ids grow with time).
    pub id: i64,
    /// Higher goes first.
    pub priority: i32,
    /// Tenant.
    pub tenant_id: i64,
    /// GPU compute the tenant holds in the pool now, in thousandths.
    pub tenant_used_milli: u64,
    /// The tenant's compute quota in the pool, in thousandths.
    pub tenant_quota_milli: u64,
    /// When it was requested (any monotonic number: seconds, ids).
    pub requested_at: i64,
}

impl QueueEntry {
    /// Used share of quota as a fraction `used / quota`, compared exactly by
    /// cross-multiplication; a tenant without quota counts as fully used.
    fn share_cmp(&self, other: &Self) -> std::cmp::Ordering {
        let a = (
            u128::from(self.tenant_used_milli),
            u128::from(self.tenant_quota_milli.max(1)),
        );
        let b = (
            u128::from(other.tenant_used_milli),
            u128::from(other.tenant_quota_milli.max(1)),
        );
        (a.0 * b.1).cmp(&(b.0 * a.1))
    }
}

/// Placement order: `Less` when `a` is served before `b`.
pub(crate) fn serve_first(a: &QueueEntry, b: &QueueEntry) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| a.share_cmp(b))
        .then_with(|| a.requested_at.cmp(&b.requested_at))
        .then_with(|| a.id.cmp(&b.id))
}

/// Sorts `entries` into placement order.
pub fn queue_order(entries: &mut [QueueEntry]) {
    entries.sort_by(serve_first);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: i64, priority: i32, tenant: i64, used: u64, quota: u64, at: i64) -> QueueEntry {
        QueueEntry {
            id,
            priority,
            tenant_id: tenant,
            tenant_used_milli: used,
            tenant_quota_milli: quota,
            requested_at: at,
        }
    }

    #[test]
    fn priority_then_fair_share_then_age() {
        let mut q = vec![
            e(1, 0, 1, 3000, 4000, 10), // tenant 1 uses 75 %
            e(2, 0, 2, 1000, 4000, 20), // tenant 2 uses 25 %
            e(3, 5, 1, 3000, 4000, 30), // high priority wins regardless
            e(4, 0, 2, 1000, 4000, 15), // same tenant as 2, older
        ];
        queue_order(&mut q);
        let ids: Vec<i64> = q.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![3, 4, 2, 1]);
    }

    #[test]
    fn equal_shares_are_served_oldest_first() {
        let mut q = vec![e(9, 0, 1, 500, 1000, 50), e(8, 0, 2, 1000, 2000, 40)];
        queue_order(&mut q);
        assert_eq!(q[0].id, 8);
    }
}
