//! Finding the best place for one request: scan hosts (rejecting most on
//! their aggregates), enumerate the distinct ways the request fits on each,
//! and rank them by the policy.

use super::fleet::Fleet;
use super::frag::{delta, fgd_delta, fgd_score, Change, HostFree};
use super::index::{Slot, SlotKind, NO_GROUP};
use super::policy::Policy;
use super::rng::SplitMix64;
use super::shape::{Shape, ShapeKind, NO_PROFILE};
use crate::ids::TenantId;

/// What one thousandth of a GPU stranded without CPU or memory costs in
/// `pack`, relative to one thousandth fragmented for the whole workload.
/// Measured on the Alibaba traces: 1, 2, 4 and 8 are within 0.1 points of
/// each other on the default and `cpu250` traces; without the term (0) the
/// default trace loses 0.7 points.
const STRANDED_WEIGHT: i64 = 2;

/// What one unit of the sum-of-squares term (see `gaps`) costs in `pack`,
/// in thousandths of a GPU fragmented for the whole workload. Measured on
/// the 23 Alibaba traces (10 seeds): 10 and 30 are within 0.03 points of
/// each other everywhere; against no term (0) the default trace gains 0.24
/// points (95.95 → 96.19 %) and `gpushare100` 0.8.
const GAP_WEIGHT: f64 = 10.0;

/// GPUs per host compared for de-duplication; beyond this, no de-duplication.
const DEDUP: usize = 16;

/// Hosts already evaluated in this search, by state signature (an
/// open-addressing set of host indices; a signature match is confirmed by
/// comparing the hosts).
struct SeenHosts<'a> {
    fleet: &'a Fleet,
    table: Vec<u32>,
    mask: usize,
}

impl<'a> SeenHosts<'a> {
    /// A set that skips repeats only when `wanted`.
    fn new(fleet: &'a Fleet, wanted: bool) -> Self {
        let size = if wanted {
            (fleet.aggs.len() * 2).next_power_of_two()
        } else {
            0
        };
        Self {
            fleet,
            table: vec![u32::MAX; size],
            mask: size.saturating_sub(1),
        }
    }

    /// True when a host identical to `h` was seen; otherwise records `h`.
    fn repeat(&mut self, h: usize) -> bool {
        if self.table.is_empty() {
            return false;
        }
        let aggs = &self.fleet.aggs;
        let signature = aggs[h].signature;
        let mut i = signature as usize & self.mask;
        loop {
            let other = self.table[i];
            if other == u32::MAX {
                self.table[i] = h as u32;
                return false;
            }
            let other = other as usize;
            if aggs[other].signature == signature && self.same_host(other, h) {
                return true;
            }
            i = (i + 1) & self.mask;
        }
    }

    fn same_host(&self, a: usize, b: usize) -> bool {
        let (x, y) = (&self.fleet.aggs[a], &self.fleet.aggs[b]);
        x.cpu_free == y.cpu_free
            && x.mem_free == y.mem_free
            && x.len == y.len
            && self
                .fleet
                .host_slots(a)
                .iter()
                .zip(self.fleet.host_slots(b))
                .all(|(s, t)| s.same_state(t) && s.nvlink == t.nvlink)
    }
}

/// The best candidate so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Best {
    pub host: usize,
    /// Host-relative positions of the changed slots.
    pub positions: Vec<usize>,
    /// What those slots become.
    pub changes: Vec<Change>,
    pub mig_start: Option<u8>,
    pub key: [i64; 3],
    /// Fragmentation delta, when the policy computed it.
    pub delta: Option<i64>,
}

/// How many places an explanation ranks: the winner and the next best.
pub(crate) const RANKED: usize = 4;

/// A place ranked for the explanation: host, changed positions, MIG start
/// and the policy's key.
#[derive(Clone, Debug)]
pub(crate) struct Ranked {
    pub host: usize,
    pub positions: Vec<usize>,
    pub mig_start: Option<u8>,
    pub key: [i64; 3],
}

/// What the search passed over, for the explanation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Passed {
    /// Hosts whose candidates were evaluated.
    pub hosts_scanned: u32,
    /// Hosts without the CPU or memory the request asks for.
    pub hosts_short: u32,
    /// GPUs with room that the tenant-isolation rule kept the request off.
    pub gpus_kept_apart: u32,
}

