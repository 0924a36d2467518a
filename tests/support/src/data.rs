//! Real data and request builders: tau-bench turns as append JSON, token counts, anchors as
//! the service derives them, id ranges.

use gatekeeper::tau_bench::{self, Conversation};
use serde_json::{Value, json};
use std::sync::OnceLock;

/// The 200 real tau-bench conversations, read once per test process.
pub fn tau() -> &'static [Conversation] {
    static DATA: OnceLock<Vec<Conversation>> = OnceLock::new();
    DATA.get_or_init(|| tau_bench::read_default().expect("tau-bench data beside the repository"))
}

/// Real turns as append JSON (no ids, tokens or anchors: the service fills them in), cycling
/// through the tau-bench conversations until `n` turns.
pub fn tau_turns(n: usize) -> Vec<Value> {
    tau()
        .iter()
        .flat_map(|c| &c.turns)
        .filter(|t| !t.text().trim().is_empty())
        .cycle()
        .take(n)
        .map(|t| json!({ "role": t.role, "content": t.text() }))
        .collect()
}

/// The o200k_base count the service uses by default.
pub fn count_tokens(text: &str) -> u32 {
    gatekeeper::tokens::TokenCounter::new(Default::default()).count(text)
}

fn anchor_source(role: &str) -> gatekeeper::coverage::derive::AnchorSource {
    use gatekeeper::coverage::derive::AnchorSource;
    if role == "tool" {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    }
}

/// The anchors the service derived before rule 2b (the tier ranking alone): tests that are not
/// about derivation send these as given anchors, so their turns are decided by rule 2 alone.
pub fn legacy_anchors(role: &str, content: &str) -> Vec<String> {
    use gatekeeper::coverage::derive::{DEFAULT_ANCHOR_COUNT, derive_anchors};
    derive_anchors(content, anchor_source(role), DEFAULT_ANCHOR_COUNT)
}

/// The provisional anchors an append of `turns` (append JSON, the first batch of a new
/// conversation) answers: given anchors as sent; derived ones ranked by rarity over the turns
/// before them, as the service ranks them.
pub fn provisional_anchors(turns: &[Value]) -> Vec<Vec<String>> {
    use gatekeeper::coverage::derive::{DEFAULT_ANCHOR_COUNT, Draft, rank_by_rarity};
    let drafts = turns.iter().map(|t| {
        let content = t["content"].as_str().unwrap();
        match t.get("anchors") {
            Some(_) => Draft::terms_only(content),
            None => Draft::new(content, anchor_source(t["role"].as_str().unwrap())),
        }
    });
    let (profiles, _) = rank_by_rarity(drafts, &Default::default());
    turns
        .iter()
        .zip(profiles)
        .map(|(t, profile)| match t.get("anchors") {
            Some(given) => serde_json::from_value(given.clone()).unwrap(),
            None => profile
                .candidates()
                .take(DEFAULT_ANCHOR_COUNT)
                .map(|c| c.text.to_owned())
                .collect(),
        })
        .collect()
}

/// One whole tau-bench conversation as append JSON (turns without text are skipped: the
/// service has nothing to store for them).
pub fn tau_conversation(index: usize) -> Vec<Value> {
    tau()[index]
        .turns
        .iter()
        .filter(|t| !t.text().trim().is_empty())
        .map(|t| json!({ "role": t.role, "content": t.text() }))
        .collect()
}

/// A real tau-bench tool result (JSON text).
pub fn tau_tool_output() -> String {
    tau()
        .iter()
        .flat_map(|c| &c.turns)
        .find(|t| t.role == "tool" && t.content.len() > 500)
        .map(|t| t.content.clone())
        .expect("the data holds tool results")
}

/// `ceil(prose / 5 + tool / 3)` without floating point: the default policy's ceiling.
pub fn default_required_budget(prose: u64, tool: u64) -> u64 {
    (3 * prose + 5 * tool).div_ceil(15)
}

/// `[[0,2],[5,5]]` → `[0, 1, 2, 5]`.
pub fn expand(ranges: &Value) -> Vec<i64> {
    ranges
        .as_array()
        .unwrap_or_else(|| panic!("id ranges, got {ranges}"))
        .iter()
        .flat_map(|r| r[0].as_i64().unwrap()..=r[1].as_i64().unwrap())
        .collect()
}

/// `[0, 1, 2, 5]` → `[[0,2],[5,5]]`.
pub fn ranges_of(ids: &[i64]) -> Value {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<[i64; 2]> = Vec::new();
    for id in ids {
        match out.last_mut() {
            Some(last) if last[1] + 1 == id => last[1] = id,
            _ => out.push([id, id]),
        }
    }
    json!(out)
}

/// A turn for append JSON with explicit tokens and anchors (for tests about a rule itself).
pub fn turn(role: &str, content: &str, tokens: u32, anchors: &[&str]) -> Value {
    json!({ "role": role, "content": content, "tokens": tokens, "anchors": anchors })
}

/// The anchor matcher's worst case: 10 turns × 64 given anchors, each 40 `a`s and a word of its
/// own, and a summary of 400,000 `a`s that holds none of them. Walked occurrence by occurrence
/// this is 640 × 400,000 comparisons of ~80 bytes (minutes); bounded, the automaton decides it
/// at once (`coverage::matching`).
pub fn matcher_worst_case() -> (Vec<Value>, String) {
    let turns = (0..10)
        .map(|t| {
            let anchors: Vec<String> = (0..64)
                .map(|k| format!("{}x{t}y{k}", "a ".repeat(40)))
                .collect();
            json!({ "role": "user", "content": anchors.join(" "), "tokens": 500, "anchors": anchors })
        })
        .collect();
    (turns, format!("{}done.", "a ".repeat(400_000)))
}
