//! Upgrading a database written before term profiles: the migration adds the columns, the
//! start-up backfill profiles every stored turn, tells anchors the service derived from anchors
//! a client sent, and rebuilds the candidate counts; checkpoints made before keep their meaning.

use crate::support::*;
use crate::test_db::{EmptyDb, backend};
use gatekeeper::coverage::{Policy, Proposal, Role, TermProfile, TurnAnchors, TurnFacts, decide};
use gatekeeper::store::{Backend, migrator};
use gatekeeper_test_support::AnyStore;
use reqwest::StatusCode;
use serde_json::json;

/// The last migration before term profiles, per backend.
fn before_profiles(backend: Backend) -> i64 {
    match backend {
        Backend::Postgres => 3,
        Backend::Sqlite => 2,
    }
}

/// The backend's migrations up to the last one before term profiles: a database as an older
/// release left it.
fn migrator_before_profiles(backend: Backend) -> sqlx::migrate::Migrator {
    let last = before_profiles(backend);
    sqlx::migrate::Migrator {
        migrations: migrator(backend)
            .iter()
            .filter(|m| m.version <= last)
            .cloned()
            .collect(),
        ..sqlx::migrate::Migrator::DEFAULT
    }
}

/// Writes rows as the previous version did: three real turns (the first and last with the
/// anchors it derived, the middle one with anchors its client sent) and a checkpoint over the
/// first two that covers the first.
async fn write_old_rows(url: &str, turns: &[(String, String, Vec<String>)], summary: &str) {
    let facts: Vec<TurnFacts> = turns
        .iter()
        .enumerate()
        .take(2)
        .map(|(i, (role, _, anchors))| TurnFacts {
            id: i as i64,
            role: role.parse::<Role>().unwrap(),
            tokens: 20,
            anchors: TurnAnchors::Given(anchors.clone()),
            pinned: false,
            profile: TermProfile::default(),
        })
        .collect();
    let proposal = Proposal {
        from: 0,
        to: 1,
        summary: summary.to_owned(),
        summary_budget: 1000,
        summary_tokens: 30,
        consumed: None,
        finish_reason: None,
        end_marker: None,
        mode: Default::default(),
    };
    let verdict = decide(&proposal, &facts, &Policy::default()).unwrap();
    assert_eq!(
        verdict.covered.ids().collect::<Vec<_>>(),
        [0],
        "the old checkpoint covers turn 0"
    );
    let verdict = serde_json::to_string(&verdict).unwrap();
    let anchors: Vec<String> = turns
        .iter()
        .map(|t| serde_json::to_string(&t.2).unwrap())
        .collect();
    match backend() {
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            migrator_before_profiles(Backend::Postgres)
                .run(&pool)
                .await
                .unwrap();
            sqlx::query("INSERT INTO conversations (tenant, conversation, next_id, total_tokens, checkpoint_count, latest_checkpoint) VALUES ('default', 'old', 3, 60, 1, 1)")
                .execute(&pool).await.unwrap();
            for (i, (role, content, _)) in turns.iter().enumerate() {
                sqlx::query("INSERT INTO turns (tenant, conversation, id, role, content, tokens, anchors) VALUES ('default', 'old', $1, $2, $3, 20, $4::jsonb)")
                    .bind(i as i64).bind(role).bind(content.as_bytes()).bind(&anchors[i])
                    .execute(&pool).await.unwrap();
            }
            sqlx::query("INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, advanced_to, outcome, covered, uncovered, not_compacted, summary, summary_tokens, verdict) \
                         VALUES ('default', 'old', 1, 0, 1, 1, 'narrowed', '{[0,0]}', '{[1,1]}', '{}', $1, 30, $2::jsonb)")
                .bind(summary.as_bytes()).bind(&verdict)
                .execute(&pool).await.unwrap();
            pool.close().await;
        }
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.unwrap();
            migrator_before_profiles(Backend::Sqlite)
                .run(&pool)
                .await
                .unwrap();
            sqlx::query("INSERT INTO conversations (tenant, conversation, next_id, total_tokens, checkpoint_count, latest_checkpoint) VALUES ('default', 'old', 3, 60, 1, 1)")
                .execute(&pool).await.unwrap();
            for (i, (role, content, _)) in turns.iter().enumerate() {
                sqlx::query("INSERT INTO turns (tenant, conversation, id, role, content, tokens, anchors) VALUES ('default', 'old', ?1, ?2, ?3, 20, ?4)")
                    .bind(i as i64).bind(role).bind(content.as_bytes()).bind(&anchors[i])
                    .execute(&pool).await.unwrap();
            }
            sqlx::query("INSERT INTO checkpoints (tenant, conversation, checkpoint_id, from_id, to_id, advanced_to, outcome, covered, uncovered, not_compacted, summary, summary_tokens, verdict) \
                         VALUES ('default', 'old', 1, 0, 1, 1, 'narrowed', '[[0,0]]', '[[1,1]]', '[]', ?1, 30, ?2)")
                .bind(summary.as_bytes()).bind(&verdict)
                .execute(&pool).await.unwrap();
            pool.close().await;
        }
    }
}

async fn execute(store: &AnyStore, sql: &'static str) {
    match store {
        AnyStore::Postgres(s) => sqlx::query(sql).execute(s.pool()).await.map(|_| ()),
        AnyStore::Sqlite(s) => sqlx::query(sql).execute(s.pool()).await.map(|_| ()),
    }
    .unwrap();
}

