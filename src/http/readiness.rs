//! `/readyz` from state a background probe keeps, so the endpoint (unauthenticated) costs no
//! query: a flood of it cannot fill the database pool.

use crate::store::Store;
use std::sync::Mutex;
use std::time::Duration;

/// How often the probe asks the database, and how long it waits for an answer. An outage shows
/// on `/readyz` within `PROBE_EVERY + PROBE_TIMEOUT`.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The last probe's verdict: `None` ready, or why not.
#[derive(Debug)]
pub struct Readiness(Mutex<Option<String>>);

impl Default for Readiness {
    fn default() -> Self {
        Self(Mutex::new(Some(
            "starting: the database was not probed yet".into(),
        )))
    }
}

impl Readiness {
    /// `Ok` when the last probe found the database reachable and migrated.
    pub fn check(&self) -> Result<(), String> {
        match &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(()),
            Some(why) => Err(why.clone()),
        }
    }

    /// Asks the database once and keeps the answer.
    pub async fn probe(&self, store: &impl Store) {
        let verdict = match tokio::time::timeout(PROBE_TIMEOUT, store.ready()).await {
            Ok(Ok(true)) => None,
            Ok(Ok(false)) => Some("migrations are not applied yet".to_owned()),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!(
                "the database did not answer within {} s",
                PROBE_TIMEOUT.as_secs()
            )),
        };
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = verdict;
    }

    /// Probes every [`PROBE_EVERY`], forever (the caller aborts it).
    pub async fn keep_probing(&self, store: impl Store) {
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            self.probe(&store).await;
        }
    }
}
