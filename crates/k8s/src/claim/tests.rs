use super::*;
use serde_json::json;
use tessera_core::sharing::MpsShare;
use tessera_core::units::MemMiB;

/// Devices as NVIDIA's driver publishes them in a node's ResourceSlice
/// (`deviceinfo.go`, `mig.go`): two H100s, GPU-b split into MIG devices.
fn published() -> Vec<serde_json::Value> {
    let gpu = |uuid: &str| {
        json!({"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": {
            "type": "gpu", "uuid": uuid, "productName": "NVIDIA H100 80GB HBM3",
            "brand": "Nvidia", "architecture": "Hopper"}}})
    };
    let mig = |uuid: &str, profile: &str| {
        json!({"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": {
            "type": "mig", "uuid": uuid, "parentUUID": "GPU-b", "profile": profile,
            "productName": "NVIDIA H100 80GB HBM3"}}})
    };
    vec![
        gpu("GPU-a"),
        gpu("GPU-b"),
        gpu("GPU-c"),
        mig("MIG-1", "1g.10gb"),
        mig("MIG-2", "1g.10gb"),
        mig("MIG-3", "3g.40gb"),
    ]
}

/// The device classes' own selectors, as the driver's Helm chart installs
/// them (`deviceclass-gpu.yaml`, `deviceclass-mig.yaml`).
fn class_selector(class: &str) -> &'static str {
    match class {
        "gpu.nvidia.com" => {
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        }
        "mig.nvidia.com" => {
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        }
        other => panic!("no such class {other}"),
    }
}

fn matches(expression: &str, device: &serde_json::Value) -> bool {
    let program = cel::Program::compile(expression)
        .unwrap_or_else(|e| panic!("{expression} does not parse: {e:?}"));
    let mut ctx = cel::Context::default();
    ctx.add_variable("device", device.clone()).unwrap();
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("{expression} on {device}: {other:?}"),
    }
}

/// The UUIDs of the published devices the claim's class and selector pick.
fn selected(claim: &AllocationClaim) -> Vec<String> {
    published()
        .iter()
        .filter(|d| matches(class_selector(claim.device_class), d) && matches(&claim.selector, d))
        .map(|d| {
            d["attributes"]["gpu.nvidia.com"]["uuid"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn input(target: &ConnectionTarget) -> ClaimInput<'_> {
    ClaimInput {
        allocation: AllocationId::new(42),
        tenant: "vision",
        namespace: "vision-prod",
        host: "gpu-h100-01",
        target,
        priority_class: Some("tessera-standard".into()),
    }
}

fn targets() -> Vec<(&'static str, ConnectionTarget)> {
    vec![
        (
            "mig",
            ConnectionTarget::Mig {
                profile: "1g.10gb".into(),
                device_uuid: "MIG-2".into(),
            },
        ),
        (
            "mps",
            ConnectionTarget::Mps {
                gpu_uuid: "GPU-a".into(),
                share: MpsShare {
                    compute_percent: 25,
                    memory: MemMiB(20_480),
                },
            },
        ),
        (
            "time-slice",
            ConnectionTarget::TimeSlice {
                gpu_uuid: "GPU-c".into(),
            },
        ),
        (
            "whole",
            ConnectionTarget::Whole {
                gpu_uuids: vec!["GPU-a".into(), "GPU-c".into()],
            },
        ),
    ]
}

#[test]
fn each_claim_selects_exactly_the_placed_devices_among_those_the_driver_publishes() {
    let want: [(&str, &[&str]); 4] = [
        ("mig", &["MIG-2"]),
        ("mps", &["GPU-a"]),
        ("time-slice", &["GPU-c"]),
        ("whole", &["GPU-a", "GPU-c"]),
    ];
    for ((name, target), (wname, uuids)) in targets().iter().zip(want) {
        assert_eq!(*name, wname);
        let c = allocation_claim(&input(target));
        assert_eq!(selected(&c), uuids, "{name}: {}", c.selector);
        let request = &c
            .claim
            .spec
            .devices
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()[0];
        let exactly = request.exactly.as_ref().unwrap();
        assert_eq!(exactly.count, Some(uuids.len() as i64), "{name}");
        assert_eq!(exactly.allocation_mode.as_deref(), Some("ExactCount"));
    }
}

#[test]
fn a_uuid_cannot_break_out_of_its_cel_string() {
    let target = ConnectionTarget::TimeSlice {
        gpu_uuid: "GPU-a' || true || '".into(),
    };
    let c = allocation_claim(&input(&target));
    assert!(selected(&c).is_empty(), "{}", c.selector);
}

#[test]
fn shared_claims_carry_the_granted_limits_in_the_drivers_config() {
    let config = |name: &str| {
        let (_, target) = targets().into_iter().find(|(n, _)| *n == name).unwrap();
        let c = allocation_claim(&input(&target));
        let json = serde_json::to_value(&c.claim).unwrap();
        json["spec"]["devices"]["config"].clone()
    };
    let mps = config("mps");
    assert_eq!(mps[0]["requests"], json!(["gpu"]));
    assert_eq!(mps[0]["opaque"]["driver"], "gpu.nvidia.com");
    assert_eq!(
        mps[0]["opaque"]["parameters"],
        json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
               "sharing": {"strategy": "MPS", "mpsConfig": {
                   "defaultActiveThreadPercentage": 25,
                   "defaultPinnedDeviceMemoryLimit": "20480Mi"}}})
    );
    let ts = config("time-slice");
    assert_eq!(
        ts[0]["opaque"]["parameters"]["sharing"],
        json!({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}})
    );
    // Exclusive devices need no sharing configuration.
    assert_eq!(config("mig"), serde_json::Value::Null);
    assert_eq!(config("whole"), serde_json::Value::Null);
}

