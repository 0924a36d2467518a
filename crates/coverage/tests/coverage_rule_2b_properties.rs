//! Invariants of rule 2b over random texts, checked against a naive matcher that reads the
//! turns' content (the decision never does: it counts term keys).

mod common;

use common::{derived, proposal};

use gatekeeper_coverage::derive::{AnchorSource, Draft};
use gatekeeper_coverage::terms::term_keys;
use gatekeeper_coverage::{Policy, Reason, decide, decide_with_evidence};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::canonical_combining_class;

/// Tokens that overlap, nest inside paths and identifiers, and differ only by case, width,
/// composition or marks.
const WORDS: &[&str] = &[
    "ZFA04Y",
    "zfa04y",
    "ＺＦＡ０４Ｙ",
    "src/store/mod.rs",
    "store",
    "mod.rs",
    "mia_li_3668",
    "li",
    "3668",
    "Straße",
    "STRASSE",
    "café",
    "cafe\u{301}",
    "İstanbul",
    "istanbul",
    "honeymoon",
    "Honeymoon",
    "Boston",
    "v1.2",
    "1,250",
    "250",
    "HAT170",
    "$100",
    "#123",
    "round-trip",
    "trip",
    "New",
    "York",
    "ﬁle",
    "file",
];

const SEPARATORS: &[&str] = &[" ", ", ", ". ", "/", "_", "-", "\n", " (", ") ", ": "];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec((0..WORDS.len(), 0..SEPARATORS.len()), 1..8).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(w, s)| format!("{}{}", WORDS[w], SEPARATORS[s]))
            .collect()
    })
}

/// Rule 2's matching, written out naively: NFKC, full case folding, whitespace collapsed; an
/// occurrence counts when no letter, digit or combining mark touches either end.
fn naive_present(anchor: &str, text: &str) -> bool {
    fn norm(s: &str) -> String {
        let folded: String = caseless::default_case_fold_str(&s.nfkc().collect::<String>())
            .nfkc()
            .collect();
        folded.split_whitespace().collect::<Vec<_>>().join(" ")
    }
    fn word(c: char) -> bool {
        c.is_alphanumeric() || canonical_combining_class(c) != 0
    }
    let (anchor, text) = (norm(anchor), norm(text));
    !anchor.is_empty()
        && text.char_indices().any(|(i, _)| {
            text[i..].starts_with(&anchor)
                && !text[..i].chars().next_back().is_some_and(word)
                && !text[i + anchor.len()..].chars().next().is_some_and(word)
        })
}

