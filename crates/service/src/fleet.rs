//! Hosts and GPUs: join tokens, enrolment, reports and the fleet view.

use crate::audit::Actor;
use crate::entity::{gpu, host, join_token};
use crate::events::DomainEvent;
use crate::{pools, secret, PlatformAdmin, Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use tessera_protocol::agent::{EnrollRequest, EnrollResponse, GpuReport, HostReport, ReportAck};
use tessera_protocol::views::{
    CreatedJoinToken, FleetView, GpuView, HostStatus, HostView, JoinTokenStatus, JoinTokenView,
    MigInstanceView, PoolView,
};

/// Longest lifetime of a join token.
pub const MAX_JOIN_TOKEN_TTL: Duration = Duration::days(30);

/// A host that authenticated with its credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedHost {
    /// Host id.
    pub id: i64,
    /// The host name the credential was issued for.
    pub hostname: String,
}

/// Checks a host name (RFC 1123 labels).
pub fn validate_hostname(field: &str, name: &str) -> Result<(), ServiceError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if ok {
        Ok(())
    } else {
        Err(ServiceError::invalid(
            field,
            format!("'{name}' is not a valid host name (letters, digits, dashes and dots; at most 253 characters)"),
        ))
    }
}

/// Checks a report for internal consistency; names the first offending field.
pub fn validate_report(report: &HostReport) -> Result<(), ServiceError> {
    validate_hostname("hostname", &report.hostname)?;
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
    if g.health.len() > 200 {
        return Err(ServiceError::invalid(
            field("health"),
            "must be at most 200 characters",
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

/// Tenants holding capacity on a GPU: (MIG start or none, tenant slug, shape label).
type Holders = Vec<(Option<u8>, String, String)>;

/// The MIG instances in a stored sharing report, by start slice, with their tenants.
fn mig_instances(sharing: Option<&serde_json::Value>, holders: &Holders) -> Vec<MigInstanceView> {
    let Some(observed) = sharing
        .and_then(|v| serde_json::from_value::<tessera_core::plan::GpuObserved>(v.clone()).ok())
    else {
        return Vec::new();
    };
    let mut list: Vec<MigInstanceView> = observed
        .instances
        .into_iter()
        .map(|i| MigInstanceView {
            tenant: holders
                .iter()
                .find(|(start, _, _)| *start == Some(i.placement.start))
                .map(|(_, t, _)| t.clone()),
            profile: i.placement.profile,
            start: i.placement.start,
            in_use: i.in_use,
        })
        .collect();
    list.sort_by_key(|i| i.start);
    list
}

fn token_status(t: &join_token::Model, now: DateTime<Utc>) -> JoinTokenStatus {
    if t.revoked_at.is_some() {
        JoinTokenStatus::Revoked
    } else if t.used_at.is_some() {
        JoinTokenStatus::Used
    } else if t.expires_at <= now {
        JoinTokenStatus::Expired
    } else {
        JoinTokenStatus::Active
    }
}

fn token_view(
    t: &join_token::Model,
    hosts: &BTreeMap<i64, String>,
    now: DateTime<Utc>,
) -> JoinTokenView {
    JoinTokenView {
        id: t.id,
        description: t.description.clone(),
        created_by: t.created_by.clone(),
        created_at: t.created_at,
        expires_at: t.expires_at,
        status: token_status(t, now),
        used_by_host: t.used_by_host_id.and_then(|id| hosts.get(&id).cloned()),
    }
}

impl Service {
    /// Creates a one-time join token valid for `ttl`. The secret is returned once.
    pub async fn create_join_token(
        &self,
        admin: &PlatformAdmin<'_>,
        description: &str,
        ttl: Duration,
    ) -> Result<CreatedJoinToken, ServiceError> {
        self.create_join_token_as(Actor::User(admin.principal()), description, ttl)
            .await
    }

    /// Like [`Self::create_join_token`], for the operator's command line.
    pub async fn create_join_token_as(
        &self,
        actor: Actor<'_>,
        description: &str,
        ttl: Duration,
    ) -> Result<CreatedJoinToken, ServiceError> {
        let description = description.trim();
        if description.is_empty() || description.chars().count() > 200 {
            return Err(ServiceError::invalid(
                "description",
                "say what the token is for, in 1-200 characters",
            ));
        }
        if ttl <= Duration::zero() || ttl > MAX_JOIN_TOKEN_TTL {
            return Err(ServiceError::invalid(
                "ttl",
                "must be between 1 minute and 30 days",
            ));
        }
        let now = self.now();
        let secret = secret::generate("tsj");
        let created_by = match &actor {
            Actor::User(p) => Some(p.audit_name()),
            _ => Some("command line".to_owned()),
        };
        let mut w = self.begin_write().await?;
        let t = join_token::ActiveModel {
            token_hash: Set(secret::hash(&secret)),
            description: Set(description.to_owned()),
            created_by: Set(created_by),
            created_at: Set(now),
            expires_at: Set(now + ttl),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::JoinTokenCreated {
            token_id: t.id,
            description: t.description.clone(),
            expires_at: t.expires_at,
        });
        w.commit(self, &actor).await?;
        Ok(CreatedJoinToken {
            token: token_view(&t, &BTreeMap::new(), now),
            secret,
        })
    }

    /// Revokes an unused join token.
    pub async fn revoke_join_token(
        &self,
        admin: &PlatformAdmin<'_>,
        id: i64,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut w = self.begin_write().await?;
        let t = join_token::Entity::find_by_id(id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("join token {id}")))?;
        let status = token_status(&t, now);
        if status != JoinTokenStatus::Active {
            return Err(ServiceError::Conflict(format!(
                "join token {id} is already {status}"
            )));
        }
        let mut active: join_token::ActiveModel = t.into();
        active.revoked_at = Set(Some(now));
        active.update(w.db()).await?;
        w.emit(DomainEvent::JoinTokenRevoked {
            token_id: id,
            status_before: status,
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        Ok(())
    }

    /// All join tokens, newest first.
    pub async fn list_join_tokens(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Vec<JoinTokenView>, ServiceError> {
        let now = self.now();
        let hosts = self.host_names().await?;
        let tokens = join_token::Entity::find()
            .order_by_desc(join_token::Column::Id)
            .all(&self.db)
            .await?;
        Ok(tokens.iter().map(|t| token_view(t, &hosts, now)).collect())
    }

    async fn host_names(&self) -> Result<BTreeMap<i64, String>, ServiceError> {
        Ok(host::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|h| (h.id, h.hostname))
            .collect())
    }

    /// Trades a join token for a host credential. The token is consumed in the
    /// same transaction that creates (or re-keys) the host, so a token works once.
    pub async fn enroll(&self, req: &EnrollRequest) -> Result<EnrollResponse, ServiceError> {
        validate_hostname("hostname", &req.hostname)?;
        let now = self.now();
        let token_hash = secret::hash(req.join_token.trim());
        let credential = secret::generate("tsh");
        let mut w = self.begin_write().await?;
        // Claim the token atomically: only one enrolment can flip used_at.
        let claimed = join_token::Entity::update_many()
            .col_expr(join_token::Column::UsedAt, Expr::value(now))
            .filter(join_token::Column::TokenHash.eq(&token_hash))
            .filter(join_token::Column::UsedAt.is_null())
            .filter(join_token::Column::RevokedAt.is_null())
            .filter(join_token::Column::ExpiresAt.gt(now))
            .exec(w.db())
            .await?;
        if claimed.rows_affected != 1 {
            return Err(ServiceError::InvalidJoinToken);
        }
        let existing = host::Entity::find()
            .filter(host::Column::Hostname.eq(&req.hostname))
            .one(w.db())
            .await?;
        let (host_id, reenrolled) = match existing {
            Some(h) => {
                let id = h.id;
                let mut active: host::ActiveModel = h.into();
                active.credential_hash = Set(secret::hash(&credential));
                active.enrolled_at = Set(now);
                active.update(w.db()).await?;
                (id, true)
            }
            None => {
                let h = host::ActiveModel {
                    hostname: Set(req.hostname.clone()),
                    credential_hash: Set(secret::hash(&credential)),
                    cpu_milli: Set(0),
                    memory_mib: Set(0),
                    enrolled_at: Set(now),
                    ..Default::default()
                }
                .insert(w.db())
                .await?;
                (h.id, false)
            }
        };
        join_token::Entity::update_many()
            .col_expr(join_token::Column::UsedByHostId, Expr::value(host_id))
            .filter(join_token::Column::TokenHash.eq(&token_hash))
            .exec(w.db())
            .await?;
        w.emit(DomainEvent::HostEnrolled {
            host_id,
            hostname: req.hostname.clone(),
            reenrolled,
        });
        w.commit(
            self,
            &Actor::Host {
                host_id,
                hostname: req.hostname.clone(),
            },
        )
        .await?;
        Ok(EnrollResponse {
            host_id,
            credential,
        })
    }

    /// The host a credential belongs to.
    pub async fn authenticate_host(
        &self,
        credential: &str,
    ) -> Result<AuthenticatedHost, ServiceError> {
        let h = host::Entity::find()
            .filter(host::Column::CredentialHash.eq(secret::hash(credential.trim())))
            .one(&self.db)
            .await?
            .ok_or(ServiceError::InvalidCredential)?;
        Ok(AuthenticatedHost {
            id: h.id,
            hostname: h.hostname,
        })
    }

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
        let mut w = self.begin_write().await?;
        let uuids: Vec<&str> = report.gpus.iter().map(|g| g.uuid.as_str()).collect();
        if let Some(clash) = gpu::Entity::find()
            .filter(gpu::Column::Uuid.is_in(uuids))
            .filter(gpu::Column::HostId.ne(who.id))
            .one(w.db())
            .await?
        {
            return Err(ServiceError::Conflict(format!(
                "GPU {} is already reported by another host; check the agent's configuration",
                clash.uuid
            )));
        }
        let h = host::Entity::find_by_id(who.id)
            .one(w.db())
            .await?
            .ok_or(ServiceError::InvalidCredential)?;
        let first_report = h.last_seen_at.is_none();
        let mut active: host::ActiveModel = h.into();
        active.cpu_milli = Set(i64::try_from(report.cpu_milli).unwrap_or(i64::MAX));
        active.memory_mib = Set(i64::try_from(report.memory_mib).unwrap_or(i64::MAX));
        active.agent_version = Set(Some(report.agent_version.clone()));
        active.backend = Set(Some(report.backend.clone()));
        active.driver_version = Set(report.driver_version.clone());
        active.last_seen_at = Set(Some(now));
        active.update(w.db()).await?;

        let existing: BTreeMap<String, gpu::Model> = gpu::Entity::find()
            .filter(gpu::Column::HostId.eq(who.id))
            .all(w.db())
            .await?
            .into_iter()
            .map(|g| (g.uuid.clone(), g))
            .collect();
        let gone: Vec<i64> = existing
            .values()
            .filter(|g| !report.gpus.iter().any(|r| r.uuid == g.uuid))
            .map(|g| g.id)
            .collect();
        if !gone.is_empty() {
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
            let peers = json!(r.nvlink_peers);
            let sharing = r.sharing.as_ref().map(|o| json!(o));
            let mig_devices = (!r.mig_devices.is_empty()).then(|| json!(r.mig_devices));
            let apply_error = report
                .errors
                .iter()
                .find(|e| e.index == r.index)
                .map(|e| e.message.clone());
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
                        && g.health == r.health
                        && g.sharing == sharing
                        && g.mig_devices == mig_devices
                        && g.apply_error == apply_error;
                    if !unchanged {
                        let mut a: gpu::ActiveModel = g.clone().into();
                        a.idx = Set(idx);
                        a.name = Set(r.name.clone());
                        a.model = Set(model_name);
                        a.memory_mib = Set(memory);
                        a.mig_capable = Set(r.mig_capable);
                        a.mig_enabled = Set(r.mig_enabled);
                        a.nvlink_peers = Set(peers);
                        a.health = Set(r.health.clone());
                        a.sharing = Set(sharing);
                        a.mig_devices = Set(mig_devices);
                        a.apply_error = Set(apply_error);
                        a.updated_at = Set(now);
                        a.update(w.db()).await?;
                    }
                }
                None => {
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
                        health: Set(r.health.clone()),
                        sharing: Set(sharing),
                        mig_devices: Set(mig_devices),
                        apply_error: Set(apply_error),
                        updated_at: Set(now),
                        ..Default::default()
                    }
                    .insert(w.db())
                    .await?;
                }
            }
        }
        let desired_changed = self.apply_agent_report(&mut w, who, report, now).await?;
        if first_report {
            w.emit(DomainEvent::HostFirstReport {
                host_id: who.id,
                gpus: report.gpus.len(),
                backend: report.backend.clone(),
            });
        }
        w.commit(
            self,
            &Actor::Host {
                host_id: who.id,
                hostname: who.hostname.clone(),
            },
        )
        .await?;
        if desired_changed {
            self.desired_changed(Some(who.id));
        }
        let next = u64::try_from(self.settings.report_interval.num_seconds())
            .unwrap_or(10)
            .max(1);
        Ok(ReportAck {
            next_report_in_s: next,
        })
    }

    /// Hosts with derived status and their GPUs.
    pub async fn fleet_view(&self, _admin: &PlatformAdmin<'_>) -> Result<FleetView, ServiceError> {
        let now = self.now();
        let hosts = host::Entity::find()
            .order_by_asc(host::Column::Hostname)
            .all(&self.db)
            .await?;
        let gpus = gpu::Entity::find()
            .order_by_asc(gpu::Column::HostId)
            .order_by_asc(gpu::Column::Idx)
            .all(&self.db)
            .await?;
        let offline_after = self.settings.host_offline_after;
        let slugs: BTreeMap<i64, String> = crate::entity::tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.slug))
            .collect();
        let mut holders: BTreeMap<String, Holders> = BTreeMap::new();
        for (uuid, list) in crate::allocations::occupancy(&self.db, None, None).await? {
            for (a, p) in list {
                let start = match &p.slice {
                    tessera_core::placement::Slice::Mig(m) => Some(m.start),
                    _ => None,
                };
                let slug = slugs.get(&a.tenant_id).cloned().unwrap_or_default();
                holders
                    .entry(uuid.clone())
                    .or_default()
                    .push((start, slug, a.shape_label.clone()));
            }
        }
        let no_holders = Holders::new();
        let hosts = hosts
            .into_iter()
            .map(|h| HostView {
                id: h.id,
                status: match h.last_seen_at {
                    Some(seen) if now - seen <= offline_after => HostStatus::Online,
                    _ => HostStatus::Offline,
                },
                hostname: h.hostname,
                last_seen_at: h.last_seen_at,
                cpu_milli: h.cpu_milli,
                memory_mib: h.memory_mib,
                agent_version: h.agent_version,
                backend: h.backend,
                driver_version: h.driver_version,
                gpus: gpus
                    .iter()
                    .filter(|g| g.host_id == h.id)
                    .map(|g| GpuView {
                        index: g.idx,
                        uuid: g.uuid.clone(),
                        model: g.model.clone(),
                        memory_mib: g.memory_mib,
                        mig_capable: g.mig_capable,
                        mig_enabled: g.mig_enabled,
                        health: g.health.clone(),
                        mig_instances: mig_instances(
                            g.sharing.as_ref(),
                            holders.get(&g.uuid).unwrap_or(&no_holders),
                        ),
                        holders: holders
                            .get(&g.uuid)
                            .unwrap_or(&no_holders)
                            .iter()
                            .filter(|(start, _, _)| start.is_none())
                            .map(|(_, t, label)| format!("{t}: {label}"))
                            .collect(),
                        pool: pools::pool_of(&self.settings.pools, &g.model)
                            .map(|p| p.name.clone()),
                    })
                    .collect(),
            })
            .collect::<Vec<HostView>>();
        let pools = self
            .settings
            .pools
            .iter()
            .map(|p| {
                let members = || {
                    hosts
                        .iter()
                        .flat_map(|h| h.gpus.iter().map(move |g| (h, g)))
                };
                let mine = |g: &GpuView| g.pool.as_deref() == Some(p.name.as_str());
                let gpus = members().filter(|(_, g)| mine(g)).count();
                let online = members()
                    .filter(|(h, g)| mine(g) && h.status == HostStatus::Online)
                    .count();
                PoolView {
                    name: p.name.clone(),
                    description: p.description.clone(),
                    sharing: p.sharing,
                    isolation: p.isolation,
                    gpus: u32::try_from(gpus).unwrap_or(u32::MAX),
                    gpus_online: u32::try_from(online).unwrap_or(u32::MAX),
                }
            })
            .collect();
        Ok(FleetView {
            pools,
            hosts,
            as_of: now,
        })
    }
}

/// Counts for the Prometheus endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetCounts {
    /// Hosts reporting within the grace period.
    pub hosts_online: u64,
    /// Hosts silent for longer.
    pub hosts_offline: u64,
    /// GPUs by (catalogue model, MIG state `enabled`/`disabled`/`n/a`).
    pub gpus: BTreeMap<(String, &'static str), u64>,
}

impl Service {
    /// Host and GPU counts (for `/metrics`; no principal: operators scrape it).
    pub async fn fleet_counts(&self) -> Result<FleetCounts, ServiceError> {
        let now = self.now();
        let offline_after = self.settings.host_offline_after;
        let mut counts = FleetCounts::default();
        for h in host::Entity::find().all(&self.db).await? {
            match h.last_seen_at {
                Some(seen) if now - seen <= offline_after => counts.hosts_online += 1,
                _ => counts.hosts_offline += 1,
            }
        }
        for g in gpu::Entity::find().all(&self.db).await? {
            let mig = match (g.mig_capable, g.mig_enabled) {
                (true, true) => "enabled",
                (true, false) => "disabled",
                _ => "n/a",
            };
            *counts.gpus.entry((g.model, mig)).or_default() += 1;
        }
        Ok(counts)
    }
}
