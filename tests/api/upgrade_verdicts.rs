//! Upgrading a Postgres database whose checkpoints keep their verdicts as jsonb (before migration
//! 0012) to verdicts as bytes with a byte of reason per turn: the migration writes the reasons
//! byte for byte as an insert does, and every answer about the old checkpoints stays the same.

use crate::support::*;
use crate::test_db::{EmptyDb, backend};
use gatekeeper::store::Backend;
use gatekeeper_test_support::{AnyStore, TestApp};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

fn pool(store: &AnyStore) -> &PgPool {
    match store {
        AnyStore::Postgres(s) => s.pool(),
        AnyStore::Sqlite(_) => unreachable!("Postgres only"),
    }
}

/// Appends `spec` (role, tokens, anchors, pinned) as real turns.
async fn turns(app: &TestApp, conversation: &str, spec: &[(&str, u32, &[&str], bool)]) {
    let real = tau_turns(spec.len());
    let turns: Vec<Value> = spec
        .iter()
        .zip(&real)
        .map(|((role, tokens, anchors, pinned), t)| {
            let mut turn = turn(role, t["content"].as_str().unwrap(), *tokens, anchors);
            turn["pinned"] = json!(pinned);
            turn
        })
        .collect();
    expect(
        app.append(conversation, json!(turns)).await,
        StatusCode::CREATED,
    )
    .await;
}

/// Three checkpoints whose verdicts give every reason there is.
async fn checkpoints_with_every_reason(app: &TestApp) {
    let spec: [(&str, u32, &[&str], bool); 6] = [
        ("user", 100, &["A0-111"], false),
        ("assistant", 100, &["A1-222"], false),
        ("user", 100, &[], false),
        ("tool", 100, &["A3-444"], false),
        ("assistant", 100, &["A4-555", "A4-556"], false),
        ("user", 100, &["A5-666"], false),
    ];
    turns(app, "reported", &spec).await;
    let body = json!({
        "from": 0, "to": 5, "summary": "Covered A0-111, A3-444, A4-555 and A5-666.",
        "summary_budget": 100, "consumed": [[0, 2], [4, 5]], "finish_reason": "length"
    });
    expect(app.propose("reported", body).await, StatusCode::CREATED).await;

    // Over the ceiling without a report: the turns after the last covered anchor are left out.
    let heavy = spec.map(|(role, _, anchors, pinned)| (role, 1000, anchors, pinned));
    turns(app, "cut", &heavy).await;
    let body =
        json!({ "from": 0, "to": 5, "summary": "A0-111 and A3-444.", "summary_budget": 1000 });
    expect(app.propose("cut", body).await, StatusCode::CREATED).await;

    let spec: [(&str, u32, &[&str], bool); 3] = [
        ("user", 100, &["P0-777"], true),
        ("assistant", 100, &["P1-888"], false),
        ("tool", 100, &["P2-999"], false),
    ];
    turns(app, "pinned", &spec).await;
    let body =
        json!({ "from": 0, "to": 2, "summary": "P0-777, P1-888, P2-999.", "summary_budget": 1000 });
    expect(app.propose("pinned", body).await, StatusCode::CREATED).await;
}

/// Every answer that reads a checkpoint: each turn's reconstruct, each checkpoint, the listing
/// and the working context.
async fn answers(app: &TestApp) -> Vec<Value> {
    let mut all = Vec::new();
    for (conversation, last) in [("reported", 5), ("cut", 5), ("pinned", 2)] {
        for id in 0..=last {
            all.push(expect(app.reconstruct(conversation, id).await, StatusCode::OK).await);
        }
        all.push(expect(app.checkpoint(conversation, 1).await, StatusCode::OK).await);
        all.push(expect(app.checkpoints(conversation).await, StatusCode::OK).await);
        all.push(expect(app.context(conversation).await, StatusCode::OK).await);
    }
    all
}