/// One search over the fleet.
pub(crate) struct Search<'a> {
    fleet: &'a Fleet,
    shape: &'a Shape,
    policy: Policy,
    /// Only GPUs holding no other tenant's slices qualify.
    exclusive_tenant: Option<TenantId>,
    /// The tenant the slice is for: `spread` keeps its slices apart.
    tenant: Option<TenantId>,
    /// A host (by position) the search must not use: held for a request
    /// that waits longer (see `schedule`).
    avoid_host: Option<usize>,
    rng: SplitMix64,
    pub candidates: u32,
    pub best: Option<Best>,
    /// The best places in rank order (the winner first), when asked for.
    pub ranked: Vec<Ranked>,
    /// Whether to keep `ranked`.
    explain: bool,
    pub passed: Passed,
    positions: Vec<usize>,
    scratch: Vec<Change>,
    idle: Vec<usize>,
    order: Vec<(usize, u32, usize)>,
    done: bool,
}

impl<'a> Search<'a> {
    pub fn new(fleet: &'a Fleet, shape: &'a Shape, policy: Policy) -> Self {
        let seed = match policy {
            Policy::Random { seed } => seed,
            _ => 0,
        };
        Self {
            fleet,
            shape,
            policy,
            exclusive_tenant: None,
            tenant: None,
            avoid_host: None,
            rng: SplitMix64::new(seed),
            candidates: 0,
            best: None,
            ranked: Vec::new(),
            explain: false,
            passed: Passed::default(),
            positions: Vec::with_capacity(8),
            scratch: Vec::with_capacity(8),
            idle: Vec::with_capacity(16),
            order: Vec::with_capacity(16),
            done: false,
        }
    }

    /// Restricts the search to GPUs that hold no slice of a tenant other
    /// than `tenant`.
    pub fn exclusive_for(mut self, tenant: Option<TenantId>) -> Self {
        self.exclusive_tenant = tenant;
        self
    }

    /// The tenant the slice is for (`spread` puts it where that tenant
    /// holds least).
    pub fn for_tenant(mut self, tenant: Option<TenantId>) -> Self {
        self.tenant = tenant;
        self
    }

    /// Slices of the request's tenant on host `h`, counted per GPU (what
    /// `spread` keeps low); 0 without a tenant.
    fn tenant_presence(&self, h: usize) -> i64 {
        self.tenant.map_or(0, |tenant| {
            self.fleet.hosts[h]
                .gpus
                .iter()
                .map(|g| g.tenants.iter().filter(|t| **t == tenant).count() as i64)
                .sum()
        })
    }

    /// Keeps the best [`RANKED`] places and counts what was passed over,
    /// for the decision's explanation.
    pub fn explained(mut self) -> Self {
        self.explain = true;
        self
    }

    /// Keeps the search off host `h` (a position in the fleet).
    pub fn avoiding(mut self, h: Option<usize>) -> Self {
        self.avoid_host = h;
        self
    }

    /// Whether GPU `i` of host `h` may take a slice under the tenant rule.
    fn tenant_admits(&self, h: usize, i: usize) -> bool {
        self.exclusive_tenant.is_none_or(|tenant| {
            self.fleet.hosts[h]
                .gpus
                .get(i)
                .is_none_or(|g| g.tenants.iter().all(|t| *t == tenant))
        })
    }

    /// Scans every host; leaves the winner in `best`.
    pub fn run(&mut self) {
        let shape = self.shape;
        // Random needs every candidate and first-fit stops at the first;
        // hosts that look alike may differ in whose slices they hold.
        let skip_repeats = !matches!(self.policy, Policy::Random { .. } | Policy::FirstFit)
            && self.exclusive_tenant.is_none()
            && !(self.policy == Policy::Spread && self.tenant.is_some());
        let mut seen = SeenHosts::new(self.fleet, skip_repeats);
        for h in 0..self.fleet.aggs.len() {
            // Before the repeat check: a host identical to an avoided one
            // is a candidate in its own right.
            if self.avoid_host == Some(h) {
                continue;
            }
            let agg = &self.fleet.aggs[h];
            let gpu_ok = agg.models & shape.models != 0 && agg.pools & shape.pools != 0;
            if shape.kind != ShapeKind::None && !gpu_ok {
                continue;
            }
            // Counted only for hosts with the GPUs asked for: "short" means
            // CPU or memory is what kept the slice off.
            if agg.cpu_free < shape.cpu || agg.mem_free < shape.mem {
                self.passed.hosts_short += 1;
                continue;
            }
            // An identical earlier host gives identical candidates and keys,
            // and earlier hosts win ties: skip this one.
            if seen.repeat(h) {
                continue;
            }
            self.passed.hosts_scanned += 1;
            match shape.kind {
                ShapeKind::None => {
                    self.clear();
                    self.consider(h, None);
                }
                ShapeKind::Whole(k) => {
                    if gpu_ok && agg.idle >= k {
                        self.whole(h, k);
                    }
                }
                ShapeKind::Frac(c) => {
                    if gpu_ok && agg.max_share_free >= c {
                        self.share(h);
                    }
                }
                ShapeKind::Mig => {
                    if gpu_ok && agg.has_mig {
                        self.share(h);
                    }
                }
            }
            if self.done {
                break;
            }
        }
    }