#[test]
fn the_check_pod_uses_the_claim_on_the_placed_node_and_names_the_allocation() {
    let (_, target) = &targets()[0];
    let c = allocation_claim(&input(target));
    assert_eq!(c.claim.metadata.name.as_deref(), Some("tessera-alloc-42"));
    assert_eq!(c.claim.metadata.namespace.as_deref(), Some("vision-prod"));
    let labels = c.claim.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["tessera.dev/allocation"], "42");
    let pod = serde_json::to_value(&c.pod).unwrap();
    assert_eq!(
        pod["spec"]["resourceClaims"],
        json!([{"name": "gpu", "resourceClaimName": "tessera-alloc-42"}])
    );
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["claims"],
        json!([{"name": "gpu"}])
    );
    assert_eq!(
        pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-h100-01"]})
    );
    assert_eq!(
        pod["spec"]["containers"][0]["env"],
        json!([{"name": "TESSERA_ALLOCATION", "value": "42"}])
    );
    assert_eq!(pod["spec"]["priorityClassName"], "tessera-standard");
    assert!(
        c.notes.iter().any(|n| n.contains("tessera-alloc-42")),
        "{:?}",
        c.notes
    );
}

/// Every document reads back into its typed struct unchanged, and equals
/// its golden file under deploy/generated/ (validated there against the
/// Kubernetes 1.34 and 1.37 schemas by scripts/deploy-check.py;
/// TESSERA_UPDATE_GOLDEN=1 rewrites them).
#[test]
fn documents_round_trip_and_match_their_golden_files() {
    for (name, target) in targets() {
        let c = allocation_claim(&input(&target));
        let yaml = c.documents().unwrap().to_yaml().unwrap();
        let docs: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        assert_eq!(docs.len(), 2, "{name}");
        let claim: ResourceClaim = serde_json::from_value(docs[0].clone()).unwrap();
        assert_eq!(claim, c.claim, "{name}");
        let pod: Pod = serde_json::from_value(docs[1].clone()).unwrap();
        assert_eq!(pod, c.pod, "{name}");
        assert_eq!(docs[0]["apiVersion"], "resource.k8s.io/v1");
        assert_eq!(docs[0]["kind"], "ResourceClaim");
        crate::golden::check(&format!("claim-{name}.yaml"), &yaml);
    }
}
