//! Search's arithmetic: BM25 scores to four decimals, and the read budget that skips turns
//! whose 32-bit term keys collide with a query term's.

use crate::support::*;
use gatekeeper::search::parse_query;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;

async fn hits(app: &TestApp, q: &str, limit: u32) -> Vec<Value> {
    let answer = crate::search::search(app, "c", q, limit).await;
    answer["hits"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_term_one_turn_of_four_holds_scores_its_idf_to_four_decimals() {
    let app = spawn_app().await;
    let turns = json!([
        turn("user", "Rebook ZFA04Y for the honeymoon.", 20, &[]),
        turn("assistant", "Which date do you prefer?", 20, &[]),
        turn("user", "The second of May, please.", 20, &[]),
        turn("assistant", "Done: the new booking is confirmed.", 20, &[]),
    ]);
    expect(app.append("c", turns).await, StatusCode::CREATED).await;
    let found = hits(&app, "honeymoon", 10).await;
    assert_eq!(found.len(), 1, "{found:?}");
    // One hit: its length is the mean, so BM25 is the idf alone, ln(1 + (4 - 1 + 0.5) / 1.5).
    let idf = (1.0f64 + 3.5 / 1.5).ln();
    assert_eq!(idf, 1.2039728043259361);
    assert_eq!(found[0]["score"], json!(1.204), "{}", found[0]);
}

/// Two different searchable words with the same term key (the index's 32-bit hash).
fn colliding_words() -> (String, String) {
    let mut seen: HashMap<u32, String> = HashMap::new();
    for i in 0u32.. {
        let mut word = "zq".to_owned();
        let mut n = i;
        for _ in 0..5 {
            word.push(char::from(b'a' + (n % 26) as u8));
            n /= 26;
        }
        let terms = parse_query(&word).unwrap().terms;
        assert_eq!(terms.len(), 1, "{word} is searchable");
        if let Some(other) = seen.insert(terms[0].key.0, word.clone()) {
            return (other, word);
        }
    }
    unreachable!("a 32-bit key collides within 2^32 + 1 words")
}

#[tokio::test]
async fn turns_whose_keys_only_collide_with_the_term_are_skipped_within_four_reads_a_hit() {
    let (decoy, wanted) = colliding_words();
    let app = spawn_app().await;
    // Seven short turns ranked ahead (same key, higher BM25), then the one that holds the word.
    let mut turns: Vec<Value> = (0..7)
        .map(|i| turn("user", &format!("Note {i}: {decoy}."), 5, &[]))
        .collect();
    turns.push(turn(
        "user",
        &format!("The booking code is {wanted}, for the trip to Boston in May."),
        50,
        &[],
    ));
    expect(app.append("c", json!(turns)).await, StatusCode::CREATED).await;
    // A limit of 2 reads at most 8 ranked turns: the 8th holds it.
    let found = hits(&app, &wanted, 2).await;
    let turns: Vec<&Value> = found.iter().map(|h| &h["turn"]).collect();
    assert_eq!(turns, [&json!(7)], "{found:?}");
}
