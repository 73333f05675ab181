//! Priority classes: named priorities platform admins define (say
//! `production-inference` > `interactive` > `batch`), each open to some
//! tenants and pools. A request picks one (or gets the default); the queue
//! serves higher values first.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Name of the class used when none is configured as the default.
pub const STANDARD: &str = "standard";

/// One class as configured (`[[priority_classes]]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriorityClass {
    /// Name (lower-case letters, digits, dashes).
    pub name: String,
    /// Higher is served first (-1,000,000..=1,000,000).
    pub value: i32,
    /// What it is for, shown on the request form.
    #[serde(default)]
    pub description: String,
    /// Tenants (slugs) that may use it; empty means every tenant.
    #[serde(default)]
    pub tenants: Vec<String>,
    /// Pools it may be used in; empty means every pool.
    #[serde(default)]
    pub pools: Vec<String>,
    /// Requests that name no class get this one (at most one class; it
    /// must be open to every tenant and pool).
    #[serde(default)]
    pub default: bool,
}

impl PriorityClass {
    /// Whether `tenant` may use it in `pool`.
    pub fn allows(&self, tenant: &str, pool: &str) -> bool {
        (self.tenants.is_empty() || self.tenants.iter().any(|t| t == tenant))
            && (self.pools.is_empty() || self.pools.iter().any(|p| p == pool))
    }

    fn standard() -> Self {
        Self {
            name: STANDARD.to_string(),
            value: 0,
            description: "The default priority".to_string(),
            tenants: Vec::new(),
            pools: Vec::new(),
            default: true,
        }
    }
}

/// Why a class list or a choice of class is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PriorityClassError {
    /// A configured class is malformed.
    #[error("priority_classes[{index}].{field}: {reason}")]
    Invalid {
        /// Position in the list.
        index: usize,
        /// The field.
        field: String,
        /// What to fix.
        reason: String,
    },
    /// The request names a class that does not exist.
    #[error("there is no priority class '{name}'; choose one of: {offered}")]
    Unknown {
        /// The name given.
        name: String,
        /// Classes this tenant may use in the pool, joined by ", ".
        offered: String,
    },
    /// The class exists but is not open to this tenant in this pool.
    #[error("priority class '{name}' is not open to your tenant in pool '{pool}'; choose one of: {offered}")]
    NotAllowed {
        /// The name given.
        name: String,
        /// The pool.
        pool: String,
        /// Classes this tenant may use in the pool, joined by ", ".
        offered: String,
    },
}

/// The configured classes, checked; highest value first. Always holds a
/// default (a built-in `standard` of value 0 when none is configured).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityClasses {
    classes: Vec<PriorityClass>,
}

impl Default for PriorityClasses {
    fn default() -> Self {
        Self {
            classes: vec![PriorityClass::standard()],
        }
    }
}

/// Largest |value| a class may have.
pub const MAX_PRIORITY: i32 = 1_000_000;

