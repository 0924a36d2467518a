//! Rarity-aware derivation (issue 11, item 2): the candidates a turn is profiled with when it is
//! appended, on real tau-bench conversations and on small cases. `derive_anchors.rs` covers the
//! tier ranking alone, which plain words never reach.

use std::collections::BTreeMap;

use gatekeeper_coverage::TermProfile;
use gatekeeper_coverage::derive::{AnchorSource, Draft, is_stop_word, rank_by_rarity};
use gatekeeper_tau_bench::{self as tau_bench, TranscriptTurn};

fn source(role: &str) -> AnchorSource {
    if role == "tool" {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    }
}

/// The profiles of one conversation's turns, appended in order, as the service ranks them.
fn profiles(turns: &[(&str, &str)]) -> Vec<TermProfile> {
    let drafts = turns
        .iter()
        .map(|(role, content)| Draft::new(content, source(role)));
    rank_by_rarity(drafts, &Default::default()).0
}

fn candidates(profile: &TermProfile) -> Vec<&str> {
    profile.candidates().map(|c| c.text).collect()
}

/// The oracle's notion, independent of the tokenizer the service uses: a run of 3 or more
/// letters or digits that is not a stop-word.
fn has_content_word(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|word| word.chars().count() >= 3 && !is_stop_word(word))
}

#[test]
fn nine_in_ten_turns_of_every_role_with_a_content_word_get_candidates() {
    let data = tau_bench::read_gz(&tau_bench::default_path()).expect("tau-bench data");
    // role → (turns with a content word, of them with at least one candidate)
    let mut by_role: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for conversation in &data {
        let texts: Vec<(String, String)> = conversation
            .turns
            .iter()
            .map(|t: &TranscriptTurn| (t.role.clone(), t.text().into_owned()))
            .collect();
        let turns: Vec<(&str, &str)> = texts
            .iter()
            .map(|(r, c)| (r.as_str(), c.as_str()))
            .collect();
        for ((role, content), profile) in turns.iter().zip(profiles(&turns)) {
            if !has_content_word(content) {
                continue;
            }
            let counts = by_role.entry(role.to_string()).or_default();
            counts.0 += 1;
            counts.1 += usize::from(profile.candidate_count() > 0);
        }
    }
    for role in ["user", "assistant", "tool"] {
        let (with_word, anchored) = by_role[role];
        assert!(with_word > 500, "{role}: {with_word} turns");
        assert!(
            anchored * 10 >= with_word * 9,
            "{role}: {anchored} of {with_word} turns with a content word have candidates"
        );
    }
}

#[test]
fn a_prose_turn_without_identifiers_gets_its_plain_words() {
    let profile = &profiles(&[("user", "Yes, please proceed with that booking. Thank you!")])[0];
    let words = candidates(profile);
    assert!(words.contains(&"proceed"), "{words:?}");
    assert!(words.contains(&"booking"), "{words:?}");
    assert!(!words.iter().any(|w| is_stop_word(w)), "{words:?}");
}

#[test]
fn what_earlier_turns_already_had_ranks_after_what_is_new() {
    let ranked = profiles(&[
        ("user", "My reservation ZFA04Y needs a change."),
        ("user", "For ZFA04Y, the baggage allowance please."),
    ]);
    let second = candidates(&ranked[1]);
    let seen = second.iter().position(|w| *w == "ZFA04Y").expect("ZFA04Y");
    let new = second
        .iter()
        .position(|w| *w == "baggage")
        .expect("baggage");
    assert!(new < seen, "{second:?}");
    // Alone, the reservation code ranks first (its tier is above plain words).
    let alone = profiles(&[("user", "For ZFA04Y, the baggage allowance please.")]);
    assert_eq!(candidates(&alone[0])[0], "ZFA04Y");
}

#[test]
fn a_turn_repeating_sixteen_codes_and_adding_sixteen_new_ones_is_profiled_with_the_new_ones() {
    // Rarity picks the 16 a profile keeps from the turn's best 32 by tier: all of the new ones
    // here, which come after the repeated ones in the text.
    let old: Vec<String> = (101..=116).map(|n| format!("AAA{n}")).collect();
    let new: Vec<String> = (201..=216).map(|n| format!("BBB{n}")).collect();
    let first = old.join(" ");
    let second = format!("{first} {}", new.join(" "));
    let profiles = profiles(&[("tool", &first), ("tool", &second)]);
    let mut kept = candidates(&profiles[1]);
    kept.sort_unstable();
    assert_eq!(kept, new);
}

#[test]
fn a_drafts_candidate_keys_are_the_keys_whose_counts_the_service_reads_for_it() {
    let draft = Draft::new(
        "Rebook ZFA04Y for the honeymoon in Seattle",
        AnchorSource::Prose,
    );
    let keys: Vec<_> = draft.candidate_keys().collect();
    assert_eq!(keys.len(), 4, "{keys:?}");
    let profile = draft.into_profile();
    assert_eq!(keys, profile.candidate_keys().collect::<Vec<_>>());
}
