//! Admissions that wait together take their turn together. Admissions are
//! serialized (that is what makes the quota and capacity checks atomic),
//! and most of a turn's round trips are the same for every request: the
//! transaction, the lock, the pools and their epochs, the audit insert, the
//! epoch swap and the commit. A request checked outside the turn joins this
//! process's line; whoever gets the turn next admits everyone in the line
//! (up to [`MOST_IN_ONE_TURN`]), one after the other in one transaction, so
//! each sees the ones before it, and answers each once it commits.
//!
//! - A refused request writes nothing (see [`Service::admit_in`]), so the
//!   others go on; only a database error fails the turn, and then every
//!   request in it gets that error and nothing of any is stored.
//! - The turn runs in a task of its own: a caller that goes away (a client
//!   that hangs up) leaves the line if it still waits there, and cannot cut
//!   the others' turn short.
//! - Each request's audit row and notices name its own caller.

use super::admission::{Checked, TurnReads};
use crate::entity::allocation;
use crate::pools::PoolSpec;
use crate::write::Write;
use crate::TenantActor;
use crate::{Service, ServiceError};
use std::collections::VecDeque;
use std::sync::Arc;
use tessera_protocol::views::NewAllocation;
use tokio::sync::oneshot;

/// The most requests one turn admits (a bound on how long one
/// transaction runs, and how long the first in it waits for the last).
pub(crate) const MOST_IN_ONE_TURN: usize = 32;

/// What a request in the line is answered: its row as stored, and the
/// pools as the turn read them; or why it was refused.
type Answer = Result<(allocation::Model, Arc<Vec<PoolSpec>>), ServiceError>;

/// A request waiting for its turn.
struct Waiting {
    ticket: u64,
    actor: TenantActor,
    req: NewAllocation,
    checked: Checked,
    answer: oneshot::Sender<Answer>,
}

/// This process's line of admissions waiting for their turn.
#[derive(Default)]
pub(crate) struct AdmissionLine {
    waiting: std::sync::Mutex<VecDeque<Waiting>>,
    next_ticket: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for AdmissionLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionLine")
            .field("waiting", &self.line().len())
            .finish()
    }
}

impl AdmissionLine {
    fn line(&self) -> std::sync::MutexGuard<'_, VecDeque<Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn join(&self, w: impl FnOnce(u64) -> Waiting) -> u64 {
        let ticket = self
            .next_ticket
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.line().push_back(w(ticket));
        ticket
    }

    /// The first `most` requests in the line, taken out of it.
    fn take(&self, most: usize) -> Vec<Waiting> {
        let mut line = self.line();
        let n = line.len().min(most);
        line.drain(..n).collect()
    }

    /// Takes request `ticket` out of the line; `false` when a turn took it.
    fn leave(&self, ticket: u64) -> bool {
        let mut line = self.line();
        match line.iter().position(|w| w.ticket == ticket) {
            Some(at) => {
                line.remove(at);
                true
            }
            None => false,
        }
    }

    /// Whether `ticket` still waits in the line (no turn took it yet).
    fn holds(&self, ticket: u64) -> bool {
        self.line().iter().any(|w| w.ticket == ticket)
    }
}

/// Leaves the line when the caller goes away before a turn took its request.
struct Place<'a> {
    line: &'a AdmissionLine,
    ticket: u64,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.line.leave(self.ticket);
    }
}

/// The error every request of a failed turn gets: the turn's own, or one
/// that says the same (a 503 stays a 503).
fn shared(e: &ServiceError) -> ServiceError {
    if e.is_busy() {
        return ServiceError::Database(sea_orm::DbErr::ConnectionAcquire(
            sea_orm::error::ConnAcquireErr::Timeout,
        ));
    }
    ServiceError::internal(format!("the admission turn failed: {e:?}"))
}

fn line_gone() -> ServiceError {
    ServiceError::internal("the admission turn ended without an answer")
}

