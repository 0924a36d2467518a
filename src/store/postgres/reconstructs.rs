//! Reconstruct reads in batches: the lookups that arrive while earlier ones are at the database
//! go together in the next statement, one round trip for all of them.
//!
//! A lookup alone costs Postgres a statement (bind, execute, a protocol exchange and two
//! context switches) and the service a send and a receive; the row itself is a few index
//! probes. Under load most of a lone lookup's cost is that overhead, so the lookups queue here
//! and at most [`MAX_IN_FLIGHT`] statements carry them. An idle service sends each lookup at
//! once, alone: nothing waits for a batch to fill.
//!
//! Each lookup is its own request's, read after the request arrived on the pool it was routed
//! to (primary or replica), so batching changes no answer: it only shares the round trip.

use crate::domain::{ConversationId, TenantId};
use crate::store::profiles::deciding_anchors;
use crate::store::{Error, ReconstructRow, Result, SpanningCheckpoint, decode};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgRow};
use sqlx::types::Json;
use sqlx::{PgPool, Row};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// Statements in flight at once per pool: one at the database while the service reads the
/// last one's rows. Each has a connection of its own, beside the pool's.
pub const MAX_IN_FLIGHT: usize = 2;

/// The `application_name` of these connections, as `pg_stat_activity` shows it.
pub const APPLICATION_NAME: &str = "gatekeeper reconstruct";

/// Lookups one statement carries at most.
pub(super) const MAX_BATCH: usize = 64;

/// The turn, its deciding checkpoint, and the summary only when it covers, for each
/// (tenant, conversation, turn) of the arrays; `ord` says which lookup a row answers (a turn
/// the log does not hold has no row). The lateral joins keep each lookup on the primary keys.
const BATCH_SQL: &str = "SELECT r.ord, t.role, t.content, t.anchors, t.anchors_given, c.checkpoint_id, c.covered_turn, \
       CASE WHEN c.covered_turn THEN c.summary END AS summary, \
       CASE WHEN c.covered_turn AND t.anchors_given = false THEN t.profile END AS profile, \
       CASE WHEN c.covered_turn THEN \
         substring(c.candidates_used from (2 * (t.id - c.from_id) + 1)::int for 2) \
       END AS used, \
       CASE WHEN NOT c.covered_turn THEN \
         substring(c.reasons from (t.id - c.from_id + 1)::int for 1) \
       END AS reason \
     FROM unnest($1::text[], $2::text[], $3::int8[]) WITH ORDINALITY AS r(tenant, conversation, id, ord) \
     CROSS JOIN LATERAL ( \
       SELECT t.id, t.role, t.content, t.anchors, t.anchors_given, t.profile FROM turns t \
       WHERE t.tenant = r.tenant AND t.conversation = r.conversation AND t.id = r.id \
     ) t \
     LEFT JOIN LATERAL ( \
       SELECT k.checkpoint_id, k.covered @> t.id AS covered_turn, k.summary, k.reasons, \
         k.from_id, k.candidates_used \
       FROM checkpoints k \
       WHERE k.tenant = r.tenant AND k.conversation = r.conversation \
         AND k.from_id <= t.id AND t.id <= k.advanced_to \
       ORDER BY k.checkpoint_id DESC LIMIT 1 \
     ) c ON true";

type Answer = Result<Option<ReconstructRow>>;

struct Lookup {
    tenant: TenantId,
    conversation: ConversationId,
    turn: i64,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Lookup>,
    in_flight: usize,
    /// Connections between senders. None once closed.
    idle: Option<Vec<PgConnection>>,
}

/// The reconstruct lookups bound for one database (the primary, or a replica).
pub struct Reconstructs {
    /// Made as the pool's own connections are (the same server, database and TLS), but held
    /// here rather than pooled, and planning generically:
    /// - sqlx's pool checks a connection with a round trip when it hands it out and again when
    ///   it takes it back, so a pooled statement costs three round trips;
    /// - Postgres keeps making a custom plan for a statement over an array whose length it can
    ///   see, again at every execution, and planning cost more than reading (one lookup alone:
    ///   8,900 statements/s with custom plans, 22,400 with the generic one).
    options: PgConnectOptions,
    connect_timeout: Duration,
    queue: Mutex<Queue>,
}

impl std::fmt::Debug for Reconstructs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconstructs").finish_non_exhaustive()
    }
}

impl Reconstructs {
    /// Batches to the database of `pool`, on at most [`MAX_IN_FLIGHT`] connections of their
    /// own, each made when first needed, within the pool's acquire timeout.
    pub fn new(pool: &PgPool) -> Arc<Self> {
        Arc::new(Self {
            options: (*pool.connect_options())
                .clone()
                .application_name(APPLICATION_NAME)
                .options([("plan_cache_mode", "force_generic_plan")]),
            connect_timeout: pool.options().get_acquire_timeout(),
            queue: Mutex::new(Queue {
                idle: Some(Vec::new()),
                ..Queue::default()
            }),
        })
    }

    /// Closes the idle connections; a sender that is still out closes its own when it ends,
    /// and lookups from now on fail as a closed pool's do.
    pub async fn close(&self) {
        let idle = self.lock().idle.take().unwrap_or_default();
        for connection in idle {
            let _ = connection.close().await;
        }
    }

