//! Builders shared by the coverage tests: terse turns and proposals.
#![allow(dead_code)]

use gatekeeper_coverage::{
    IdRange, Mode, Policy, Proposal, Role, TermProfile, TurnAnchors, TurnFacts, Verdict, decide,
};

/// A turn whose client sent `anchors` (authoritative, rule 2).
pub fn turn(id: i64, role: Role, tokens: u32, anchors: &[&str]) -> TurnFacts {
    TurnFacts {
        id,
        role,
        tokens,
        anchors: TurnAnchors::Given(anchors.iter().map(|a| a.to_string()).collect()),
        pinned: false,
        profile: TermProfile::default(),
    }
}

/// The anchors a test turn was given.
pub fn given(turn: &TurnFacts) -> &[String] {
    turn.anchors.given().unwrap_or_default()
}

/// The anchors a test turn was given, to change them.
pub fn given_mut(turn: &mut TurnFacts) -> &mut Vec<String> {
    match &mut turn.anchors {
        TurnAnchors::Given(anchors) => anchors,
        TurnAnchors::Derived => panic!("a turn built with given anchors"),
    }
}

/// User turns of 10 tokens appended in order to a new conversation, anchors derived (ids from
/// `first`), profiled exactly as appends profile them.
pub fn derived<T: AsRef<str>>(first: i64, texts: &[T]) -> Vec<TurnFacts> {
    use gatekeeper_coverage::derive::{AnchorSource, Draft, rank_by_rarity};
    let drafts = texts
        .iter()
        .map(|t| Draft::new(t.as_ref(), AnchorSource::Prose));
    let (profiles, _) = rank_by_rarity(drafts, &Default::default());
    (profiles.into_iter().enumerate())
        .map(|(i, profile)| TurnFacts {
            id: first + i as i64,
            role: Role::User,
            tokens: 10,
            anchors: TurnAnchors::Derived,
            pinned: false,
            profile,
        })
        .collect()
}

/// A user turn of 10 tokens with the given anchors.
pub fn user(id: i64, anchors: &[&str]) -> TurnFacts {
    turn(id, Role::User, 10, anchors)
}

/// A proposal with a generous budget, no report, no finish reason and a summary that ends cleanly.
pub fn proposal(from: i64, to: i64, summary: &str) -> Proposal {
    Proposal {
        from,
        to,
        summary: summary.to_string(),
        summary_budget: 10_000,
        summary_tokens: 100,
        consumed: None,
        finish_reason: None,
        end_marker: None,
        mode: Mode::Narrow,
    }
}

pub fn ranges(pairs: &[[i64; 2]]) -> Vec<IdRange> {
    pairs.iter().map(|&p| IdRange::from(p)).collect()
}

pub fn decide_default(p: &Proposal, turns: &[TurnFacts]) -> Verdict {
    decide(p, turns, &Policy::default()).expect("a valid proposal")
}

/// The seed's scenario: 400 turns of 150 tokens, each with its own anchor `INV-<id>`; a summary
/// that carries the anchors of turns 0–359 only and stops mid-sentence; finish_reason `length`;
/// budget 4096; a report claiming the whole range.
pub fn seed_scenario() -> (Proposal, Vec<TurnFacts>) {
    let turns: Vec<TurnFacts> = (0..400)
        .map(|id| {
            let role = if id % 4 == 3 { Role::Tool } else { Role::User };
            turn(id, role, 150, &[&format!("INV-{id}")])
        })
        .collect();
    let mut summary = String::from("<summary>\nThe customer filed invoices ");
    for id in 0..360 {
        summary.push_str(&format!("INV-{id}, "));
    }
    summary.push_str("and then asked about the refund for");
    let proposal = Proposal {
        summary,
        summary_budget: 4096,
        summary_tokens: 4096,
        consumed: Some(ranges(&[[0, 399]])),
        finish_reason: Some("length".into()),
        end_marker: Some("</summary>".into()),
        ..proposal(0, 399, "")
    };
    (proposal, turns)
}

/// Runs `strategy` for `cases` cases, counts by name the branches `branches` says each case
/// reached, prints the counts, and fails unless every branch in `expected` was reached: a
/// property over a generator that never reaches a branch says nothing about it. The cases come
/// from a fixed seed, so the counts are the same on every run (the properties themselves draw
/// new cases each run), and a rare branch cannot make this flaky.
pub fn assert_branches_reached<S: proptest::strategy::Strategy>(
    cases: u32,
    strategy: S,
    expected: &[&'static str],
    branches: impl Fn(S::Value) -> Vec<&'static str>,
) {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    let counts = RefCell::new(BTreeMap::<&'static str, u32>::new());
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::with_cases(cases),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    runner
        .run(&strategy, |value| {
            let mut counts = counts.borrow_mut();
            for branch in branches(value) {
                assert!(
                    expected.contains(&branch),
                    "{branch:?} is not an expected branch"
                );
                *counts.entry(branch).or_default() += 1;
            }
            Ok(())
        })
        .expect("counting never fails a case");
    let counts = counts.into_inner();
    eprintln!("branches reached in {cases} cases: {counts:#?}");
    let missing: Vec<_> = expected
        .iter()
        .filter(|b| !counts.contains_key(*b))
        .collect();
    assert!(missing.is_empty(), "never reached: {missing:?}");
}
