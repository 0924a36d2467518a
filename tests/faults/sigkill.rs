//! 2. SIGKILL in the middle of batch appends and proposals, on Postgres and on SQLite.

use crate::harness::checks::{append_issue, checkpoint_issue, join_all, next_id, verify_all_turns};
use crate::harness::db::{Backend, Db, backend_name};
use crate::harness::postgres::ensure_postgres_up;
use crate::harness::service::{LogFile, Service, all_checkpoints, call, client, get};
use crate::harness::{Rng, Violations, append_body, seed, tau, thousands};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KILL_ROUNDS: usize = 3;
const KILL_APPENDERS: usize = 4;
const KILL_PROPOSERS: usize = 4;
/// Turns in each proposer's conversation: enough for every proposal of every round.
const PROPOSAL_TURNS: i64 = 600;

/// A batch of tau-bench turns with explicit ids.
#[derive(Debug, Clone)]
struct Batch {
    start: i64,
    idx: Vec<usize>,
}

impl Batch {
    fn body(&self) -> Value {
        append_body(self.start, &self.idx)
    }

    fn turns(&self) -> Vec<(i64, usize)> {
        self.idx
            .iter()
            .enumerate()
            .map(|(k, &i)| (self.start + k as i64, i))
            .collect()
    }
}

struct KillAppender {
    conversation: String,
    next_id: i64,
    cursor: usize,
    acked: Vec<Batch>,
    /// Sent, no answer: the kill came first.
    pending: Option<Batch>,
    /// When the unanswered request was sent.
    pending_sent: Option<Instant>,
    rng: Rng,
}

impl KillAppender {
    /// Batches of 5 to 40 turns back to back until a request gets no answer (bounded).
    async fn run(
        mut self,
        http: reqwest::Client,
        base: String,
        violations: Arc<Violations>,
    ) -> Self {
        let url = format!("{base}/v1/conversations/{}/turns", self.conversation);
        let deadline = Instant::now() + Duration::from_secs(30);
        for _ in 0..2_000 {
            if Instant::now() > deadline {
                break;
            }
            let n = self.rng.range(5, 40) as usize;
            let batch = Batch {
                start: self.next_id,
                idx: (0..n).map(|k| (self.cursor + k) % tau().len()).collect(),
            };
            let sent = Instant::now();
            match call(&http, Method::POST, &url, Some(&batch.body()), None).await {
                Err(_) => {
                    self.pending = Some(batch);
                    self.pending_sent = Some(sent);
                    break;
                }
                Ok(a) if a.status == 201 => {
                    if let Some(issue) = append_issue(&a, batch.start, n) {
                        violations.push(format!("{}: {issue}", self.conversation));
                    }
                    self.next_id += n as i64;
                    self.cursor += n;
                    self.acked.push(batch);
                }
                Ok(a) => {
                    violations.push(format!(
                        "{}: append answered {} {}",
                        self.conversation, a.status, a.body
                    ));
                    break;
                }
            }
        }
        self
    }
}

/// A proposal as sent: its Idempotency-Key, body and what it must persist.
#[derive(Debug, Clone)]
struct Sent {
    key: String,
    body: Value,
    from: i64,
    to: i64,
    summary: String,
    checkpoint_id: Option<i64>,
}

/// Proposes successive two-turn ranges of its own conversation, each with the previous
/// checkpoint as `expected_checkpoint` and its own Idempotency-Key.
struct KillProposer {
    c: usize,
    conversation: String,
    nonce: u64,
    next_from: i64,
    latest: Option<i64>,
    done: Vec<Sent>,
    pending: Option<Sent>,
    pending_sent: Option<Instant>,
}

impl KillProposer {
    fn next_proposal(&self) -> Sent {
        let (c, seq) = (self.c, self.done.len() + 1);
        let (from, to) = (self.next_from, self.next_from + 1);
        let summary = format!(
            "Checkpoint {seq} of proposer {c}: K{c}T{from} and K{c}T{to} are carried over."
        );
        Sent {
            key: format!("faults-{:x}-{c}-{seq}", self.nonce),
            body: json!({
                "from": from, "to": to, "summary": summary, "summary_budget": 50_000,
                "expected_checkpoint": self.latest
            }),
            from,
            to,
            summary,
            checkpoint_id: None,
        }
    }

    fn accept(&mut self, mut sent: Sent, checkpoint_id: i64) {
        sent.checkpoint_id = Some(checkpoint_id);
        self.latest = Some(checkpoint_id);
        self.next_from = sent.to + 1;
        self.done.push(sent);
    }

