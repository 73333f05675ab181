//! Right-sizing advice for running slices: what each measurably used (its
//! telemetry's rollups, see [`crate::telemetry`]) against the shapes the
//! pools offer ([`tessera_core::rightsize`]).
//!
//! Telemetry is read per hour where the hour is rolled up, and per minute
//! (then per sample) after it, over the last [`WINDOW_MS`]: a fleet's
//! running slices cost one row per slice and hour.

use crate::allocations::{AllocationRow, View};
use crate::entity::{allocation, gpu_rollup, gpu_sample, tenant};
use crate::telemetry::{rollup_of, sample_of};
use crate::usage::{held_of, GpuModels};
use crate::{PlatformAdmin, Service, ServiceError, TenantActor};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use std::collections::BTreeMap;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::metering::{price_at, Price, HOUR_MS};
use tessera_core::placement::Policy;
use tessera_core::rightsize::{advise, Advice, Held, MeasuredUse, Offer, Period};
use tessera_core::sharing::SliceShape;
use tessera_core::slice::PoolOffer;
use tessera_core::telemetry::{roll_up, Sample, MINUTE_MS};
use tessera_protocol::views::{Recommendations, SliceAdvice};

/// How far back telemetry is read: a month.
pub const WINDOW_MS: i64 = 30 * 24 * HOUR_MS;

/// A slice's telemetry by device: rolled-up hours, minutes after them,
/// samples after those.
#[derive(Default)]
struct Devices(BTreeMap<String, DeviceUse>);

#[derive(Default)]
struct DeviceUse {
    hours: BTreeMap<i64, Period>,
    minutes: BTreeMap<i64, Period>,
    samples: Vec<Sample>,
}

impl DeviceUse {
    /// Its periods, each moment counted once: hours, then minutes after
    /// the last hour, then samples after the last minute (rolled up per
    /// minute here).
    fn periods(&self) -> Vec<Period> {
        let mut out: Vec<Period> = self.hours.values().copied().collect();
        let after_hours = self
            .hours
            .keys()
            .next_back()
            .map_or(i64::MIN, |h| h + HOUR_MS);
        out.extend(self.minutes.range(after_hours..).map(|(_, p)| *p));
        let after_minutes = self
            .minutes
            .keys()
            .next_back()
            .map_or(after_hours, |m| (m + MINUTE_MS).max(after_hours));
        let fresh: Vec<Sample> = self
            .samples
            .iter()
            .filter(|s| s.at_ms >= after_minutes)
            .copied()
            .collect();
        out.extend(roll_up(&fresh, MINUTE_MS).iter().map(|r| Period {
            util_pct: r.util_avg,
            covered_ms: r.covered_ms,
            mem_max_mib: r.mem_max_mib,
        }));
        out
    }
}

impl Service {
    /// What `ids` used over the last month, per slice.
    async fn measured_use(
        &self,
        ids: &[AllocationId],
    ) -> Result<BTreeMap<AllocationId, MeasuredUse>, ServiceError> {
        let now = self.now().timestamp_millis();
        let mut by_slice: BTreeMap<AllocationId, Devices> = BTreeMap::new();
        for chunk in ids.chunks(500) {
            let rolled = gpu_rollup::Entity::find()
                .filter(gpu_rollup::Column::AllocationId.is_in(chunk.iter().copied()))
                .filter(gpu_rollup::Column::StartMs.gte(now - WINDOW_MS))
                .all(&self.db)
                .await?;
            for r in &rolled {
                let Some(id) = r.allocation_id else { continue };
                let roll = rollup_of(r)?;
                let device = by_slice
                    .entry(id)
                    .or_default()
                    .0
                    .entry(r.device_uuid.clone())
                    .or_default();
                if r.period_ms == HOUR_MS {
                    device.hours.insert(
                        r.start_ms,
                        Period {
                            util_pct: roll.util_p95,
                            covered_ms: roll.covered_ms,
                            mem_max_mib: roll.mem_max_mib,
                        },
                    );
                } else if r.period_ms == MINUTE_MS {
                    device.minutes.insert(
                        r.start_ms,
                        Period {
                            util_pct: roll.util_avg,
                            covered_ms: roll.covered_ms,
                            mem_max_mib: roll.mem_max_mib,
                        },
                    );
                }
            }
            // Samples the rollups do not have yet (the last few minutes).
            let raw = gpu_sample::Entity::find()
                .filter(gpu_sample::Column::AllocationId.is_in(chunk.iter().copied()))
                .filter(gpu_sample::Column::AtMs.gte(now - 2 * HOUR_MS))
                .all(&self.db)
                .await?;
            for s in &raw {
                let (Some(id), Some(sample)) = (s.allocation_id, sample_of(s)?) else {
                    continue;
                };
                by_slice
                    .entry(id)
                    .or_default()
                    .0
                    .entry(s.device_uuid.clone())
                    .or_default()
                    .samples
                    .push(sample);
            }
        }
        Ok(by_slice
            .into_iter()
            .map(|(id, devices)| {
                let periods: Vec<Period> =
                    devices.0.values().flat_map(DeviceUse::periods).collect();
                (id, MeasuredUse::of(&periods, devices.0.len()))
            })
            .collect())
    }

