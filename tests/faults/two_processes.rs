//! 3. Two service processes on one database, Postgres or a SQLite file.
//!
//! Every request retries outage answers (`503` with `Retry-After`, which change nothing) as the
//! clients do: on one SQLite file a writer of one process may wait past the busy timeout while
//! the other process holds the lock. The report counts them; what is checked is the outcome.

use crate::harness::checks::{checkpoint_issue, join_all, next_id, verify_turns};
use crate::harness::db::{Backend, Db, backend_name};
use crate::harness::postgres::ensure_postgres_up;
use crate::harness::service::{Service, all_checkpoints, call, call_retrying_outages, client, get};
use crate::harness::{Rng, Violations, seed, tau, thousands};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

const SHARED_TURNS: i64 = 60;
const FREE_FOR_ALL: i64 = 20;
const RACE_ROUNDS: i64 = 10;
const RACERS: usize = 10;

/// Appends 3-turn batches without ids through one process until told to stop (bounded);
/// returns (assigned ids, tau indexes) per batch.
async fn shared_appender(
    http: reqwest::Client,
    url: String,
    stop: Arc<AtomicBool>,
    mut cursor: usize,
    violations: Arc<Violations>,
    outages: Arc<AtomicU32>,
) -> Vec<(Vec<i64>, Vec<usize>)> {
    let mut batches = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..2_000 {
        if stop.load(Ordering::SeqCst) || Instant::now() > deadline {
            break;
        }
        let idx: Vec<usize> = (0..3).map(|k| (cursor + k) % tau().len()).collect();
        cursor += 3;
        let turns: Vec<Value> = idx
            .iter()
            .map(|&i| json!({ "role": tau()[i].role, "content": tau()[i].content }))
            .collect();
        let (answer, retried) =
            call_retrying_outages(&http, Method::POST, &url, Some(&json!({ "turns": turns })))
                .await;
        outages.fetch_add(retried, Ordering::Relaxed);
        match answer {
            Ok(a) if a.status == 201 => {
                let ids: Vec<i64> = a.body["turns"]
                    .as_array()
                    .map(|t| t.iter().filter_map(|t| t["id"].as_i64()).collect())
                    .unwrap_or_default();
                let consecutive = ids.len() == 3 && ids.windows(2).all(|w| w[1] == w[0] + 1);
                if !consecutive || a.body["appended"] != 3 {
                    violations.push(format!("an append was not one block of 3 ids: {}", a.body));
                }
                batches.push((ids, idx));
            }
            other => {
                violations.push(format!("append through {url}: {other:?}"));
                break;
            }
        }
        // Back to back, but leaving the lock to others now and then.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    batches
}

async fn two_processes_on_one_database(backend: Backend) {
    let name = format!("two-processes-{}", backend_name(backend));
    let seed = seed();
    let test_started = Instant::now();
    let mut rng = Rng(seed);
    let db = Db::fresh(backend, "two");
    let env = db.env();
    // Started one after the other: the first creates and migrates the database.
    let a = Service::start(&format!("{name}-a"), &env).await;
    let b = Service::start(&format!("{name}-b"), &env).await;
    let logs = vec![a.log.clone(), b.log.clone()];
    let bases = [a.base.clone(), b.base.clone()];
    let http = client(Duration::from_secs(30));
    let violations = Arc::new(Violations::default());
    let outages = Arc::new(AtomicU32::new(0));
    let conversation = "shared";
    let turns_url = |base: &str| format!("{base}/v1/conversations/{conversation}/turns");
    let compactions_url =
        |base: &str| format!("{base}/v1/conversations/{conversation}/compactions");

    let setup: Vec<Value> = (0..SHARED_TURNS)
        .map(|i| {
            let t = &tau()[i as usize];
            json!({ "id": i, "role": t.role, "content": t.content, "anchors": [format!("S{i}")] })
        })
        .collect();
    let answer = call(
        &http,
        Method::POST,
        &turns_url(&a.base),
        Some(&json!({ "turns": setup })),
        None,
    )
    .await
    .expect("the setup append");
    assert_eq!(answer.status, 201, "setup: {}", answer.body);

    // Appends through both processes, all along.
    let stop = Arc::new(AtomicBool::new(false));
    let appenders: Vec<_> = (0..4)
        .map(|k| {
            tokio::spawn(shared_appender(
                http.clone(),
                turns_url(&bases[k % 2]),
                stop.clone(),
                rng.below(tau().len() as u64) as usize,
                violations.clone(),
                outages.clone(),
            ))
        })
        .collect();

    // 20 proposals at once, half through each process, no expected_checkpoint.
    let barrier = Arc::new(tokio::sync::Barrier::new(FREE_FOR_ALL as usize));
    let mut tasks = Vec::new();
    for i in 0..FREE_FOR_ALL {
        let (http, barrier, outages) = (http.clone(), barrier.clone(), outages.clone());
        let url = compactions_url(&bases[i as usize % 2]);
        let body = json!({ "from": i, "to": i, "summary": format!("Free for all {i}: S{i} stays."), "summary_budget": 50_000 });
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let started = Instant::now();
            let (answer, retried) =
                call_retrying_outages(&http, Method::POST, &url, Some(&body)).await;
            outages.fetch_add(retried, Ordering::Relaxed);
            (i, started.elapsed(), answer)
        }));
    }
    // checkpoint id → (from, to, summary) as the 201 named it
    let mut expected: BTreeMap<i64, (i64, i64, String)> = BTreeMap::new();
    let mut slowest = Duration::ZERO;
    for (i, took, answer) in
        join_all(tasks, Duration::from_secs(60), "free-for-all proposals").await
    {
        slowest = slowest.max(took);
        match answer {
            Ok(a) if a.status == 201 => {
                let id = a.body["checkpoint_id"].as_i64().unwrap_or(-1);
                let summary = format!("Free for all {i}: S{i} stays.");
                if expected.insert(id, (i, i, summary)).is_some() {
                    violations.push(format!("two 201s named checkpoint {id}"));
                }
            }
            other => violations.push(format!("free-for-all proposal {i}: {other:?}")),
        }
    }
    let ids: Vec<i64> = expected.keys().copied().collect();
    if ids != (1..=FREE_FOR_ALL).collect::<Vec<_>>() {
        violations.push(format!(
            "the {FREE_FOR_ALL} concurrent proposals got checkpoint ids {ids:?}"
        ));
    }

    // Races: every round, 10 clients (5 per process) expect the same latest checkpoint.
    let mut winners = 0;
    let mut losers = 0;
    for round in 0..RACE_ROUNDS {
        let latest = FREE_FOR_ALL + round;
        let turn = FREE_FOR_ALL + round;
        let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
        let mut tasks = Vec::new();
        for k in 0..RACERS {
            let (http, barrier, outages) = (http.clone(), barrier.clone(), outages.clone());
            let url = compactions_url(&bases[k % 2]);
            let summary = format!("Race {round}, client {k}: S{turn} stays.");
            let body = json!({ "from": turn, "to": turn, "summary": summary, "summary_budget": 50_000, "expected_checkpoint": latest });
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let started = Instant::now();
                let (answer, retried) =
                    call_retrying_outages(&http, Method::POST, &url, Some(&body)).await;
                outages.fetch_add(retried, Ordering::Relaxed);
                (summary, started.elapsed(), answer)
            }));
        }
        let answers = join_all(tasks, Duration::from_secs(60), "racing proposals").await;
        let mut won = Vec::new();
        for (summary, took, answer) in answers {
            slowest = slowest.max(took);
            match answer {
                Ok(a) if a.status == 201 => won.push((summary, a.body["checkpoint_id"].as_i64())),
                Ok(a) if a.status == 409 => {
                    losers += 1;
                    if a.body["latest_checkpoint"].as_i64() != Some(latest + 1) {
                        violations.push(format!(
                            "race {round}: a 409 names latest checkpoint {}, expected {}",
                            a.body["latest_checkpoint"],
                            latest + 1
                        ));
                    }
                }
                other => violations.push(format!("race {round}: {other:?}")),
            }
        }
        match won.as_slice() {
            [(summary, Some(id))] if *id == latest + 1 => {
                winners += 1;
                expected.insert(*id, (turn, turn, summary.clone()));
            }
            _ => violations.push(format!(
                "race {round}: expected exactly one winner with checkpoint {}, got {won:?}",
                latest + 1
            )),
        }
    }
    stop.store(true, Ordering::SeqCst);
    let appended = join_all(appenders, Duration::from_secs(60), "appenders").await;

    // Decisions serialized: ids 1..n without gaps, each checkpoint exactly the proposal its 201
    // named, whole.
    let list = all_checkpoints(&http, &compactions_url(&a.base))
        .await
        .expect("the list");
    let mut listed: Vec<i64> = list
        .iter()
        .filter_map(|c| c["checkpoint_id"].as_i64())
        .collect();
    listed.sort();
    let total = FREE_FOR_ALL + RACE_ROUNDS;
    if listed != (1..=total).collect::<Vec<_>>() {
        violations.push(format!("checkpoint ids {listed:?}, expected 1..={total}"));
    }
    for (id, (from, to, summary)) in &expected {
        let base = &bases[*id as usize % 2];
        let url = format!("{base}/v1/conversations/{conversation}/compactions/{id}");
        match get(&http, &url).await {
            Ok(a) if a.status == 200 => {
                if let Some(issue) = checkpoint_issue(&a.body, Some((*from, *to, summary.as_str())))
                {
                    violations.push(format!("checkpoint {id}: {issue}"));
                }
            }
            other => violations.push(format!("checkpoint {id}: {other:?}")),
        }
    }

    // Appends through both processes: gap-free, each batch one block, each turn its own content.
    let mut all_ids: Vec<i64> = Vec::new();
    let mut work: Vec<(i64, usize)> = Vec::new();
    let mut batches = 0;
    for process_batches in &appended {
        for (ids, idx) in process_batches {
            batches += 1;
            all_ids.extend(ids);
            work.extend(ids.iter().copied().zip(idx.iter().copied()));
        }
    }
    all_ids.sort();
    let end = SHARED_TURNS + all_ids.len() as i64;
    if all_ids != (SHARED_TURNS..end).collect::<Vec<_>>() {
        violations.push(format!(
            "appended ids are not {SHARED_TURNS}..{end} exactly once each"
        ));
    }
    let stored = next_id(&http, &b, conversation).await;
    if stored != Some(end) {
        violations.push(format!("next_id {stored:?}, expected {end}"));
    }
    for issue in verify_turns(&http, &b.base, conversation, &work).await {
        violations.push(issue);
    }

    eprintln!(
        "{name}: 2 processes on one database; {} checkpoints decided ({FREE_FOR_ALL} concurrent proposals → ids {}..{} each named once; {winners}/{RACE_ROUNDS} expected_checkpoint races with exactly one winner of {RACERS}, {losers} × 409; slowest decision {:.2} s, retries included); ids 1..{} gap-free; {} turns appended in {} batches through both, ids {SHARED_TURNS}..{} gap-free and byte-exact; {} outage answers retried; {} violations; {:.1} s; seed {seed}",
        listed.len(),
        ids.first().copied().unwrap_or(0),
        ids.last().copied().unwrap_or(0),
        slowest.as_secs_f64(),
        total,
        thousands(all_ids.len() as u64),
        thousands(batches),
        end - 1,
        outages.load(Ordering::Relaxed),
        violations.count(),
        test_started.elapsed().as_secs_f64(),
    );
    violations.assert_none(&name, &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn two_processes_on_one_postgres_database_serialize_decisions() {
    ensure_postgres_up();
    two_processes_on_one_database(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "fault injection: run by .ci/run with --ignored --test-threads=1"]
async fn two_processes_on_one_sqlite_file_serialize_decisions() {
    two_processes_on_one_database(Backend::Sqlite).await;
}
