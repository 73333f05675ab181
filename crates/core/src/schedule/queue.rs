//! The order in which queued requests are placed: QoS class first
//! (guaranteed, then burstable, then best-effort: a request is never served
//! after one that it could preempt, or it would take the room back the moment
//! it was freed), then priority, then fair share across tenants (the tenant
//! whose recent use is smallest for its weight in the pool goes first; see
//! [`decayed_usage`](super::decayed_usage)), then age.

use serde::{Deserialize, Serialize};

use crate::ids::{AllocationId, TenantId};

/// One queued request, as the scheduler sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Allocation id (ties after age; ids grow with time).
    pub id: AllocationId,
    /// Guaranteed before burstable before best-effort.
    #[serde(default)]
    pub qos: super::QosClass,
    /// Higher goes first (within a QoS class).
    pub priority: i32,
    /// Tenant.
    pub tenant_id: TenantId,
    /// The tenant's recent use of the pool (any unit, the same for every
    /// entry of the queue: [`decayed_usage`](super::decayed_usage)).
    pub tenant_usage: u64,
    /// The tenant's fair-share weight in the pool (relative to the other
    /// tenants'; 0 counts as no share at all).
    pub tenant_weight: u64,
    /// When it was requested (any monotonic number: seconds, ids).
    pub requested_at: i64,
}

impl QueueEntry {
    /// Use for weight, `usage / weight`, compared exactly by
    /// cross-multiplication; a tenant without weight goes after every
    /// tenant with one, whatever the use.
    fn share_cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self.tenant_weight, other.tenant_weight) {
            (0, 0) => self.tenant_usage.cmp(&other.tenant_usage),
            (0, _) => std::cmp::Ordering::Greater,
            (_, 0) => std::cmp::Ordering::Less,
            (wa, wb) => (u128::from(self.tenant_usage) * u128::from(wb))
                .cmp(&(u128::from(other.tenant_usage) * u128::from(wa))),
        }
    }
}

/// Placement order: `Less` when `a` is served before `b`.
pub(crate) fn serve_first(a: &QueueEntry, b: &QueueEntry) -> std::cmp::Ordering {
    b.qos
        .protection()
        .cmp(&a.qos.protection())
        .then_with(|| b.priority.cmp(&a.priority))
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

    fn e(id: i64, priority: i32, tenant: i64, used: u64, weight: u64, at: i64) -> QueueEntry {
        QueueEntry {
            id: AllocationId::new(id),
            qos: super::super::QosClass::Guaranteed,
            priority,
            tenant_id: TenantId::new(tenant),
            tenant_usage: used,
            tenant_weight: weight,
            requested_at: at,
        }
    }

    #[test]
    fn a_tenant_without_weight_goes_last() {
        let mut q = vec![
            e(1, 0, 1, 0, 0, 1),
            e(2, 0, 2, 9000, 1, 2),
            e(3, 0, 3, 5, 0, 0),
        ];
        queue_order(&mut q);
        let ids: Vec<i64> = q.iter().map(|e| e.id.get()).collect();
        assert_eq!(ids, vec![2, 1, 3]);
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
        let ids: Vec<i64> = q.iter().map(|e| e.id.get()).collect();
        assert_eq!(ids, vec![3, 4, 2, 1]);
    }

    #[test]
    fn guaranteed_goes_before_what_it_could_preempt_whatever_the_priority() {
        use super::super::QosClass;
        let mut q = vec![
            QueueEntry {
                qos: QosClass::BestEffort,
                ..e(1, 1000, 1, 0, 1, 0)
            },
            QueueEntry {
                qos: QosClass::Burstable,
                ..e(2, 100, 1, 0, 1, 1)
            },
            e(3, -100, 2, 0, 1, 2),
            QueueEntry {
                qos: QosClass::BestEffort,
                ..e(4, 2000, 1, 0, 1, 3)
            },
        ];
        queue_order(&mut q);
        let ids: Vec<i64> = q.iter().map(|e| e.id.get()).collect();
        assert_eq!(ids, vec![3, 2, 4, 1]);
    }

    #[test]
    fn equal_shares_are_served_oldest_first() {
        let mut q = vec![e(9, 0, 1, 500, 1000, 50), e(8, 0, 2, 1000, 2000, 40)];
        queue_order(&mut q);
        assert_eq!(q[0].id.get(), 8);
    }
}
