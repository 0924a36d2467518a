//! Checks every fault makes: whole checkpoints, whole appends, acknowledged turns stored
//! byte-exact; and a bounded wait for tasks.

use crate::harness::service::{Answer, Service, get};
use crate::harness::tau;
use gatekeeper::api::CheckpointResponse;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::task::JoinHandle;

/// `[[a, b], ...]` as the set of ids it holds.
fn ids_of(ranges: &Value) -> Option<BTreeSet<i64>> {
    let mut ids = BTreeSet::new();
    for range in ranges.as_array()? {
        let (a, b) = (range.get(0)?.as_i64()?, range.get(1)?.as_i64()?);
        if a > b || b - a > 1_000_000 {
            return None;
        }
        for id in a..=b {
            if !ids.insert(id) {
                return None;
            }
        }
    }
    Some(ids)
}

/// What is wrong with a checkpoint as `GET .../compactions/{id}` answered it: it must parse, its
/// covered / uncovered / not_compacted must partition `[from, to]`, and it must be the proposal
/// `expected` = (from, to, summary).
pub(crate) fn checkpoint_issue(body: &Value, expected: Option<(i64, i64, &str)>) -> Option<String> {
    if let Err(e) = serde_json::from_value::<CheckpointResponse>(body.clone()) {
        return Some(format!("does not parse ({e}): {body}"));
    }
    let (Some(from), Some(to)) = (body["from"].as_i64(), body["to"].as_i64()) else {
        return Some(format!("no range: {body}"));
    };
    let parts: Vec<Option<BTreeSet<i64>>> = ["covered", "uncovered", "not_compacted"]
        .iter()
        .map(|k| ids_of(&body[*k]))
        .collect();
    let mut union = BTreeSet::new();
    for part in &parts {
        let Some(part) = part else {
            return Some(format!("malformed ranges: {body}"));
        };
        for id in part {
            if !union.insert(*id) {
                return Some(format!(
                    "turn {id} is in two parts of the partition: {body}"
                ));
            }
        }
    }
    if union != (from..=to).collect() {
        return Some(format!(
            "covered + uncovered + not_compacted is not [{from}, {to}]: {body}"
        ));
    }
    let summary = body["summary"].as_str().unwrap_or_default();
    match expected {
        None => Some(format!("a checkpoint nobody proposed: {body}")),
        Some((f, t, s)) if (f, t, s) != (from, to, summary) => Some(format!(
            "checkpoint holds [{from}, {to}] {summary:?}, expected [{f}, {t}] {s:?}"
        )),
        Some(_) => None,
    }
}

/// What is wrong with a successful append answer for `n` turns from `start`: a batch is all
/// new or all replayed, never half.
pub(crate) fn append_issue(a: &Answer, start: i64, n: usize) -> Option<String> {
    let appended = a.body["appended"].as_u64();
    let replayed = a.body["replayed"].as_u64();
    let n = n as u64;
    let whole = matches!((appended, replayed), (Some(x), Some(0)) if x == n)
        || matches!((appended, replayed), (Some(0), Some(y)) if y == n);
    let status_ok = (a.status == 201) == (appended.unwrap_or(0) > 0);
    let ids: Vec<i64> = a.body["turns"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["id"].as_i64()).collect())
        .unwrap_or_default();
    let ids_ok = ids == (start..start + n as i64).collect::<Vec<_>>();
    (!(whole && status_ok && ids_ok)).then(|| {
        format!(
            "append of {n} turns from {start} answered {} {}",
            a.status, a.body
        )
    })
}

/// Every turn of `turns` (id, tau index) is stored byte-exactly; returns the violations.
pub(crate) async fn verify_turns(
    http: &reqwest::Client,
    base: &str,
    conversation: &str,
    turns: &[(i64, usize)],
) -> Vec<String> {
    let mut issues = Vec::new();
    for &(id, i) in turns {
        let url = format!("{base}/v1/conversations/{conversation}/turns/{id}");
        match get(http, &url).await {
            Ok(a) if a.status == 200 => {
                if a.body["content"].as_str() != Some(tau()[i].content.as_str())
                    || a.body["role"].as_str() != Some(tau()[i].role.as_str())
                {
                    issues.push(format!(
                        "{conversation} turn {id} differs from what was acknowledged"
                    ));
                }
            }
            Ok(a) => issues.push(format!(
                "{conversation} turn {id} was acknowledged but answers {} {}",
                a.status, a.body
            )),
            Err(e) => issues.push(format!("{conversation} turn {id}: {e}")),
        }
    }
    issues
}

/// `verify_turns` for many conversations at once; returns how many turns were checked.
pub(crate) async fn verify_all_turns(
    http: &reqwest::Client,
    service: &Service,
    work: Vec<(String, Vec<(i64, usize)>)>,
) -> (u64, Vec<String>) {
    let checked: u64 = work.iter().map(|(_, t)| t.len() as u64).sum();
    let mut tasks = Vec::new();
    for (conversation, turns) in work {
        let http = http.clone();
        let base = service.base.clone();
        tasks.push(tokio::spawn(async move {
            verify_turns(&http, &base, &conversation, &turns).await
        }));
    }
    let mut issues = Vec::new();
    for issue in join_all(tasks, Duration::from_secs(120), "verifying turns").await {
        issues.extend(issue);
    }
    (checked, issues)
}

pub(crate) async fn next_id(
    http: &reqwest::Client,
    service: &Service,
    conversation: &str,
) -> Option<i64> {
    let a = get(http, &service.conversation_url(conversation, ""))
        .await
        .ok()?;
    (a.status == 200)
        .then(|| a.body["next_id"].as_i64())
        .flatten()
}

pub(crate) async fn join_all<T>(tasks: Vec<JoinHandle<T>>, within: Duration, what: &str) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + within;
    let mut out = Vec::new();
    for task in tasks {
        match tokio::time::timeout_at(deadline, task).await {
            Ok(result) => out.push(result.expect("a task panicked")),
            Err(_) => panic!("{what}: tasks did not finish within {within:?}"),
        }
    }
    out
}
