//! The Kubernetes objects of Tessera's placements, typed by `k8s-openapi`
//! (Kubernetes 1.34, the first release with `resource.k8s.io/v1`):
//!
//! - [`claim`]: per active allocation, a DRA `ResourceClaim` that selects
//!   exactly the placed GPU or MIG device by UUID (a CEL selector on the
//!   attributes NVIDIA's DRA driver publishes), with the driver's sharing
//!   configuration for MPS and time-slicing, and a check pod that uses it
//!   on the placed node;
//! - [`tenant`]: per tenant namespace, the `ResourceQuota` (DRA devices per
//!   device class, and the device plugin's extended resources), and the
//!   `PriorityClass`es of Tessera's priority classes.
//!
//! Pure: the service gathers the inputs; callers render with
//! [`Documents::to_yaml`] or as a `v1` `List` of [`Documents`]' objects.

/// The typed Kubernetes structs these objects are built from (Kubernetes
/// 1.34), for callers that read them back.
pub use k8s_openapi;

pub mod claim;
#[cfg(test)]
mod golden;
pub mod nvidia;
pub mod tenant;

use serde::Serialize;

/// Label every generated object carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "tessera");
/// Label naming the allocation of a claim or pod (the agent matches the
/// allocation's processes by `TESSERA_ALLOCATION`, which the pod sets too).
pub const LABEL_ALLOCATION: &str = "tessera.dev/allocation";
/// Label naming the tenant (slug) of a generated object.
pub const LABEL_TENANT: &str = "tessera.dev/tenant";

/// A generated object could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("could not render a Kubernetes object: {0}")]
pub struct RenderError(String);

/// Kubernetes objects in the order they are applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Documents(pub Vec<serde_json::Value>);

impl Documents {
    /// Adds a typed object.
    pub fn push<T: Serialize>(&mut self, object: &T) -> Result<(), RenderError> {
        self.0
            .push(serde_json::to_value(object).map_err(|e| RenderError(e.to_string()))?);
        Ok(())
    }

    /// Multi-document YAML (`---` between objects), what `kubectl apply -f`
    /// takes.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let mut out = String::new();
        for (i, doc) in self.0.iter().enumerate() {
            if i > 0 {
                out.push_str("---\n");
            }
            out.push_str(&serde_yaml_ng::to_string(doc).map_err(|e| RenderError(e.to_string()))?);
        }
        Ok(out)
    }
}

/// Metadata with Tessera's labels.
pub(crate) fn metadata(
    name: &str,
    namespace: Option<&str>,
    labels: &[(&str, String)],
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    let mut all =
        std::collections::BTreeMap::from([(MANAGED_BY.0.to_owned(), MANAGED_BY.1.to_owned())]);
    for (k, v) in labels {
        all.insert((*k).to_owned(), v.clone());
    }
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(all),
        ..Default::default()
    }
}
