//! `derive_anchors` on real tau-bench airline turns and on small hand-made cases.

use std::collections::HashSet;
use std::sync::OnceLock;

use gatekeeper_coverage::derive::{
    AnchorSource, DEFAULT_ANCHOR_COUNT, MAX_ANCHOR_CHARS, derive_anchors, is_stop_word,
};
use gatekeeper_tau_bench::{self as tau_bench, Conversation, TranscriptTurn};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

/// Parsed once: the file is 5,308 turns and most tests walk all of them.
fn conversations() -> &'static [Conversation] {
    static DATA: OnceLock<Vec<Conversation>> = OnceLock::new();
    DATA.get_or_init(|| {
        tau_bench::read_gz(&tau_bench::default_path()).expect("tau-bench data in ../shared/data")
    })
}

fn turns() -> impl Iterator<Item = &'static TranscriptTurn> {
    conversations().iter().flat_map(|c| c.turns.iter())
}

/// The mapping the service uses: tool results are tool output, everything else prose.
fn source(turn: &TranscriptTurn) -> AnchorSource {
    if turn.role == "tool" {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    }
}

fn anchors(turn: &TranscriptTurn) -> Vec<String> {
    derive_anchors(&turn.text(), source(turn), DEFAULT_ANCHOR_COUNT)
}

fn prose(text: &str) -> Vec<String> {
    derive_anchors(text, AnchorSource::Prose, 10)
}

fn turn_of(conversation: &str, index: usize) -> &'static TranscriptTurn {
    let found = conversations()
        .iter()
        .find(|c| c.conversation == conversation)
        .unwrap_or_else(|| panic!("{conversation} is in the data"));
    &found.turns[index]
}

/// Every key of every object in `value`, and every string or number value.
fn keys_and_values(value: &serde_json::Value, keys: &mut HashSet<String>, values: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                keys.insert(k.clone());
                keys_and_values(v, keys, values);
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                keys_and_values(v, keys, values);
            }
        }
        serde_json::Value::String(s) => {
            values.push_str(s);
            values.push('\n');
        }
        serde_json::Value::Number(n) => {
            values.push_str(&n.to_string());
            values.push('\n');
        }
        _ => {}
    }
}

// --- real data ---------------------------------------------------------------------------------

#[test]
fn the_data_file_holds_all_5308_turns() {
    // The all-turns properties below mean little if the reader silently lost some.
    assert_eq!(conversations().len(), 200);
    assert_eq!(turns().count(), 5308);
}

