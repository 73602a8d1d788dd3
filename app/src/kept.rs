//! An answer's data kept as the JSON it came as, decoded into its type
//! where it is shown. The panels that show such answers load their code
//! the first time they open (`views::deferred`); keeping the data as JSON
//! until then leaves its decoding out of the first load too.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Kept<T> {
    value: Value,
    of: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Kept<T> {
    pub fn new(value: Value) -> Self {
        Self { value, of: PhantomData }
    }

    /// The data as a `T`, or why it is not one.
    pub fn decoded(&self) -> Result<T, String> {
        // From an owned value, as every message is decoded: the decoders
        // its types share with those are compiled once.
        shard_protocol::decode::from_value(self.value.clone())
            .map_err(|error| format!("unexpected answer: {error}"))
    }

    /// One field of the data, as it came.
    pub fn field(&self, name: &str) -> &Value {
        &self.value[name]
    }
}
