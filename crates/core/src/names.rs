//! Enums whose variants have stable names (stored, sent and shown): one
//! place writes each name, and serde, sea-orm and `as_str` all use it.

/// Declares a stable-name enum: serde, sea-orm and `as_str` all use the one
/// name written next to each variant, and `ALL` lists the variants. The names
/// are captured as `tt`, not `literal`: derive macros such as utoipa's do not
/// look inside the invisible group a `literal` fragment arrives in, and would
/// fall back to the Rust variant names (the OpenAPI test catches that).
macro_rules! stable_names {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($db:tt) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:tt, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[cfg_attr(feature = "sea-orm", derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum))]
        #[cfg_attr(feature = "sea-orm", sea_orm(rs_type = "String", db_type = "Text", enum_name = $db))]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                #[serde(rename = $text)]
                #[cfg_attr(feature = "sea-orm", sea_orm(string_value = $text))]
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stable name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// The value called `name`, if any.
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == name)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use stable_names;