    fn url(&self, base: &str) -> String {
        format!("{base}/v1/conversations/{}/compactions", self.conversation)
    }

    async fn run(
        mut self,
        http: reqwest::Client,
        base: String,
        violations: Arc<Violations>,
    ) -> Self {
        let url = self.url(&base);
        let deadline = Instant::now() + Duration::from_secs(30);
        for _ in 0..2_000 {
            if Instant::now() > deadline || self.next_from + 1 >= PROPOSAL_TURNS {
                break;
            }
            let sent = self.next_proposal();
            let sent_at = Instant::now();
            match call(&http, Method::POST, &url, Some(&sent.body), Some(&sent.key)).await {
                Err(_) => {
                    self.pending = Some(sent);
                    self.pending_sent = Some(sent_at);
                    break;
                }
                Ok(a) if a.status == 201 => match a.body["checkpoint_id"].as_i64() {
                    Some(id) if id == self.done.len() as i64 + 1 => self.accept(sent, id),
                    _ => {
                        violations.push(format!(
                            "{}: proposal {} answered {}",
                            self.conversation, sent.key, a.body
                        ));
                        break;
                    }
                },
                Ok(a) => {
                    violations.push(format!(
                        "{}: proposal {} answered {} {}",
                        self.conversation, sent.key, a.status, a.body
                    ));
                    break;
                }
            }
        }
        self
    }

    /// Checks every checkpoint of the conversation is whole and is one that was sent; returns
    /// the id under which the pending proposal was persisted, if it was.
    async fn check_checkpoints(
        &self,
        http: &reqwest::Client,
        service: &Service,
        violations: &Violations,
    ) -> Option<i64> {
        let c = &self.conversation;
        let list = match all_checkpoints(http, &service.conversation_url(c, "/compactions")).await {
            Ok(list) => list,
            Err(e) => {
                violations.push(format!("{c}: {e}"));
                return None;
            }
        };
        let mut ids: Vec<i64> = list
            .iter()
            .filter_map(|c| c["checkpoint_id"].as_i64())
            .collect();
        ids.sort();
        let sent: HashMap<&str, &Sent> = self
            .done
            .iter()
            .chain(self.pending.as_ref())
            .map(|s| (s.summary.as_str(), s))
            .collect();
        let mut found: HashMap<String, i64> = HashMap::new();
        for &id in &ids {
            let url = service.conversation_url(c, &format!("/compactions/{id}"));
            let body = match get(http, &url).await {
                Ok(a) if a.status == 200 => a.body,
                other => {
                    violations.push(format!("{c}: checkpoint {id}: {other:?}"));
                    continue;
                }
            };
            let summary = body["summary"].as_str().unwrap_or_default().to_owned();
            let expected = sent
                .get(summary.as_str())
                .map(|s| (s.from, s.to, s.summary.as_str()));
            if let Some(issue) = checkpoint_issue(&body, expected) {
                violations.push(format!("{c}: checkpoint {id} is not whole: {issue}"));
            }
            if found.insert(summary, id).is_some() {
                violations.push(format!("{c}: checkpoint {id} persists a proposal twice"));
            }
        }
        for s in &self.done {
            if found.get(&s.summary) != s.checkpoint_id.as_ref() {
                violations.push(format!(
                    "{c}: acknowledged checkpoint {:?} ({}) is missing",
                    s.checkpoint_id, s.key
                ));
            }
        }
        let pending = self
            .pending
            .as_ref()
            .and_then(|s| found.get(&s.summary).copied());
        let expected_ids: Vec<i64> =
            (1..=(self.done.len() + usize::from(pending.is_some())) as i64).collect();
        if ids != expected_ids {
            violations.push(format!(
                "{c}: checkpoint ids {ids:?}, expected {expected_ids:?}"
            ));
        }
        pending
    }
}

/// Whether every turn of `batch` is stored with its content (`Some(true)`), none is
/// (`Some(false)`), or some are and some are not (`None`: a torn batch, reported).
async fn batch_presence(
    http: &reqwest::Client,
    service: &Service,
    conversation: &str,
    batch: &Batch,
    violations: &Violations,
) -> Option<bool> {
    let mut present = 0;
    let mut absent = 0;
    for (id, i) in batch.turns() {
        let url = service.conversation_url(conversation, &format!("/turns/{id}"));
        match get(http, &url).await {
            Ok(a) if a.status == 200 && a.body["content"].as_str() == Some(&tau()[i].content) => {
                present += 1;
            }
            Ok(a) if a.status == 404 => absent += 1,
            other => {
                violations.push(format!("{conversation} turn {id}: {other:?}"));
                return None;
            }
        }
    }
    let n = batch.idx.len();
    match (present, absent) {
        (p, 0) if p == n => Some(true),
        (0, a) if a == n => Some(false),
        _ => {
            violations.push(format!(
                "{conversation}: batch [{}..{}) is torn: {present} turns present, {absent} absent",
                batch.start,
                batch.start + n as i64
            ));
            None
        }
    }
}

