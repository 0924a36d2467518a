//! Reads from a real streaming replica (docs/scaling.md): every read that carries the position of
//! a write it saw is answered from a state that holds that write, while writers append and
//! compact; replay paused (reads without a position go stale, reads with one and the Rust
//! client's never do); the replica stopped mid-load (reads go on from the primary, no errors);
//! the replica promoted away (it stops following, so it must stop answering); and a replica that
//! refuses new sessions while its poll still calls it healthy (each read it fails is answered
//! again by the primary).

use crate::harness::postgres::{PgDb, ensure_postgres_up};
use crate::harness::replica::{ReadOnlyRole, Replica};
use crate::harness::service::{Answer, Service, call, client, get, get_at};
use crate::harness::{Rng, Violations, seed, tau};
use reqwest::Method;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WRITERS: usize = 4;

/// One writer's loop for `for_how_long`: append a 3-turn batch, read its last turn back with
/// the answer's position; every third batch compact it and read a covered turn back the same
/// way. Returns (writes, reads checked).
async fn writer(
    base: String,
    conversation: String,
    for_how_long: Duration,
    mut rng: Rng,
    violations: Arc<Violations>,
) -> (u64, u64) {
    let http = client(Duration::from_secs(30));
    let (mut writes, mut reads) = (0u64, 0u64);
    let deadline = Instant::now() + for_how_long;
    let at = |path: &str| format!("{base}/v1/conversations/{conversation}{path}");
    let mut batch = 0;
    while Instant::now() < deadline {
        let start = rng.below(tau().len() as u64 - 3) as usize;
        let appended = append(&http, &at("/turns"), start..start + 3).await;
        let Some((ids, position)) = written(&appended, &violations, "append") else {
            return (writes, reads);
        };
        writes += 1;
        let last = ids["turns"][2]["id"].as_i64().unwrap_or(-1);
        let read = get_at(&http, &at(&format!("/reconstruct/{last}")), &position).await;
        reads += 1;
        match &read {
            Ok(a) if a.status == 200 && a.body["text"] == tau()[start + 2].content => {}
            other => violations.push(format!(
                "{conversation}: turn {last} read at {position}: {other:?}"
            )),
        }
        batch += 1;
        if batch % 3 == 0 {
            let first = ids["turns"][0]["id"].as_i64().unwrap_or(-1);
            let summary: String = (start..start + 3)
                .map(|i| tau()[i].content.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            let body =
                json!({ "from": first, "to": last, "summary": summary, "summary_budget": 100_000 });
            let proposed = call(&http, Method::POST, &at("/compactions"), Some(&body), None).await;
            let Some((verdict, position)) = written(&proposed, &violations, "proposal") else {
                return (writes, reads);
            };
            writes += 1;
            let Some(covered) = verdict["covered"][0][0].as_i64() else {
                continue;
            };
            let read = get_at(&http, &at(&format!("/reconstruct/{covered}")), &position).await;
            reads += 1;
            match &read {
                Ok(a) if a.status == 200 && a.body["source"] == "summary" && a.body["checkpoint_id"] == verdict["checkpoint_id"] => {}
                other => violations.push(format!("{conversation}: covered turn {covered} read at {position} (checkpoint {}): {other:?}", verdict["checkpoint_id"])),
            }
        }
    }
    (writes, reads)
}

/// Appends tau-bench turns `turns` at `url` (a conversation's `/turns`).
async fn append(
    http: &reqwest::Client,
    url: &str,
    turns: std::ops::Range<usize>,
) -> Result<Answer, reqwest::Error> {
    let turns: Vec<Value> = tau()[turns]
        .iter()
        .map(|t| json!({ "role": t.role, "content": t.content }))
        .collect();
    call(
        http,
        Method::POST,
        url,
        Some(&json!({ "turns": turns })),
        None,
    )
    .await
}

fn written(
    answer: &Result<Answer, reqwest::Error>,
    violations: &Violations,
    what: &str,
) -> Option<(Value, String)> {
    match answer {
        Ok(a) if a.status == 201 => match &a.position {
            Some(p) => Some((a.body.clone(), p.clone())),
            None => {
                violations.push(format!("a {what} answer without Gatekeeper-Position"));
                None
            }
        },
        other => {
            violations.push(format!("{what}: {other:?}"));
            None
        }
    }
}

async fn load(
    base: &str,
    phase: &str,
    for_how_long: Duration,
    rng: &mut Rng,
    violations: &Arc<Violations>,
) -> (u64, u64) {
    let tasks: Vec<_> = (0..WRITERS)
        .map(|k| {
            tokio::spawn(writer(
                base.to_owned(),
                format!("{phase}-{k}"),
                for_how_long,
                Rng(rng.below(u64::MAX)),
                violations.clone(),
            ))
        })
        .collect();
    let mut totals = (0, 0);
    for t in tasks {
        let (w, r) = t.await.expect("a writer");
        totals = (totals.0 + w, totals.1 + r);
    }
    totals
}

/// Through the paused replica: 20 appends, each read back without a position (counting the
/// stale answers), with the position its answer carried, and through the Rust client (which
/// carries it itself). Returns the stale reads without a position.
async fn client_reads_its_writes(base: &str, rng: &mut Rng, violations: &Violations) -> u32 {
    let http = client(Duration::from_secs(30));
    let gatekeeper = gatekeeper::client::Client::new(base, None);
    let mut stale = 0;
    for round in 0..20 {
        let conversation = format!("paused-{round}");
        let at = |path: &str| format!("{base}/v1/conversations/{conversation}{path}");
        let i = rng.below(tau().len() as u64) as usize;
        let body = json!({ "turns": [{ "role": tau()[i].role, "content": tau()[i].content }] });
        let appended = call(&http, Method::POST, &at("/turns"), Some(&body), None).await;
        let Some((_, position)) = written(&appended, violations, "append") else {
            return stale;
        };
        if !matches!(get(&http, &at("/reconstruct/0")).await, Ok(a) if a.status == 200) {
            stale += 1;
        }
        match get_at(&http, &at("/reconstruct/0"), &position).await {
            Ok(a) if a.status == 200 && a.body["text"] == tau()[i].content => {}
            other => violations.push(format!(
                "{conversation} read at {position} while paused: {other:?}"
            )),
        }
        let through_client = format!("{conversation}-client");
        let request: gatekeeper::api::AppendTurnsRequest =
            serde_json::from_value(body.clone()).expect("an append request");
        match gatekeeper.append(&through_client, &request).await {
            Ok(_) => match gatekeeper.reconstruct(&through_client, 0).await {
                Ok(r) if r.text == tau()[i].content => {}
                other => violations.push(format!(
                    "the Rust client's read of {through_client} while paused: {other:?}"
                )),
            },
            Err(e) => violations.push(format!("the Rust client's append while paused: {e}")),
        }
    }
    stale
}

async fn metric(http: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = match get(http, &format!("{base}/metrics")).await {
        Ok(a) => a.body.as_str().unwrap_or_default().to_owned(),
        Err(_) => String::new(),
    };
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn reads_from_a_streaming_replica_never_go_back_before_a_write_they_saw() {
    ensure_postgres_up();
    let seed = seed();
    let mut rng = Rng(seed);
    let started = Instant::now();
    let db = PgDb::new("replica");
    let replica = Replica::start();
    replica.catch_up().await;
    let label = format!("{{replica=\"127.0.0.1:{}\"}}", replica.port);
    let env = vec![
        ("DATABASE_URL", db.url()),
        ("GATEKEEPER_READ_DATABASE_URLS", replica.url(db.name())),
        ("GATEKEEPER_READ_MAX_WAIT_MS", "200".to_owned()),
    ];
    let service = Service::start("replica", &env).await;
    let http = client(Duration::from_secs(10));
    let violations = Arc::new(Violations::default());
    let replica_reads = format!("gatekeeper_replica_reads_total{label}");

    // Read-your-writes under concurrent appends and proposals.
    let (w1, r1) = load(
        &service.base,
        "steady",
        Duration::from_secs(4),
        &mut rng,
        &violations,
    )
    .await;
    let by_replica = metric(&http, &service.base, &replica_reads).await;
    let by_primary = metric(
        &http,
        &service.base,
        "gatekeeper_replica_reads_total{replica=\"primary\"}",
    )
    .await;
    if by_replica == 0.0 {
        violations.push("the replica answered no read");
    }

    // Replay paused: the replica's state stops moving. Reads without a position may be stale
    // (it is within the lag bound); reads with one, and the Rust client's, never are.
    replica.pause_replay(true).await;
    let paused = client_reads_its_writes(&service.base, &mut rng, &violations).await;
    replica.pause_replay(false).await;
    replica.catch_up().await;

    // Stopped mid-load: reads go on from the primary.
    let ((w2, r2), stopped) = tokio::join!(
        load(
            &service.base,
            "stopped",
            Duration::from_secs(3),
            &mut rng,
            &violations
        ),
        async {
            tokio::time::sleep(Duration::from_millis(700)).await;
            replica.stop();
            Instant::now()
        }
    );
    let retried = metric(
        &http,
        &service.base,
        "gatekeeper_replica_read_retries_total",
    )
    .await;
    if paused == 0 {
        violations.push("no read without a position was stale while replay was paused: the replica answered none of them");
    }
    let healthy_after_stop = metric(
        &http,
        &service.base,
        &format!("gatekeeper_replica_healthy{label}"),
    )
    .await;
    if healthy_after_stop != 0.0 {
        violations.push(format!(
            "the stopped replica still counts as healthy {:.1} s after",
            stopped.elapsed().as_secs_f64()
        ));
    }

    // Back, then promoted away: it no longer follows the primary and must stop answering.
    replica.start_again();
    replica.catch_up().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before_promotion = metric(&http, &service.base, &replica_reads).await;
    replica.promote();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_promotion = metric(&http, &service.base, &replica_reads).await;
    let (w3, r3) = load(
        &service.base,
        "promoted",
        Duration::from_secs(2),
        &mut rng,
        &violations,
    )
    .await;
    let healthy_promoted = metric(
        &http,
        &service.base,
        &format!("gatekeeper_replica_healthy{label}"),
    )
    .await;
    let after_load = metric(&http, &service.base, &replica_reads).await;
    if healthy_promoted != 0.0 || after_load != after_promotion {
        violations.push(format!(
            "the promoted replica still answers reads ({after_promotion} → {after_load})"
        ));
    }

    eprintln!(
        "replica: {WRITERS} writers; steady 4 s: {w1} writes, {r1} reads at their positions ({by_replica} reads by the replica, {by_primary} by the primary); replica stopped mid-load: {w2} writes, {r2} reads ({retried} retried on the primary); replay paused: {paused}/20 reads without a position stale, 0 with one; promoted away: {w3} writes, {r3} reads, replica reads {before_promotion} → {after_load}; {} violations; {:.1} s; seed {seed}",
        violations.count(),
        started.elapsed().as_secs_f64()
    );
    violations.assert_none("replica", std::slice::from_ref(&service.log));
}

/// The replica's role at its connection limit and its sessions ended: the poller's next poll
/// waits out its timeout, so for about a second the replica still counts as healthy while every
/// read sent to it fails (a 503 from the store). Each such read must be answered again by the
/// primary, so the client sees only 200s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn reads_from_a_streaming_replica_that_refuses_sessions_are_answered_by_the_primary() {
    const READS: usize = 8;
    const ATTEMPTS: usize = 3;
    ensure_postgres_up();
    let started = Instant::now();
    let role = ReadOnlyRole::create().await;
    let db = PgDb::new("replica_refuses");
    let replica = Replica::start();
    replica.catch_up().await;
    let label = format!("{{replica=\"127.0.0.1:{}\"}}", replica.port);
    let env = vec![
        ("DATABASE_URL", db.url()),
        (
            "GATEKEEPER_READ_DATABASE_URLS",
            replica.url_as(&role.0, db.name()),
        ),
        ("GATEKEEPER_READ_MAX_WAIT_MS", "200".to_owned()),
    ];
    let service = Service::start("replica-refuses", &env).await;
    role.grant_reads(&db.url()).await;
    let http = client(Duration::from_secs(10));
    let violations = Violations::default();
    let replica_reads = format!("gatekeeper_replica_reads_total{label}");
    let retries = "gatekeeper_replica_read_retries_total";
    let at = |path: &str| service.conversation_url("refused", path);
    // Each phase reads turns of its own: the answer cache must not answer them.
    let appended = append(&http, &at("/turns"), 0..(ATTEMPTS + 2) * READS).await;
    let (_, position) = written(&appended, &violations, "append").expect("the turns are appended");
    replica.catch_up().await;

    let read_all = |phase: usize| {
        futures_util::future::join_all((phase * READS..(phase + 1) * READS).map(|k| {
            let (http, url, position) = (&http, at(&format!("/reconstruct/{k}")), &position);
            async move { (k, get_at(http, &url, position).await) }
        }))
    };
    let check = |phase: &str, reads: Vec<(usize, Result<Answer, reqwest::Error>)>| {
        for (k, read) in reads {
            match read {
                Ok(a) if a.status == 200 && a.body["text"] == tau()[k].content => {}
                other => violations.push(format!("{phase}: turn {k}: {other:?}")),
            }
        }
    };

    check("healthy", read_all(0).await);
    let by_replica = metric(&http, &service.base, &replica_reads).await;
    if by_replica == 0.0 {
        violations.push("the replica answered no read while healthy");
    }

    let healthy_again = || async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while metric(
            &http,
            &service.base,
            &format!("gatekeeper_replica_healthy{label}"),
        )
        .await
            != 1.0
        {
            assert!(
                Instant::now() < deadline,
                "the replica is not healthy again after 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    // Ending the role's sessions can catch the poller's own session mid-poll: it then skips the
    // replica at once, and no read reaches the refusing replica. Such an attempt proves nothing
    // either way, so it is made again once the replica is healthy (CI saw it once in many runs).
    let (mut sent_while_refusing, mut retried) = (0.0, 0.0);
    for attempt in 1..=ATTEMPTS {
        role.limit_connections(0).await;
        replica.catch_up().await;
        replica.end_sessions_of(&role.0).await;
        let sent_before = metric(&http, &service.base, &replica_reads).await;
        let retried_before = metric(&http, &service.base, retries).await;
        check("refusing", read_all(attempt).await);
        sent_while_refusing = metric(&http, &service.base, &replica_reads).await - sent_before;
        retried = metric(&http, &service.base, retries).await - retried_before;
        // Sessions allowed again: the replica is healthy and answers once more.
        role.limit_connections(-1).await;
        replica.catch_up().await;
        healthy_again().await;
        if sent_while_refusing > 0.0 && retried > 0.0 {
            break;
        }
    }
    if retried == 0.0 || sent_while_refusing == 0.0 {
        violations.push(format!(
            "{sent_while_refusing} reads went to the refusing replica and {retried} were retried on the primary in the last of {ATTEMPTS} attempts: the fault was not reached"
        ));
    }

    let before = metric(&http, &service.base, &replica_reads).await;
    check("recovered", read_all(ATTEMPTS + 1).await);
    let after = metric(&http, &service.base, &replica_reads).await;
    if after == before {
        violations.push("the replica answered no read once it accepted sessions again");
    }

    eprintln!(
        "replica refusing sessions: {READS} reads each phase; healthy: {by_replica} by the replica; refusing: {sent_while_refusing} sent to it, {retried} retried on the primary; recovered: {} by the replica; {} violations; {:.1} s",
        after - before,
        violations.count(),
        started.elapsed().as_secs_f64()
    );
    violations.assert_none(
        "replica refusing sessions",
        std::slice::from_ref(&service.log),
    );
}
