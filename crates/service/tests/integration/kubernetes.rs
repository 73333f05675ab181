//! Kubernetes objects from what the database holds: the DRA claim of each
//! kind of slice selects exactly its placed device with its granted
//! limits; a tenant's bundle follows its quota in force and its
//! namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;
use chrono::Duration;
use common::agent::*;
use common::{fixture, fixture_with_pools, Fixture};
use serde_json::Value;
use tessera_core::quota::QuotaAmount;
use tessera_core::sharing::SliceShape;
use tessera_core::units::MemMiB;
use tessera_protocol::quotas::{NewQuotaGrant, QuotaDecision};
use tessera_protocol::views::TenantEdit;
use tessera_service::{Clock, TenantActor};

/// The claim of allocation `id` as JSON: (device class, CEL selector,
/// count, sharing config or null, namespace).
async fn claim(f: &Fixture, who: &TenantActor, id: tessera_core::ids::AllocationId) -> Value {
    let c = f.service.allocation_kubernetes(who, id).await.unwrap();
    serde_json::to_value(&c.claim).unwrap()
}

fn request(claim: &Value) -> &Value {
    &claim["spec"]["devices"]["requests"][0]["exactly"]
}

#[tokio::test]
async fn each_slices_claim_selects_exactly_its_placed_device_and_only_its_tenant_sees_it() {
    let f = fixture().await;
    let mut h100s = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a0"), h100(1, "GPU-a1")]).await;
    let mut l4s = Agent::enrol(&f, "gpu-l4", vec![l4(0, "GPU-d0")]).await;
    let mut a100s = Agent::enrol(
        &f,
        "gpu-a100",
        vec![a100(0, "GPU-c0"), a100(1, "GPU-c1"), a100(2, "GPU-c2")],
    )
    .await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;

    let m = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 8))
        .await
        .unwrap();
    // Placed, not yet active: nothing to claim yet.
    let err = f
        .service
        .allocation_kubernetes(&alice, m.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");
    assert!(err.to_string().contains("once it is active"), "{err}");
    h100s.converge(&f).await;
    let active = get(&f, &alice, m.id).await;
    let device = env_of(&active, "CUDA_VISIBLE_DEVICES").unwrap();
    assert!(device.starts_with("MIG-"), "{device}");
    let c = claim(&f, &alice, m.id).await;
    assert_eq!(c["metadata"]["name"], format!("tessera-alloc-{}", m.id));
    assert_eq!(
        c["metadata"]["namespace"], "vision",
        "the slug, no namespace set"
    );
    assert_eq!(request(&c)["deviceClassName"], "mig.nvidia.com");
    assert_eq!(
        request(&c)["selectors"][0]["cel"]["expression"],
        format!("device.attributes['gpu.nvidia.com'].uuid == '{device}'")
    );
    assert_eq!(c["spec"]["devices"]["config"], Value::Null);
    // The view carries the same claim as YAML, for the page.
    let conn = active.connection.unwrap();
    assert!(
        conn.kubernetes_yaml.contains(&device),
        "{}",
        conn.kubernetes_yaml
    );
    assert!(conn.kubernetes_yaml.contains("kind: ResourceClaim"));
    assert!(!conn.kubernetes_notes.is_empty());
    // Another tenant's allocation does not exist for nora.
    let err = f
        .service
        .allocation_kubernetes(&nora, m.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 404, "{err}");

    let ts = f
        .service
        .request_allocation(&alice, &ask("l4-shared", SliceShape::TimeSlice {}, 2))
        .await
        .unwrap();
    l4s.converge(&f).await;
    let c = claim(&f, &alice, ts.id).await;
    assert_eq!(request(&c)["deviceClassName"], "gpu.nvidia.com");
    assert_eq!(
        request(&c)["selectors"][0]["cel"]["expression"],
        "device.attributes['gpu.nvidia.com'].uuid == 'GPU-d0'"
    );
    assert_eq!(
        c["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["strategy"],
        "TimeSlicing"
    );

    let whole = f
        .service
        .request_allocation(
            &alice,
            &ask(
                "a100-whole",
                SliceShape::Whole {
                    count: 2,
                    nvlink_local: false,
                },
                2,
            ),
        )
        .await
        .unwrap();
    a100s.converge(&f).await;
    let placed: Vec<String> = get(&f, &alice, whole.id)
        .await
        .gpus
        .iter()
        .map(|g| format!("'{}'", g.uuid))
        .collect();
    assert_eq!(placed.len(), 2);
    let c = claim(&f, &alice, whole.id).await;
    assert_eq!(
        request(&c)["count"],
        2,
        "one claim for every GPU of the slice"
    );
    assert_eq!(
        request(&c)["selectors"][0]["cel"]["expression"],
        format!(
            "device.attributes['gpu.nvidia.com'].uuid in [{}]",
            placed.join(", ")
        )
    );

    // Released: no device to claim any more.
    f.service.release_allocation(&alice, m.id).await.unwrap();
    let err = f
        .service
        .allocation_kubernetes(&alice, m.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");
}

#[tokio::test]
async fn an_mps_claim_carries_the_slices_granted_limits() {
    let mut pools = common::pools();
    for p in &mut pools {
        if p.name == "l4-shared" {
            p.sharing = tessera_core::sharing::SharingMode::Mps;
        }
    }
    let f = fixture_with_pools(pools).await;
    let mut agent = Agent::enrol(&f, "gpu-l4", vec![l4(0, "GPU-14")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let v = f
        .service
        .request_allocation(
            &alice,
            &ask(
                "l4-shared",
                SliceShape::Mps {
                    compute_percent: 30,
                    memory_mib: MemMiB(6144),
                },
                2,
            ),
        )
        .await
        .unwrap();
    agent.converge(&f).await;
    let c = claim(&f, &alice, v.id).await;
    assert_eq!(
        request(&c)["selectors"][0]["cel"]["expression"],
        "device.attributes['gpu.nvidia.com'].uuid == 'GPU-14'"
    );
    assert_eq!(
        c["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"],
        serde_json::json!({"strategy": "MPS", "mpsConfig": {
            "defaultActiveThreadPercentage": 30,
            "defaultPinnedDeviceMemoryLimit": "6144Mi"}})
    );
    let notes = f
        .service
        .allocation_kubernetes(&alice, v.id)
        .await
        .unwrap()
        .notes;
    assert!(notes.iter().any(|n| n.contains("MPSSupport")), "{notes:?}");
}

/// The quota of the bundle's first namespace, key → amount.
async fn hard(f: &Fixture, who: &TenantActor) -> std::collections::BTreeMap<String, String> {
    let b = f.service.tenant_kubernetes(who).await.unwrap();
    b.quotas[0]
        .spec
        .as_ref()
        .unwrap()
        .hard
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

#[tokio::test]
async fn a_tenants_bundle_follows_its_quota_in_force_and_its_namespaces() {
    let f = fixture().await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let mig_devices = "mig.nvidia.com.deviceclass.resource.k8s.io/devices";
    let gpu_devices = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices";
    // vision: h100-mig 8 slices; a100-whole 4 GPUs; l4-shared (time-sliced) 4 slices.
    let h = hard(&f, &alice).await;
    assert_eq!(h[mig_devices], "8");
    assert_eq!(
        h[gpu_devices], "8",
        "4 whole A100s and 4 time-sliced L4 slices"
    );
    assert_eq!(h["requests.nvidia.com/gpu"], "4");
    assert_eq!(h["requests.nvidia.com/gpu.shared"], "4");
    assert_eq!(h["count/resourceclaims.resource.k8s.io"], "16");

    // A temporary grant of 2 more slices for an hour (four-eyes: a second
    // platform admin approves it) raises the quota while it lasts.
    let root = f.admin().await;
    let change = f
        .service
        .grant_quota(
            &root.require_platform_admin().unwrap(),
            &NewQuotaGrant {
                tenant: "vision".parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: QuotaAmount {
                    gpus: 0.5,
                    memory_gib: 0.0,
                    max_slices: 2,
                },
                ends_at: tessera_protocol::timestamp::Timestamp::new(
                    f.clock.now() + Duration::hours(1),
                )
                .unwrap(),
                reason: "deadline".into(),
            },
        )
        .await
        .unwrap();
    let pat = f.login("pat", &["platform"]).await;
    f.service
        .decide_quota_request(
            &pat.require_platform_admin().unwrap(),
            change.proposal.unwrap().id,
            &QuotaDecision::Approve {
                amount: None,
                ends_at: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(hard(&f, &alice).await[mig_devices], "10");
    f.clock.advance(Duration::hours(2));
    assert_eq!(hard(&f, &alice).await[mig_devices], "8", "the grant ended");

    // Namespaces: a platform admin maps vision to two; each gets the quota.
    let proof = root.require_platform_admin().unwrap();
    let view = f
        .service
        .tenants_admin(&proof)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.slug == "vision")
        .unwrap();
    assert_eq!(view.namespaces, vec!["vision".to_owned()]);
    let edit = |namespaces: &[&str], revision| TenantEdit {
        slug: "vision".into(),
        name: view.name.clone(),
        cost_centre: view.cost_centre.clone(),
        member_groups: view.member_groups.clone(),
        admin_groups: view.admin_groups.clone(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        revision: Some(revision),
    };
    let bad = f
        .service
        .update_tenant(
            &proof,
            &view.slug.parse().unwrap(),
            &edit(&["Vision_Prod"], view.revision),
        )
        .await
        .unwrap_err();
    assert_eq!(bad.status(), 400, "{bad}");
    assert!(bad.to_string().contains("Kubernetes namespace"), "{bad}");
    let updated = f
        .service
        .update_tenant(
            &proof,
            &view.slug.parse().unwrap(),
            &edit(&["vision-prod", "vision-batch"], view.revision),
        )
        .await
        .unwrap();
    assert_eq!(updated.namespaces, vec!["vision-prod", "vision-batch"]);
    let b = f.service.tenant_kubernetes(&alice).await.unwrap();
    let ns: Vec<_> = b
        .quotas
        .iter()
        .map(|q| q.metadata.namespace.clone().unwrap())
        .collect();
    assert_eq!(ns, vec!["vision-prod", "vision-batch"]);
    assert!(f.audit_actions().await.iter().any(|a| a == "tenant.update"));

    // No two tenants share a namespace.
    let nlp = f
        .service
        .tenants_admin(&proof)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.slug == "nlp")
        .unwrap();
    let err = f
        .service
        .update_tenant(
            &proof,
            &"nlp".parse().unwrap(),
            &TenantEdit {
                slug: "nlp".into(),
                name: nlp.name.clone(),
                cost_centre: None,
                member_groups: nlp.member_groups.clone(),
                admin_groups: nlp.admin_groups.clone(),
                namespaces: vec!["vision-batch".into()],
                revision: Some(nlp.revision),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");
    assert!(
        err.to_string().contains("belongs to tenant 'vision'"),
        "{err}"
    );
}

/// Two platform admins give two tenants the same namespace at once: one
/// wins, the other is told whose it is (on PostgreSQL too, where the
/// writes run side by side). Six rounds, a new namespace each.
#[tokio::test]
async fn racing_admins_never_give_one_namespace_to_two_tenants() {
    let f = fixture().await;
    let root = f.admin().await;
    let proof = root.require_platform_admin().unwrap();
    for round in 0..6 {
        let namespace = format!("shared-{round}");
        let views = f.service.tenants_admin(&proof).await.unwrap();
        let tasks: Vec<_> = ["vision", "nlp"]
            .into_iter()
            .map(|slug| {
                let v = views.iter().find(|t| t.slug == slug).unwrap().clone();
                let service = f.service.clone();
                let root = root.clone();
                let namespace = namespace.clone();
                tokio::spawn(async move {
                    let proof = root.require_platform_admin().unwrap();
                    service
                        .update_tenant(
                            &proof,
                            &v.slug.parse().unwrap(),
                            &TenantEdit {
                                slug: v.slug.clone(),
                                name: v.name.clone(),
                                cost_centre: v.cost_centre.clone(),
                                member_groups: v.member_groups.clone(),
                                admin_groups: v.admin_groups.clone(),
                                namespaces: vec![namespace],
                                revision: Some(v.revision),
                            },
                        )
                        .await
                })
            })
            .collect();
        let results: Vec<_> = futures::future::join_all(tasks)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {results:?}");
        let lost = results.into_iter().find_map(Result::err).unwrap();
        assert_eq!(lost.status(), 409, "{lost}");
        let holders = f
            .service
            .tenants_admin(&proof)
            .await
            .unwrap()
            .into_iter()
            .filter(|t| t.namespaces.contains(&namespace))
            .count();
        assert_eq!(holders, 1, "round {round}");
    }
}

/// A slug that is no namespace name needs namespaces set; nothing is
/// written when they are missing.
#[tokio::test]
async fn a_tenant_whose_slug_is_no_namespace_name_must_name_its_namespaces() {
    let f = fixture().await;
    let root = f.admin().await;
    let proof = root.require_platform_admin().unwrap();
    let edit = |namespaces: Vec<String>| TenantEdit {
        slug: "-lab".into(),
        name: "Lab".into(),
        cost_centre: None,
        member_groups: vec![],
        admin_groups: vec![],
        namespaces,
        revision: None,
    };
    let err = f
        .service
        .create_tenant(&proof, &edit(vec![]))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 400, "{err}");
    assert!(
        err.to_string().contains("not a Kubernetes namespace name"),
        "{err}"
    );
    assert_eq!(
        f.service.tenants_admin(&proof).await.unwrap().len(),
        2,
        "nothing written"
    );
    let made = f
        .service
        .create_tenant(&proof, &edit(vec!["lab".into()]))
        .await
        .unwrap();
    assert_eq!(made.namespaces, vec!["lab"]);
}
