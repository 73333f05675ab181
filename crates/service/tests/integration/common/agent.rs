//! A fake host agent the tests drive by hand, and the request helpers the
//! allocation and fleet tests share.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{host_named, Fixture};
use sea_orm::EntityTrait;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::plan::{GpuObserved, ObservedInstance};
use tessera_core::sharing::SliceShape;
use tessera_protocol::agent::{
    DesiredState, GpuApplyError, GpuDesiredEntry, GpuReport, HostReport, MigDevice,
};
use tessera_protocol::views::{AllocationView, NewAllocation};
use tessera_service::entity::allocation;
use tessera_service::fleet::AuthenticatedHost;
use tessera_service::ServiceError;
use tessera_service::TenantActor;

pub const NO_WAIT: std::time::Duration = std::time::Duration::ZERO;

// ---------------------------------------------------------------- fixtures

pub fn h100(index: u32, uuid: &str) -> GpuReport {
    GpuReport {
        index,
        uuid: uuid.into(),
        name: "H100-80GB".into(),
        memory_mib: 81_559,
        mig_capable: true,
        mig_enabled: true,
        nvlink_peers: vec![],
        health: Default::default(),
        sharing: Some(GpuObserved {
            mig_enabled: true,
            ..GpuObserved::default()
        }),
        mig_devices: vec![],
    }
}

pub fn l4(index: u32, uuid: &str) -> GpuReport {
    GpuReport {
        index,
        uuid: uuid.into(),
        name: "L4".into(),
        memory_mib: 23_034,
        mig_capable: false,
        mig_enabled: false,
        nvlink_peers: vec![],
        health: Default::default(),
        sharing: Some(GpuObserved::default()),
        mig_devices: vec![],
    }
}

pub fn a100(index: u32, uuid: &str) -> GpuReport {
    GpuReport {
        name: "A100-SXM4-40GB".into(),
        memory_mib: 40_960,
        mig_enabled: false,
        sharing: Some(GpuObserved::default()),
        ..h100(index, uuid)
    }
}

pub fn report(hostname: &str, gpus: Vec<GpuReport>, applied: Option<i64>) -> HostReport {
    HostReport {
        hostname: host_named(hostname),
        agent_version: "0.1.0".into(),
        cpu_milli: 64_000,
        memory_mib: 512 * 1024,
        backend: "simulated".into(),
        driver_version: Some("550".into()),
        gpus,
        applied_generation: applied,
        errors: vec![],
        stopped: Vec::new(),
    }
}

/// The MIG device UUID the fake agent gives an instance.
pub fn mig_uuid(gpu: &str, start: u8) -> String {
    format!("MIG-{gpu}-{start}")
}

/// A host the tests drive by hand, playing its agent.
pub struct Agent {
    pub host: AuthenticatedHost,
    /// What the GPUs look like before any desired state is applied.
    pub base: Vec<GpuReport>,
    /// The last desired state fetched.
    pub last: Option<DesiredState>,
}

impl Agent {
    pub async fn enrol(f: &Fixture, hostname: &str, gpus: Vec<GpuReport>) -> Self {
        let host = f.enrolled_host(hostname).await;
        f.service
            .record_report(&host, &report(hostname, gpus.clone(), None))
            .await
            .unwrap();
        Self {
            host,
            base: gpus,
            last: None,
        }
    }

    /// The agent's long poll, answered at once.
    pub async fn fetch(&mut self, f: &Fixture) -> DesiredState {
        let d = f
            .service
            .wait_desired(&self.host, None, NO_WAIT)
            .await
            .unwrap();
        self.last = Some(d.clone());
        d
    }

    /// The GPUs after the desired state `d` was applied exactly.
    pub fn applied(&self, d: &DesiredState) -> Vec<GpuReport> {
        self.base
            .iter()
            .map(|g| {
                let mut g = g.clone();
                if let Some(e) = d.gpus.iter().find(|e| e.uuid == g.uuid) {
                    apply_entry(&mut g, e);
                }
                g
            })
            .collect()
    }

    /// Fetches the desired state, applies it exactly and reports it.
    pub async fn converge(&mut self, f: &Fixture) -> DesiredState {
        let d = self.fetch(f).await;
        let gpus = self.applied(&d);
        self.send(f, gpus, Some(d.generation), vec![]).await;
        d
    }

    /// Reports `gpus` as they are.
    pub async fn send(
        &self,
        f: &Fixture,
        gpus: Vec<GpuReport>,
        applied: Option<i64>,
        errors: Vec<GpuApplyError>,
    ) {
        let mut r = report(self.host.hostname(), gpus, applied);
        r.errors = errors;
        f.service.record_report(&self.host, &r).await.unwrap();
        // As the server's round does, about a second later.
        f.service.flush_heartbeats().await.unwrap();
    }
}

