//! Fuzzing the core with proptest: arbitrary Unicode through the normalizer and the anchor
//! matcher, arbitrary proposals through the decision. Cases come from `PROPTEST_CASES`
//! (CI runs a short bounded run; `PROPTEST_CASES=200000 cargo test --release --test fuzz_core`
//! is the long one), and failures found are kept in `crates/coverage/tests/fuzz_core.proptest-regressions`.

use gatekeeper_coverage::normalize::normalize;
use gatekeeper_coverage::{
    IdRange, Mode, Outcome, Policy, Proposal, Role, TermProfile, TruncationSignal, TurnAnchors,
    TurnFacts, anchor_present, decide, locate,
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
}

/// Where a budget comes from: anywhere in `1..=i64::MAX` (which almost never lands near a real
/// range's ceiling or a summary's size), a few tokens either side of the range's ceiling, or
/// either side of the summary's own token count, so `over_ceiling` and `at_budget` flip both ways.
#[derive(Debug, Clone, Copy)]
enum Budget {
    Anywhere(i64),
    NearCeiling(i64),
    NearSummary(i64),
}

fn budget() -> impl Strategy<Value = Budget> {
    prop_oneof![
        (1i64..=i64::MAX).prop_map(Budget::Anywhere),
        (-2i64..=2).prop_map(Budget::NearCeiling),
        (-2i64..=2).prop_map(Budget::NearSummary),
    ]
}

/// Rule 1 read independently: `ceil(prose / 5 + tool / 3)` with the default ratios.
fn ceiling(facts: &[TurnFacts]) -> u64 {
    let (prose, tool) = facts.iter().fold((0u128, 0u128), |(p, t), f| match f.role {
        Role::Tool => (p, t + u128::from(f.tokens)),
        _ => (p + u128::from(f.tokens), t),
    });
    u64::try_from((prose * 3 + tool * 5).div_ceil(15)).unwrap()
}

/// How often a run reached each branch of rule 1 and rule 3's `at_budget`, each way.
#[derive(Debug, Default)]
struct Reached {
    over_ceiling: u32,
    under_ceiling: u32,
    at_budget: u32,
    below_budget: u32,
}

#[test]
fn the_decision_never_panics_on_arbitrary_input_and_keeps_its_invariants() {
    let turns = proptest::collection::vec(
        (
            0u8..4,
            any::<u32>(),
            proptest::collection::vec(text(), 0..4),
        ),
        1..20,
    );
    let consumed = proptest::option::of(proptest::collection::vec((0i64..20, 0i64..20), 0..4));
    let strategy = (
        text(),
        turns,
        consumed,
        budget(),
        prop_oneof![any::<u32>(), 0u32..64],
        (
            proptest::option::of(text()),
            proptest::option::of(text()),
            any::<bool>(),
        ),
    );
    let config = ProptestConfig {
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        // What the `proptest!` macro sets, so failures are kept beside this file as above.
        source_file: Some(file!()),
        ..ProptestConfig::default()
    };
    let reached = std::cell::RefCell::new(Reached::default());
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(
        &strategy,
        |(
            summary,
            turns,
            consumed,
            budget,
            summary_tokens,
            (finish_reason, end_marker, strict),
        )| {
            let to = turns.len() as i64 - 1;
            let facts: Vec<TurnFacts> = turns
                .into_iter()
                .enumerate()
                .map(|(i, (role, tokens, anchors))| TurnFacts {
                    id: i as i64,
                    role: [Role::System, Role::User, Role::Assistant, Role::Tool][role as usize],
                    tokens,
                    anchors: TurnAnchors::Given(anchors),
                    pinned: false,
                    profile: TermProfile::default(),
                })
                .collect();
            let consumed = consumed.map(|c| {
                c.into_iter()
                    .map(|(a, b)| IdRange::new(a.min(b).min(to), a.max(b).min(to)))
                    .collect()
            });
            let required = ceiling(&facts);
            let budget = match budget {
                Budget::Anywhere(b) => b,
                Budget::NearCeiling(d) => (required as i64 + d).max(1),
                Budget::NearSummary(d) => (i64::from(summary_tokens) + d).max(1),
            };
            let proposal = Proposal {
                from: 0,
                to,
                summary,
                summary_budget: budget,
                summary_tokens,
                consumed,
                finish_reason,
                end_marker,
                mode: if strict { Mode::Strict } else { Mode::Narrow },
            };
            let v = decide(&proposal, &facts, &Policy::default()).unwrap();
            prop_assert_eq!(
                v.covered.count() + v.uncovered.count() + v.not_compacted.count(),
                (to + 1) as u64
            );
            for id in v.covered.ids() {
                for a in facts[id as usize].anchors.given().unwrap_or_default() {
                    prop_assert!(anchor_present(a, &proposal.summary));
                }
            }
            if strict {
                prop_assert!(matches!(v.outcome, Outcome::Accepted | Outcome::Rejected));
            }
            // Rule 1 and rule 3's budget tell, at their edges too.
            prop_assert_eq!(v.required_budget, required);
            prop_assert_eq!(
                v.over_ceiling,
                required > budget as u64,
                "budget {}",
                budget
            );
            let at_budget = v.truncation_signals.contains(&TruncationSignal::AtBudget);
            prop_assert_eq!(
                at_budget,
                i64::from(summary_tokens) >= budget,
                "budget {}",
                budget
            );
            let mut r = reached.borrow_mut();
            *(if v.over_ceiling {
                &mut r.over_ceiling
            } else {
                &mut r.under_ceiling
            }) += 1;
            *(if at_budget {
                &mut r.at_budget
            } else {
                &mut r.below_budget
            }) += 1;
            Ok(())
        },
    );
    let reached = reached.into_inner();
    eprintln!("branches reached: {reached:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        reached.over_ceiling > 0
            && reached.under_ceiling > 0
            && reached.at_budget > 0
            && reached.below_budget > 0,
        "every branch is reached each way: {reached:?}"
    );
}
