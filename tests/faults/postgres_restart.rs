//! 1. Postgres restarted (and its backends terminated) while clients append and reconstruct.

use crate::harness::checks::{append_issue, join_all, next_id, verify_all_turns};
use crate::harness::postgres::{PgDb, PostgresBackUp, ensure_postgres_up, pg_admin, pg_ctlcluster};
use crate::harness::service::{Service, call, client, get, outage_issue, retry_pause};
use crate::harness::{Rng, Violations, append_body, seed, tally, tau, thousands};
use reqwest::Method;
use sqlx::Connection;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A writer's append.
    Client,
    /// A writer's reconstruct: it may be answered from the service's memory without the
    /// database (a cached answer, while the checkpoint feed has not yet seen the outage), so
    /// its successes do not say the database is back.
    Reconstruct,
    /// A steady probe of a data route (`GET /v1/conversations/{c}`), every 50 ms.
    Data,
    /// `GET /readyz`, every 100 ms.
    Ready,
    /// A fresh connection to the service's database, straight from the test, every 50 ms: when
    /// Postgres itself was unreachable.
    Db,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    sent: f64,
    received: f64,
    /// 0: no answer.
    status: u16,
    kind: Kind,
}

impl Event {
    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A request to the service's API (not a probe of readiness or of the database).
    fn api(&self) -> bool {
        matches!(self.kind, Kind::Client | Kind::Reconstruct | Kind::Data)
    }

    /// A request the service can only answer through the database.
    fn needs_database(&self) -> bool {
        matches!(self.kind, Kind::Client | Kind::Data)
    }
}

struct Ledger {
    started: Instant,
    events: Mutex<Vec<Event>>,
    violations: Violations,
    stop: AtomicBool,
}

