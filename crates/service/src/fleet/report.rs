//! Agents' reports: checked for consistency, then the host's facts and GPUs
//! are stored and its allocations advanced, in one write.

use super::AuthenticatedHost;
use super::REPORT_FULL_EVERY;
use crate::allocations::{gpu_loss, live_on_host, AllocationRow};
use crate::entity::gpu::{HealthFindings, MigDevices, NvlinkPeers, ObservedSharing};
use crate::entity::{gpu, host};
use crate::events::DomainEvent;
use crate::metrics::ReportOutcome;
use crate::runtime::fleet_index::CarriedIndexes;
use crate::{Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, Set};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::health::{assess, HealthVerdict};
use tessera_core::ids::{GpuId, HostId};
use tessera_protocol::agent::{GpuReport, HostReport, ReportAck};

/// Checks a report for internal consistency; names the first offending field.
pub fn validate_report(report: &HostReport) -> Result<(), ServiceError> {
    if report.agent_version.trim().is_empty() || report.agent_version.len() > 64 {
        return Err(ServiceError::invalid(
            "agent_version",
            "must be 1-64 characters",
        ));
    }
    if report.backend.trim().is_empty() || report.backend.len() > 32 {
        return Err(ServiceError::invalid("backend", "must be 1-32 characters"));
    }
    if report.cpu_milli == 0 {
        return Err(ServiceError::invalid("cpu_milli", "must be greater than 0"));
    }
    if report.memory_mib == 0 {
        return Err(ServiceError::invalid(
            "memory_mib",
            "must be greater than 0",
        ));
    }
    if i64::try_from(report.cpu_milli).is_err() || i64::try_from(report.memory_mib).is_err() {
        return Err(ServiceError::invalid("memory_mib", "is out of range"));
    }
    if report.gpus.len() > 64 {
        return Err(ServiceError::invalid(
            "gpus",
            "a host can report at most 64 GPUs",
        ));
    }
    let indices: BTreeSet<u32> = report.gpus.iter().map(|g| g.index).collect();
    let mut uuids = BTreeSet::new();
    for (i, g) in report.gpus.iter().enumerate() {
        validate_gpu(i, g, &indices)?;
        if !uuids.insert(g.uuid.as_str()) {
            return Err(ServiceError::invalid(
                format!("gpus[{i}].uuid"),
                format!("'{}' appears twice", g.uuid),
            ));
        }
    }
    if indices.len() != report.gpus.len() {
        return Err(ServiceError::invalid(
            "gpus",
            "two GPUs have the same index",
        ));
    }
    Ok(())
}

fn validate_gpu(i: usize, g: &GpuReport, indices: &BTreeSet<u32>) -> Result<(), ServiceError> {
    let field = |f: &str| format!("gpus[{i}].{f}");
    let uuid_ok = g.uuid.starts_with("GPU-")
        && g.uuid.len() <= 100
        && g.uuid[4..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == '-')
        && g.uuid.len() > 4;
    if !uuid_ok {
        return Err(ServiceError::invalid(
            field("uuid"),
            format!("'{}' is not a GPU UUID (GPU-<hex>)", g.uuid),
        ));
    }
    if g.name.trim().is_empty() || g.name.len() > 200 {
        return Err(ServiceError::invalid(
            field("name"),
            "must be 1-200 characters",
        ));
    }
    if g.memory_mib == 0 || i64::try_from(g.memory_mib).is_err() {
        return Err(ServiceError::invalid(
            field("memory_mib"),
            "must be greater than 0",
        ));
    }
    if g.mig_enabled && !g.mig_capable {
        return Err(ServiceError::invalid(
            field("mig_enabled"),
            "a GPU that is not MIG-capable cannot have MIG enabled",
        ));
    }
    if let Some(sharing) = &g.sharing {
        if sharing.mig_enabled != g.mig_enabled {
            return Err(ServiceError::invalid(
                field("sharing.mig_enabled"),
                "must agree with mig_enabled",
            ));
        }
        if !sharing.mig_enabled && !sharing.instances.is_empty() {
            return Err(ServiceError::invalid(
                field("sharing.instances"),
                "a GPU with MIG off has no GPU instances",
            ));
        }
    }
    if g.health.xids.len() > tessera_core::health::MAX_XIDS {
        return Err(ServiceError::invalid(
            field("health.xids"),
            format!(
                "at most {} distinct XIDs (the most recent)",
                tessera_core::health::MAX_XIDS
            ),
        ));
    }
    if g.health.throttle.len() > tessera_core::health::ThrottleReason::ALL.len() {
        return Err(ServiceError::invalid(
            field("health.throttle"),
            "lists a reason twice",
        ));
    }
    for peer in &g.nvlink_peers {
        if *peer == g.index || !indices.contains(peer) {
            return Err(ServiceError::invalid(
                field("nvlink_peers"),
                format!("{peer} is not another GPU of this host"),
            ));
        }
    }
    Ok(())
}