async fn count(store: &AnyStore, sql: &'static str) -> i64 {
    match store {
        AnyStore::Postgres(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await,
        AnyStore::Sqlite(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await,
    }
    .unwrap()
}

#[tokio::test]
async fn a_database_from_before_term_profiles_is_upgraded_at_start_without_changing_old_answers() {
    let real = tau_turns(4);
    let turns: Vec<(String, String, Vec<String>)> = real[1..]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (role, content) = (t["role"].as_str().unwrap(), t["content"].as_str().unwrap());
            let anchors = if i == 1 {
                vec!["booking".to_owned()]
            } else {
                legacy_anchors(role, content)
            };
            (role.to_owned(), content.to_owned(), anchors)
        })
        .collect();
    assert!(!turns[0].2.is_empty() && !turns[2].2.is_empty());
    let summary = format!("The user asked about {}.", turns[0].2.join(", "));
    let empty = EmptyDb::new().await;
    write_old_rows(&empty.url, &turns, &summary).await;

    let db = empty.connect().await;
    assert_eq!(
        count(
            &db.store,
            "SELECT count(*) FROM turns WHERE profile IS NULL"
        )
        .await,
        3
    );
    assert_eq!(db.store.backfill_profiles().await.unwrap(), 3);
    assert_eq!(
        db.store.backfill_profiles().await.unwrap(),
        0,
        "once is enough"
    );
    assert_eq!(
        count(
            &db.store,
            "SELECT count(*) FROM turns WHERE profile IS NULL"
        )
        .await,
        0
    );
    assert!(
        count(
            &db.store,
            "SELECT count(*) FROM term_counts WHERE conversation = 'old'"
        )
        .await
            > 0
    );
    // The search index, younger than profiles, indexes the old turns from their profiles.
    assert_eq!(db.store.backfill_search().await.unwrap(), 3);
    assert_eq!(
        db.store.backfill_search().await.unwrap(),
        0,
        "once is enough"
    );
    let app = spawn_app_on(db, defaults()).await;
    for (id, (_, content, _)) in turns.iter().enumerate() {
        let word = (content.split(|c: char| !c.is_alphanumeric()))
            .max_by_key(|w| w.len())
            .unwrap();
        let path = format!("/v1/conversations/old/search?q={word}&limit=50");
        let found = expect(app.get(&path).await, StatusCode::OK).await;
        assert!(
            (found["hits"].as_array().unwrap().iter()).any(|h| h["turn"] == id as i64),
            "old turn {id} is found by {word:?}: {found}"
        );
    }

    // The anchors the old version derived are recognised as derived; the client's stay given.
    for (id, origin) in [(0, "derived"), (1, "given"), (2, "derived")] {
        let turn = expect(app.turn("old", id).await, StatusCode::OK).await;
        assert_eq!(turn["anchor_origin"], origin, "turn {id}");
        assert_eq!(
            turn["anchors"],
            json!(turns[id as usize].2),
            "turn {id} keeps its anchors"
        );
    }
    // The old checkpoint answers as before: its evidence is the anchors that decided then.
    let answer = expect(app.reconstruct("old", 0).await, StatusCode::OK).await;
    assert_eq!(answer["source"], "summary");
    let evidence: Vec<&str> = answer["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["anchor"].as_str().unwrap())
        .collect();
    assert_eq!(evidence, turns[0].2);
    let answer = expect(app.reconstruct("old", 1).await, StatusCode::OK).await;
    assert_eq!(
        (&answer["source"], &answer["reason"]),
        (&json!("raw_log"), &json!("anchor_missing"))
    );

    // New proposals decide the upgraded turns by rule 2b, like any other.
    let plan = expect(
        app.plan("old", "summary_budget=100000&from=2").await,
        StatusCode::OK,
    )
    .await;
    let anchors = plan["turns"][0]["anchors"].clone();
    let summary = format!(
        "Then {}.",
        anchors
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let verdict = expect(
        app.propose(
            "old",
            json!({ "from": 2, "to": 2, "summary": summary, "summary_budget": 100000 }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(verdict["covered"], json!([[2, 2]]));
}

#[tokio::test]
async fn a_turn_written_without_a_profile_by_an_older_process_is_decided_from_its_content() {
    let app = spawn_app().await;
    expect(
        app.append("c", json!(tau_turns(4)[1..])).await,
        StatusCode::CREATED,
    )
    .await;
    let plan = expect(app.plan("c", "summary_budget=100000").await, StatusCode::OK).await;
    // As an older process still running during an upgrade would have stored turn 2.
    execute(
        &app.store,
        "UPDATE turns SET profile = NULL, anchors_given = NULL WHERE id = 2",
    )
    .await;
    let again = expect(app.plan("c", "summary_budget=100000").await, StatusCode::OK).await;
    assert_eq!(again["turns"][2]["anchors"], plan["turns"][2]["anchors"]);
    let mut summary = String::from("Summary: ");
    for t in again["turns"].as_array().unwrap() {
        for a in t["anchors"].as_array().unwrap() {
            summary.push_str(a.as_str().unwrap());
            summary.push_str(", ");
        }
    }
    summary.push_str("done.");
    let verdict = expect(
        app.propose(
            "c",
            json!({ "from": 0, "to": 2, "summary": summary, "summary_budget": 100000 }),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert!(gatekeeper_covers(&verdict, 2), "{verdict}");
}

fn gatekeeper_covers(verdict: &serde_json::Value, id: i64) -> bool {
    expand(&verdict["covered"]).contains(&id)
}