    /// Advice for `rows` (running slices), biggest savings first.
    async fn advise_rows(
        &self,
        rows: Vec<allocation::Model>,
    ) -> Result<Recommendations, ServiceError> {
        let ids: Vec<AllocationId> = rows.iter().map(|r| r.id).collect();
        let used = self.measured_use(&ids).await?;
        let specs = self.pools(&self.db).await?;
        let offers: Vec<PoolOffer> = specs.iter().map(Self::pool_offer).collect();
        // Each pool's hosts, empty: what they can hold at all.
        let mut empty = BTreeMap::new();
        for spec in &specs {
            let snap = self
                .pool_snapshot(&self.db, spec, self.now(), View::Empty, &[])
                .await?;
            empty.insert(spec.name.to_string(), snap.fleet);
        }
        let placeable = |offer: &PoolOffer, shape: &SliceShape| {
            empty.get(&offer.pool).is_some_and(|fleet| {
                offer
                    .placement_request(shape)
                    .is_ok_and(|r| fleet.place(&r, Policy::Pack).is_ok())
            })
        };
        let prices = self.price_list().await?;
        let models = GpuModels::load(&self.db).await?;
        let slugs: BTreeMap<TenantId, String> = tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.slug.to_string()))
            .collect();
        let now = self.now().timestamp_millis();
        let price = |pool: &str| -> Option<u64> {
            price_at(&prices, pool, now).map(|p: &Price| p.gpu_hour_micros)
        };
        // Savings in money only add up within one currency: the first
        // priced pool's.
        let currency = prices.first().map(|p| p.currency.clone());
        let mut slices = Vec::with_capacity(rows.len());
        for row in &rows {
            let (Some(placement), Some(own)) = (
                row.placement.as_ref(),
                offers.iter().find(|o| o.pool == row.pool.as_str()),
            ) else {
                continue;
            };
            let Some(first) = placement.gpus.first() else {
                continue;
            };
            let model = models.of(first);
            let gpus = u32::try_from(placement.gpus.len()).unwrap_or(u32::MAX);
            let share = held_of(row, &models).map(|h| h.share).unwrap_or_default();
            let held = Held {
                shape: row.slice_shape(),
                pool: own,
                model: &model,
                gpus,
                share: tessera_core::ledger::GpuShare(share.0 / u64::from(gpus.max(1))),
                gpu_hour_micros: price(own.pool.as_str()),
            };
            let pool_offers: Vec<Offer<'_>> = offers
                .iter()
                .filter(|o| {
                    currency.is_none()
                        || price_at(&prices, &o.pool, now)
                            .is_none_or(|p| Some(&p.currency) == currency.as_ref())
                })
                .map(|o| Offer {
                    pool: o,
                    gpu_hour_micros: price(&o.pool),
                })
                .collect();
            let measured = used.get(&row.id).copied().unwrap_or_default();
            let advice = advise(
                &self.settings.rightsizing,
                &held,
                &measured,
                &pool_offers,
                &placeable,
            );
            slices.push(SliceAdvice {
                allocation: row.id,
                tenant: slugs.get(&row.tenant_id).cloned().unwrap_or_default(),
                pool: row.pool.to_string(),
                shape: row.shape_label.clone(),
                used: measured,
                sentence: advice.sentence(&measured),
                advice,
            });
        }
        slices.sort_by(|a, b| {
            b.advice
                .saves_gpu_hours_month()
                .total_cmp(&a.advice.saves_gpu_hours_month())
                .then(a.allocation.cmp(&b.allocation))
        });
        let mut report = Recommendations {
            saves_gpu_hours_month: 0.0,
            saves_micros_month: 0,
            smaller: 0,
            slices,
        };
        for s in &report.slices {
            if let Advice::Smaller { resize, .. } = &s.advice {
                report.smaller += 1;
                report.saves_gpu_hours_month += resize.saves_gpu_hours_month;
                report.saves_micros_month += resize.saves_micros_month.unwrap_or(0);
            }
        }
        Ok(report)
    }

    fn running() -> sea_orm::Select<allocation::Entity> {
        allocation::Entity::find().filter(allocation::Column::State.eq(AllocationPhase::Active))
    }

    /// Advice for the tenant's running slices.
    pub async fn recommendations(
        &self,
        actor: &TenantActor,
    ) -> Result<Recommendations, ServiceError> {
        let rows = Self::running()
            .filter(allocation::Column::TenantId.eq(actor.tenant_id))
            .all(&self.db)
            .await?;
        self.advise_rows(rows).await
    }

    /// Advice for every running slice in the fleet (platform admins).
    pub async fn fleet_recommendations(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Recommendations, ServiceError> {
        let rows = Self::running().all(&self.db).await?;
        self.advise_rows(rows).await
    }

    /// Advice for one of the tenant's slices; `None` unless it is running.
    pub async fn allocation_advice(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<Option<SliceAdvice>, ServiceError> {
        let row = self.own_row(actor, id).await?;
        if row.state != AllocationPhase::Active {
            return Ok(None);
        }
        Ok(self.advise_rows(vec![row]).await?.slices.pop())
    }
}

impl Service {
    /// Asks for the smaller shape the advice names instead of slice `id`:
    /// a new request in the advised pool with the same lease (within the
    /// pool's longest), purpose and QoS, which replaces `id` (released once
    /// the new one is active). 409 when the slice has no smaller shape.
    pub async fn resize_allocation(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<tessera_protocol::views::AllocationView, ServiceError> {
        actor.require_request("request slices for it")?;
        let old = self.own_row(actor, id).await?;
        let Some(advice) = self.allocation_advice(actor, id).await? else {
            return Err(ServiceError::Conflict(format!(
                "allocation {id} is {}; only a running slice can be resized",
                old.state
            )));
        };
        let Advice::Smaller { resize, .. } = advice.advice else {
            return Err(ServiceError::Conflict(format!(
                "allocation {id} has no smaller shape to move to. {}",
                advice.sentence
            )));
        };
        self.replace_with(actor, &old, &resize.pool, resize.shape)
            .await
    }

    /// Asks for `shape` in `pool` instead of slice `id` (for a waiting
    /// request, one of the shapes its page says would start now), admitted
    /// like any request; `id` is withdrawn or released once the new one is
    /// active.
    pub async fn request_instead(
        &self,
        actor: &TenantActor,
        id: AllocationId,
        pool: &str,
        shape: SliceShape,
    ) -> Result<tessera_protocol::views::AllocationView, ServiceError> {
        actor.require_request("request slices for it")?;
        let old = self.own_row(actor, id).await?;
        self.replace_with(actor, &old, pool, shape).await
    }

    /// A request for `shape` in `pool` that replaces `old`: its lease
    /// (within the pool's longest), purpose and QoS; its priority class in
    /// its own pool, the default class elsewhere (classes are per pool).
    async fn replace_with(
        &self,
        actor: &TenantActor,
        old: &allocation::Model,
        pool: &str,
        shape: SliceShape,
    ) -> Result<tessera_protocol::views::AllocationView, ServiceError> {
        let spec = self.pool_spec(&self.db, "pool", pool).await?;
        let same_pool = spec.name == old.pool;
        let req = tessera_protocol::requests::NewAllocation {
            tenant: None,
            pool: spec.name.clone(),
            shape,
            lease_hours: u32::try_from(old.lease_hours)
                .unwrap_or(1)
                .clamp(1, spec.max_lease_hours.max(1)),
            purpose: old.purpose.clone(),
            priority_class: same_pool.then(|| old.priority_class.clone()),
            qos: old.qos,
            replaces: Some(old.id),
        };
        self.request_allocation(actor, &req).await
    }
}
