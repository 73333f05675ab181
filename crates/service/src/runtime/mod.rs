//! The per-process machinery that makes the use cases fast and keeps
//! several replicas in step, apart from the use cases themselves: what a
//! process believes for a moment ([`memo`]), the pools indexed for the
//! placer between admissions ([`fleet_index`]), the tenants' allocation
//! lists ([`list_cache`]), and the notices replicas send each other
//! ([`replicas`]). Nothing here decides anything: every use case is right
//! without it (a cold process answers the same, only slower).
//!
//! The admission line (`allocations/line.rs`) stays beside the admission
//! rule it serializes.

pub(crate) mod fleet_index;
pub(crate) mod list_cache;
pub(crate) mod memo;
pub(crate) mod replicas;

/// The hooks every write carries to its commit (see
/// [`crate::commit_hook::CommitHook`]): the fleet index's, whose epochs move with
/// every change to what the placer sees.
pub(crate) fn commit_hooks() -> Vec<Box<dyn crate::commit_hook::CommitHook>> {
    vec![Box::<fleet_index::CarriedIndexes>::default()]
}