    /// The turn's row, read in the next statement to leave for the database.
    pub async fn read(
        self: &Arc<Self>,
        tenant: &TenantId,
        conversation: &ConversationId,
        turn: i64,
    ) -> Answer {
        let (answer, answered) = oneshot::channel();
        let lookup = Lookup {
            tenant: tenant.clone(),
            conversation: conversation.clone(),
            turn,
            answer,
        };
        let start_sender = {
            let mut queue = self.lock();
            if queue.idle.is_none() {
                return Err(sqlx::Error::PoolClosed.into());
            }
            queue.waiting.push(lookup);
            let start = queue.in_flight < MAX_IN_FLIGHT;
            queue.in_flight += usize::from(start);
            start
        };
        if start_sender {
            // A task of its own: a request that goes away (its client hung up) must not take
            // the other lookups of its statement with it.
            tokio::spawn(Arc::clone(self).send_batches());
        }
        answered.await.unwrap_or_else(|_| {
            Err(Error::invariant(
                "a reconstruct batch ended without answering",
            ))
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // The queue is left consistent at every step, so a panic elsewhere poisons nothing.
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends what waits, in statements of at most [`MAX_BATCH`], until nothing does.
    async fn send_batches(self: Arc<Self>) {
        let mut slot = InFlight {
            reconstructs: &self,
            held: true,
        };
        let mut connection: Option<PgConnection> = self.lock().idle.as_mut().and_then(Vec::pop);
        loop {
            let batch: Vec<Lookup> = {
                let mut queue = self.lock();
                let n = queue.waiting.len().min(MAX_BATCH);
                if n == 0 {
                    // Under the lock that queued the last lookup: one queued after this sees
                    // the free slot and starts a sender.
                    queue.in_flight -= 1;
                    slot.held = false;
                    if let (Some(idle), Some(connection)) = (queue.idle.as_mut(), connection) {
                        idle.push(connection);
                    }
                    return;
                }
                queue.waiting.drain(..n).collect()
            };
            metrics::histogram!("gatekeeper_reconstruct_batch_lookups").record(batch.len() as f64);
            match self.answer(&mut connection, &batch).await {
                Ok(answers) => {
                    for (lookup, answer) in batch.into_iter().zip(answers) {
                        let _ = lookup.answer.send(answer);
                    }
                }
                Err(e) => {
                    // The next batch starts on a new connection: this one may be broken.
                    connection = None;
                    for lookup in batch {
                        let _ = lookup.answer.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// The batch's answers. A connection that waited idle may have died meanwhile (a server
    /// restart), so an unavailable database on it is tried once more on a new connection, as
    /// the pool's check before handing out a connection would have.
    async fn answer(
        &self,
        connection: &mut Option<PgConnection>,
        batch: &[Lookup],
    ) -> Result<Vec<Answer>> {
        if let Some(c) = connection.as_mut() {
            match fetch(c, batch).await {
                Err(Error::Unavailable(_)) => *connection = None,
                answered => return answered,
            }
        }
        let c = connection.insert(self.connect().await?);
        fetch(c, batch).await
    }

    async fn connect(&self) -> Result<PgConnection> {
        match tokio::time::timeout(
            self.connect_timeout,
            PgConnection::connect_with(&self.options),
        )
        .await
        {
            Ok(connected) => Ok(connected?),
            Err(_) => Err(sqlx::Error::PoolTimedOut.into()),
        }
    }
}

/// One statement for the batch: the answer of each lookup, in the batch's order.
async fn fetch(connection: &mut PgConnection, batch: &[Lookup]) -> Result<Vec<Answer>> {
    let tenants: Vec<&str> = batch.iter().map(|l| l.tenant.as_str()).collect();
    let conversations: Vec<&str> = batch.iter().map(|l| l.conversation.as_str()).collect();
    let turns: Vec<i64> = batch.iter().map(|l| l.turn).collect();
    let rows = sqlx::query(BATCH_SQL)
        .bind(tenants)
        .bind(conversations)
        .bind(turns)
        .fetch_all(connection)
        .await?;
    let mut answers: Vec<Answer> = (0..batch.len()).map(|_| Ok(None)).collect();
    for row in &rows {
        let ord: i64 = row.try_get("ord")?;
        let slot = usize::try_from(ord - 1)
            .ok()
            .and_then(|i| answers.get_mut(i))
            .ok_or_else(|| Error::invariant(format!("a reconstruct row for lookup {ord}")))?;
        // A row that does not decode fails its own lookup only.
        *slot = decode_reconstruct_row(row).map(Some);
    }
    Ok(answers)
}

/// Gives the statement slot back if the sender ends before its queue is empty (a panic, or
/// the runtime shutting down).
struct InFlight<'a> {
    reconstructs: &'a Reconstructs,
    held: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.held {
            self.reconstructs.lock().in_flight -= 1;
        }
    }
}

fn decode_reconstruct_row(row: &PgRow) -> Result<ReconstructRow> {
    let Json(anchors): Json<Vec<String>> = row.try_get("anchors")?;
    let deciding_anchors = deciding_anchors(
        anchors,
        row.try_get("anchors_given")?,
        row.try_get("profile")?,
        row.try_get("used")?,
    )?;
    let checkpoint = match row.try_get::<Option<i64>, _>("checkpoint_id")? {
        None => None,
        Some(checkpoint_id) => {
            let summary: Option<Vec<u8>> = row.try_get("summary")?;
            let reason: Option<Vec<u8>> = row.try_get("reason")?;
            Some(SpanningCheckpoint {
                checkpoint_id,
                covered: row.try_get("covered_turn")?,
                summary: summary.map(decode::text).transpose()?,
                reason: super::reasons::decode(reason.as_deref())?,
            })
        }
    };
    Ok(ReconstructRow {
        role: decode::role(row.try_get("role")?)?,
        content: decode::text(row.try_get("content")?)?,
        deciding_anchors,
        checkpoint,
    })
}