impl Ledger {
    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn record(&self, sent: f64, status: u16, kind: Kind) {
        let received = self.now();
        self.events.lock().unwrap().push(Event {
            sent,
            received,
            status,
            kind,
        });
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

/// One client: its own conversation, appending batches with explicit ids and reconstructing
/// turns it was told are stored.
struct Writer {
    conversation: String,
    next_id: i64,
    cursor: usize,
    /// (id, tau index) of every acknowledged turn.
    acked: Vec<(i64, usize)>,
    rng: Rng,
    stuck: bool,
}

impl Writer {
    /// Appends one batch of 1 to 8 turns, retrying `503`s with the same ids until it is
    /// acknowledged (at most 45 s).
    async fn append(&mut self, http: &reqwest::Client, base: &str, ledger: &Ledger) {
        let n = self.rng.range(1, 8) as usize;
        let start = self.next_id;
        let idx: Vec<usize> = (0..n).map(|k| (self.cursor + k) % tau().len()).collect();
        let body = append_body(start, &idx);
        let url = format!("{base}/v1/conversations/{}/turns", self.conversation);
        let what = format!(
            "append {}[{start}..{}]",
            self.conversation,
            start + n as i64
        );
        let give_up = Instant::now() + Duration::from_secs(45);
        for attempt in 1..=200 {
            let sent = ledger.now();
            match call(http, Method::POST, &url, Some(&body), None).await {
                Err(e) => {
                    ledger.record(sent, 0, Kind::Client);
                    ledger.violations.push(format!("{what}: no answer: {e}"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(a) if a.status == 200 || a.status == 201 => {
                    ledger.record(sent, a.status, Kind::Client);
                    if let Some(issue) = append_issue(&a, start, n) {
                        ledger.violations.push(format!("{what}: {issue}"));
                    }
                    if attempt == 1 && a.status == 200 {
                        ledger
                            .violations
                            .push(format!("{what}: a first attempt was a replay"));
                    }
                    self.acked
                        .extend(idx.iter().enumerate().map(|(k, &i)| (start + k as i64, i)));
                    self.next_id += n as i64;
                    self.cursor += n;
                    return;
                }
                Ok(a) if a.status == 503 => {
                    ledger.record(sent, a.status, Kind::Client);
                    if let Some(issue) = outage_issue(&a) {
                        ledger
                            .violations
                            .push(format!("{what}: outage answer: {issue}"));
                    }
                    tokio::time::sleep(retry_pause(&a)).await;
                }
                Ok(a) => {
                    ledger.record(sent, a.status, Kind::Client);
                    ledger
                        .violations
                        .push(format!("{what}: answered {} {}", a.status, a.body));
                    self.stuck = true;
                    return;
                }
            }
            if Instant::now() > give_up {
                break;
            }
        }
        ledger
            .violations
            .push(format!("{what}: not acknowledged within 45 s"));
        self.stuck = true;
    }

    /// Reconstructs one acknowledged turn: its raw text, or a `503` during the outage; never a
    /// `404`.
    async fn reconstruct(&mut self, http: &reqwest::Client, base: &str, ledger: &Ledger) {
        let (id, i) = self.acked[self.rng.below(self.acked.len() as u64) as usize];
        let url = format!(
            "{base}/v1/conversations/{}/reconstruct/{id}",
            self.conversation
        );
        let what = format!("reconstruct {}/{id}", self.conversation);
        let sent = ledger.now();
        match get(http, &url).await {
            Err(e) => {
                ledger.record(sent, 0, Kind::Reconstruct);
                ledger.violations.push(format!("{what}: no answer: {e}"));
            }
            Ok(a) => {
                ledger.record(sent, a.status, Kind::Reconstruct);
                match a.status {
                    200 => {
                        if a.body["text"].as_str() != Some(tau()[i].content.as_str())
                            || a.body["source"] != "live"
                        {
                            ledger
                                .violations
                                .push(format!("{what}: not the raw turn: {}", a.body));
                        }
                    }
                    503 => {
                        if let Some(issue) = outage_issue(&a) {
                            ledger
                                .violations
                                .push(format!("{what}: outage answer: {issue}"));
                        }
                    }
                    404 => ledger
                        .violations
                        .push(format!("{what}: 404 for an acknowledged turn: {}", a.body)),
                    status => ledger
                        .violations
                        .push(format!("{what}: answered {status} {}", a.body)),
                }
            }
        }
    }

    /// Mixed traffic until the round stops (bounded: 20,000 requests, 120 s).
    async fn run(mut self, http: reqwest::Client, base: String, ledger: Arc<Ledger>) -> Self {
        let deadline = Instant::now() + Duration::from_secs(120);
        for _ in 0..20_000 {
            if ledger.stopped() || self.stuck || Instant::now() > deadline {
                break;
            }
            if self.acked.is_empty() || self.rng.below(100) < 55 {
                self.append(&http, &base, &ledger).await;
            } else {
                self.reconstruct(&http, &base, &ledger).await;
            }
        }
        self
    }
}

/// Connects to `url` every 50 ms until the round stops (bounded: 5,000 attempts); a success is
/// recorded as 200, a failure as 503.
async fn db_probe(url: String, ledger: Arc<Ledger>) {
    for _ in 0..5_000 {
        if ledger.stopped() {
            break;
        }
        let sent = ledger.now();
        let connected =
            tokio::time::timeout(Duration::from_secs(1), sqlx::PgConnection::connect(&url)).await;
        let status = match connected {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
                200
            }
            _ => 503,
        };
        ledger.record(sent, status, Kind::Db);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `url` every `every` until the round stops (bounded: 5,000 polls).
async fn probe(
    http: reqwest::Client,
    url: String,
    ledger: Arc<Ledger>,
    kind: Kind,
    every: Duration,
) {
    for _ in 0..5_000 {
        if ledger.stopped() {
            break;
        }
        let sent = ledger.now();
        match get(&http, &url).await {
            Ok(a) => {
                ledger.record(sent, a.status, kind);
                match a.status {
                    200 => {}
                    503 => {
                        if let Some(issue) = outage_issue(&a) {
                            ledger
                                .violations
                                .push(format!("{url}: outage answer: {issue}"));
                        }
                    }
                    status => ledger
                        .violations
                        .push(format!("{url}: answered {status} {}", a.body)),
                }
            }
            Err(e) => {
                ledger.record(sent, 0, kind);
                ledger.violations.push(format!("{url}: no answer: {e}"));
            }
        }
        tokio::time::sleep(every).await;
    }
}

#[derive(Debug, Clone, Copy)]
enum PgFault {
    /// `pg_ctlcluster <version> main restart`.
    Restart,
    /// `pg_ctlcluster <version> main stop`, 3 s down, `start`: an outage longer than the
    /// service's wait for a connection (1 s), so requests and `/readyz` must answer 503.
    Down,
    /// Three sweeps of `pg_terminate_backend` over the service's connections, 300 ms apart.
    Terminate,
}

/// When the outage began and when the service answered again, in ledger seconds.
struct Recovery {
    outage_began: Option<f64>,
    recovered: Option<f64>,
}

/// The outage begins with the first non-2xx data answer at or after `t0`; the service has
/// recovered at the first 2xx of a request sent after that (or after `t0` if nothing failed).
fn recovery(events: &[Event], t0: f64) -> Recovery {
    let data = || events.iter().filter(|e| e.api());
    let outage_began = data()
        .filter(|e| e.received >= t0 && !e.ok())
        .map(|e| e.received)
        .min_by(f64::total_cmp);
    let since = outage_began.unwrap_or(t0);
    let recovered = data()
        .filter(|e| e.needs_database() && e.ok() && e.sent >= since)
        .map(|e| e.received)
        .min_by(f64::total_cmp);
    Recovery {
        outage_began,
        recovered,
    }
}

struct RoundFigures {
    fault: String,
    unreachable: f64,
    outage_answers: BTreeMap<u16, u64>,
    readyz_during: BTreeMap<u16, u64>,
    recovery: f64,
    outage_seen: bool,
    late_failures: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn postgres_restarted_while_clients_append_and_reconstruct_loses_nothing() {
    let _postgres_back_up = PostgresBackUp;
    ensure_postgres_up();
    let seed = seed();
    let test_started = Instant::now();
    let mut rng = Rng(seed);
    let db = PgDb::new("restart");
    let service = Service::start(
        "pg-restart",
        &[
            ("DATABASE_URL", db.url()),
            // A request waits at most this long for a connection before it is answered 503.
            ("GATEKEEPER_DB_ACQUIRE_TIMEOUT_SECS", "1".into()),
            ("GATEKEEPER_REQUEST_TIMEOUT_SECS", "10".into()),
        ],
    )
    .await;
    let http = client(Duration::from_secs(20));
    let ledger = Arc::new(Ledger {
        started: Instant::now(),
        events: Mutex::new(Vec::new()),
        violations: Violations::default(),
        stop: AtomicBool::new(false),
    });

    let mut writers: Vec<Writer> = (0..WRITERS)
        .map(|w| Writer {
            conversation: format!("pg-writer-{w}"),
            next_id: 0,
            cursor: rng.below(tau().len() as u64) as usize,
            acked: Vec::new(),
            rng: rng.fork(),
            stuck: false,
        })
        .collect();
    for w in &mut writers {
        w.append(&http, &service.base, &ledger).await;
    }

    let mut rounds = Vec::new();
    for fault in [PgFault::Restart, PgFault::Down, PgFault::Terminate] {
        ledger.stop.store(false, Ordering::SeqCst);
        let mut tasks = Vec::new();
        for w in writers.drain(..) {
            tasks.push(tokio::spawn(w.run(
                http.clone(),
                service.base.clone(),
                ledger.clone(),
            )));
        }
        let probes = vec![
            tokio::spawn(probe(
                http.clone(),
                service.conversation_url("pg-writer-0", ""),
                ledger.clone(),
                Kind::Data,
                Duration::from_millis(50),
            )),
            tokio::spawn(probe(
                http.clone(),
                format!("{}/readyz", service.base),
                ledger.clone(),
                Kind::Ready,
                Duration::from_millis(100),
            )),
            tokio::spawn(db_probe(db.url(), ledger.clone())),
        ];
        tokio::time::sleep(Duration::from_millis(1500)).await;

        let t0 = ledger.now();
        let fault_name = match fault {
            PgFault::Restart => {
                let took = tokio::task::spawn_blocking(|| pg_ctlcluster("restart"))
                    .await
                    .unwrap();
                format!("restart (pg_ctlcluster, {:.1} s)", took.as_secs_f64())
            }
            PgFault::Down => {
                let took = tokio::task::spawn_blocking(|| {
                    let stop = pg_ctlcluster("stop");
                    std::thread::sleep(Duration::from_secs(3));
                    stop + Duration::from_secs(3) + pg_ctlcluster("start")
                })
                .await
                .unwrap();
                format!(
                    "stop, 3 s down, start (pg_ctlcluster, {:.1} s)",
                    took.as_secs_f64()
                )
            }
            PgFault::Terminate => {
                let mut terminated = 0;
                for sweep in 0..3 {
                    if sweep > 0 {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                    }
                    let mut admin = pg_admin().await.expect("an admin connection");
                    let n: i64 = sqlx::query_scalar(
                        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) \
                         FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                    )
                    .bind(db.name())
                    .fetch_one(&mut admin)
                    .await
                    .expect("pg_terminate_backend");
                    terminated += n;
                }
                format!("pg_terminate_backend (3 sweeps, {terminated} backends)")
            }
        };
        let command_done = ledger.now();

        // Wait (at most 30 s) for the first success after the outage.
        let deadline = Instant::now() + Duration::from_secs(30);
        let recovered = loop {
            let r = recovery(&ledger.events(), t0);
            let settled = ledger.now() > command_done + 0.5;
            if let (true, Some(at)) = (settled, r.recovered) {
                break Some((at, r.outage_began.is_some()));
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let Some((recovered_at, outage_seen)) = recovered else {
            ledger.stop.store(true, Ordering::SeqCst);
            panic!(
                "{fault_name}: the service did not answer a data request successfully within 30 s; log {}",
                service.log.0.display()
            );
        };
        // Keep the traffic on a while after recovery: it must stay healthy.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        ledger.stop.store(true, Ordering::SeqCst);
        writers = join_all(tasks, Duration::from_secs(120), "writers").await;
        join_all(probes, Duration::from_secs(30), "probes").await;

        let events = ledger.events();
        let mut outage_answers = BTreeMap::new();
        let mut readyz_during = BTreeMap::new();
        let mut late_failures = 0;
        // How long Postgres itself refused connections: from the first failed connection after
        // the fault to the next successful one.
        let db_down = events
            .iter()
            .filter(|e| e.kind == Kind::Db && e.sent >= t0 && !e.ok())
            .map(|e| e.sent)
            .min_by(f64::total_cmp);
        let unreachable = db_down.map_or(0.0, |down| {
            events
                .iter()
                .filter(|e| e.kind == Kind::Db && e.sent > down && e.ok())
                .map(|e| e.sent)
                .min_by(f64::total_cmp)
                .unwrap_or(ledger.now())
                - down
        });
        for e in events
            .iter()
            .filter(|e| e.received >= t0 && e.kind != Kind::Db)
        {
            if e.api() && !e.ok() {
                *outage_answers.entry(e.status).or_insert(0) += 1;
            }
            if e.kind == Kind::Ready && e.received <= recovered_at {
                *readyz_during.entry(e.status).or_insert(0) += 1;
            }
            // Once recovered (and a second for connections the fault broke), no more failures.
            // `/readyz` answers with the last background probe's verdict, which can be its
            // interval (1 s) plus its own wait for a connection (1 s) old: two seconds for it.
            let grace = if e.kind == Kind::Ready { 2.0 } else { 1.0 };
            if !e.ok() && e.sent > recovered_at + grace {
                late_failures += 1;
            }
        }
        let last_ready = events
            .iter()
            .filter(|e| e.kind == Kind::Ready)
            .max_by(|a, b| a.received.total_cmp(&b.received))
            .map(|e| e.status);
        if last_ready != Some(200) {
            ledger.violations.push(format!(
                "{fault_name}: /readyz answered {last_ready:?} after recovery"
            ));
        }
        // A readiness check waits up to the acquire timeout (1 s) for a connection: an outage
        // longer than that plus the probe interval must show.
        if unreachable > 1.5 && readyz_during.get(&503).is_none_or(|n| *n == 0) {
            ledger.violations.push(format!(
                "{fault_name}: Postgres was unreachable for {unreachable:.1} s but /readyz never answered 503: {}",
                tally(&readyz_during)
            ));
        }
        if recovered_at - t0 > 10.0 {
            ledger.violations.push(format!(
                "{fault_name}: recovery took {:.1} s",
                recovered_at - t0
            ));
        }
        if late_failures > 0 {
            ledger.violations.push(format!(
                "{fault_name}: {late_failures} failures more than 1 s after recovery"
            ));
        }
        rounds.push(RoundFigures {
            fault: fault_name,
            unreachable,
            outage_answers,
            readyz_during,
            recovery: recovered_at - t0,
            outage_seen,
            late_failures,
        });
    }

    // Everything acknowledged is there, byte-exact, and nothing else.
    let ready = get(&http, &format!("{}/readyz", service.base)).await;
    assert!(
        ready.as_ref().is_ok_and(|a| a.status == 200),
        "/readyz after the faults: {ready:?}"
    );
    for w in &writers {
        let stored = next_id(&http, &service, &w.conversation).await;
        if stored != Some(w.next_id) {
            ledger.violations.push(format!(
                "{}: next_id {stored:?}, but {} turns were acknowledged",
                w.conversation, w.next_id
            ));
        }
    }
    let work = writers
        .iter()
        .map(|w| (w.conversation.clone(), w.acked.clone()))
        .collect();
    let (checked, issues) = verify_all_turns(&http, &service, work).await;
    let lost = issues.len();
    for issue in issues {
        ledger.violations.push(issue);
    }
    let events = ledger.events();
    let count = |pred: &dyn Fn(&Event) -> bool| events.iter().filter(|e| pred(e)).count() as u64;
    let requests = count(&|e| e.kind != Kind::Db);
    let five_hundreds = count(&|e| e.kind != Kind::Db && e.status >= 500 && e.status != 503);
    // Every request names an acknowledged turn or an existing conversation: any 404 is wrong.
    let not_found = count(&|e| e.api() && e.status == 404);
    let rounds_text: Vec<String> = rounds
        .iter()
        .map(|r| {
            format!(
                "{}: Postgres unreachable {:.2} s, outage answers {}, readyz during outage {}, recovery {:.2} s{}",
                r.fault,
                r.unreachable,
                tally(&r.outage_answers),
                tally(&r.readyz_during),
                r.recovery,
                if r.outage_seen { "" } else { " (no request failed)" }
            )
        })
        .collect();
    eprintln!(
        "pg-restart: {} acknowledged appends checked byte-exact, {lost} lost; {}; {} requests, {} × 5xx other than 503, {} × 404, {} late failures, {} violations; {:.1} s; seed {seed}",
        thousands(checked),
        rounds_text.join("; "),
        thousands(requests),
        five_hundreds,
        not_found,
        rounds.iter().map(|r| r.late_failures).sum::<u64>(),
        ledger.violations.count(),
        test_started.elapsed().as_secs_f64(),
    );
    ledger
        .violations
        .assert_none("pg-restart", std::slice::from_ref(&service.log));
}