impl Service {
    /// Admits `req` (checked as `checked`) in the next turn that takes it:
    /// this caller's own, or another's it joins.
    pub(super) async fn admit_in_line(
        &self,
        actor: &TenantActor,
        req: &NewAllocation,
        checked: Checked,
    ) -> Result<(allocation::Model, Arc<Vec<PoolSpec>>), ServiceError> {
        let (answer, mut answered) = oneshot::channel();
        let ticket = self.admission_line.join(|ticket| Waiting {
            ticket,
            actor: actor.clone(),
            req: req.clone(),
            checked,
            answer,
        });
        let _place = Place {
            line: &self.admission_line,
            ticket,
        };
        loop {
            let permit = tokio::select! {
                biased;
                a = &mut answered => return a.unwrap_or_else(|_| Err(line_gone())),
                p = self.admission_permit() => p?,
            };
            let w = match self.begin_admission_holding(permit).await {
                Ok(w) => w,
                // Not taken meanwhile: refused with the error. Taken: the
                // turn that took it answers.
                Err(e) if self.admission_line.leave(ticket) => return Err(e),
                Err(_) => return answered.await.unwrap_or_else(|_| Err(line_gone())),
            };
            let turn = self.admission_line.take(MOST_IN_ONE_TURN);
            let mine = turn.iter().any(|w| w.ticket == ticket);
            if turn.is_empty() {
                // Taken by the turn before: the lock goes to the next.
                drop(w);
            } else {
                let service = self.clone();
                tokio::spawn(async move { service.admit_together(w, turn).await });
            }
            // Taken by this turn or an earlier one: wait for the answer.
            // Else the line was longer than one turn: try again.
            if mine || !self.admission_line.holds(ticket) {
                return answered.await.unwrap_or_else(|_| Err(line_gone()));
            }
        }
    }

    /// Admits `turn` in `w`, which holds the admission turn, commits, and
    /// answers each request.
    async fn admit_together(self, mut w: Write, turn: Vec<Waiting>) {
        self.metrics.admission_turn(turn.len());
        let answers: Vec<Answer> = match self.admit_each(&mut w, &turn).await {
            Ok((pools, answers)) => match w.commit(&self, &crate::audit::Actor::System).await {
                Ok(()) => {
                    let pools = Arc::new(pools);
                    answers
                        .into_iter()
                        .map(|a| a.map(|row| (row, Arc::clone(&pools))))
                        .collect()
                }
                Err(e) => turn.iter().map(|_| Err(shared(&e))).collect(),
            },
            Err(e) => {
                drop(w);
                turn.iter().map(|_| Err(shared(&e))).collect()
            }
        };
        for (waiting, answer) in turn.into_iter().zip(answers) {
            // A caller that went away is not answered.
            let _ = waiting.answer.send(answer);
        }
    }

    /// Admits each of `turn` in `w`: the pools in force, and each
    /// request's row or refusal; a database error fails them all.
    #[allow(clippy::type_complexity)]
    async fn admit_each(
        &self,
        w: &mut Write,
        turn: &[Waiting],
    ) -> Result<(Vec<PoolSpec>, Vec<Result<allocation::Model, ServiceError>>), ServiceError> {
        let mut read = TurnReads::new(self.pools_in_force(w.db()).await?);
        let mut answers = Vec::with_capacity(turn.len());
        for waiting in turn {
            match self
                .admit_in(
                    w,
                    &mut read,
                    &waiting.actor,
                    &waiting.req,
                    &waiting.checked,
                    None,
                )
                .await
            {
                Err(e) if e.is_failure() => return Err(e),
                other => answers.push(other),
            }
        }
        Ok((read.pools.specs, answers))
    }
}

impl Service {
    /// Admission turns this process took, and the requests they admitted
    /// (what `tessera_admission_turn_requests` counts).
    pub fn admission_turns(&self) -> (u64, u64) {
        self.metrics.admission_turns()
    }
}
