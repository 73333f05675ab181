#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use AllocationEvent as E;
use AllocationState as S;

fn releasing(outcome: ReleaseOutcome) -> S {
    S::releasing(outcome)
}

fn failed_outcome() -> ReleaseOutcome {
    ReleaseOutcome::Failed {
        reason: "boom".into(),
    }
}

fn retrying() -> S {
    S::Releasing {
        outcome: ReleaseOutcome::Released,
        teardown_error: Some("boom".into()),
    }
}

fn all_states() -> Vec<S> {
    vec![
        S::Requested,
        S::Queued,
        S::Placed,
        S::Provisioning,
        S::Active,
        releasing(ReleaseOutcome::Released),
        releasing(ReleaseOutcome::Expired),
        releasing(failed_outcome()),
        retrying(),
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
    use ReleaseOutcome as O;
    let failed = S::Failed {
        reason: "boom".into(),
    };
    let fail = E::Fail {
        reason: "boom".into(),
    };
    let teardown_failed = |outcome: O| S::Releasing {
        outcome,
        teardown_error: Some("boom".into()),
    };
    vec![
        (S::Requested, E::NoCapacity, S::Queued),
        (S::Queued, E::NoCapacity, S::Queued),
        (S::Requested, E::Place, S::Placed),
        (S::Queued, E::Place, S::Placed),
        (S::Placed, E::CapacityLost, S::Queued),
        (S::Placed, E::StartProvisioning, S::Provisioning),
        (S::Provisioning, E::Provisioned, S::Active),
        // Nothing on a GPU yet: immediate.
        (S::Requested, E::Release, S::Released),
        (S::Queued, E::Release, S::Released),
        (S::Placed, E::Release, S::Released),
        (S::Requested, fail.clone(), failed.clone()),
        (S::Queued, fail.clone(), failed.clone()),
        (S::Placed, fail.clone(), failed.clone()),
        (S::Requested, E::Expire, S::Expired),
        (S::Queued, E::Expire, S::Expired),
        (S::Placed, E::Expire, S::Expired),
        // On a GPU: through teardown.
        (S::Provisioning, E::Release, releasing(O::Released)),
        (S::Active, E::Release, releasing(O::Released)),
        (S::Provisioning, E::Expire, releasing(O::Expired)),
        (S::Active, E::Expire, releasing(O::Expired)),
        (S::Provisioning, fail.clone(), releasing(failed_outcome())),
        (S::Active, fail.clone(), releasing(failed_outcome())),
        // Teardown done: finalise per outcome.
        (releasing(O::Released), E::Released, S::Released),
        (releasing(O::Expired), E::Released, S::Expired),
        (releasing(failed_outcome()), E::Released, failed),
        (retrying(), E::Released, S::Released),
        // Teardown failed: stay, holding capacity, with the reason.
        (
            releasing(O::Released),
            fail.clone(),
            teardown_failed(O::Released),
        ),
        (
            releasing(O::Expired),
            fail.clone(),
            teardown_failed(O::Expired),
        ),
        (
            releasing(failed_outcome()),
            fail.clone(),
            teardown_failed(failed_outcome()),
        ),
        (retrying(), fail, teardown_failed(O::Released)),
    ]
}

#[test]
fn every_legal_transition() {
    for (from, event, to) in legal() {
        assert_eq!(
            transition(&from, &event),
            Ok(to),
            "{from:?} --{}-->",
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
            let allowed = legal.iter().any(|(f, e, _)| f == &from && e == &event);
            let result = transition(&from, &event);
            if allowed {
                assert!(result.is_ok(), "{from:?} {}", event.name());
            } else {
                illegal += 1;
                let err = result.unwrap_err();
                assert_eq!(err.from, from.name());
                assert_eq!(err.subject, "an allocation");
            }
        }
    }
    assert_eq!(legal.len(), 30);
    assert_eq!(illegal, 12 * 9 - 30);
}

#[test]
fn capacity_is_held_until_teardown_is_done() {
    for (event, end) in [
        (E::Release, S::Released),
        (E::Expire, S::Expired),
        (
            E::Fail {
                reason: "xid 79".into(),
            },
            S::Failed {
                reason: "xid 79".into(),
            },
        ),
    ] {
        for from in [S::Provisioning, S::Active] {
            let tearing = transition(&from, &event).unwrap();
            assert_eq!(tearing.name(), "releasing");
            assert!(tearing.holds_capacity(), "{from} --{}-->", event.name());
            let retry = transition(
                &tearing,
                &E::Fail {
                    reason: "GPU instance busy".into(),
                },
            )
            .unwrap();
            assert!(retry.holds_capacity());
            assert!(matches!(
                &retry,
                S::Releasing { teardown_error: Some(r), .. } if r == "GPU instance busy"
            ));
            let done = transition(&retry, &E::Released).unwrap();
            assert_eq!(done, end);
            assert!(!done.holds_capacity());
        }
    }
}

#[test]
fn releasing_serializes_its_outcome_and_reads_old_rows() {
    let json = serde_json::to_value(S::releasing(ReleaseOutcome::Expired)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"state": "releasing", "outcome": {"kind": "expired"}})
    );
    let retry = S::Releasing {
        outcome: ReleaseOutcome::Failed {
            reason: "ecc".into(),
        },
        teardown_error: Some("busy".into()),
    };
    let json = serde_json::to_value(&retry).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "state": "releasing",
            "outcome": {"kind": "failed", "reason": "ecc"},
            "teardown_error": "busy"
        })
    );
    assert_eq!(serde_json::from_value::<S>(json).unwrap(), retry);
    let old: S = serde_json::from_str(r#"{"state":"releasing"}"#).unwrap();
    assert_eq!(old, S::releasing(ReleaseOutcome::Released));
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
    assert!(S::releasing(ReleaseOutcome::Released).holds_capacity());
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
fn proposals_are_submitted_before_anyone_decides() {
    use QuotaRequestEvent as QE;
    use QuotaRequestState as QS;
    assert_eq!(
        quota_request_transition(&QS::Proposed, &QE::Submit),
        Ok(QS::Pending)
    );
    assert_eq!(
        quota_request_transition(&QS::Proposed, &QE::Withdraw),
        Ok(QS::Withdrawn)
    );
    for event in [QE::Approve, QE::Reject { reason: "r".into() }] {
        let err = quota_request_transition(&QS::Proposed, &event).unwrap_err();
        assert!(matches!(err, QuotaRequestError::Transition(_)), "{event:?}");
    }
    let err = quota_request_transition(&QS::Pending, &QE::Submit).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot submit a quota request that is pending"
    );
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
        for event in [
            QE::Submit,
            QE::Approve,
            QE::Reject { reason: "r".into() },
            QE::Withdraw,
        ] {
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

#[test]
fn a_release_outcome_names_the_phase_it_ends_in() {
    for outcome in [
        ReleaseOutcome::Released,
        ReleaseOutcome::Expired,
        failed_outcome(),
    ] {
        assert_eq!(outcome.final_phase(), outcome.final_state().phase());
        assert_eq!(outcome.final_phase().name(), outcome.name());
    }
}