#[test]
fn a_tool_result_with_a_reservation_yields_its_reservation_code() {
    // airline-2-0, turn 8: get_reservation_details for JG7FMM.
    let turn = turns()
        .find(|t| t.role == "tool" && t.content.starts_with(r#"{"reservation_id": "JG7FMM""#))
        .expect("the JG7FMM reservation record");
    let anchors = anchors(turn);
    assert!(anchors.contains(&"JG7FMM".to_owned()), "{anchors:?}");
    // Its owner is the other top-level identifier.
    assert!(
        anchors.contains(&"omar_davis_3817".to_owned()),
        "{anchors:?}"
    );
}

#[test]
fn every_reservation_record_yields_its_reservation_code_and_user_id() {
    // The record's own identifiers outrank longer nested values (timestamps, payment ids).
    let mut records = 0;
    for turn in turns().filter(|t| t.role == "tool") {
        let Ok(serde_json::Value::Object(record)) = serde_json::from_str(&turn.content) else {
            continue;
        };
        let (Some(code), Some(user)) = (record.get("reservation_id"), record.get("user_id")) else {
            continue;
        };
        records += 1;
        let anchors = anchors(turn);
        for id in [code, user] {
            let id = id.as_str().expect("ids are strings");
            assert!(anchors.iter().any(|a| a == id), "{id} not in {anchors:?}");
        }
    }
    assert!(records > 500, "only {records} reservation records");
}

#[test]
fn a_flight_search_result_yields_its_flight_numbers() {
    let turn = turn_of("airline-0-0", 9);
    assert_eq!(turn.name.as_deref(), Some("search_direct_flight"));
    assert_eq!(anchors(turn)[..2], ["HAT069", "HAT083"]);
}

#[test]
fn a_user_turn_mentioning_its_user_and_reservation_ids_yields_both() {
    let turn = turn_of("airline-10-0", 3);
    assert_eq!(
        turn.content,
        "My user ID is mia_kim_4397, and the reservation ID is H9ZU1C."
    );
    assert_eq!(anchors(turn), ["mia_kim_4397", "H9ZU1C"]);
}

#[test]
fn a_user_turn_giving_only_a_user_id_yields_just_that_id() {
    // "user ID" is generic: the id is the only distinctive token.
    let turn = turn_of("airline-0-0", 3);
    assert_eq!(turn.content, "Sure, my user ID is mia_li_3668.");
    assert_eq!(anchors(turn), ["mia_li_3668"]);
}

#[test]
fn json_keys_of_tool_output_are_never_anchors() {
    let mut checked = 0;
    for turn in turns().filter(|t| t.role == "tool") {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&turn.content) else {
            continue;
        };
        let mut keys = HashSet::new();
        let mut values = String::new();
        keys_and_values(&value, &mut keys, &mut values);
        // Some keys are also values (a payment method is keyed by its own id); those may be.
        for anchor in derive_anchors(&turn.content, AnchorSource::ToolOutput, 10) {
            assert!(
                !keys.contains(&anchor) || values.contains(&anchor),
                "key {anchor:?} in {}",
                turn.content
            );
        }
        checked += 1;
    }
    assert!(checked > 900, "only {checked} JSON tool results");
}

#[test]
fn argument_keys_of_rendered_tool_calls_are_not_anchors() {
    // Tool-call-only turns render as `name({"user_id": "..."})` prose; quoted keys are skipped.
    let mut checked = 0;
    for turn in turns().filter(|t| t.content.is_empty() && !t.tool_calls.is_empty()) {
        let mut keys = HashSet::new();
        let mut values = String::new();
        for call in &turn.tool_calls {
            let arguments = serde_json::from_str(&call.arguments).expect("JSON arguments");
            keys_and_values(&arguments, &mut keys, &mut values);
        }
        // A key the model also wrote inside a value ("user_id: yara_garcia_1905") may be one.
        for anchor in derive_anchors(&turn.text(), AnchorSource::Prose, 10) {
            assert!(
                !keys.contains(&anchor) || values.contains(&anchor),
                "key {anchor:?} in {:?}",
                turn.text()
            );
        }
        checked += 1;
    }
    assert!(checked > 1000, "only {checked} tool-call turns");
}

#[test]
fn a_tool_call_only_turn_yields_its_argument_values() {
    let turn = turn_of("airline-0-0", 6);
    assert!(turn.content.is_empty());
    assert_eq!(anchors(turn)[0], "mia_li_3668");
}

#[test]
fn every_anchor_of_every_turn_occurs_in_its_content_and_has_alphanumeric_ends() {
    let mut with_anchors = 0;
    for turn in turns() {
        let text = turn.text();
        let anchors = anchors(turn);
        with_anchors += usize::from(!anchors.is_empty());
        for anchor in &anchors {
            assert!(text.contains(anchor.as_str()), "{anchor:?} not in {text:?}");
            assert!(anchor.starts_with(char::is_alphanumeric), "{anchor:?}");
            assert!(anchor.ends_with(char::is_alphanumeric), "{anchor:?}");
            assert!(anchor.chars().count() <= MAX_ANCHOR_CHARS, "{anchor:?}");
        }
    }
    // Most turns carry something distinctive; chit-chat ("Thank you!") does not.
    assert!(
        with_anchors > 3000,
        "only {with_anchors} turns with anchors"
    );
}

#[test]
fn derivation_is_deterministic() {
    for turn in turns() {
        assert_eq!(anchors(turn), anchors(turn));
    }
}

#[test]
fn no_turn_gets_more_than_max_anchors() {
    for turn in turns().step_by(7) {
        for max in 0..=6 {
            let anchors = derive_anchors(&turn.text(), source(turn), max);
            assert!(anchors.len() <= max);
        }
    }
}

#[test]
fn a_smaller_max_keeps_a_prefix_of_a_larger_one() {
    // The ranking does not depend on max: asking for fewer drops the least distinctive.
    for turn in turns().step_by(5) {
        let text = turn.text();
        let five = derive_anchors(&text, source(turn), 5);
        let three = derive_anchors(&text, source(turn), 3);
        assert_eq!(three[..], five[..three.len()]);
    }
}

#[test]
fn no_turn_gets_duplicate_anchors_even_ignoring_case() {
    for turn in turns() {
        let anchors = derive_anchors(&turn.text(), source(turn), 10);
        let folded: HashSet<String> = anchors.iter().map(|a| a.to_lowercase()).collect();
        assert_eq!(folded.len(), anchors.len(), "{anchors:?}");
    }
}

#[test]
fn no_turn_gets_a_stop_word_anchor() {
    for turn in turns() {
        for anchor in derive_anchors(&turn.text(), source(turn), 10) {
            assert!(!is_stop_word(&anchor), "{anchor:?}");
        }
    }
}

#[test]
fn chit_chat_turns_get_no_anchors() {
    let turn = turn_of("airline-0-0", 19);
    assert_eq!(
        turn.content,
        "Yes, please proceed with that booking. Thank you!"
    );
    assert!(anchors(turn).is_empty());
}

// --- hand-made cases ---------------------------------------------------------------------------

#[test]
fn versions_and_paths_are_anchors_without_their_surrounding_punctuation() {
    // The leading slash goes: anchors begin and end alphanumeric for word-boundary matching.
    assert_eq!(prose("Deploy v1.2 to /srv/app now"), ["v1.2", "srv/app"]);
    assert_eq!(prose("see (v1.2, and HAT123."), ["HAT123", "v1.2"]);
}

#[test]
fn capitalized_words_starting_a_sentence_are_ignored() {
    assert_eq!(prose("Yesterday Alice met Bob"), ["Alice", "Bob"]);
    assert_eq!(prose("The plan is set. Later we call Carol."), ["Carol"]);
    assert_eq!(prose("ok\nMonday works for Dave"), ["Dave"]);
    assert!(prose("The").is_empty());
}

#[test]
fn a_title_does_not_end_the_sentence() {
    assert_eq!(prose("We met Mr. Smith there"), ["Smith"]);
}

#[test]
fn all_caps_and_camel_case_words_are_anchors_even_at_sentence_start() {
    assert_eq!(prose("JFK to SEA"), ["JFK", "SEA"]);
    assert_eq!(prose("HashMap beats the list"), ["HashMap"]);
    assert_eq!(prose("use an iPhone"), ["iPhone"]);
}

#[test]
fn a_turn_of_only_stop_words_gets_no_anchors() {
    assert!(prose("I would like to do that, if you can. Thanks!").is_empty());
    assert!(prose("").is_empty());
    assert!(prose("   \n\t ").is_empty());
}

#[test]
fn short_numbers_and_ordinals_are_not_anchors() {
    assert!(prose("call me at 5 or 12, on the 3rd or 21st").is_empty());
    assert_eq!(prose("it costs $1,250 or 300"), ["1,250", "300"]);
}

#[test]
fn tiers_rank_digits_then_identifiers_then_cased_words_then_names() {
    assert_eq!(
        prose("then Alice saw NASA use pkg/mod at 2024-05-15"),
        ["2024-05-15", "pkg/mod", "NASA", "Alice"]
    );
}

#[test]
fn within_a_tier_longer_tokens_come_first_and_ties_keep_text_order() {
    assert_eq!(
        prose("AB1 ABCD12 XY9 CD12"),
        ["ABCD12", "CD12", "AB1", "XY9"]
    );
}

#[test]
fn duplicates_are_dropped_ignoring_case() {
    assert_eq!(prose("then JFK, again jfk and JFK"), ["JFK"]);
    assert_eq!(prose("ref abc123 and ABC123"), ["abc123"]);
}

#[test]
fn prose_words_with_punctuation_are_not_identifiers() {
    assert!(prose("a one-way or round-trip, and/or e.g. a quick look").is_empty());
}

#[test]
fn overlong_tokens_are_skipped() {
    let blob = format!("https://example.com/{}", "a1".repeat(40));
    assert_eq!(prose(&format!("open {blob} or GH42")), ["GH42"]);
}

#[test]
fn json_tool_output_yields_values_not_keys() {
    let json = r#"{"reservation_id": "ZFA04Y", "status": "cancelled", "total": 1250, "ok": true, "note": null}"#;
    assert_eq!(
        derive_anchors(json, AnchorSource::ToolOutput, 10),
        ["ZFA04Y", "1250"]
    );
}

#[test]
fn json_looking_prose_is_read_as_json() {
    let json = r#"  [{"flight_number": "HAT069", "date": "2024-05-20"}]"#;
    assert_eq!(
        derive_anchors(json, AnchorSource::Prose, 10),
        ["HAT069", "2024-05-20"]
    );
}

#[test]
fn json_numbers_are_rendered_as_in_the_text() {
    assert_eq!(
        derive_anchors("[255.0, 7, 1e3]", AnchorSource::ToolOutput, 10),
        ["255.0"]
    );
}

#[test]
fn json_free_text_values_are_split_into_words() {
    let json = r#"{"message": "Seat 14C confirmed. Contact Alice at gate B22"}"#;
    assert_eq!(
        derive_anchors(json, AnchorSource::ToolOutput, 10),
        ["14C", "B22", "Alice"]
    );
}

#[test]
fn escaped_json_strings_that_do_not_occur_verbatim_are_skipped() {
    // `\/` decodes to `/`, so "srv/app9" is not in the text; the plain value is.
    let json = r#"{"path": "srv\/app9", "id": "Q77"}"#;
    assert_eq!(derive_anchors(json, AnchorSource::ToolOutput, 10), ["Q77"]);
}

#[test]
fn tool_output_that_is_not_json_is_read_as_prose() {
    let text = "Certificate certificate_3221322 added to user mei_brown_7075 with amount 200.";
    assert_eq!(
        derive_anchors(text, AnchorSource::ToolOutput, 10),
        ["certificate_3221322", "mei_brown_7075", "200"]
    );
    assert_eq!(
        derive_anchors("{broken: HAT001", AnchorSource::ToolOutput, 10),
        ["HAT001"]
    );
}

#[test]
fn tokens_whose_ends_change_under_nfkc_are_skipped() {
    // `㈠` is alphanumeric but normalizes to `(一)`, which word boundaries cannot match.
    assert_eq!(prose("see ㈠AB12 or CD34"), ["CD34"]);
}

#[test]
fn zero_max_yields_nothing() {
    assert!(derive_anchors("HAT069 JFK", AnchorSource::Prose, 0).is_empty());
}

// --- properties --------------------------------------------------------------------------------

fn check_anchors(input: &str, source: AnchorSource, max: usize) -> Result<(), TestCaseError> {
    let anchors = derive_anchors(input, source, max);
    prop_assert!(anchors.len() <= max);
    for anchor in &anchors {
        prop_assert!(input.contains(anchor.as_str()), "{:?} not in input", anchor);
        prop_assert!(anchor.starts_with(char::is_alphanumeric), "{:?}", anchor);
        prop_assert!(anchor.ends_with(char::is_alphanumeric), "{:?}", anchor);
        // The matcher compares after NFKC: the ends must survive it.
        let normalized: String = anchor.nfkc().collect();
        prop_assert!(
            normalized.starts_with(char::is_alphanumeric),
            "{:?}",
            normalized
        );
        prop_assert!(
            normalized.ends_with(char::is_alphanumeric),
            "{:?}",
            normalized
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics_and_yields_substrings_with_alphanumeric_ends(
        input in any::<String>(),
        max in 0usize..8,
    ) {
        check_anchors(&input, AnchorSource::Prose, max)?;
        check_anchors(&input, AnchorSource::ToolOutput, max)?;
    }

    #[test]
    fn json_like_text_never_panics_and_yields_substrings_with_alphanumeric_ends(
        input in r#"[\[\]{}",:. \\/_a-zA-Z0-9ée\n-]{0,80}"#,
        max in 0usize..8,
    ) {
        check_anchors(&input, AnchorSource::ToolOutput, max)?;
        check_anchors(&input, AnchorSource::Prose, max)?;
    }

    #[test]
    fn json_values_never_panic_and_yield_substrings(
        value in json_value(),
        max in 0usize..8,
    ) {
        let text = value.to_string();
        check_anchors(&text, AnchorSource::ToolOutput, max)?;
    }
}

/// Small random JSON documents with escapes, unicode and nesting.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        any::<String>().prop_map(serde_json::Value::String),
        "[A-Z0-9_/\" -]{0,12}".prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
