//! Decoding of the internally tagged enums of §11 (`ContentBlock`,
//! `ToolResultContent`, `RenderDescriptor`) and of `sync`'s pending
//! questions (`PendingRequest`) from the JSON object itself.
//!
//! serde's derive decodes an internally tagged enum through a buffered copy
//! of its input and a second decoder for every variant: the largest part of
//! these types' share of the browser bundle. Here the object is read once,
//! its tag taken out, and each field of the one variant it names decoded
//! from its own value. The rules are the derive's: a missing tag or
//! required field is an error, an optional field absent or `null` is
//! `None`, unknown fields are ignored, and an unknown tag is the enum's
//! `Unknown`.

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, Error};
use serde_json::{Map, Value};

use crate::decode::unexpected;

/// An object's fields once its tag is read.
pub(crate) struct Tagged {
    pub(crate) tag: String,
    fields: Map<String, Value>,
}

impl Tagged {
    /// Reads an object and takes out its `tag` field, which must be a string.
    pub(crate) fn read<'de, D: Deserializer<'de>>(
        deserializer: D,
        tag: &'static str,
    ) -> Result<Self, D::Error> {
        let mut fields = Map::deserialize(deserializer)?;
        match fields.remove(tag) {
            Some(Value::String(tag)) => Ok(Self { tag, fields }),
            Some(other) => Err(D::Error::invalid_type(unexpected(&other), &"a string")),
            None => Err(D::Error::missing_field(tag)),
        }
    }

    /// A required field.
    pub(crate) fn field<T: DeserializeOwned, E: Error>(
        &mut self,
        name: &'static str,
    ) -> Result<T, E> {
        let value = self.fields.remove(name).ok_or_else(|| E::missing_field(name))?;
        decode(name, value)
    }

    /// The fields not yet taken, as one struct `T` (a variant's payload
    /// written beside the tag, as serde's `flatten` would read it).
    pub(crate) fn rest<T: DeserializeOwned, E: Error>(self) -> Result<T, E> {
        crate::decode::from_value(Value::Object(self.fields)).map_err(E::custom)
    }

    /// An optional field: absent or `null` is `None`.
    pub(crate) fn optional<T: DeserializeOwned, E: Error>(
        &mut self,
        name: &'static str,
    ) -> Result<Option<T>, E> {
        match self.fields.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => decode(name, value).map(Some),
        }
    }
}

/// `value` as a `T`; an error names the field.
fn decode<T: DeserializeOwned, E: Error>(name: &str, value: Value) -> Result<T, E> {
    crate::decode::from_value(value).map_err(|error| E::custom(format_args!("`{name}`: {error}")))
}