    /// Candidates for a fraction or MIG profile on host `h`.
    fn share(&mut self, h: usize) {
        let fleet = self.fleet;
        let shape = self.shape;
        let slots = fleet.host_slots(h);
        let dedup = !matches!(self.policy, Policy::Random { .. });
        let mut seen = [0usize; DEDUP];
        let mut n_seen = 0;
        for (i, slot) in slots.iter().enumerate() {
            if shape.can_host(slot, &fleet.models) != Some(true) {
                continue;
            }
            if !self.tenant_admits(h, i) {
                self.passed.gpus_kept_apart += 1;
                continue;
            }
            if dedup {
                if seen[..n_seen].iter().any(|&j| slots[j].same_state(slot)) {
                    continue;
                }
                if n_seen < DEDUP {
                    seen[n_seen] = i;
                    n_seen += 1;
                }
            }
            let m = usize::from(slot.model);
            match slot.kind {
                SlotKind::Shared => {
                    let ShapeKind::Frac(compute) = shape.kind else {
                        continue;
                    };
                    let mut new = *slot;
                    new.free -= compute;
                    new.mem_free -= shape.gpu_mem[m];
                    new.clients += 1;
                    self.clear();
                    self.push(i, Change { old: *slot, new });
                    self.consider(h, None);
                }
                SlotKind::Mig => {
                    let profile = shape.profile[m];
                    let Some(table) = fleet.models[m].mig.as_ref() else {
                        continue;
                    };
                    if profile == NO_PROFILE {
                        continue;
                    }
                    let mut mask = table.free_mask(slot.layout, profile);
                    while mask != 0 {
                        let start = mask.trailing_zeros() as u8;
                        mask &= mask - 1;
                        let mut new = *slot;
                        new.layout = table.next(slot.layout, profile, start);
                        new.free = table.free_milli(new.layout);
                        self.clear();
                        self.push(i, Change { old: *slot, new });
                        self.consider(h, Some(start));
                        if self.done {
                            return;
                        }
                    }
                }
                SlotKind::Exclusive => {}
            }
            if self.done {
                return;
            }
        }
    }

    /// Candidates for `k` whole GPUs on host `h`.
    fn whole(&mut self, h: usize, k: u32) {
        let fleet = self.fleet;
        let slots = fleet.host_slots(h);
        let k = k as usize;
        self.idle.clear();
        for (i, slot) in slots.iter().enumerate() {
            if self.shape.can_host(slot, &fleet.models) != Some(true) {
                continue;
            }
            if self.tenant_admits(h, i) {
                self.idle.push(i);
            } else {
                self.passed.gpus_kept_apart += 1;
            }
        }
        if self.idle.len() < k {
            return;
        }
        let take = |slot: &Slot| {
            let mut new = *slot;
            new.allocated = true;
            new.free = 0;
            new
        };
        if self.shape.nvlink && k > 1 {
            // One candidate per NVLink group with room: its first k idle GPUs.
            for a in 0..self.idle.len() {
                let group = slots[self.idle[a]].nvlink;
                let first_of_group = !self.idle[..a].iter().any(|&j| slots[j].nvlink == group);
                if group == NO_GROUP || !first_of_group {
                    continue;
                }
                self.clear();
                for b in a..self.idle.len() {
                    let j = self.idle[b];
                    if slots[j].nvlink == group && self.scratch.len() < k {
                        self.push(
                            j,
                            Change {
                                old: slots[j],
                                new: take(&slots[j]),
                            },
                        );
                    }
                }
                if self.scratch.len() == k {
                    self.consider(h, None);
                    if self.done {
                        return;
                    }
                }
            }
            return;
        }
        // Take GPUs from the smallest NVLink groups first, keeping large
        // groups whole for NVLink-local requests.
        self.order.clear();
        for &i in &self.idle {
            let group = slots[i].nvlink;
            let size = if group == NO_GROUP {
                0
            } else {
                self.idle
                    .iter()
                    .filter(|&&j| slots[j].nvlink == group)
                    .count()
            };
            self.order.push((size, group, i));
        }
        self.order.sort_unstable();
        self.clear();
        for o in 0..k {
            let i = self.order[o].2;
            self.push(
                i,
                Change {
                    old: slots[i],
                    new: take(&slots[i]),
                },
            );
        }
        self.consider(h, None);
    }

