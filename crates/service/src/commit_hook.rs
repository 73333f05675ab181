//! What a write carries to its commit without knowing it (see
//! `crate::write`): the use cases' own state that must move with the
//! write's events, settled in its transaction.

use crate::events::DomainEvent;
use crate::{Service, ServiceError};
use sea_orm::DatabaseTransaction;

/// Something a write carries to its commit without knowing it: settled in
/// the transaction, after the write's own rows and before the commit, with
/// the write's events (it may write rows of its own and keep what it
/// carried in the process: should the commit then fail, what it kept names
/// state the database never stored, and is not trusted).
pub(crate) trait CommitHook: std::any::Any + Send + Sync {
    /// Settles what was carried, given the write's events.
    fn settle<'a>(
        self: Box<Self>,
        service: &'a Service,
        txn: &'a DatabaseTransaction,
        events: &'a [DomainEvent],
    ) -> futures_util::future::BoxFuture<'a, Result<(), ServiceError>>;

    /// Itself, to be found again by type (see `Write::hook`).
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}
