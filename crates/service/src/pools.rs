//! GPU pools: named sets of GPUs with a sharing policy and an isolation
//! class. The rules are core's ([`tessera_core::pool`]); this module adds the
//! checks that need the tenants and priority classes.

use crate::ServiceError;
pub use tessera_core::pool::{pool_of, PoolSpec, PoolSpecError, ReleasePolicy};
pub use tessera_core::sharing::IsolationClass;

/// Checks `[[priority_classes]]`: the list itself, then that the tenants
/// and pools each class names exist.
pub fn priority_classes(
    classes: Vec<tessera_core::schedule::PriorityClass>,
    pools: &[PoolSpec],
    directory: &crate::identity::Directory,
) -> Result<tessera_core::schedule::PriorityClasses, ServiceError> {
    for (i, c) in classes.iter().enumerate() {
        if let Some(p) = c
            .pools
            .iter()
            .find(|p| !pools.iter().any(|x| &x.name == *p))
        {
            return Err(ServiceError::invalid(
                format!("priority_classes[{i}].pools"),
                format!("there is no pool '{p}'"),
            ));
        }
        if let Some(t) = c
            .tenants
            .iter()
            .find(|t| !directory.tenants.iter().any(|x| &x.slug == *t))
        {
            return Err(ServiceError::invalid(
                format!("priority_classes[{i}].tenants"),
                format!("there is no tenant '{t}'"),
            ));
        }
    }
    tessera_core::schedule::PriorityClasses::new(classes).map_err(|e| match e {
        tessera_core::schedule::PriorityClassError::Invalid {
            index,
            field,
            reason,
        } => ServiceError::invalid(format!("priority_classes[{index}].{field}"), reason),
        other => ServiceError::invalid("priority_classes", other.to_string()),
    })
}

/// Checks what pools say about tenants: fair-share weights name tenants
/// that exist.
pub fn validate_pool_tenants(
    pools: &[PoolSpec],
    directory: &crate::identity::Directory,
) -> Result<(), ServiceError> {
    for (i, p) in pools.iter().enumerate() {
        if let Some(t) = p
            .fair_share_weights
            .keys()
            .find(|t| !directory.tenants.iter().any(|x| &x.slug == *t))
        {
            return Err(ServiceError::invalid(
                format!("pools[{i}].fair_share_weights"),
                format!("there is no tenant '{t}'"),
            ));
        }
    }
    Ok(())
}

/// Checks pools for mistakes a config author would make; names the field.
pub fn validate_pools(pools: &[PoolSpec]) -> Result<(), ServiceError> {
    tessera_core::pool::validate_pools(pools).map_err(ServiceError::from)
}

impl From<PoolSpecError> for ServiceError {
    fn from(e: PoolSpecError) -> Self {
        ServiceError::invalid(e.field, e.reason)
    }
}