impl PriorityClasses {
    /// Checks `classes` (names, values, one default open to all).
    pub fn new(classes: Vec<PriorityClass>) -> Result<Self, PriorityClassError> {
        let invalid = |index: usize, field: &str, reason: String| PriorityClassError::Invalid {
            index,
            field: field.to_string(),
            reason,
        };
        let mut defaults = 0;
        for (i, c) in classes.iter().enumerate() {
            if !crate::pool::is_slug(&c.name) {
                return Err(invalid(
                    i,
                    "name",
                    format!(
                        "'{}' must be 1-64 lower-case letters, digits or dashes",
                        c.name
                    ),
                ));
            }
            if classes[..i].iter().any(|o| o.name == c.name) {
                return Err(invalid(i, "name", format!("'{}' appears twice", c.name)));
            }
            if c.value.abs() > MAX_PRIORITY {
                return Err(invalid(
                    i,
                    "value",
                    format!("{} is outside -{MAX_PRIORITY}..={MAX_PRIORITY}", c.value),
                ));
            }
            if c.default {
                defaults += 1;
                if defaults > 1 {
                    return Err(invalid(
                        i,
                        "default",
                        "only one class can be the default".into(),
                    ));
                }
                if !c.tenants.is_empty() || !c.pools.is_empty() {
                    return Err(invalid(
                        i,
                        "default",
                        "the default class must be open to every tenant and pool (leave tenants and pools empty)".into(),
                    ));
                }
            }
        }
        let mut classes = classes;
        if defaults == 0 {
            if let Some(i) = classes.iter().position(|c| c.name == STANDARD) {
                return Err(invalid(
                    i,
                    "default",
                    format!("'{STANDARD}' is the name of the built-in default; mark it `default = true` or rename it"),
                ));
            }
            classes.push(PriorityClass::standard());
        }
        classes.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.name.cmp(&b.name)));
        Ok(Self { classes })
    }

    /// Every class, highest value first.
    pub fn all(&self) -> &[PriorityClass] {
        &self.classes
    }

    /// The class of requests that name none.
    pub fn default_class(&self) -> &PriorityClass {
        self.classes
            .iter()
            .find(|c| c.default)
            .unwrap_or(&self.classes[self.classes.len() - 1])
    }

    /// The classes `tenant` may use in `pool`, highest first.
    pub fn offered(&self, tenant: &str, pool: &str) -> Vec<&PriorityClass> {
        self.classes
            .iter()
            .filter(|c| c.allows(tenant, pool))
            .collect()
    }

    /// The class a request of `tenant` in `pool` runs at: the one named,
    /// if open to it there, else the default.
    pub fn choose(
        &self,
        tenant: &str,
        pool: &str,
        name: Option<&str>,
    ) -> Result<&PriorityClass, PriorityClassError> {
        let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
            return Ok(self.default_class());
        };
        let offered = || {
            self.offered(tenant, pool)
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.classes.iter().find(|c| c.name == name) {
            None => Err(PriorityClassError::Unknown {
                name: name.to_string(),
                offered: offered(),
            }),
            Some(c) if !c.allows(tenant, pool) => Err(PriorityClassError::NotAllowed {
                name: name.to_string(),
                pool: pool.to_string(),
                offered: offered(),
            }),
            Some(c) => Ok(c),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn class(name: &str, value: i32, tenants: &[&str], pools: &[&str]) -> PriorityClass {
        PriorityClass {
            name: name.into(),
            value,
            description: String::new(),
            tenants: tenants.iter().map(|t| t.to_string()).collect(),
            pools: pools.iter().map(|p| p.to_string()).collect(),
            default: false,
        }
    }

    fn sample() -> PriorityClasses {
        PriorityClasses::new(vec![
            class("batch", -100, &[], &[]),
            class("production-inference", 1000, &["vision"], &["h100-mig"]),
            class("interactive", 100, &[], &[]),
        ])
        .unwrap()
    }

    #[test]
    fn classes_are_ranked_and_a_standard_default_is_added() {
        let c = sample();
        let names: Vec<&str> = c.all().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["production-inference", "interactive", "standard", "batch"]
        );
        assert_eq!(c.default_class().name, STANDARD);
        assert_eq!(PriorityClasses::default().default_class().value, 0);
    }

    #[test]
    fn a_request_gets_the_class_it_may_use_or_a_clear_error() {
        let c = sample();
        assert_eq!(c.choose("nlp", "h100-mig", None).unwrap().name, STANDARD);
        assert_eq!(
            c.choose("nlp", "h100-mig", Some(" ")).unwrap().name,
            STANDARD
        );
        assert_eq!(
            c.choose("vision", "h100-mig", Some("production-inference"))
                .unwrap()
                .value,
            1000
        );
        let refused = c
            .choose("nlp", "h100-mig", Some("production-inference"))
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "priority class 'production-inference' is not open to your tenant in pool 'h100-mig'; choose one of: interactive, standard, batch"
        );
        // Open to vision, but not in another pool.
        assert!(matches!(
            c.choose("vision", "l4", Some("production-inference")),
            Err(PriorityClassError::NotAllowed { .. })
        ));
        assert!(matches!(
            c.choose("vision", "l4", Some("urgent")),
            Err(PriorityClassError::Unknown { .. })
        ));
        let offered: Vec<&str> = c
            .offered("vision", "h100-mig")
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            offered,
            ["production-inference", "interactive", "standard", "batch"]
        );
    }

    #[test]
    fn mistakes_in_the_list_name_the_field() {
        let err = |classes| PriorityClasses::new(classes).unwrap_err().to_string();
        assert_eq!(
            err(vec![class("Urgent", 1, &[], &[])]),
            "priority_classes[0].name: 'Urgent' must be 1-64 lower-case letters, digits or dashes"
        );
        assert!(err(vec![class("a", 1, &[], &[]), class("a", 2, &[], &[])]).contains("[1].name"));
        assert!(err(vec![class("a", 2_000_000, &[], &[])]).contains("[0].value"));
        let mut narrow = class("a", 0, &["vision"], &[]);
        narrow.default = true;
        assert!(err(vec![narrow]).contains("open to every tenant"));
        let mut one = class("a", 0, &[], &[]);
        one.default = true;
        let mut two = one.clone();
        two.name = "b".into();
        assert!(err(vec![one.clone(), two]).contains("only one"));
        assert!(err(vec![class(STANDARD, 5, &[], &[])]).contains("built-in default"));
        // A configured default replaces the built-in one.
        let c = PriorityClasses::new(vec![one]).unwrap();
        assert_eq!(c.all().len(), 1);
        assert_eq!(c.default_class().name, "a");
    }
}
