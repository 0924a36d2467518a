//! `GET .../context` and `GET .../compaction-plan` on real tau-bench conversations.

use crate::support::*;
use gatekeeper::coverage::anchor_present;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// What the append answered for each turn, with the role and content that were sent.
pub(crate) struct Logged {
    pub role: String,
    pub content: String,
    pub tokens: u64,
    pub anchors: Vec<String>,
}

/// Appends a real conversation with the anchors the service used to derive, sent as given
/// anchors: these tests are about the context and the plan, so rule 2 alone decides their turns
/// (rule 2b has its own tests).
pub(crate) async fn append_conversation(
    app: &TestApp,
    conversation: &str,
    index: usize,
) -> Vec<Logged> {
    let mut turns = tau_conversation(index);
    for turn in &mut turns {
        let anchors = legacy_anchors(
            turn["role"].as_str().unwrap(),
            turn["content"].as_str().unwrap(),
        );
        turn["anchors"] = json!(anchors);
    }
    let response = expect(
        app.append(conversation, json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
    turns
        .iter()
        .zip(response["turns"].as_array().unwrap())
        .map(|(sent, got)| Logged {
            role: sent["role"].as_str().unwrap().to_owned(),
            content: sent["content"].as_str().unwrap().to_owned(),
            tokens: got["tokens"].as_u64().unwrap(),
            anchors: got["anchors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect(),
        })
        .collect()
}

/// A clean summary that carries the anchors of every anchored turn of `[from, to]` except `skip`.
fn summary_without(log: &[Logged], from: usize, to: usize, skip: &[usize]) -> String {
    let mut summary = format!("<summary>\nTurns {from} to {to}:\n");
    for i in (from..=to).filter(|i| !skip.contains(i)) {
        if !log[i].anchors.is_empty() {
            summary.push_str(&format!(
                "- the {} mentioned {}.\n",
                log[i].role,
                log[i].anchors.join(", ")
            ));
        }
    }
    summary.push_str("</summary>");
    summary
}

/// The turns of `[from, to]` the summary covers under the anchors rule: independently of the
/// service, with the crate's own matcher.
fn anchored(log: &[Logged], from: usize, to: usize, summary: &str) -> Vec<i64> {
    (from..=to)
        .filter(|&i| {
            !log[i].anchors.is_empty() && log[i].anchors.iter().all(|a| anchor_present(a, summary))
        })
        .map(|i| i as i64)
        .collect()
}

/// Up to `n` anchored turns of `[from, to]` (after `from`) whose absence from the summary
/// really uncovers them: some anchor of theirs is not brought in by the other turns' anchors.
pub(crate) fn skippable(log: &[Logged], from: usize, to: usize, n: usize) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::new();
    for i in from + 1..=to {
        if chosen.len() == n {
            break;
        }
        let mut skip = chosen.clone();
        skip.push(i);
        let summary = summary_without(log, from, to, &skip);
        if !log[i].anchors.is_empty()
            && skip
                .iter()
                .all(|&s| !log[s].anchors.iter().all(|a| anchor_present(a, &summary)))
        {
            chosen = skip;
        }
    }
    assert_eq!(
        chosen.len(),
        n,
        "[{from}, {to}] has {n} turns that can be left out"
    );
    chosen
}

pub(crate) struct Checkpoint {
    pub id: i64,
    from: i64,
    advanced_to: i64,
    covered: Vec<i64>,
    summary: String,
    summary_tokens: u64,
}

pub(crate) async fn compact(
    app: &TestApp,
    conversation: &str,
    log: &[Logged],
    from: usize,
    to: usize,
    skip: &[usize],
) -> Checkpoint {
    let summary = summary_without(log, from, to, skip);
    let body = json!({ "from": from, "to": to, "summary": summary, "summary_budget": 100_000 });
    let verdict = expect(app.propose(conversation, body).await, StatusCode::CREATED).await;
    let covered = anchored(log, from, to, &summary);
    assert_eq!(
        expand(&verdict["covered"]),
        covered,
        "the verdict covers exactly the anchored turns"
    );
    for s in skip {
        assert!(
            !covered.contains(&(*s as i64)),
            "turn {s} was left out of the summary"
        );
    }
    Checkpoint {
        id: verdict["checkpoint_id"].as_i64().unwrap(),
        from: from as i64,
        advanced_to: verdict["advanced_to"].as_i64().unwrap(),
        covered,
        summary_tokens: verdict["summary_tokens"].as_u64().unwrap(),
        summary,
    }
}

/// The working context the contract describes, built from the appended log and the verdicts.
fn expected_context(log: &[Logged], checkpoints: &[Checkpoint]) -> Vec<Value> {
    let mut items: Vec<Value> = Vec::new();
    for (id, turn) in log.iter().enumerate() {
        let id = id as i64;
        let decider = checkpoints
            .iter()
            .filter(|c| c.from <= id && id <= c.advanced_to)
            .max_by_key(|c| c.id);
        match decider {
            Some(c) if c.covered.contains(&id) => {
                let existing = items
                    .iter_mut()
                    .find(|i| i["type"] == "summary" && i["checkpoint_id"] == c.id);
                match existing {
                    Some(item) => item["covers_ids"].as_array_mut().unwrap().push(json!(id)),
                    None => items.push(json!({
                        "type": "summary", "checkpoint_id": c.id, "covers_ids": [id], "text": c.summary, "tokens": c.summary_tokens
                    })),
                }
            }
            decider => items.push(json!({
                "type": "turn", "id": id, "role": turn.role, "content": turn.content,
                "source": if decider.is_some() { "raw_log" } else { "live" }, "tokens": turn.tokens
            })),
        }
    }
    for item in &mut items {
        if let Some(ids) = item.as_object_mut().unwrap().remove("covers_ids") {
            let ids: Vec<i64> = ids
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_i64().unwrap())
                .collect();
            item["covers"] = ranges_of(&ids);
        }
    }
    items
}

fn check_context(context: &Value, log: &[Logged], checkpoints: &[Checkpoint]) {
    let items = context["items"].as_array().unwrap();
    let expected = expected_context(log, checkpoints);
    assert_eq!(items.len(), expected.len(), "item count");
    for (i, (got, want)) in items.iter().zip(&expected).enumerate() {
        for (field, value) in want.as_object().unwrap() {
            assert_eq!(&got[field], value, "item {i}, field {field}");
        }
    }
    // Turn order: each item's first turn id increases.
    let firsts: Vec<i64> = items
        .iter()
        .map(|i| {
            if i["type"] == "summary" {
                i["covers"][0][0].as_i64().unwrap()
            } else {
                i["id"].as_i64().unwrap()
            }
        })
        .collect();
    assert!(
        firsts.windows(2).all(|w| w[0] < w[1]),
        "items in turn order: {firsts:?}"
    );
    let sum: u64 = items.iter().map(|i| i["tokens"].as_u64().unwrap()).sum();
    assert_eq!(context["total_tokens"].as_u64(), Some(sum));
}

/// The store read only what the answer shows: the summaries of its summary items (not those
/// newer checkpoints hide) and the contents of its turn items (not those a summary stands for).
async fn check_reads(app: &TestApp, conversation: &str, context: &Value) {
    let stored = app.store.context(conversation).await.unwrap();
    let items = context["items"].as_array().unwrap();
    let of_type = |kind: &str, field: &str| -> Vec<i64> {
        let mut ids: Vec<i64> = items
            .iter()
            .filter(|i| i["type"] == kind)
            .map(|i| i[field].as_i64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };
    let mut summaries: Vec<i64> = stored.summaries.keys().copied().collect();
    summaries.sort_unstable();
    assert_eq!(
        summaries,
        of_type("summary", "checkpoint_id"),
        "summaries read"
    );
    let contents: Vec<i64> = (stored.turns.iter())
        .filter(|t| t.content.is_some())
        .map(|t| t.id)
        .collect();
    assert_eq!(contents, of_type("turn", "id"), "contents read");
}

#[tokio::test]
async fn the_context_of_a_real_conversation_holds_each_deciding_summary_once_and_every_other_turn()
{
    let app = spawn_app().await;
    let log = append_conversation(&app, "airline", 0).await;
    let n = log.len();
    assert!(n >= 28, "a whole conversation");

    // Before any checkpoint: every turn, live.
    let context = expect(app.context("airline").await, StatusCode::OK).await;
    assert_eq!(context["conversation"], "airline");
    check_context(&context, &log, &[]);
    check_reads(&app, "airline", &context).await;
    assert_eq!(
        context["total_tokens"].as_u64(),
        Some(log.iter().map(|t| t.tokens).sum())
    );

    // Two checkpoints side by side, each leaving out two turns.
    let mut checkpoints =
        vec![compact(&app, "airline", &log, 0, 14, &skippable(&log, 0, 14, 2)).await];
    checkpoints.push(compact(&app, "airline", &log, 15, 24, &skippable(&log, 15, 24, 2)).await);
    let context = expect(app.context("airline").await, StatusCode::OK).await;
    check_context(&context, &log, &checkpoints);
    check_reads(&app, "airline", &context).await;
    let items = context["items"].as_array().unwrap();
    let summaries: Vec<&Value> = items.iter().filter(|i| i["type"] == "summary").collect();
    assert_eq!(summaries.len(), 2);
    assert_eq!(summaries[0]["covers"], ranges_of(&checkpoints[0].covered));
    assert_eq!(summaries[1]["covers"], ranges_of(&checkpoints[1].covered));
    let sources: Vec<(i64, &str)> = items
        .iter()
        .filter(|i| i["type"] == "turn")
        .map(|i| (i["id"].as_i64().unwrap(), i["source"].as_str().unwrap()))
        .collect();
    assert!(sources.iter().any(|(_, s)| *s == "raw_log"));
    assert!(
        sources
            .iter()
            .filter(|(id, _)| *id > 24)
            .all(|(_, s)| *s == "live")
    );
    assert_eq!(sources.iter().filter(|(id, _)| *id > 24).count(), n - 25);

    // A third checkpoint straddling both: each turn is decided by the newest checkpoint that
    // spans it, so the older summaries cover less.
    checkpoints.push(compact(&app, "airline", &log, 10, 19, &skippable(&log, 10, 19, 1)).await);
    let context = expect(app.context("airline").await, StatusCode::OK).await;
    check_context(&context, &log, &checkpoints);
    check_reads(&app, "airline", &context).await;
    let items = context["items"].as_array().unwrap();
    let first = items.iter().find(|i| i["checkpoint_id"] == 1).unwrap();
    assert!(expand(&first["covers"]).iter().all(|id| *id < 10));

    // A checkpoint over everything so far hides every older summary.
    let last = n - 1;
    checkpoints.push(compact(&app, "airline", &log, 0, last, &[]).await);
    let context = expect(app.context("airline").await, StatusCode::OK).await;
    check_context(&context, &log, &checkpoints);
    check_reads(&app, "airline", &context).await;
    let ids: Vec<i64> = context["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["checkpoint_id"].as_i64())
        .collect();
    assert_eq!(ids, [4]);
}

#[tokio::test]
async fn the_context_of_an_unknown_conversation_is_404() {
    let app = spawn_app().await;
    problem(app.context("unknown").await, StatusCode::NOT_FOUND).await;
}

/// `(to, prefix_tokens, required_budget)` recomputed from the appended token counts.
fn expected_plan(log: &[Logged], from: usize, budget: u64) -> (Option<i64>, u64, u64) {
    let (mut prose, mut tool) = (0u64, 0u64);
    let mut fit = None;
    let mut first = None;
    for (id, turn) in log.iter().enumerate().skip(from) {
        if turn.role == "tool" {
            tool += turn.tokens;
        } else {
            prose += turn.tokens;
        }
        let required = default_required_budget(prose, tool);
        first.get_or_insert((prose + tool, required));
        if required <= budget {
            fit = Some((id as i64, prose + tool, required));
        } else {
            break;
        }
    }
    match (fit, first) {
        (Some((to, prefix, required)), _) => (Some(to), prefix, required),
        (None, Some((prefix, required))) => (None, prefix, required),
        (None, None) => (None, 0, 0),
    }
}

/// A dry-run proposal's verdict, whatever its outcome (a rejected one is a 422 with the verdict).
async fn dry_verdict(app: &TestApp, conversation: &str, from: i64, to: i64, budget: u64) -> Value {
    let body = json!({ "from": from, "to": to, "summary": "Nothing to see.", "summary_budget": budget, "dry_run": true });
    let response = app.propose(conversation, body).await;
    let status = response.status();
    assert!(
        status == StatusCode::OK || status == StatusCode::UNPROCESSABLE_ENTITY,
        "{status}"
    );
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_compaction_plan_picks_the_largest_to_whose_range_fits_the_budget() {
    let app = spawn_app().await;
    // A long conversation with many tool results.
    let log = append_conversation(&app, "c", 3).await;
    assert!(log.iter().filter(|t| t.role == "tool").count() >= 10);
    let last = log.len() as i64 - 1;
    for from in [0usize, 1, 7, 30] {
        // Budgets at, just under and just over the exact requirement of a few prefixes.
        let mut budgets: Vec<u64> = vec![1, 10, 400, 1_000_000];
        for k in [from, from + 3, from + 10, log.len() - 1] {
            let (_, _, required) = expected_plan(&log[..=k], from, u64::MAX);
            budgets.extend([required - 1, required, required + 1]);
        }
        for budget in budgets.into_iter().filter(|b| *b > 0) {
            let plan = expect(
                app.plan("c", &format!("summary_budget={budget}&from={from}"))
                    .await,
                StatusCode::OK,
            )
            .await;
            let (ceiling_to, _, _) = expected_plan(&log, from, budget);
            assert_eq!(plan["from"].as_i64(), Some(from as i64));
            // The ceiling bounds the range; the anchors' share of the budget may shorten it, but
            // never below `from`.
            let to = plan["to"].as_i64();
            assert_eq!(
                to.is_some(),
                ceiling_to.is_some(),
                "from {from}, budget {budget}: {plan}"
            );
            assert!(to <= ceiling_to, "from {from}, budget {budget}: {plan}");
            let anchor_tokens = plan["anchor_tokens"].as_u64().unwrap();
            assert!(
                to.is_none_or(|to| to == from as i64 || anchor_tokens <= budget / 2),
                "from {from}, budget {budget}: {plan}"
            );
            let (_, prefix, required) = match to {
                Some(to) => expected_plan(&log[..=to as usize], from, budget),
                None => expected_plan(&log, from, budget),
            };
            assert_eq!(
                plan["prefix_tokens"].as_u64(),
                Some(prefix),
                "from {from}, budget {budget}"
            );
            assert_eq!(
                plan["required_budget"].as_u64(),
                Some(required),
                "from {from}, budget {budget}"
            );
            assert_eq!(plan["summary_budget"].as_u64(), Some(budget));
            // What the decision will check: every turn of the planned range, and no other.
            let planned: Vec<i64> = (plan["turns"].as_array().unwrap().iter())
                .map(|t| t["id"].as_i64().unwrap())
                .collect();
            let range = to.map_or(Vec::new(), |to| (from as i64..=to).collect());
            assert_eq!(planned, range, "from {from}, budget {budget}");
        }
    }
    let plan = expect(
        app.plan("c", "summary_budget=1000000").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (plan["from"].as_i64(), plan["to"].as_i64()),
        (Some(0), Some(last))
    );

    // The plan agrees with the decision: its range is under the ceiling, one more turn is over.
    let budget = 900;
    let plan = expect(
        app.plan("c", &format!("summary_budget={budget}")).await,
        StatusCode::OK,
    )
    .await;
    let to = plan["to"].as_i64().expect("some prefix fits");
    assert!(to < last);
    let verdict = dry_verdict(&app, "c", 0, to, budget).await;
    assert_eq!(verdict["over_ceiling"], false);
    assert_eq!(verdict["required_budget"], plan["required_budget"]);
    assert_eq!(verdict["prefix_tokens"], plan["prefix_tokens"]);
    assert_eq!(
        dry_verdict(&app, "c", 0, to + 1, budget).await["over_ceiling"],
        true
    );
}

#[tokio::test]
async fn the_compaction_plan_to_is_null_when_the_first_turn_alone_does_not_fit() {
    let app = spawn_app().await;
    let log = append_conversation(&app, "c", 0).await;
    // The system prompt opens the conversation and is long.
    assert_eq!(log[0].role, "system");
    let alone = default_required_budget(log[0].tokens, 0);
    assert!(alone > 100);
    for budget in [1, alone - 1] {
        let plan = expect(
            app.plan("c", &format!("summary_budget={budget}&from=0"))
                .await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(plan["to"], Value::Null, "{plan}");
        assert_eq!(plan["from"], 0);
        assert_eq!(plan["prefix_tokens"].as_u64(), Some(log[0].tokens));
        assert_eq!(plan["required_budget"].as_u64(), Some(alone));
        assert_eq!(plan["summary_budget"].as_u64(), Some(budget));
    }
    let plan = expect(
        app.plan("c", &format!("summary_budget={alone}")).await,
        StatusCode::OK,
    )
    .await;
    assert!(plan["to"].as_i64().is_some(), "{plan}");
    // A tool result alone: ratio 3.
    let tool = log
        .iter()
        .position(|t| t.role == "tool" && t.tokens > 30)
        .unwrap();
    let need = default_required_budget(0, log[tool].tokens);
    let plan = expect(
        app.plan("c", &format!("summary_budget={}&from={tool}", need - 1))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (plan["to"].clone(), plan["required_budget"].as_u64()),
        (Value::Null, Some(need))
    );
}

#[tokio::test]
async fn the_compaction_plan_starts_after_the_latest_checkpoint_by_default() {
    let app = spawn_app().await;
    let log = append_conversation(&app, "c", 2).await;
    let plan = expect(
        app.plan("c", "summary_budget=1000000").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["from"], 0);

    let first = compact(&app, "c", &log, 0, 9, &[]).await;
    assert_eq!(first.advanced_to, 9);
    let plan = expect(
        app.plan("c", "summary_budget=1000000").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["from"], 10);
    let (to, prefix, required) = expected_plan(&log, 10, 1_000_000);
    assert_eq!(
        (
            plan["to"].as_i64(),
            plan["prefix_tokens"].as_u64(),
            plan["required_budget"].as_u64()
        ),
        (to, Some(prefix), Some(required))
    );

    // A partial checkpoint advances less than its `to`: the plan resumes after advanced_to.
    let anchored_turn = (10..16).find(|&i| !log[i].anchors.is_empty()).unwrap();
    let summary = format!("Then {} came up and", log[anchored_turn].anchors.join(", "));
    let body = json!({ "from": 10, "to": 16, "summary": summary, "summary_budget": 100_000 });
    let verdict = expect(app.propose("c", body).await, StatusCode::CREATED).await;
    let advanced_to = verdict["advanced_to"].as_i64().unwrap();
    assert!(advanced_to < 16, "{verdict}");
    let plan = expect(
        app.plan("c", "summary_budget=1000000").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["from"].as_i64(), Some(advanced_to + 1));
    // An explicit `from` wins.
    let plan = expect(
        app.plan("c", "summary_budget=1000000&from=2").await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(plan["from"], 2);
}

#[tokio::test]
async fn the_compaction_plan_refuses_a_from_beyond_the_log_and_a_missing_or_non_positive_budget() {
    let app = spawn_app().await;
    let log = append_conversation(&app, "c", 1).await;
    let n = log.len();
    // Like any turn id the log does not hold, it is a 404.
    for from in [n, n + 1, 10_000] {
        let body = problem(
            app.plan("c", &format!("summary_budget=100&from={from}"))
                .await,
            StatusCode::NOT_FOUND,
        )
        .await;
        assert!(body["detail"].as_str().unwrap().contains("not in the log"));
    }
    let negative = app.plan("c", "summary_budget=100&from=-1").await;
    assert!(negative.status().is_client_error());
    for query in [
        "summary_budget=0",
        "summary_budget=-5",
        "",
        "from=0",
        "summary_budget=abc",
        "summary_budget=1.5",
        "summary_budget=",
    ] {
        let body = problem(app.plan("c", query).await, StatusCode::BAD_REQUEST).await;
        assert!(body["field"].is_string(), "{query}: {body}");
    }
    problem(
        app.plan("unknown", "summary_budget=100").await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

#[tokio::test]
async fn the_plan_says_whose_anchors_each_turn_is_checked_on() {
    let app = spawn_app().await;
    let mut turns = tau_turns(2);
    turns[0]["anchors"] = json!(["K0-000"]);
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    let plan = expect(app.plan("c", "summary_budget=100000").await, StatusCode::OK).await;
    let origins: Vec<(&Value, &Value)> = (plan["turns"].as_array().unwrap().iter())
        .map(|t| (&t["id"], &t["anchor_origin"]))
        .collect();
    let want = [(json!(0), json!("given")), (json!(1), json!("derived"))];
    assert_eq!(
        origins,
        want.iter().map(|(a, b)| (a, b)).collect::<Vec<_>>(),
        "{plan}"
    );
}