/// A range's texts and a summary made of some of them and some loose words, so that anchors are
/// often present.
fn range_and_summary() -> impl Strategy<Value = (Vec<String>, String)> {
    (
        prop::collection::vec(text(), 1..8),
        prop::collection::vec((0usize..8, 0..WORDS.len()), 0..12),
    )
        .prop_map(|(texts, pieces)| {
            let mut summary = String::new();
            for (t, w) in pieces {
                summary.push_str(texts.get(t).map_or(WORDS[w], String::as_str));
                summary.push_str(". ");
            }
            (texts, summary)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_turns_term_keys_hold_every_candidate_its_text_contains(a in text(), b in text()) {
        let keys = term_keys(&b);
        for candidate in Draft::new(&a, AnchorSource::Prose).into_profile().candidates() {
            if naive_present(candidate.text, &b) {
                prop_assert!(
                    keys.binary_search(&candidate.key).is_ok(),
                    "{:?} occurs in {:?} but is not among its terms", candidate.text, b
                );
            }
        }
    }

    #[test]
    fn a_turn_is_covered_only_by_its_anchors_in_the_summary_its_own_words_first(
        (texts, summary) in range_and_summary(),
    ) {
        let turns = derived(0, &texts);
        let d = decide_with_evidence(&proposal(0, texts.len() as i64 - 1, &summary), &turns, &Policy::default()).unwrap();
        let held_elsewhere = |k: usize, anchor: &str| {
            texts.iter().enumerate().any(|(j, other)| j != k && naive_present(anchor, other))
        };
        for (k, turn) in turns.iter().enumerate() {
            let used: Vec<&str> = turn.profile.candidates().enumerate()
                .filter(|(i, _)| d.candidates_used[k] & (1 << i) != 0)
                .map(|(_, c)| c.text)
                .collect();
            prop_assert_eq!(d.verdict.covered.contains(turn.id), !used.is_empty(), "turn {}", k);
            for anchor in &used {
                prop_assert!(naive_present(anchor, &summary), "{:?} not in {:?}", anchor, summary);
            }
            // A word another turn holds decides only after every word the turn has alone.
            if used.iter().any(|a| held_elsewhere(k, a)) {
                for own in turn.profile.candidates().filter(|c| !held_elsewhere(k, c.text)) {
                    prop_assert!(used.contains(&own.text), "turn {} is covered by {:?} but not by its own {:?}", k, used, own.text);
                }
            }
        }
    }

    #[test]
    fn a_derived_verdict_never_depends_on_the_order_turns_arrive_in(
        texts in prop::collection::vec(text(), 1..8),
        summary in text(),
        rotate in 0usize..8,
    ) {
        let turns = derived(0, &texts);
        let expected = decide(&proposal(0, texts.len() as i64 - 1, &summary), &turns, &Policy::default()).unwrap();
        let mut shuffled = turns.clone();
        let n = shuffled.len();
        shuffled.rotate_left(rotate % n);
        shuffled.reverse();
        prop_assert_eq!(decide(&proposal(0, texts.len() as i64 - 1, &summary), &shuffled, &Policy::default()).unwrap(), expected);
    }
}

/// Every branch of rule 2b the properties above are meant to exercise, by name.
const BRANCHES: &[&str] = &[
    "covered on anchors no other turn holds",
    "covered on an anchor other turns hold too",
    "uncovered: every anchor checked is shared",
    "uncovered: an anchor of its own is missing",
    "uncovered: no_anchors",
    "a turn with some but not all of its candidates in the summary",
];

#[test]
fn the_generator_reaches_every_branch_of_rule_2b_the_properties_speak_of() {
    common::assert_branches_reached(512, range_and_summary(), BRANCHES, |(texts, summary)| {
        let turns = derived(0, &texts);
        let p = proposal(0, texts.len() as i64 - 1, &summary);
        let d = decide_with_evidence(&p, &turns, &Policy::default()).unwrap();
        let shared = |k: usize, anchor: &str| {
            (texts.iter().enumerate()).any(|(j, other)| j != k && naive_present(anchor, other))
        };
        let mut reached = Vec::new();
        for (k, turn) in turns.iter().enumerate() {
            let candidates: Vec<&str> = turn.profile.candidates().map(|c| c.text).collect();
            let present = candidates
                .iter()
                .filter(|a| naive_present(a, &summary))
                .count();
            if present > 0 && present < candidates.len() {
                reached.push("a turn with some but not all of its candidates in the summary");
            }
            if d.verdict.covered.contains(turn.id) {
                let used = (candidates.iter().enumerate())
                    .filter(|(i, _)| d.candidates_used[k] & (1 << i) != 0);
                reached.push(if used.clone().any(|(_, a)| shared(k, a)) {
                    "covered on an anchor other turns hold too"
                } else {
                    "covered on anchors no other turn holds"
                });
                continue;
            }
            let detail = d.verdict.turns.iter().find(|t| t.id == turn.id).unwrap();
            reached.push(match detail.reason {
                Reason::NoAnchors => "uncovered: no_anchors",
                _ if !detail.evidence.is_empty()
                    && detail.evidence.iter().all(|e| e.turns_sharing > 1) =>
                {
                    "uncovered: every anchor checked is shared"
                }
                _ => "uncovered: an anchor of its own is missing",
            });
        }
        reached
    });
}
