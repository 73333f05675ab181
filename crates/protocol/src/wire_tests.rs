//! The JSON of views whose states, kinds and modes are enums: the same
//! strings as when they were bare strings, byte for byte.

#![allow(clippy::unwrap_used)]

use chrono::{DateTime, TimeZone, Utc};
use tessera_core::ids::{AllocationId, JoinTokenId, NotificationId};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::notify::NotificationKind;
use tessera_core::quota::Demand;
use tessera_core::sharing::{IsolationClass, SharingMode, SliceShape};
use tessera_core::units::{ComputeMilli, MemMiB};

use crate::quotas::{NotificationView, WebhookDeliveryStatus, WebhookDeliveryView};
use crate::views::{AllocationView, JoinTokenStatus, JoinTokenView, PoolView};

fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
}

const AT: &str = "2026-11-29T12:00:00Z";

#[test]
fn allocation_view_states_are_the_phase_names() {
    let view = AllocationView {
        waiting_for: None,
        estimated_start: None,
        id: AllocationId::new(7),
        tenant: "vision".into(),
        pool: "h100-mig".into(),
        state: AllocationPhase::Releasing,
        reason: None,
        ending_as: Some(AllocationPhase::Expired),
        shape: SliceShape::Mig {
            profile: "1g.10gb".into(),
        },
        shape_label: "1g.10gb MIG".into(),
        demand: Demand {
            compute: ComputeMilli(142),
            memory: MemMiB(9856),
            slices: 1,
        },
        purpose: String::new(),
        requested_by: "Ann".into(),
        lease_hours: 4,
        lease_ends_at: None,
        max_lease_hours: 72,
        host: None,
        gpus: Vec::new(),
        mig_start: None,
        priority_class: "standard".into(),
        qos: tessera_core::schedule::QosClass::BestEffort,
        queue_position: None,
        capacity_lost: None,
        drain: None,
        idle: None,
        preemption: None,
        processes_stopped: None,
        replaces: None,
        starts_now: Vec::new(),
        placement_why: None,
        connection: None,
        created_at: at(),
        placed_at: None,
        active_at: None,
        ended_at: None,
        as_of: at(),
    };
    let json = serde_json::to_string(&view).unwrap();
    assert_eq!(
        json,
        format!(
            concat!(
                r#"{{"id":7,"tenant":"vision","pool":"h100-mig","state":"releasing","#,
                r#""reason":null,"ending_as":"expired","#,
                r#""shape":{{"kind":"mig","profile":"1g.10gb"}},"shape_label":"1g.10gb MIG","#,
                r#""demand":{{"compute":142,"memory":9856,"slices":1}},"purpose":"","#,
                r#""requested_by":"Ann","lease_hours":4,"lease_ends_at":null,"#,
                r#""max_lease_hours":72,"host":null,"gpus":[],"mig_start":null,"#,
                r#""priority_class":"standard","qos":"best-effort","queue_position":null,"connection":null,"created_at":"{at}","#,
                r#""placed_at":null,"active_at":null,"ended_at":null,"as_of":"{at}"}}"#
            ),
            at = AT
        )
    );
    assert_eq!(serde_json::from_str::<AllocationView>(&json).unwrap(), view);
    let names: Vec<String> = [
        AllocationPhase::Requested,
        AllocationPhase::Queued,
        AllocationPhase::Placed,
        AllocationPhase::Provisioning,
        AllocationPhase::Active,
        AllocationPhase::Releasing,
        AllocationPhase::Released,
        AllocationPhase::Failed,
        AllocationPhase::Expired,
    ]
    .iter()
    .map(|p| serde_json::to_string(p).unwrap())
    .collect();
    assert_eq!(
        names,
        [
            r#""requested""#,
            r#""queued""#,
            r#""placed""#,
            r#""provisioning""#,
            r#""active""#,
            r#""releasing""#,
            r#""released""#,
            r#""failed""#,
            r#""expired""#
        ]
    );
}

#[test]
fn notification_and_webhook_views_keep_their_strings() {
    let n = NotificationView {
        id: NotificationId::new(3),
        kind: NotificationKind::QuotaRequestApproved,
        title: "Approved".into(),
        body: String::new(),
        link: Some("/t/vision/quota".into()),
        created_at: at(),
        read: false,
    };
    assert_eq!(
        serde_json::to_string(&n).unwrap(),
        format!(
            concat!(
                r#"{{"id":3,"kind":"quota_request.approved","title":"Approved","body":"","#,
                r#""link":"/t/vision/quota","created_at":"{at}","read":false}}"#
            ),
            at = AT
        )
    );
    let d = WebhookDeliveryView {
        id: 9,
        event: NotificationKind::AllocationLeaseEnding,
        status: WebhookDeliveryStatus::Delivered,
        attempts: 2,
        last_error: None,
        detail: None,
        created_at: at(),
    };
    assert_eq!(
        serde_json::to_string(&d).unwrap(),
        format!(
            concat!(
                r#"{{"id":9,"event":"allocation.lease_ending","status":"delivered","#,
                r#""attempts":2,"last_error":null,"detail":null,"created_at":"{at}"}}"#
            ),
            at = AT
        )
    );
    for (status, name) in [
        (WebhookDeliveryStatus::Pending, "pending"),
        (WebhookDeliveryStatus::Delivered, "delivered"),
        (WebhookDeliveryStatus::Failed, "failed"),
    ] {
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            format!("\"{name}\"")
        );
        assert_eq!(status.as_str(), name);
    }
}

