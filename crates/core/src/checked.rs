//! Names checked once, where they enter: a value of one of these types is
//! valid by construction, so code past the edge never checks it again.
//!
//! On the wire each is the plain string (deserializing checks it, so a bad
//! one is a 400 naming the field); in the database the same text column
//! (`sea-orm` feature). They deref to `str` for reading.
//!
//! ```
//! use tessera_core::checked::Hostname;
//! assert!(Hostname::parse("gpu-h100-01.dc1").is_ok());
//! assert!(Hostname::parse("-gpu").is_err());
//! let h: Result<Hostname, _> = serde_json::from_str("\"not a host\"");
//! assert!(h.is_err());
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;

/// A name that breaks its type's rule: what was given and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("'{given}' is not a valid {what} ({rule})")]
pub struct NameError {
    /// The text given (cut to 80 characters).
    pub given: String,
    /// What it was meant to be ("host name").
    pub what: &'static str,
    /// The rule, as people read it.
    pub rule: &'static str,
}

macro_rules! checked_names {
    ($(
        $(#[$doc:meta])*
        $name:ident: $what:literal, $rule:literal, $check:path;
    )*) => {$(
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        #[cfg_attr(feature = "sea-orm", derive(sea_orm::DeriveValueType))]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(value_type = String))]
        pub struct $name(String);

        impl $name {
            /// What the type names, and its rule (for messages).
            pub const WHAT: &'static str = $what;

            /// `text` if it keeps the rule.
            pub fn parse(text: &str) -> Result<Self, NameError> {
                if $check(text) {
                    Ok(Self(text.to_owned()))
                } else {
                    Err(NameError {
                        given: text.chars().take(80).collect(),
                        what: $what,
                        rule: $rule,
                    })
                }
            }

            /// The name.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;

            fn try_from(text: String) -> Result<Self, NameError> {
                if $check(&text) {
                    Ok(Self(text))
                } else {
                    Self::parse(&text)
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = NameError;

            fn from_str(text: &str) -> Result<Self, NameError> {
                Self::parse(text)
            }
        }

        impl From<$name> for String {
            fn from(name: $name) -> String {
                name.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    )*};
}

checked_names! {
    /// A GPU machine's host name: RFC 1123 labels (letters, digits and
    /// dashes, not at either end of a label) joined by dots, at most 253
    /// characters. Agents send it; hosts are enrolled, listed and audited
    /// by it.
    Hostname: "host name", "letters, digits, dashes and dots; at most 253 characters", is_hostname;
}

/// Whether `name` is a host name (RFC 1123).
pub fn is_hostname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_is_checked_once_where_it_enters() {
        for good in [
            "gpu-h100-01",
            "a",
            "node7.dc-1.example.com",
            &"a".repeat(63),
        ] {
            let h = Hostname::parse(good).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(h.as_str(), good);
            assert_eq!(serde_json::to_string(&h).ok(), Some(format!("\"{good}\"")));
        }
        for bad in [
            "",
            "-gpu",
            "gpu-",
            "gpu 1",
            "gpu_1",
            "a..b",
            &"a".repeat(64),
            &"a.".repeat(127),
        ] {
            let err = Hostname::parse(bad).err();
            assert!(err.is_some(), "{bad}");
            let json = serde_json::to_string(bad).unwrap_or_default();
            let read: Result<Hostname, _> = serde_json::from_str(&json);
            let message = read.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                message.contains("is not a valid host name"),
                "{bad}: {message}"
            );
        }
        let h = Hostname::parse("gpu-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(h, "gpu-1");
        assert_eq!(h.len(), 5, "reads as a str");
    }
}
