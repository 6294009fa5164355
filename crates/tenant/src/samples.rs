//! The last traffic sample each remote edge posted for one tenant, which the impact preview
//! replays (`POST /_netacl/v1/edge/sample`, `crate::resources::logs::sample`). In memory only.
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use netacl_eval::RequestInput;

/// The most edges whose samples a tenant keeps.
pub const MAX_EDGES: usize = 16;
/// A posted sample older than this is not replayed (the edge stopped posting).
pub const SAMPLE_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

struct Posted {
    edge: String,
    at: Instant,
    requests: Arc<Vec<RequestInput>>,
}

/// The last sample each remote edge posted for one tenant (see the module docs).
#[derive(Default)]
pub struct PostedSamples(Mutex<Vec<Posted>>);

impl PostedSamples {
    /// Keeps `requests` as `edge`'s sample, replacing its previous one.
    pub fn put(&self, edge: String, requests: Vec<RequestInput>) {
        let mut posted = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        posted.retain(|p| p.edge != edge && p.at.elapsed() < SAMPLE_MAX_AGE);
        if posted.len() >= MAX_EDGES {
            // The least recently posted makes room.
            if let Some(oldest) = (0..posted.len()).min_by_key(|&i| posted[i].at) {
                posted.swap_remove(oldest);
            }
        }
        posted.push(Posted {
            edge,
            at: Instant::now(),
            requests: Arc::new(requests),
        });
    }

    /// The samples in use: each edge's last, younger than [`SAMPLE_MAX_AGE`].
    pub fn current(&self) -> Vec<Arc<Vec<RequestInput>>> {
        let posted = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        posted
            .iter()
            .filter(|p| p.at.elapsed() < SAMPLE_MAX_AGE)
            .map(|p| Arc::clone(&p.requests))
            .collect()
    }
}