    /// Ranks the candidate in `scratch` on host `h`.
    fn consider(&mut self, h: usize, mig_start: Option<u8>) {
        self.candidates += 1;
        let fleet = self.fleet;
        let shape = self.shape;
        let agg = &fleet.aggs[h];
        let cpu_after = agg.cpu_free - shape.cpu;
        let mem_after = agg.mem_free - shape.mem;
        let mut leftover = 0i64;
        let mut consumed = 0i64;
        for change in &self.scratch {
            leftover += i64::from(change.new.free);
            consumed += i64::from(change.old.free) - i64::from(change.new.free);
        }
        let host_after = i64::from(agg.free_total) - consumed;
        // Compute taken beyond the demand (a MIG profile rounding a share
        // up) is capacity lost to every class: it counts as fragmentation.
        let waste = match shape.kind {
            ShapeKind::Frac(compute) => (consumed - i64::from(compute)).max(0),
            _ => 0,
        };
        let before = HostFree {
            cpu: agg.cpu_free,
            mem: agg.mem_free,
            gpu: i64::from(agg.free_total),
        };
        let after = HostFree {
            cpu: cpu_after,
            mem: mem_after,
            gpu: host_after,
        };
        let mut frag_delta = None;
        let key = match self.policy {
            // A CPU-only request strands no GPU capacity where there is none
            // free: the host with the least free GPU, then the least CPU.
            Policy::Pack if shape.kind == ShapeKind::None => [host_after, i64::from(cpu_after), 0],
            Policy::Pack => {
                let d = delta(
                    &fleet.classes,
                    fleet.host_cells(h),
                    &self.scratch,
                    cpu_after,
                    mem_after,
                    &fleet.models,
                );
                frag_delta = Some(d);
                let stranded = fleet.pairing.stranded_delta(before, after);
                let gaps = fleet.gaps.delta(&self.scratch);
                let gaps = (GAP_WEIGHT * fleet.total_weight as f64 * gaps).round() as i64;
                [
                    d + fleet.total_weight * (waste + STRANDED_WEIGHT * stranded) + gaps,
                    leftover,
                    host_after,
                ]
            }
            Policy::Fgd => {
                let d = fgd_delta(
                    &fleet.classes,
                    fleet.host_cells(h),
                    &self.scratch,
                    before,
                    after,
                    &fleet.models,
                );
                frag_delta = Some(d);
                [-fgd_score(d, fleet.total_weight), 0, 0]
            }
            Policy::BestFit => [leftover, host_after, i64::from(cpu_after)],
            // The host holding fewest of the tenant's slices, then the
            // least-loaded host and GPU.
            Policy::Spread => [self.tenant_presence(h), -host_after, -leftover],
            Policy::FirstFit => {
                self.done = true;
                [0, 0, 0]
            }
            Policy::Random { .. } => {
                if self.rng.below(u64::from(self.candidates)) != 0 {
                    return;
                }
                [0, 0, 0]
            }
        };
        if self.explain {
            self.rank(h, mig_start, key);
        }
        let better = match (&self.best, self.policy) {
            (None, _) | (_, Policy::Random { .. }) => true,
            (Some(best), _) => key < best.key,
        };
        if better {
            let best = self.best.get_or_insert_with(Best::default);
            best.host = h;
            best.positions.clone_from(&self.positions);
            best.changes.clone_from(&self.scratch);
            best.mig_start = mig_start;
            best.key = key;
            best.delta = frag_delta;
        }
    }

    /// Keeps the candidate among the best [`RANKED`], after those with an
    /// equal key (earlier candidates win ties, as in `consider`).
    fn rank(&mut self, h: usize, mig_start: Option<u8>, key: [i64; 3]) {
        if matches!(self.policy, Policy::Random { .. }) {
            return;
        }
        let at = self.ranked.partition_point(|r| r.key <= key);
        if at >= RANKED {
            return;
        }
        self.ranked.insert(
            at,
            Ranked {
                host: h,
                positions: self.positions.clone(),
                mig_start,
                key,
            },
        );
        self.ranked.truncate(RANKED);
    }

    fn clear(&mut self) {
        self.positions.clear();
        self.scratch.clear();
    }

    fn push(&mut self, position: usize, change: Change) {
        self.positions.push(position);
        self.scratch.push(change);
    }
}
