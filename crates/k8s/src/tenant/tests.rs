use super::*;
use tessera_core::units::{ComputeMilli, MemMiB};

fn pool(name: &str, sharing: SharingMode, gpus_milli: u32, slices: u32) -> PoolQuota {
    PoolQuota {
        pool: name.into(),
        sharing,
        quota: Quota {
            compute: ComputeMilli(gpus_milli),
            memory: MemMiB(80 * 1024),
            max_slices: slices,
        },
        mig_profiles: if sharing == SharingMode::Mig {
            vec!["1g.10gb".into(), "3g.40gb".into()]
        } else {
            Vec::new()
        },
    }
}

pub(crate) fn sample() -> TenantInput {
    TenantInput {
        tenant: "vision".into(),
        namespaces: vec!["vision".into(), "vision-batch".into()],
        pools: vec![
            pool("train", SharingMode::Exclusive, 4500, 2),
            pool("inference", SharingMode::Mig, 2000, 6),
            pool("notebooks", SharingMode::Mps, 1000, 4),
            pool("dev", SharingMode::TimeSlicing, 500, 3),
        ],
        priorities: vec![
            Priority {
                name: "standard".into(),
                value: 0,
                description: "Everyday work".into(),
            },
            Priority {
                name: "production".into(),
                value: 1000,
                description: String::new(),
            },
        ],
    }
}

#[test]
fn the_quota_counts_what_each_pool_allows() {
    let hard = hard_limits(&sample().pools);
    let get = |k: &str| hard.get(k).copied();
    // Whole GPUs: 4.5 GPU-equivalents are 4 whole GPUs; MPS 4 + time-sliced 3.
    assert_eq!(
        get("gpu.nvidia.com.deviceclass.resource.k8s.io/devices"),
        Some(4 + 4 + 3)
    );
    assert_eq!(
        get("mig.nvidia.com.deviceclass.resource.k8s.io/devices"),
        Some(6)
    );
    assert_eq!(get("requests.nvidia.com/gpu"), Some(4));
    assert_eq!(get("requests.nvidia.com/gpu.shared"), Some(7));
    assert_eq!(get("requests.nvidia.com/mig-1g.10gb"), Some(6));
    assert_eq!(get("requests.nvidia.com/mig-3g.40gb"), Some(6));
    assert_eq!(
        get("count/resourceclaims.resource.k8s.io"),
        Some(2 + 6 + 4 + 3)
    );
}

#[test]
fn a_priority_class_that_makes_no_kubernetes_name_gets_no_priority_class() {
    assert_eq!(
        priority_class_name("standard").as_deref(),
        Some("tessera-standard")
    );
    assert_eq!(priority_class_name("batch-"), None);
    let mut input = sample();
    input.priorities.push(Priority {
        name: "odd-".into(),
        value: 5,
        description: String::new(),
    });
    assert_eq!(tenant_bundle(&input).priority_classes.len(), 2);
}

#[test]
fn no_quota_allows_nothing_rather_than_everything() {
    let hard = hard_limits(&[]);
    assert!(hard.len() >= 5);
    assert!(hard.values().all(|n| *n == 0), "{hard:?}");
}

#[test]
fn every_namespace_gets_the_quota_and_the_classes_never_preempt() {
    let b = tenant_bundle(&sample());
    assert_eq!(b.namespaces.len(), 2);
    assert_eq!(b.quotas.len(), 2);
    assert_eq!(
        b.quotas[1].metadata.namespace.as_deref(),
        Some("vision-batch")
    );
    assert_eq!(b.quotas[0].spec, b.quotas[1].spec);
    assert_eq!(b.priority_classes.len(), 2);
    let p = &b.priority_classes[1];
    assert_eq!(p.metadata.name.as_deref(), Some("tessera-production"));
    assert_eq!(p.value, 1000);
    assert_eq!(p.preemption_policy.as_deref(), Some("Never"));
    assert_eq!(
        b.namespaces[0].metadata.labels.as_ref().unwrap()["tessera.dev/tenant"],
        "vision"
    );
}

#[test]
fn the_bundle_round_trips_through_the_typed_structs() {
    let b = tenant_bundle(&sample());
    let yaml = b.documents().unwrap().to_yaml().unwrap();
    let docs: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 2 + 2 + 2);
    let ns: Namespace = serde_json::from_value(docs[0].clone()).unwrap();
    assert_eq!(ns, b.namespaces[0]);
    let q: ResourceQuota = serde_json::from_value(docs[3].clone()).unwrap();
    assert_eq!(q, b.quotas[1]);
    let p: PriorityClass = serde_json::from_value(docs[4].clone()).unwrap();
    assert_eq!(p, b.priority_classes[0]);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "Namespace",
            "ResourceQuota",
            "ResourceQuota",
            "PriorityClass",
            "PriorityClass"
        ]
    );
}
