#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use AllocationEvent as E;
use AllocationState as S;

fn all_states() -> Vec<S> {
    vec![
        S::Requested,
        S::Queued,
        S::Placed,
        S::Provisioning,
        S::Active,
        S::Releasing,
        S::Released,
        S::Failed { reason: "x".into() },
        S::Expired,
    ]
}

fn all_events() -> Vec<E> {
    vec![
        E::NoCapacity,
        E::Place,
        E::CapacityLost,
        E::StartProvisioning,
        E::Provisioned,
        E::Release,
        E::Released,
        E::Fail {
            reason: "boom".into(),
        },
        E::Expire,
    ]
}

fn legal() -> Vec<(S, E, S)> {
    let failed = S::Failed {
        reason: "boom".into(),
    };
    let fail = E::Fail {
        reason: "boom".into(),
    };
    vec![
        (S::Requested, E::NoCapacity, S::Queued),
        (S::Requested, E::Place, S::Placed),
        (S::Queued, E::Place, S::Placed),
        (S::Placed, E::CapacityLost, S::Queued),
        (S::Placed, E::StartProvisioning, S::Provisioning),
        (S::Provisioning, E::Provisioned, S::Active),
        (S::Requested, E::Release, S::Released),
        (S::Queued, E::Release, S::Released),
        (S::Placed, E::Release, S::Released),
        (S::Provisioning, E::Release, S::Releasing),
        (S::Active, E::Release, S::Releasing),
        (S::Releasing, E::Released, S::Released),
        (S::Requested, fail.clone(), failed.clone()),
        (S::Queued, fail.clone(), failed.clone()),
        (S::Placed, fail.clone(), failed.clone()),
        (S::Provisioning, fail.clone(), failed.clone()),
        (S::Active, fail.clone(), failed.clone()),
        (S::Releasing, fail, failed),
        (S::Requested, E::Expire, S::Expired),
        (S::Queued, E::Expire, S::Expired),
        (S::Placed, E::Expire, S::Expired),
        (S::Provisioning, E::Expire, S::Expired),
        (S::Active, E::Expire, S::Expired),
    ]
}

#[test]
fn every_legal_transition() {
    for (from, event, to) in legal() {
        assert_eq!(
            transition(&from, &event),
            Ok(to),
            "{from} --{}-->",
            event.name()
        );
    }
}

#[test]
fn every_other_pair_is_a_typed_error() {
    let legal = legal();
    let mut illegal = 0;
    for from in all_states() {
        for event in all_events() {
            let allowed = legal
                .iter()
                .any(|(f, e, _)| f.name() == from.name() && e == &event);
            let result = transition(&from, &event);
            if allowed {
                assert!(result.is_ok(), "{from} {}", event.name());
            } else {
                illegal += 1;
                let err = result.unwrap_err();
                assert_eq!(err.from, from.name());
                assert_eq!(err.subject, "an allocation");
            }
        }
    }
    assert_eq!(illegal, 9 * 9 - 23);
}

#[test]
fn terminal_states_accept_nothing_and_hold_nothing() {
    for s in all_states() {
        if s.is_terminal() {
            assert!(!s.holds_capacity());
            for e in all_events() {
                assert!(transition(&s, &e).is_err());
            }
        }
    }
    assert!(S::Releasing.holds_capacity());
    assert!(!S::Queued.holds_capacity());
}

#[test]
fn errors_read_well_and_serialize() {
    let err = transition(&S::Released, &E::StartProvisioning).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot start provisioning an allocation that is released"
    );
    let json = serde_json::to_value(S::Failed {
        reason: "no GPU".into(),
    })
    .unwrap();
    assert_eq!(
        json,
        serde_json::json!({"state": "failed", "reason": "no GPU"})
    );
    let back: AllocationEvent = serde_json::from_str(r#"{"event":"place"}"#).unwrap();
    assert_eq!(back, E::Place);
}

#[test]
fn quota_requests_are_decided_once() {
    use QuotaRequestEvent as QE;
    use QuotaRequestState as QS;
    assert_eq!(
        quota_request_transition(&QS::Pending, &QE::Approve),
        Ok(QS::Approved)
    );
    assert_eq!(
        quota_request_transition(&QS::Pending, &QE::Withdraw),
        Ok(QS::Withdrawn)
    );
    assert_eq!(
        quota_request_transition(
            &QS::Pending,
            &QE::Reject {
                reason: " over budget ".into()
            }
        ),
        Ok(QS::Rejected {
            reason: "over budget".into()
        })
    );
    assert_eq!(
        quota_request_transition(
            &QS::Pending,
            &QE::Reject {
                reason: "  ".into()
            }
        ),
        Err(QuotaRequestError::ReasonRequired)
    );
    let done = [
        QS::Approved,
        QS::Rejected {
            reason: "no".into(),
        },
        QS::Withdrawn,
    ];
    for state in done {
        for event in [QE::Approve, QE::Reject { reason: "r".into() }, QE::Withdraw] {
            let err = quota_request_transition(&state, &event).unwrap_err();
            assert!(
                matches!(err, QuotaRequestError::Transition(_)),
                "{state:?} {event:?}"
            );
        }
    }
    let err = quota_request_transition(&QS::Approved, &QE::Withdraw).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot withdraw a quota request that is approved"
    );
}