#[derive(Default)]
struct KillFigures {
    kills: Vec<f64>,
    pending_batches: u64,
    committed_batches: u64,
    pending_proposals: u64,
    committed_proposals: u64,
    /// Unanswered requests sent before the kill (the others were refused after it).
    in_flight_batches: u64,
    in_flight_proposals: u64,
    torn: u64,
    batch_replays: (u64, u64),
    proposal_replays: (u64, u64),
}

async fn sigkill_mid_writes(backend: Backend) {
    let name = format!("sigkill-{}", backend_name(backend));
    let seed = seed();
    let test_started = Instant::now();
    let mut rng = Rng(seed);
    let db = Db::fresh(backend, "sigkill");
    let env = db.env();
    let violations = Arc::new(Violations::default());
    let nonce = rng.next();
    let mut logs: Vec<Arc<LogFile>> = Vec::new();

    let mut service = Service::start(&name, &env).await;
    let http = client(Duration::from_secs(20));
    let mut appenders: Vec<KillAppender> = (0..KILL_APPENDERS)
        .map(|c| KillAppender {
            conversation: format!("kill-append-{c}"),
            next_id: 0,
            cursor: rng.below(tau().len() as u64) as usize,
            acked: Vec::new(),
            pending: None,
            pending_sent: None,
            rng: rng.fork(),
        })
        .collect();
    let mut proposers: Vec<KillProposer> = Vec::new();
    for c in 0..KILL_PROPOSERS {
        let conversation = format!("kill-propose-{c}");
        let turns: Vec<Value> = (0..PROPOSAL_TURNS)
            .map(|i| {
                let t = &tau()[(c * 1000 + i as usize) % tau().len()];
                json!({ "id": i, "role": t.role, "content": t.content, "anchors": [format!("K{c}T{i}")] })
            })
            .collect();
        let a = call(
            &http,
            Method::POST,
            &service.conversation_url(&conversation, "/turns"),
            Some(&json!({ "turns": turns })),
            None,
        )
        .await
        .expect("the setup append");
        assert_eq!(a.status, 201, "setup append: {}", a.body);
        proposers.push(KillProposer {
            c,
            conversation,
            nonce,
            next_from: 0,
            latest: None,
            done: Vec::new(),
            pending: None,
            pending_sent: None,
        });
    }

    let mut figures = KillFigures::default();
    for _round in 0..KILL_ROUNDS {
        // Clients write back to back; the service dies under them at a random moment.
        let http_round = client(Duration::from_secs(20));
        let append_tasks: Vec<_> = appenders
            .drain(..)
            .map(|a| {
                tokio::spawn(a.run(http_round.clone(), service.base.clone(), violations.clone()))
            })
            .collect();
        let propose_tasks: Vec<_> = proposers
            .drain(..)
            .map(|p| {
                tokio::spawn(p.run(http_round.clone(), service.base.clone(), violations.clone()))
            })
            .collect();
        let kill_after = Duration::from_millis(rng.range(300, 1500));
        tokio::time::sleep(kill_after).await;
        let killed_at = Instant::now();
        service.sigkill().await;
        figures.kills.push(kill_after.as_secs_f64());
        appenders = join_all(append_tasks, Duration::from_secs(60), "appenders").await;
        proposers = join_all(propose_tasks, Duration::from_secs(60), "proposers").await;
        let before_kill = |sent: Option<Instant>| u64::from(sent.is_some_and(|s| s < killed_at));
        for a in &mut appenders {
            figures.in_flight_batches += before_kill(a.pending_sent.take());
        }
        for p in &mut proposers {
            figures.in_flight_proposals += before_kill(p.pending_sent.take());
        }
        logs.push(service.log.clone());

        // The same database, a new process.
        service = Service::start(&name, &env).await;
        let http = client(Duration::from_secs(20));

        // Before any retry: every batch wholly present or wholly absent, every checkpoint whole.
        let mut batch_state = Vec::new();
        for a in &appenders {
            let mut log_end = a.next_id;
            let state = match &a.pending {
                Some(batch) => {
                    figures.pending_batches += 1;
                    let presence =
                        batch_presence(&http, &service, &a.conversation, batch, &violations).await;
                    match presence {
                        Some(true) => {
                            figures.committed_batches += 1;
                            log_end = batch.start + batch.idx.len() as i64;
                        }
                        None => figures.torn += 1,
                        Some(false) => {}
                    }
                    presence
                }
                None => None,
            };
            // A conversation whose first batch never landed does not exist yet: next_id 0.
            let stored = next_id(&http, &service, &a.conversation).await.unwrap_or(0);
            let consistent = match (&a.pending, state) {
                (None, _) => stored == a.next_id,
                (Some(_), Some(_)) => stored == log_end,
                (Some(_), None) => true, // torn: reported already
            };
            if !consistent {
                violations.push(format!(
                    "{}: next_id {stored} after the kill, {} turns acknowledged, the unanswered batch present: {state:?}",
                    a.conversation, a.next_id
                ));
            }
            if let Some(last) = a.acked.last()
                && batch_presence(&http, &service, &a.conversation, last, &violations).await
                    != Some(true)
            {
                violations.push(format!(
                    "{}: the last acknowledged batch is not there after the kill",
                    a.conversation
                ));
            }
            batch_state.push(state);
        }
        let mut proposal_state = Vec::new();
        for p in &proposers {
            let found = p.check_checkpoints(&http, &service, &violations).await;
            if p.pending.is_some() {
                figures.pending_proposals += 1;
                figures.committed_proposals += u64::from(found.is_some());
            }
            proposal_state.push(found);
        }

        // Every client retries what got no answer, with the same ids or Idempotency-Key, and
        // replays its last acknowledged request as if that answer had been lost.
        for (a, state) in appenders.iter_mut().zip(batch_state) {
            let url = service.conversation_url(&a.conversation, "/turns");
            if let Some(last) = a.acked.last() {
                figures.batch_replays.1 += 1;
                match call(&http, Method::POST, &url, Some(&last.body()), None).await {
                    Ok(ans)
                        if ans.status == 200
                            && append_issue(&ans, last.start, last.idx.len()).is_none() =>
                    {
                        figures.batch_replays.0 += 1;
                    }
                    other => violations.push(format!(
                        "{}: replaying the last acknowledged batch: {other:?}",
                        a.conversation
                    )),
                }
            }
            if let Some(batch) = a.pending.take() {
                let n = batch.idx.len();
                let expected = if state == Some(true) { 200 } else { 201 };
                match call(&http, Method::POST, &url, Some(&batch.body()), None).await {
                    Ok(ans)
                        if ans.status == expected
                            && append_issue(&ans, batch.start, n).is_none() => {}
                    other => violations.push(format!(
                        "{}: retrying batch [{}..{}) (present: {state:?}): {other:?}",
                        a.conversation,
                        batch.start,
                        batch.start + n as i64
                    )),
                }
                a.next_id = batch.start + n as i64;
                a.cursor += n;
                a.acked.push(batch);
            }
        }
        for (p, found) in proposers.iter_mut().zip(proposal_state) {
            let url = p.url(&service.base);
            if let Some(last) = p.done.last() {
                figures.proposal_replays.1 += 1;
                match call(&http, Method::POST, &url, Some(&last.body), Some(&last.key)).await {
                    Ok(ans)
                        if ans.status == 201
                            && ans.replayed
                            && ans.body["checkpoint_id"].as_i64() == last.checkpoint_id =>
                    {
                        figures.proposal_replays.0 += 1;
                    }
                    other => violations.push(format!(
                        "{}: replaying acknowledged proposal {} (checkpoint {:?}) must return the stored answer: {other:?}",
                        p.conversation, last.key, last.checkpoint_id
                    )),
                }
            }
            if let Some(sent) = p.pending.take() {
                let expected_id = found.unwrap_or(p.done.len() as i64 + 1);
                match call(&http, Method::POST, &url, Some(&sent.body), Some(&sent.key)).await {
                    Ok(ans)
                        if ans.status == 201
                            && ans.replayed == found.is_some()
                            && ans.body["checkpoint_id"].as_i64() == Some(expected_id) => {}
                    other => violations.push(format!(
                        "{}: retrying proposal {} (persisted as {found:?} before the retry) must give checkpoint {expected_id}: {other:?}",
                        p.conversation, sent.key
                    )),
                }
                p.accept(sent, expected_id);
            }
        }
    }

    // Exactly once: every batch once, in order; one checkpoint per key, in order.
    let http = client(Duration::from_secs(20));
    let mut work = Vec::new();
    let mut batches = 0;
    for a in &appenders {
        batches += a.acked.len();
        let stored = next_id(&http, &service, &a.conversation).await;
        if stored != Some(a.next_id) {
            violations.push(format!(
                "{}: next_id {stored:?}, but {} turns were sent",
                a.conversation, a.next_id
            ));
        }
        work.push((
            a.conversation.clone(),
            a.acked.iter().flat_map(Batch::turns).collect(),
        ));
    }
    let (turns_checked, issues) = verify_all_turns(&http, &service, work).await;
    let lost = issues.len();
    for issue in issues {
        violations.push(issue);
    }
    let mut keys = 0;
    let mut checkpoints = 0;
    for p in &proposers {
        keys += p.done.len();
        let list = all_checkpoints(
            &http,
            &service.conversation_url(&p.conversation, "/compactions"),
        )
        .await;
        let ids: Vec<i64> = list
            .unwrap_or_default()
            .iter()
            .filter_map(|c| c["checkpoint_id"].as_i64())
            .collect();
        checkpoints += ids.len();
        let expected: Vec<i64> = (1..=p.done.len() as i64).rev().collect();
        if ids != expected {
            violations.push(format!(
                "{}: checkpoints {ids:?} for {} keys",
                p.conversation,
                p.done.len()
            ));
        }
        for s in &p.done {
            let id = s.checkpoint_id.unwrap_or(0);
            let url = service.conversation_url(&p.conversation, &format!("/compactions/{id}"));
            match get(&http, &url).await {
                Ok(a) if a.status == 200 => {
                    if let Some(issue) =
                        checkpoint_issue(&a.body, Some((s.from, s.to, s.summary.as_str())))
                    {
                        violations.push(format!("{}: checkpoint {id}: {issue}", p.conversation));
                    }
                }
                other => violations.push(format!("{}: checkpoint {id}: {other:?}", p.conversation)),
            }
        }
        // The same key with another body is refused and changes nothing.
        if let Some(last) = p.done.last() {
            let mut other_body = last.body.clone();
            other_body["summary"] = json!(format!("{} (edited)", last.summary));
            let a = call(
                &http,
                Method::POST,
                &p.url(&service.base),
                Some(&other_body),
                Some(&last.key),
            )
            .await;
            if !a.as_ref().is_ok_and(|a| a.status == 422) {
                violations.push(format!(
                    "{}: key {} reused with another body must be 422: {a:?}",
                    p.conversation, last.key
                ));
            }
        }
    }
    let after = {
        let mut n = 0;
        for p in &proposers {
            let list = all_checkpoints(
                &http,
                &service.conversation_url(&p.conversation, "/compactions"),
            )
            .await;
            n += list.map_or(0, |l| l.len());
        }
        n
    };
    if after != checkpoints {
        violations.push(format!(
            "a reused key with another body changed the checkpoints: {checkpoints} → {after}"
        ));
    }
    logs.push(service.log.clone());

    let kills: Vec<String> = figures.kills.iter().map(|k| format!("{k:.2}")).collect();
    eprintln!(
        "{name}: {} kills at [{}] s; {} batches ({} turns) and {keys} proposals acknowledged or retried, {} turns checked byte-exact, {lost} lost or different; unanswered: {} batches ({} in flight at the kill; {} committed, {} absent, {} torn), {} proposals ({} in flight; {} committed); lost-answer replays: {}/{} batches answered 200 replayed, {}/{} proposals the stored answer; exactly once: {checkpoints} checkpoints for {keys} keys; {} violations; {:.1} s; seed {seed}",
        figures.kills.len(),
        kills.join(", "),
        thousands(batches as u64),
        thousands(turns_checked),
        thousands(turns_checked),
        figures.pending_batches,
        figures.in_flight_batches,
        figures.committed_batches,
        figures.pending_batches - figures.committed_batches - figures.torn,
        figures.torn,
        figures.pending_proposals,
        figures.in_flight_proposals,
        figures.committed_proposals,
        figures.batch_replays.0,
        figures.batch_replays.1,
        figures.proposal_replays.0,
        figures.proposal_replays.1,
        violations.count(),
        test_started.elapsed().as_secs_f64(),
    );
    violations.assert_none(&name, &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn sigkill_mid_appends_and_proposals_on_postgres_converges_to_exactly_once() {
    ensure_postgres_up();
    sigkill_mid_writes(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn sigkill_mid_appends_and_proposals_on_sqlite_converges_to_exactly_once() {
    sigkill_mid_writes(Backend::Sqlite).await;
}
