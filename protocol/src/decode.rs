//! Decoding a parsed JSON value into a protocol type, read as the protocol
//! writes its messages: a struct only ever from an object, a map key and a
//! field name only ever as a string.
//!
//! serde_json's own decoder of a `Value` also reads a struct written as an
//! array (`[1, "x"]` for `{ seq: 1, text: "x" }`) and hands a field name
//! over in more than one form, so every derived decoder was compiled with
//! paths no peer of this protocol takes. The browser bundle carries one such
//! decoder per wire type: reading only what the wire holds took a tenth of
//! its size off (docs/PERFORMANCE.md). Every message and every answer's data
//! is decoded here, so each type's decoder is compiled once.
//!
//! A struct written as an array is refused, like any other value of the
//! wrong type; everything else reads as serde_json reads it, with the same
//! error messages.

use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, Error as _, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde_json::{Error, Value};

/// `value` as a `T`.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    T::deserialize(Json(value))
}

/// A parsed JSON value as a serde decoder (see the module's notes).
pub struct Json(pub Value);

impl<'de> Deserializer<'de> for Json {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(value) => visitor.visit_bool(value),
            Value::Number(number) => {
                if let Some(value) = number.as_u64() {
                    visitor.visit_u64(value)
                } else if let Some(value) = number.as_i64() {
                    visitor.visit_i64(value)
                } else {
                    visitor.visit_f64(number.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(value) => visitor.visit_string(value),
            Value::Array(items) => visit_array(items, visitor),
            Value::Object(fields) => visit_object(fields, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            value => visitor.visit_some(Json(value)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(value) => visitor.visit_string(value),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(value) => visitor.visit_str(&value),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visit_array(items, visitor),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(fields) => visit_object(fields, visitor),
            other => Err(invalid_type(&other, &visitor)),
        }
    }

    /// Only from an object: the one place this differs from serde_json.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(name) => visitor.visit_enum(Variant { name, value: None }),
            Value::Object(fields) => {
                let mut fields = fields.into_iter();
                match (fields.next(), fields.next()) {
                    (Some((name, value)), None) => {
                        visitor.visit_enum(Variant { name, value: Some(value) })
                    }
                    _ => Err(Error::invalid_value(Unexpected::Map, &"a map with a single key")),
                }
            }
            other => Err(Error::invalid_type(unexpected(&other), &"a string or a map")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf
    }
}

fn visit_array<'de, V: Visitor<'de>>(items: Vec<Value>, visitor: V) -> Result<V::Value, Error> {
    let len = items.len();
    let mut items = Items(items.into_iter());
    let value = visitor.visit_seq(&mut items)?;
    if items.0.len() == 0 {
        Ok(value)
    } else {
        Err(Error::invalid_length(len, &"fewer elements in array"))
    }
}

fn visit_object<'de, V: Visitor<'de>>(
    fields: serde_json::Map<String, Value>,
    visitor: V,
) -> Result<V::Value, Error> {
    let len = fields.len();
    let mut fields = Fields { fields: fields.into_iter(), value: None };
    let value = visitor.visit_map(&mut fields)?;
    if fields.fields.len() == 0 {
        Ok(value)
    } else {
        Err(Error::invalid_length(len, &"fewer elements in map"))
    }
}

struct Items(std::vec::IntoIter<Value>);

impl<'de> SeqAccess<'de> for Items {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0.next().map(|item| seed.deserialize(Json(item))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Fields {
    fields: serde_json::map::IntoIter,
    /// The value of the key last read.
    value: Option<Value>,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.fields.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(Key(key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(Json(value)),
            None => Err(Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.fields.len())
    }
}

/// A key's methods for a type parsed from its text: `method => visit(type,
/// what the error says was expected)`.
macro_rules! parsed {
    ($($method:ident => $visit:ident($parse:ty, $expected:literal)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                visitor.$visit(self.parse::<$parse>($expected)?)
            }
        )*
    };
}

/// A map key or an enum's variant name: always a string on the wire, read
/// as a number or a boolean where the key's type is one, as serde_json does.
struct Key(String);

impl Key {
    fn parse<T: std::str::FromStr>(&self, expected: &'static str) -> Result<T, Error> {
        self.0.parse().map_err(|_| Error::invalid_value(Unexpected::Str(&self.0), &expected))
    }
}

impl<'de> Deserializer<'de> for Key {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_string(self.0)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_str(&self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
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
        visitor.visit_enum(Variant { name: self.0, value: None })
    }

    parsed! {
        deserialize_bool => visit_bool(bool, "a boolean"),
        deserialize_u8 => visit_u64(u64, "an unsigned integer"),
        deserialize_u16 => visit_u64(u64, "an unsigned integer"),
        deserialize_u32 => visit_u64(u64, "an unsigned integer"),
        deserialize_u64 => visit_u64(u64, "an unsigned integer"),
        deserialize_i8 => visit_i64(i64, "an integer"),
        deserialize_i16 => visit_i64(i64, "an integer"),
        deserialize_i32 => visit_i64(i64, "an integer"),
        deserialize_i64 => visit_i64(i64, "an integer"),
        deserialize_f32 => visit_f64(f64, "a number"),
        deserialize_f64 => visit_f64(f64, "a number"),
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct ignored_any
    }
}

/// An enum written as its variant's name, or as `{ name: value }`.
struct Variant {
    name: String,
    value: Option<Value>,
}

impl<'de> EnumAccess<'de> for Variant {
    type Error = Error;
    type Variant = Payload;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Payload), Error> {
        let variant = seed.deserialize(Key(self.name))?;
        Ok((variant, Payload(self.value)))
    }
}

/// The value of an enum's variant, if it has one.
struct Payload(Option<Value>);

impl<'de> VariantAccess<'de> for Payload {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.0 {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(Error::invalid_type(unexpected(&other), &"unit variant")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        match self.0 {
            Some(value) => seed.deserialize(Json(value)),
            None => Err(Error::invalid_type(Unexpected::UnitVariant, &"newtype variant")),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Some(Value::Array(items)) => visit_array(items, visitor),
            Some(other) => Err(Error::invalid_type(unexpected(&other), &"tuple variant")),
            None => Err(Error::invalid_type(Unexpected::UnitVariant, &"tuple variant")),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Some(Value::Object(fields)) => visit_object(fields, visitor),
            Some(other) => Err(Error::invalid_type(unexpected(&other), &"struct variant")),
            None => Err(Error::invalid_type(Unexpected::UnitVariant, &"struct variant")),
        }
    }
}

fn invalid_type<'de>(value: &Value, expected: &impl Visitor<'de>) -> Error {
    Error::invalid_type(unexpected(value), expected)
}

/// How serde names a value in "invalid type: …" errors.
pub(crate) fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(value) => Unexpected::Bool(*value),
        Value::Number(number) => {
            if let Some(value) = number.as_u64() {
                Unexpected::Unsigned(value)
            } else if let Some(value) = number.as_i64() {
                Unexpected::Signed(value)
            } else {
                Unexpected::Float(number.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(value) => Unexpected::Str(value),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}
