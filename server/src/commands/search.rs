//! `search.query`: the search index's matches (crate::search), each named
//! by the agent it is listed under now and whether its session is the one
//! that agent runs.

use std::sync::Arc;

use shard_protocol::search::{SearchHit, SearchQuery, SearchResults};

use super::{Daemon, Outcome, not_found, ok};

pub fn query(daemon: &Arc<dyn Daemon>, query: SearchQuery) -> Outcome {
    let daemon = daemon.clone();
    Outcome::Later(Box::pin(async move {
        let registry = daemon.registry();
        if let Some(agent_id) = &query.agent_id
            && !registry.contains(agent_id)
        {
            return Err(not_found(agent_id));
        }
        let search = registry.context.search.clone();
        let found = search.query(&query.query, query.agent_id, query.limit).await?;
        let results = found
            .into_iter()
            // Listed under an agent the registry no longer has: the index
            // forgets it at the next start.
            .filter_map(|found| {
                let info = registry.info(&found.agent_id)?;
                let active = registry
                    .manifest(&found.agent_id)
                    .is_some_and(|manifest| manifest.session_id == found.session_id);
                Some(SearchHit {
                    agent_name: info.identity.name,
                    agent_id: found.agent_id,
                    session_id: found.session_id,
                    active,
                    entry_id: found.entry_id,
                    role: found.role,
                    at: found.at,
                    snippet: found.snippet,
                })
            })
            .collect();
        ok(SearchResults { results })
    }))
}