async fn reasons(pool: &PgPool) -> Vec<(String, Vec<u8>)> {
    sqlx::query_as("SELECT conversation, reasons FROM checkpoints ORDER BY conversation")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Takes the database back to migration 0011: verdicts as jsonb, no reasons, the checks on the
/// pointer set as they were written then.
async fn verdicts_as_jsonb(pool: &PgPool) {
    for statement in [
        "DELETE FROM _sqlx_migrations WHERE version = 12",
        "ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_reasons_check, \
           DROP CONSTRAINT checkpoints_ranges_check, DROP COLUMN reasons, \
           ALTER COLUMN verdict TYPE jsonb USING convert_from(verdict, 'UTF8')::jsonb, \
           ALTER COLUMN verdict SET COMPRESSION pglz, ALTER COLUMN summary SET COMPRESSION pglz, \
           ADD CONSTRAINT checkpoints_check3 \
             CHECK (covered + uncovered <@ int8multirange(int8range(from_id, advanced_to, '[]'))), \
           ADD CONSTRAINT checkpoints_check4 CHECK (covered + uncovered + not_compacted \
             = int8multirange(int8range(from_id, to_id, '[]')))",
        "DROP FUNCTION int8multirange_size(int8multirange)",
    ] {
        sqlx::query(statement).execute(pool).await.unwrap();
    }
}

#[tokio::test]
async fn verdicts_kept_as_jsonb_are_converted_at_start_with_the_reasons_an_insert_writes() {
    if backend() != Backend::Postgres {
        return;
    }
    let empty = EmptyDb::new().await;
    let url = empty.url.clone();
    let app = spawn_app_on(empty.connect().await, defaults()).await;
    checkpoints_with_every_reason(&app).await;
    let written = reasons(pool(&app.store)).await;
    // Not vacuous: all five reasons (codes 1 to 5) are among the bytes written.
    let codes: std::collections::BTreeSet<u8> = written
        .iter()
        .flat_map(|(_, r)| r.iter().copied())
        .collect();
    assert_eq!(codes, (0..=5).collect(), "{written:?}");
    let before = answers(&app).await;
    let reasons_answered: Vec<&Value> = before.iter().filter_map(|a| a.get("reason")).collect();
    assert!(reasons_answered.len() >= 4, "{before:?}");

    verdicts_as_jsonb(pool(&app.store)).await;
    let store = AnyStore::connect(&url).await.unwrap();
    assert_eq!(reasons(pool(&store)).await, written);
    let app = app.restarted_on(store).await;
    assert_eq!(answers(&app).await, before);

    // A checkpoint made after the upgrade answers its reasons as the converted ones do.
    let spec: [(&str, u32, &[&str], bool); 2] = [
        ("user", 100, &["Z0-123"], false),
        ("assistant", 100, &["Z1-456"], false),
    ];
    turns(&app, "after", &spec).await;
    let body =
        json!({ "from": 0, "to": 1, "summary": "Z0-123 was handled.", "summary_budget": 1000 });
    expect(app.propose("after", body).await, StatusCode::CREATED).await;
    let answer = expect(app.reconstruct("after", 1).await, StatusCode::OK).await;
    assert_eq!(answer["reason"], "anchor_missing", "{answer}");
}

/// The pointer set of a case: each id's sets (bit 0 covered, 1 uncovered, 2 not compacted).
fn multirange(sets: &[u8], bit: u8) -> String {
    let ranges: Vec<String> = (0..sets.len())
        .filter(|&id| sets[id] & bit != 0)
        .map(|id| format!("[{id},{id}]"))
        .collect();
    format!("{{{}}}", ranges.join(","))
}

#[tokio::test]
async fn the_checks_on_a_pointer_set_accept_exactly_what_the_checks_before_migration_0012_did() {
    if backend() != Backend::Postgres {
        return;
    }
    let app = spawn_app().await;
    turns(&app, "c", &[("user", 100, &["Q0-1"], false)]).await;
    let pool = pool(&app.store);
    let (mut accepted, mut refused) = (0, 0);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) % n
    };
    for case in 0..400 {
        let to = next(5) as i64;
        let advanced_to = next(to as u64 + 1) as i64;
        // Mostly one set per id of the range, sometimes none, two, or an id past `to`.
        let sets: Vec<u8> = (0..=to + i64::from(next(4) == 0))
            .map(|_| match next(10) {
                0 => 0,
                1 => 1 << next(3) | 1 << next(3),
                _ => 1 << next(3),
            })
            .collect();
        let (c, u, n) = (
            multirange(&sets, 1),
            multirange(&sets, 2),
            multirange(&sets, 4),
        );
        let before: bool = sqlx::query_scalar(
            "SELECT 0 <= $1 AND $1 <= $2 AND NOT isempty($3::int8multirange) \
               AND NOT ($3::int8multirange && $4::int8multirange) \
               AND NOT ($3::int8multirange && $5::int8multirange) \
               AND NOT ($4::int8multirange && $5::int8multirange) \
               AND $3::int8multirange + $4::int8multirange <@ int8multirange(int8range(0, $1, '[]')) \
               AND $3::int8multirange + $4::int8multirange + $5::int8multirange \
                 = int8multirange(int8range(0, $2, '[]'))",
        )
        .bind(advanced_to)
        .bind(to)
        .bind(&c)
        .bind(&u)
        .bind(&n)
        .fetch_one(pool)
        .await
        .unwrap();
        let inserted = sqlx::query(
            "INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, \
               advanced_to, outcome, covered, uncovered, not_compacted, summary, summary_tokens, \
               verdict, reasons) \
             VALUES ('default', 'c', $1, 0, $2, $3, 'narrowed', $4::int8multirange, \
               $5::int8multirange, $6::int8multirange, '', 0, '{}', \
               decode(repeat('00', ($2 + 1)::int), 'hex'))",
        )
        .bind(i64::from(case) + 1)
        .bind(to)
        .bind(advanced_to)
        .bind(&c)
        .bind(&u)
        .bind(&n)
        .execute(pool)
        .await;
        let ok = match inserted {
            Ok(_) => true,
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23514") => false,
            Err(e) => panic!("case {case}: {e}"),
        };
        if ok {
            accepted += 1;
        } else {
            refused += 1;
        }
        assert_eq!(
            ok, before,
            "case {case}: to {to}, advanced_to {advanced_to}, covered {c}, uncovered {u}, not compacted {n}"
        );
    }
    // Both answers were given often.
    assert!(
        accepted > 50 && refused > 50,
        "{accepted} accepted, {refused} refused"
    );
}
