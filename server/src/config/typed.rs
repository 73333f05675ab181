//! Reads the configuration tree into the typed structs, giving each text
//! value the type its field asks for.
//!
//! Environment variables are text, so every override enters the tree as a
//! string: a string field keeps `123456`, `007`, `true` or `[abc]` exactly
//! as written (a secret is never turned into a number); a number or boolean
//! field parses the text; a list field takes a TOML array (`["a", "b"]`) or
//! comma-separated words (`a,b`). Values written in the TOML file keep the
//! type TOML gave them.

use serde::de::value::{Error, MapDeserializer, SeqDeserializer};
use serde::de::{self, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

/// A TOML value read by the type its field asks for.
pub(super) struct Typed(pub toml::Value);

impl<'de> IntoDeserializer<'de, Error> for Typed {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

fn items(values: Vec<toml::Value>) -> SeqDeserializer<std::vec::IntoIter<Typed>, Error> {
    SeqDeserializer::new(
        values
            .into_iter()
            .map(Typed)
            .collect::<Vec<_>>()
            .into_iter(),
    )
}

/// A list written in an environment variable: a TOML array, or words
/// separated by commas (none for an empty value).
fn list_from_text(text: &str) -> Result<Vec<toml::Value>, Error> {
    let trimmed = text.trim();
    if trimmed.starts_with('[') {
        return match format!("v = {trimmed}").parse::<toml::Table>() {
            Ok(mut t) => match t.remove("v") {
                Some(toml::Value::Array(a)) => Ok(a),
                _ => Err(de::Error::custom(format!("{text:?} is not a list"))),
            },
            Err(_) => Err(de::Error::custom(format!(
                "{text:?} is not a TOML array such as [\"a\", \"b\"] (or write a,b)"
            ))),
        };
    }
    Ok(trimmed
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| toml::Value::String(w.to_owned()))
        .collect())
}

macro_rules! number_from_text {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0 {
                toml::Value::String(s) => {
                    let t = s.trim();
                    if let Ok(i) = t.parse::<i64>() {
                        visitor.visit_i64(i)
                    } else if let Ok(u) = t.parse::<u64>() {
                        visitor.visit_u64(u)
                    } else if let Ok(f) = t.parse::<f64>() {
                        visitor.visit_f64(f)
                    } else {
                        Err(de::Error::invalid_value(de::Unexpected::Str(&s), &visitor))
                    }
                }
                other => Typed(other).deserialize_any(visitor),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Typed {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            toml::Value::String(s) => visitor.visit_string(s),
            toml::Value::Integer(i) => visitor.visit_i64(i),
            toml::Value::Float(f) => visitor.visit_f64(f),
            toml::Value::Boolean(b) => visitor.visit_bool(b),
            toml::Value::Datetime(d) => visitor.visit_string(d.to_string()),
            toml::Value::Array(a) => visitor.visit_seq(items(a)),
            toml::Value::Table(t) => visitor.visit_map(MapDeserializer::new(
                t.into_iter().map(|(k, v)| (k, Typed(v))),
            )),
        }
    }

    number_from_text! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            toml::Value::String(s) => match s.trim() {
                "true" => visitor.visit_bool(true),
                "false" => visitor.visit_bool(false),
                _ => Err(de::Error::invalid_value(de::Unexpected::Str(&s), &visitor)),
            },
            other => Typed(other).deserialize_any(visitor),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            toml::Value::String(s) => visitor.visit_seq(items(list_from_text(&s)?)),
            other => Typed(other).deserialize_any(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // TOML has no null: a key that is there has a value.
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            toml::Value::String(s) => visitor.visit_enum(s.into_deserializer()),
            toml::Value::Table(t) if t.len() == 1 => {
                visitor.visit_enum(de::value::MapAccessDeserializer::new(MapDeserializer::new(
                    t.into_iter().map(|(k, v)| (k, Typed(v))),
                )))
            }
            other => Typed(other).deserialize_any(visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct tuple_struct map struct identifier
    }
}
