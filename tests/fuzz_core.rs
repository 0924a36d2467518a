//! Fuzzing the core with proptest: arbitrary Unicode through the normalizer and the anchor
//! matcher, arbitrary proposals through the decision. Cases come from `PROPTEST_CASES`
//! (CI runs a short bounded run; `PROPTEST_CASES=200000 cargo test --release --test fuzz_core`
//! is the long one), and failures found are kept in `tests/fuzz_core.proptest-regressions`.

use gatekeeper::coverage::normalize::normalize;
use gatekeeper::coverage::{
    IdRange, Mode, Outcome, Policy, Proposal, Role, TermProfile, TurnAnchors, TurnFacts,
    anchor_present, decide, locate,
};
use proptest::prelude::*;

/// Text that mixes ASCII, Latin-1, combining marks, Hangul jamo, CJK, emoji, ligatures,
/// full-width forms, control characters and whitespace of every kind.
fn text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        "[a-zA-Z0-9 ,.;:()\\-_/]{0,12}",
        any::<char>().prop_map(String::from),
        proptest::sample::select(vec![
            "\u{301}",
            "\u{308}",
            "ﬁ",
            "ß",
            "İ",
            "ς",
            "Σ",
            "１２",
            "Ｋ",
            "\u{1100}\u{1161}",
            "\u{AC00}",
            "東京",
            "👍🏽",
            "\u{200b}",
            "\u{a0}",
            "\u{3000}",
            "\n\t",
            "\0",
            "\u{2028}",
            "e\u{301}",
        ])
        .prop_map(String::from),
    ];
    proptest::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: Some(Box::new(
        proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), ..ProptestConfig::default() })]

    #[test]
    fn normalizing_never_panics_and_is_idempotent(s in text()) {
        let once = normalize(&s);
        let twice = normalize(once.as_str());
        prop_assert_eq!(once.as_str(), twice.as_str());
        prop_assert!(!once.as_str().starts_with(' ') && !once.as_str().ends_with(' '));
    }

    #[test]
    fn located_evidence_is_a_valid_span_that_holds_the_anchor(summary in text(), anchors in proptest::collection::vec(text(), 0..6)) {
        let chars: Vec<char> = summary.chars().collect();
        for e in locate(&anchors, &summary) {
            prop_assert!(e.start < e.end && e.end <= chars.len(), "{:?} in {} chars", e, chars.len());
            let span: String = chars[e.start..e.end].iter().collect();
            prop_assert!(anchor_present(&e.anchor, &span), "{:?} not in its own span {:?}", e.anchor, span);
            prop_assert!(anchor_present(&e.anchor, &summary));
        }
    }

    #[test]
    fn an_anchor_is_always_present_in_itself_unless_it_normalizes_to_nothing(anchor in text()) {
        let normalized = normalize(&anchor);
        prop_assert_eq!(anchor_present(&anchor, &anchor), !normalized.as_str().is_empty());
    }

    #[test]
    fn the_decision_never_panics_on_arbitrary_input_and_keeps_its_invariants(
        summary in text(),
        turns in proptest::collection::vec((0u8..4, any::<u32>(), proptest::collection::vec(text(), 0..4)), 1..20),
        consumed in proptest::option::of(proptest::collection::vec((0i64..20, 0i64..20), 0..4)),
        budget in 1i64..=i64::MAX,
        summary_tokens in any::<u32>(),
        finish_reason in proptest::option::of(text()),
        end_marker in proptest::option::of(text()),
        strict in any::<bool>(),
    ) {
        let to = turns.len() as i64 - 1;
        let facts: Vec<TurnFacts> = turns.into_iter().enumerate().map(|(i, (role, tokens, anchors))| TurnFacts {
            id: i as i64,
            role: [Role::System, Role::User, Role::Assistant, Role::Tool][role as usize],
            tokens,
            anchors: TurnAnchors::Given(anchors),
            pinned: false,
            profile: TermProfile::default(),
        }).collect();
        let consumed = consumed.map(|c| c.into_iter().map(|(a, b)| IdRange::new(a.min(b).min(to), a.max(b).min(to))).collect());
        let proposal = Proposal {
            from: 0, to, summary, summary_budget: budget, summary_tokens, consumed,
            finish_reason, end_marker, mode: if strict { Mode::Strict } else { Mode::Narrow },
        };
        let v = decide(&proposal, &facts, &Policy::default()).unwrap();
        prop_assert_eq!(v.covered.count() + v.uncovered.count() + v.not_compacted.count(), (to + 1) as u64);
        for id in v.covered.ids() {
            for a in facts[id as usize].anchors.given().unwrap_or_default() {
                prop_assert!(anchor_present(a, &proposal.summary));
            }
        }
        if strict {
            prop_assert!(matches!(v.outcome, Outcome::Accepted | Outcome::Rejected));
        }
    }
}