#[test]
fn fleet_views_keep_their_strings() {
    let pool = PoolView {
        name: "ts".into(),
        description: "notebooks".into(),
        sharing: SharingMode::TimeSlicing,
        isolation: IsolationClass::Development,
        gpus: 2,
        gpus_online: 1,
        gpus_schedulable: 1,
        free_gpu_milli: 1000,
        fragmented_gpu_milli: 0,
        unplaceable: Vec::new(),
    };
    assert_eq!(
        serde_json::to_string(&pool).unwrap(),
        concat!(
            r#"{"name":"ts","description":"notebooks","sharing":"time-slicing","#,
            r#""isolation":"development","gpus":2,"gpus_online":1,"gpus_schedulable":1,"#,
            r#""free_gpu_milli":1000,"fragmented_gpu_milli":0,"unplaceable":[]}"#
        )
    );
    let token = JoinTokenView {
        id: JoinTokenId::new(1),
        description: "rack 4".into(),
        created_by: None,
        created_at: at(),
        expires_at: at(),
        status: JoinTokenStatus::Revoked,
        used_by_host: None,
        for_host: Some("gpu-1".into()),
    };
    assert_eq!(
        serde_json::to_string(&token).unwrap(),
        format!(
            concat!(
                r#"{{"id":1,"description":"rack 4","created_by":null,"created_at":"{at}","#,
                r#""expires_at":"{at}","status":"revoked","used_by_host":null,"#,
                r#""for_host":"gpu-1"}}"#
            ),
            at = AT
        )
    );
    for (status, name) in [
        (JoinTokenStatus::Active, "active"),
        (JoinTokenStatus::Used, "used"),
        (JoinTokenStatus::Expired, "expired"),
        (JoinTokenStatus::Revoked, "revoked"),
    ] {
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            format!("\"{name}\"")
        );
        assert_eq!(status.as_str(), name);
    }
    for (class, name) in [
        (IsolationClass::Production, "production"),
        (IsolationClass::Batch, "batch"),
        (IsolationClass::Development, "development"),
    ] {
        assert_eq!(
            serde_json::to_string(&class).unwrap(),
            format!("\"{name}\"")
        );
        assert_eq!(class.as_str(), name);
    }
}

#[test]
fn telemetry_batches_keep_their_shape_and_refuse_unknown_fields() {
    use crate::agent::{GpuSample, InstanceSample, TelemetryBatch, TelemetryRound};
    let batch = TelemetryBatch {
        hostname: tessera_core::checked::Hostname::parse("gpu-1").unwrap(),
        interval_ms: 10_000,
        rounds: vec![TelemetryRound {
            at_ms: 1_796_000_000_000,
            gpus: vec![GpuSample {
                uuid: "GPU-1".into(),
                util_pct: Some(40),
                mem_used_mib: 1024,
                power_mw: Some(300_000),
                temp_c: None,
                sm_clock_mhz: None,
                instances: vec![InstanceSample {
                    uuid: "MIG-1".into(),
                    util_pct: None,
                    mem_used_mib: 512,
                }],
                clients: Vec::new(),
            }],
        }],
    };
    let json = serde_json::to_string(&batch).unwrap();
    assert_eq!(
        json,
        r#"{"hostname":"gpu-1","interval_ms":10000,"rounds":[{"at_ms":1796000000000,"gpus":[{"uuid":"GPU-1","util_pct":40,"mem_used_mib":1024,"power_mw":300000,"temp_c":null,"sm_clock_mhz":null,"instances":[{"uuid":"MIG-1","util_pct":null,"mem_used_mib":512}]}]}]}"#
    );
    assert_eq!(
        serde_json::from_str::<TelemetryBatch>(&json).unwrap(),
        batch
    );
    // Optional figures may be left out; an unknown one is refused.
    let minimal = r#"{"hostname":"h","interval_ms":1000,"rounds":[{"at_ms":1,"gpus":[{"uuid":"GPU-1","util_pct":0,"mem_used_mib":0}]}]}"#;
    assert!(serde_json::from_str::<TelemetryBatch>(minimal).is_ok());
    let extra = minimal.replace(r#""util_pct":0"#, r#""util_pct":0,"fan":3"#);
    assert!(serde_json::from_str::<TelemetryBatch>(&extra).is_err());
    // A GPU whose utilisation the driver does not give (MIG on) leaves it
    // out or sends null: unknown, not 0.
    for unknown in [
        minimal.replace(r#""util_pct":0,"#, ""),
        minimal.replace(r#""util_pct":0"#, r#""util_pct":null"#),
    ] {
        let parsed = serde_json::from_str::<TelemetryBatch>(&unknown).unwrap();
        assert_eq!(parsed.rounds[0].gpus[0].util_pct, None, "{unknown}");
    }
}