pub fn apply_entry(g: &mut GpuReport, e: &GpuDesiredEntry) {
    let d = &e.desired;
    g.mig_enabled = d.mig_enabled;
    g.sharing = Some(GpuObserved {
        mig_enabled: d.mig_enabled,
        instances: d
            .instances
            .iter()
            .map(|i| ObservedInstance {
                placement: i.placement.clone(),
                compute_instances: i.compute_instances.clone(),
                in_use: false,
            })
            .collect(),
        processes_running: false,
        allocations_running: Vec::new(),
        mps: d.mps,
        mps_servers: Vec::new(),
        mps_strays: Vec::new(),
        time_slice_replicas: d.time_slice_replicas,
    });
    g.mig_devices = d
        .instances
        .iter()
        .map(|i| MigDevice {
            gi_start: i.placement.start,
            profile: i.placement.profile.clone(),
            uuid: mig_uuid(&g.uuid, i.placement.start),
        })
        .collect();
}

pub fn entry<'a>(d: &'a DesiredState, uuid: &str) -> &'a GpuDesiredEntry {
    d.gpus
        .iter()
        .find(|e| e.uuid == uuid)
        .unwrap_or_else(|| panic!("{uuid} not in desired state {d:?}"))
}

pub fn mig(profile: &str) -> SliceShape {
    SliceShape::Mig {
        profile: profile.into(),
    }
}

pub fn ask(pool: &str, shape: SliceShape, lease_hours: u32) -> NewAllocation {
    NewAllocation {
        tenant: None,
        pool: pool.parse().unwrap(),
        shape,
        lease_hours,
        purpose: "integration test".into(),
        priority_class: None,
        qos: Default::default(),
        replaces: None,
    }
}

pub async fn actor(f: &Fixture, subject: &str, groups: &[&str], tenant: &str) -> TenantActor {
    let p = f.login(subject, groups).await;
    f.service
        .tenant_actor(&p, &tenant.parse().unwrap())
        .await
        .unwrap()
}

/// `count` concurrent requests for a `1g.10gb` slice in `h100-mig`, round
/// robin over `actors`, all in flight at once.
pub async fn race(
    f: &Fixture,
    actors: &[TenantActor],
    count: usize,
) -> Vec<Result<AllocationView, ServiceError>> {
    let tasks: Vec<_> = (0..count)
        .map(|i| {
            let service = f.service.clone();
            let a = actors[i % actors.len()].clone();
            tokio::spawn(async move {
                service
                    .request_allocation(&a, &ask("h100-mig", mig("1g.10gb"), 4))
                    .await
            })
        })
        .collect();
    futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

/// `n` members of each tenant, vision and nlp alternating.
pub async fn members(f: &Fixture, n: usize) -> Vec<TenantActor> {
    let mut actors = Vec::new();
    for i in 0..n {
        actors.push(actor(f, &format!("v{i}"), &["vision"], "vision").await);
        actors.push(actor(f, &format!("n{i}"), &["nlp"], "nlp").await);
    }
    actors
}

pub async fn get(f: &Fixture, a: &TenantActor, id: AllocationId) -> AllocationView {
    f.service.get_allocation(a, id).await.unwrap()
}

/// (compute milli, memory MiB, slices) the tenant holds in `pool`.
pub async fn usage(f: &Fixture, tenant_id: TenantId, pool: &str) -> (u32, u64, u32) {
    let q = f.service.quota_views(tenant_id).await.unwrap();
    let u = q
        .iter()
        .find(|q| q.pool == pool)
        .map(|q| q.usage)
        .unwrap_or_default();
    (u.compute.0, u.memory.0, u.slices)
}

/// The tenant's quota in force and use in `pool` as the request form reads
/// them (one statement, as admissions do), checked against the quota
/// page's (read apart): `(compute milli, memory MiB, slices)` of each.
pub async fn offer_agrees(
    f: &Fixture,
    a: &TenantActor,
    pool: &str,
) -> ((u32, u64, u32), (u32, u64, u32)) {
    let options = f.service.request_options(a).await.unwrap();
    let offered = options.pools.iter().find(|p| p.offer.pool == pool).unwrap();
    // (The page leaves out pools without quota or use.)
    let page = f.service.quota_views(a.tenant_id()).await.unwrap();
    let view = page.iter().find(|q| q.pool == pool);
    let quota = offered.quota.unwrap_or_default();
    assert_eq!(quota, view.map(|v| v.quota).unwrap_or_default(), "{pool}");
    assert_eq!(
        offered.usage,
        view.map(|v| v.usage).unwrap_or_default(),
        "{pool}"
    );
    let u = offered.usage;
    (
        (quota.compute.0, quota.memory.0, quota.max_slices),
        (u.compute.0, u.memory.0, u.slices),
    )
}

pub async fn rows(f: &Fixture) -> Vec<allocation::Model> {
    allocation::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
}

pub fn env_of(v: &AllocationView, key: &str) -> Option<String> {
    v.connection
        .as_ref()?
        .env
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
}

pub fn count(actions: &[String], action: &str) -> usize {
    actions.iter().filter(|a| *a == action).count()
}