impl Service {
    /// Stores a host's report: host facts, and its GPUs replaced by what it sees now.
    pub async fn record_report(
        &self,
        who: &AuthenticatedHost,
        report: &HostReport,
    ) -> Result<ReportAck, ServiceError> {
        validate_report(report)?;
        if report.hostname != who.hostname {
            return Err(ServiceError::Forbidden(format!(
                "this credential belongs to host '{}', not '{}'; an agent may only report for its own host",
                who.hostname, report.hostname
            )));
        }
        let now = self.now();
        let digest = report_digest(report);
        if let Some(d) = &digest {
            let offline_after = self.settings.host_offline_after;
            let repeated = if self.host_checks.repeats(who.id, d, now, offline_after) {
                Some(ReportOutcome::Repeated)
            } else if !self.host_checks.full_due_here(who.id, d, now)
                && self.record_repeat(who, d, now).await?
            {
                Some(ReportOutcome::RepeatedStored)
            } else {
                None
            };
            if let Some(outcome) = repeated {
                self.metrics.reported(outcome);
                return Ok(self.report_ack(Some(d.clone())));
            }
        }
        let mut w = self.begin_write().await?;
        let existing: BTreeMap<String, gpu::Model> = gpu::Entity::find()
            .filter(gpu::Column::HostId.eq(who.id))
            .all(w.db())
            .await?
            .into_iter()
            .map(|g| (g.uuid.clone(), g))
            .collect();
        // Only a GPU new to this host can be another's (UUIDs are unique).
        let new_uuids: Vec<&str> = report
            .gpus
            .iter()
            .map(|g| g.uuid.as_str())
            .filter(|u| !existing.contains_key(*u))
            .collect();
        if !new_uuids.is_empty() {
            if let Some(clash) = gpu::Entity::find()
                .filter(gpu::Column::Uuid.is_in(new_uuids))
                .filter(gpu::Column::HostId.ne(who.id))
                .one(w.db())
                .await?
            {
                return Err(ServiceError::Conflict(format!(
                    "GPU {} is already reported by another host; check the agent's configuration",
                    clash.uuid
                )));
            }
        }
        let h = host::Entity::find_by_id(who.id)
            .one(w.db())
            .await?
            .ok_or(ServiceError::InvalidCredential)?;
        let first_report = h.last_seen_at.is_none();
        // What the placer sees of the host: whether it is online, its CPU
        // and memory, and (below) its GPUs.
        let back_online = h
            .last_seen_at
            .is_some_and(|seen| now - seen > self.settings.host_offline_after);
        let resources_changed = h.cpu_milli != i64::try_from(report.cpu_milli).unwrap_or(i64::MAX)
            || h.memory_mib != i64::try_from(report.memory_mib).unwrap_or(i64::MAX);
        if back_online || resources_changed {
            w.hook::<CarriedIndexes>().capacity_changed();
        }
        let mut active: host::ActiveModel = h.into();
        active.cpu_milli = Set(i64::try_from(report.cpu_milli).unwrap_or(i64::MAX));
        active.memory_mib = Set(i64::try_from(report.memory_mib).unwrap_or(i64::MAX));
        active.agent_version = Set(Some(report.agent_version.clone()));
        active.backend = Set(Some(report.backend.clone()));
        active.driver_version = Set(report.driver_version.clone());
        active.last_seen_at = Set(Some(now));
        // Cleared again below if processing it changes the desired state.
        active.report_digest = Set(digest.clone());
        active.report_full_at = Set(Some(now));
        if let Some(applied) = report.applied_generation {
            // What the agent applied (its slices' progress follows below).
            active.applied_generation = Set(Some(applied));
        }
        active.update(w.db()).await?;

        let gone: Vec<GpuId> = existing
            .values()
            .filter(|g| !report.gpus.iter().any(|r| r.uuid == g.uuid))
            .map(|g| g.id)
            .collect();
        // Whether any GPU row changed here (else they read as `existing`).
        let mut gpus_written = !gone.is_empty();
        if !gone.is_empty() {
            w.hook::<CarriedIndexes>().capacity_changed();
            gpu::Entity::delete_many()
                .filter(Condition::all().add(gpu::Column::Id.is_in(gone)))
                .exec(w.db())
                .await?;
        }
        for r in &report.gpus {
            let model = tessera_core::catalogue::lookup(&r.name, r.memory_mib);
            let model_name = if model.generic {
                r.name.clone()
            } else {
                model.name.to_owned()
            };
            let peers = NvlinkPeers(r.nvlink_peers.clone());
            let sharing = r.sharing.clone().map(ObservedSharing);
            let mig_devices =
                (!r.mig_devices.is_empty()).then(|| MigDevices(r.mig_devices.clone()));
            let apply_error = report
                .errors
                .iter()
                .find(|e| e.index == r.index)
                .map(|e| e.message.clone());
            let health = assess(&r.health);
            let findings =
                (!health.findings.is_empty()).then(|| HealthFindings(health.findings.clone()));
            let before = existing
                .get(&r.uuid)
                .map_or(HealthVerdict::Healthy, |g| g.health);
            if before != health.verdict {
                w.emit(DomainEvent::GpuHealthChanged {
                    host_id: who.id,
                    hostname: who.hostname.clone(),
                    index: r.index,
                    uuid: r.uuid.clone(),
                    before,
                    after: health.clone(),
                });
            }
            let idx = i32::try_from(r.index)
                .map_err(|_| ServiceError::invalid("gpus.index", "is out of range"))?;
            let memory = i64::try_from(r.memory_mib).unwrap_or(i64::MAX);
            match existing.get(&r.uuid) {
                Some(g) => {
                    let unchanged = g.idx == idx
                        && g.name == r.name
                        && g.model == model_name
                        && g.memory_mib == memory
                        && g.mig_capable == r.mig_capable
                        && g.mig_enabled == r.mig_enabled
                        && g.nvlink_peers == peers
                        && g.health == health.verdict
                        && g.health_findings == findings
                        && g.sharing == sharing
                        && g.mig_devices == mig_devices
                        && g.apply_error == apply_error;
                    if !unchanged {
                        let placer_facts_changed = g.idx != idx
                            || g.model != model_name
                            || g.memory_mib != memory
                            || g.mig_enabled != r.mig_enabled
                            || g.nvlink_peers != peers;
                        if placer_facts_changed
                            || (g.sharing != sharing
                                && unmanaged_changed(w.db(), g, sharing.as_ref()).await?)
                        {
                            w.hook::<CarriedIndexes>().capacity_changed();
                        }
                        let mut a: gpu::ActiveModel = g.clone().into();
                        a.idx = Set(idx);
                        a.name = Set(r.name.clone());
                        a.model = Set(model_name);
                        a.memory_mib = Set(memory);
                        a.mig_capable = Set(r.mig_capable);
                        a.mig_enabled = Set(r.mig_enabled);
                        a.nvlink_peers = Set(peers);
                        a.health = Set(health.verdict);
                        a.health_findings = Set(findings);
                        a.sharing = Set(sharing);
                        a.mig_devices = Set(mig_devices);
                        a.apply_error = Set(apply_error);
                        a.updated_at = Set(now);
                        a.update(w.db()).await?;
                        gpus_written = true;
                    }
                }
                None => {
                    w.hook::<CarriedIndexes>().capacity_changed();
                    // Free the index first if a replaced GPU still holds it.
                    gpu::Entity::delete_many()
                        .filter(gpu::Column::HostId.eq(who.id))
                        .filter(gpu::Column::Idx.eq(idx))
                        .exec(w.db())
                        .await?;
                    gpu::ActiveModel {
                        host_id: Set(who.id),
                        idx: Set(idx),
                        uuid: Set(r.uuid.clone()),
                        name: Set(r.name.clone()),
                        model: Set(model_name),
                        memory_mib: Set(memory),
                        mig_capable: Set(r.mig_capable),
                        mig_enabled: Set(r.mig_enabled),
                        nvlink_peers: Set(peers),
                        health: Set(health.verdict),
                        health_findings: Set(findings),
                        sharing: Set(sharing),
                        mig_devices: Set(mig_devices),
                        apply_error: Set(apply_error),
                        updated_at: Set(now),
                        ..Default::default()
                    }
                    .insert(w.db())
                    .await?;
                    gpus_written = true;
                }
            }
        }
        self.apply_agent_report(&mut w, who, report, now).await?;
        // Slices on GPUs that turned unhealthy or went missing lose their
        // capacity; those whose GPU (or whole host) came back get it back.
        let gpus: BTreeMap<String, gpu::Model> = if gpus_written {
            gpu::Entity::find()
                .filter(gpu::Column::HostId.eq(who.id))
                .all(w.db())
                .await?
                .into_iter()
                .map(|g| (g.uuid.clone(), g))
                .collect()
        } else {
            existing
        };
        let mut rows = Vec::new();
        for a in live_on_host(w.db(), who.id).await? {
            let loss = match a.stored_placement() {
                Some(p) => gpu_loss(p, &gpus),
                None => None,
            };
            rows.push((a, loss));
        }
        self.settle_capacity(&mut w, rows, now).await?;
        if first_report {
            w.emit(DomainEvent::HostFirstReport {
                host_id: who.id,
                gpus: report.gpus.len(),
                backend: report.backend.clone(),
            });
        }
        // Remembered before the commit: a commit that changes the host's
        // desired state forgets it again (`wake_local`).
        if let Some(d) = &digest {
            self.host_checks.processed(who.id, d.clone(), now);
        }
        if let Err(e) = w.commit(self, &who.actor()).await {
            self.host_checks.forget_report(Some(who.id));
            return Err(e);
        }
        self.metrics.reported(ReportOutcome::Processed);
        Ok(self.report_ack(digest))
    }

