//! Server-sent events from a streaming HTTP response.

use eventsource_stream::{Event, Eventsource};
use futures_util::{Stream, StreamExt};

use super::ProviderError;

/// The events of a response body, each `data` payload as one item.
pub fn events(response: reqwest::Response) -> impl Stream<Item = Result<Event, ProviderError>> {
    response.bytes_stream().eventsource().map(|event| event.map_err(ProviderError::Interrupted))
}