    /// Writes the sightings of hosts whose reports repeated the last one
    /// (see `heartbeat`), in one statement per 500 hosts, as the earliest
    /// of them: a host's `last_seen_at` may read up to a round early, never
    /// late, and never moves back. A failure keeps them for the next round.
    /// How many hosts it wrote.
    pub async fn flush_heartbeats(&self) -> Result<usize, ServiceError> {
        let seen = self.host_checks.take_seen();
        let Some(at) = seen.values().min().copied() else {
            return Ok(0);
        };
        let hosts: Vec<HostId> = seen.keys().copied().collect();
        let written = async {
            let w = self.begin_write().await?;
            for chunk in hosts.chunks(500) {
                host::Entity::update_many()
                    .col_expr(host::Column::LastSeenAt, Expr::value(at))
                    .filter(host::Column::Id.is_in(chunk.iter().copied()))
                    .filter(
                        Condition::any()
                            .add(host::Column::LastSeenAt.is_null())
                            .add(host::Column::LastSeenAt.lt(at)),
                    )
                    .exec(w.db())
                    .await?;
            }
            w.commit(self, &crate::audit::Actor::System).await
        }
        .await;
        match written {
            Ok(()) => Ok(seen.len()),
            Err(e) => {
                self.host_checks.restore_seen(seen);
                Err(e)
            }
        }
    }

    fn report_ack(&self, digest: Option<String>) -> ReportAck {
        let seconds = |d: Duration| u64::try_from(d.num_seconds()).unwrap_or(10).max(1);
        let next = seconds(self.settings.report_interval);
        ReportAck {
            next_report_in_s: next,
            heartbeat_s: heartbeat_s(next, seconds(self.settings.host_offline_after)),
            digest,
        }
    }

    /// A desired-state poll that names the digest of the host's last report
    /// ([`ReportAck::digest`]) stands for that report when it would be
    /// [`ReportOutcome::Polled`]: the host is noted as seen, in memory, and
    /// needs not send it. Whether it did (otherwise the agent sends the
    /// report, which takes the usual path).
    pub fn note_polled_report(&self, who: &AuthenticatedHost, digest: &str) -> bool {
        let noted =
            self.host_checks
                .repeats(who.id, digest, self.now(), self.settings.host_offline_after);
        if noted {
            self.metrics.reported(ReportOutcome::Polled);
        }
        noted
    }

    /// Records only that the host was seen, when its report repeats the last
    /// one processed in full (on any replica; this one remembers it from
    /// then on): less than [`REPORT_FULL_EVERY`] ago, with the
    /// host online since (a host coming back is processed in full, so its
    /// slices get their capacity back) and its desired state unchanged
    /// (every change of it clears the digest). Whether it did.
    async fn record_repeat(
        &self,
        who: &AuthenticatedHost,
        digest: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, ServiceError> {
        let w = self.begin_write().await?;
        let seen = host::Entity::update_many()
            .col_expr(host::Column::LastSeenAt, Expr::value(now))
            .filter(host::Column::Id.eq(who.id))
            .filter(host::Column::ReportDigest.eq(digest))
            .filter(host::Column::ReportFullAt.gt(now - REPORT_FULL_EVERY))
            .filter(host::Column::LastSeenAt.gt(now - self.settings.host_offline_after))
            .exec(w.db())
            .await?
            .rows_affected
            == 1;
        // Remembered here too, so the host's next repeats cost this replica
        // nothing; before the commit, like a full processing (a change of
        // the host's desired state waits for this row and forgets it after).
        let full_at = match seen {
            true => host::Entity::find_by_id(who.id)
                .one(w.db())
                .await?
                .and_then(|h| h.report_full_at),
            false => None,
        };
        if let Some(full_at) = full_at {
            self.host_checks
                .processed_at(who.id, digest.to_owned(), full_at, now);
        }
        if let Err(e) = w.commit(self, &who.actor()).await {
            self.host_checks.forget_report(Some(who.id));
            return Err(e);
        }
        Ok(seen)
    }
}

/// Whether the MIG instances on GPU `g` that no open allocation owns (the
/// placer counts them as taken) differ between what was stored and `now`.
async fn unmanaged_changed<C: sea_orm::ConnectionTrait>(
    conn: &C,
    g: &gpu::Model,
    now: Option<&ObservedSharing>,
) -> Result<bool, ServiceError> {
    use crate::allocations::{occupancy, unmanaged_instances};
    let held = occupancy(conn, None, Some(&[g.host_id])).await?;
    let owned = held.get(&g.uuid).map(Vec::as_slice).unwrap_or(&[]);
    let before = unmanaged_instances(g.observed(), owned);
    let after = unmanaged_instances(now.map(|s| &s.0), owned);
    Ok(before != after)
}

/// SHA-256 (hex) of a report as JSON: equal reports, equal digests (`None`
/// if it does not serialize, which plain data always does).
fn report_digest(report: &HostReport) -> Option<String> {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(report).ok()?;
    Some(hex::encode(Sha256::digest(bytes)))
}

/// How long an idle agent's poll is held ([`ReportAck::heartbeat_s`]): half
/// the offline grace, so that one late poll does not take a host offline,
/// never shorter than the report interval nor longer than a poll may wait.
fn heartbeat_s(report_every_s: u64, offline_after_s: u64) -> u64 {
    (offline_after_s / 2)
        .min(tessera_protocol::agent::DESIRED_MAX_WAIT_S)
        .max(report_every_s)
}

#[cfg(test)]
mod heartbeat_tests {
    use super::heartbeat_s;

    #[test]
    fn the_heartbeat_is_half_the_grace_within_the_interval_and_the_longest_poll() {
        assert_eq!(heartbeat_s(5, 30), 15);
        assert_eq!(
            heartbeat_s(5, 7),
            5,
            "never shorter than the report interval"
        );
        assert_eq!(heartbeat_s(20, 30), 20);
        assert_eq!(heartbeat_s(5, 600), 30, "a poll waits at most 30 s");
    }
}
