//! One table per rule of the coverage decision (issue 2, rules 1–8).

mod common;

use common::*;
use gatekeeper_coverage::{
    AnchorRule, CompressionRatio, CoveragePath, IdRanges, Mode, Outcome, Policy, ProposalError,
    Reason, Rejection, Role, TruncationSignal, TurnStatus, decide,
};

fn set(pairs: &[[i64; 2]]) -> IdRanges {
    IdRanges::from_ranges(ranges(pairs))
}

#[test]
fn rule_1_required_budget_is_the_ceiling_of_tokens_over_ratio_per_role() {
    struct Case {
        name: &'static str,
        turns: Vec<(Role, u32)>,
        budget: i64,
        policy: Policy,
        prefix: u64,
        required: u64,
        over: bool,
    }
    let default = Policy::default();
    let prose_2_5 = Policy {
        prose_ratio: "2.5".parse().unwrap(),
        ..default
    };
    let cases = [
        Case {
            name: "prose at exactly 5x fits",
            turns: vec![(Role::User, 500)],
            budget: 100,
            policy: default,
            prefix: 500,
            required: 100,
            over: false,
        },
        Case {
            name: "one token past 5x is over",
            turns: vec![(Role::User, 501)],
            budget: 100,
            policy: default,
            prefix: 501,
            required: 101,
            over: true,
        },
        Case {
            name: "system and assistant turns are prose",
            turns: vec![(Role::System, 250), (Role::Assistant, 250)],
            budget: 100,
            policy: default,
            prefix: 500,
            required: 100,
            over: false,
        },
        Case {
            name: "tool turns compress only 3x",
            turns: vec![(Role::Tool, 300)],
            budget: 99,
            policy: default,
            prefix: 300,
            required: 100,
            over: true,
        },
        Case {
            name: "fractions add up before the ceiling",
            turns: vec![(Role::User, 1), (Role::Tool, 1)],
            budget: 1,
            policy: default,
            prefix: 2,
            required: 1,
            over: false,
        },
        Case {
            name: "a fraction rounds up",
            turns: vec![(Role::User, 6)],
            budget: 1,
            policy: default,
            prefix: 6,
            required: 2,
            over: true,
        },
        Case {
            name: "zero tokens need zero budget",
            turns: vec![(Role::User, 0)],
            budget: 1,
            policy: default,
            prefix: 0,
            required: 0,
            over: false,
        },
        Case {
            name: "a configured decimal ratio is exact",
            turns: vec![(Role::User, 10)],
            budget: 4,
            policy: prose_2_5,
            prefix: 10,
            required: 4,
            over: false,
        },
        Case {
            name: "the seed's 400 x 150 prose tokens exceed 4096 x 5",
            turns: vec![(Role::User, 150); 400],
            budget: 4096,
            policy: default,
            prefix: 60_000,
            required: 12_000,
            over: true,
        },
        Case {
            name: "u32::MAX tokens do not overflow",
            turns: vec![(Role::Tool, u32::MAX); 3],
            budget: i64::MAX,
            policy: default,
            prefix: 3 * u64::from(u32::MAX),
            required: u64::from(u32::MAX),
            over: false,
        },
    ];
    for c in cases {
        let turns: Vec<_> = c
            .turns
            .iter()
            .enumerate()
            .map(|(i, &(role, tokens))| turn(i as i64, role, tokens, &["A1"]))
            .collect();
        let p = proposal(0, turns.len() as i64 - 1, "A1.");
        let p = gatekeeper_coverage::Proposal {
            summary_budget: c.budget,
            summary_tokens: 0,
            ..p
        };
        let v = decide(&p, &turns, &c.policy).unwrap();
        assert_eq!(
            (v.prefix_tokens, v.required_budget, v.over_ceiling),
            (c.prefix, c.required, c.over),
            "{}",
            c.name
        );
    }
}

#[test]
fn rule_2_a_turn_is_anchored_only_when_its_anchors_are_in_the_summary() {
    struct Case {
        name: &'static str,
        anchors: &'static [&'static str],
        summary: &'static str,
        rule: AnchorRule,
        covered: bool,
        missing: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "the only anchor present",
            anchors: &["INV-2093"],
            summary: "Paid INV-2093.",
            rule: AnchorRule::All,
            covered: true,
            missing: &[],
        },
        Case {
            name: "every anchor present",
            anchors: &["INV-2093", "Lisbon"],
            summary: "INV-2093 for the Lisbon trip.",
            rule: AnchorRule::All,
            covered: true,
            missing: &[],
        },
        Case {
            name: "one of two anchors missing",
            anchors: &["INV-2093", "Lisbon"],
            summary: "INV-2093 for the trip.",
            rule: AnchorRule::All,
            covered: false,
            missing: &["Lisbon"],
        },
        Case {
            name: "one of two is enough under the any rule",
            anchors: &["INV-2093", "Lisbon"],
            summary: "INV-2093 for the trip.",
            rule: AnchorRule::Any,
            covered: true,
            missing: &[],
        },
        Case {
            name: "none present under the any rule",
            anchors: &["INV-2093", "Lisbon"],
            summary: "A trip.",
            rule: AnchorRule::Any,
            covered: false,
            missing: &["INV-2093", "Lisbon"],
        },
        Case {
            name: "a substring inside a longer word does not count",
            anchors: &["cat"],
            summary: "We concatenate.",
            rule: AnchorRule::All,
            covered: false,
            missing: &["cat"],
        },
        Case {
            name: "an id that is a prefix of a longer id does not count",
            anchors: &["INV-1"],
            summary: "Refunded INV-10.",
            rule: AnchorRule::All,
            covered: false,
            missing: &["INV-1"],
        },
        Case {
            name: "case and whitespace do not matter",
            anchors: &["New York"],
            summary: "Flew to new\n  YORK.",
            rule: AnchorRule::All,
            covered: true,
            missing: &[],
        },
        Case {
            name: "a turn without anchors is never anchored",
            anchors: &[],
            summary: "Anything at all.",
            rule: AnchorRule::All,
            covered: false,
            missing: &[],
        },
    ];
    for c in cases {
        let turns = [user(0, c.anchors)];
        let policy = Policy {
            anchor_rule: c.rule,
            ..Policy::default()
        };
        let v = decide(&proposal(0, 0, c.summary), &turns, &policy).unwrap();
        assert_eq!(v.covered.contains(0), c.covered, "{}", c.name);
        let missing: Vec<&str> = v
            .turns
            .iter()
            .flat_map(|t| t.missing_anchors.iter().map(|a| a.as_str()))
            .collect();
        assert_eq!(missing, c.missing, "{}", c.name);
    }
}

#[test]
fn rule_3_each_truncation_tell_is_reported_by_name() {
    use TruncationSignal::*;
    struct Case {
        name: &'static str,
        summary: &'static str,
        finish_reason: Option<&'static str>,
        end_marker: Option<&'static str>,
        tokens: u32,
        signals: &'static [TruncationSignal],
    }
    let cases = [
        Case {
            name: "a clean summary",
            summary: "All settled.",
            finish_reason: Some("stop"),
            end_marker: None,
            tokens: 10,
            signals: &[],
        },
        Case {
            name: "finish_reason length",
            summary: "All settled.",
            finish_reason: Some("length"),
            end_marker: None,
            tokens: 10,
            signals: &[FinishReasonLength],
        },
        Case {
            name: "finish_reason max_tokens (Anthropic)",
            summary: "All settled.",
            finish_reason: Some("max_tokens"),
            end_marker: None,
            tokens: 10,
            signals: &[FinishReasonLength],
        },
        Case {
            name: "finish_reason max_output_tokens (Gemini)",
            summary: "All settled.",
            finish_reason: Some("max_output_tokens"),
            end_marker: None,
            tokens: 10,
            signals: &[FinishReasonLength],
        },
        Case {
            name: "finish_reason end_turn is not a tell",
            summary: "All settled.",
            finish_reason: Some("end_turn"),
            end_marker: None,
            tokens: 10,
            signals: &[],
        },
        Case {
            name: "end marker present after trailing whitespace",
            summary: "Done.</summary>\n\n",
            finish_reason: None,
            end_marker: Some("</summary>"),
            tokens: 10,
            signals: &[],
        },
        Case {
            name: "end marker missing",
            summary: "Done. The customer then",
            finish_reason: None,
            end_marker: Some("</summary>"),
            tokens: 10,
            signals: &[EndMarkerMissing, MidClause],
        },
        Case {
            name: "tokens equal to the budget",
            summary: "Done.",
            finish_reason: None,
            end_marker: None,
            tokens: 100,
            signals: &[AtBudget],
        },
        Case {
            name: "tokens over the budget",
            summary: "Done.",
            finish_reason: None,
            end_marker: None,
            tokens: 101,
            signals: &[AtBudget],
        },
        Case {
            name: "one token under the budget",
            summary: "Done.",
            finish_reason: None,
            end_marker: None,
            tokens: 99,
            signals: &[],
        },
        Case {
            name: "ends on a letter",
            summary: "The customer asked about the",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[MidClause],
        },
        Case {
            name: "ends on a digit",
            summary: "Flight HAT 1",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[MidClause],
        },
        Case {
            name: "ends on a comma",
            summary: "Booked, paid,",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[MidClause],
        },
        Case {
            name: "ends on a semicolon",
            summary: "Booked;",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[MidClause],
        },
        Case {
            name: "ends on a colon",
            summary: "Remaining items:",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[MidClause],
        },
        Case {
            name: "ends on a hyphen",
            summary: "a non-",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[MidClause],
        },
        Case {
            name: "ends on a closing parenthesis",
            summary: "Booked (paid)",
            finish_reason: None,
            end_marker: None,
            tokens: 10,
            signals: &[],
        },
        Case {
            name: "every tell at once",
            summary: "and the",
            finish_reason: Some("length"),
            end_marker: Some("</summary>"),
            tokens: 100,
            signals: &[FinishReasonLength, EndMarkerMissing, AtBudget, MidClause],
        },
    ];
    for c in cases {
        let p = gatekeeper_coverage::Proposal {
            finish_reason: c.finish_reason.map(String::from),
            end_marker: c.end_marker.map(String::from),
            summary_budget: 100,
            summary_tokens: c.tokens,
            ..proposal(0, 0, c.summary)
        };
        let v = decide_default(&p, &[user(0, &["x"])]);
        assert_eq!(v.truncation_signals, c.signals, "{}", c.name);
        assert_eq!(v.truncated, !c.signals.is_empty(), "{}", c.name);
    }
}

#[test]
fn rule_4_a_coverage_report_is_trusted_only_as_far_as_the_anchors_bear_it_out() {
    struct Case {
        name: &'static str,
        consumed: &'static [[i64; 2]],
        summary: &'static str,
        covered: &'static [[i64; 2]],
        uncovered: &'static [(i64, Reason)],
        contradictions: &'static [[i64; 2]],
        outcome: Outcome,
    }
    // Turn 0: A0; turn 1: A1; turn 2: no anchors; turn 3: A3.
    let turns = [
        user(0, &["A0"]),
        user(1, &["A1"]),
        user(2, &[]),
        user(3, &["A3"]),
    ];
    let cases = [
        Case {
            name: "all reported and anchored",
            consumed: &[[0, 3]],
            summary: "A0 A1 A3.",
            covered: &[[0, 3]],
            uncovered: &[],
            contradictions: &[],
            outcome: Outcome::Accepted,
        },
        Case {
            name: "a turn left out of the report",
            consumed: &[[0, 1], [3, 3]],
            summary: "A0 A1 A3.",
            covered: &[[0, 1], [3, 3]],
            uncovered: &[(2, Reason::NotReported)],
            contradictions: &[],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "reported but its anchor is missing",
            consumed: &[[0, 3]],
            summary: "A0 A3.",
            covered: &[[0, 0], [2, 3]],
            uncovered: &[(1, Reason::AnchorMissing)],
            contradictions: &[[1, 1]],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "unreported and unanchored is not a contradiction",
            consumed: &[[0, 0]],
            summary: "A0.",
            covered: &[[0, 0]],
            uncovered: &[
                (1, Reason::NotReported),
                (2, Reason::NotReported),
                (3, Reason::NotReported),
            ],
            contradictions: &[],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "an unanchored turn is lost to a truncated summary",
            consumed: &[[0, 3]],
            summary: "A0 A1 A3 and",
            covered: &[[0, 1], [3, 3]],
            uncovered: &[(2, Reason::NoAnchors)],
            contradictions: &[],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "overlapping report ranges are merged",
            consumed: &[[0, 2], [1, 3]],
            summary: "A0 A1 A3.",
            covered: &[[0, 3]],
            uncovered: &[],
            contradictions: &[],
            outcome: Outcome::Accepted,
        },
        Case {
            name: "an empty report covers nothing",
            consumed: &[],
            summary: "A0 A1 A3.",
            covered: &[],
            uncovered: &[
                (0, Reason::NotReported),
                (1, Reason::NotReported),
                (2, Reason::NotReported),
                (3, Reason::NotReported),
            ],
            contradictions: &[],
            outcome: Outcome::Rejected,
        },
    ];
    for c in cases {
        let p = gatekeeper_coverage::Proposal {
            consumed: Some(ranges(c.consumed)),
            ..proposal(0, 3, c.summary)
        };
        let v = decide_default(&p, &turns);
        assert_eq!(v.coverage_path, CoveragePath::Reported, "{}", c.name);
        assert_eq!(v.covered, set(c.covered), "{}", c.name);
        let uncovered: Vec<(i64, Reason)> = v.turns.iter().map(|t| (t.id, t.reason)).collect();
        assert_eq!(uncovered, c.uncovered, "{}", c.name);
        assert_eq!(v.contradictions, set(c.contradictions), "{}", c.name);
        assert_eq!(v.outcome, c.outcome, "{}", c.name);
        assert_eq!(
            v.advanced_to,
            Some(3),
            "{}: a report always advances to `to`",
            c.name
        );
        assert!(v.not_compacted.is_empty(), "{}", c.name);
    }
}

#[test]
fn rule_4_the_seeds_scenario_covers_exactly_the_turns_the_summary_carries() {
    let (p, turns) = seed_scenario();
    let v = decide_default(&p, &turns);
    assert_eq!(v.covered, set(&[[0, 359]]));
    assert_eq!(v.uncovered, set(&[[360, 399]]));
    assert_eq!(v.contradictions, set(&[[360, 399]]));
    assert_eq!(v.contradictions.count(), 40);
    assert!(v.not_compacted.is_empty());
    assert_eq!(v.outcome, Outcome::Narrowed);
    assert_eq!(v.advanced_to, Some(399));
    assert!(v.over_ceiling && v.truncated);
    assert_eq!(
        v.truncation_signals,
        [
            TruncationSignal::FinishReasonLength,
            TruncationSignal::EndMarkerMissing,
            TruncationSignal::AtBudget,
            TruncationSignal::MidClause
        ]
    );
    assert!(
        v.turns
            .iter()
            .all(|t| t.status == TurnStatus::Uncovered && t.reason == Reason::AnchorMissing)
    );
    assert_eq!(v.turns[0].missing_anchors, ["INV-360"]);
}

#[test]
fn rule_5_without_a_report_under_the_ceiling_the_anchors_decide_each_turn() {
    struct Case {
        name: &'static str,
        summary: &'static str,
        covered: &'static [[i64; 2]],
        uncovered: &'static [(i64, Reason)],
        outcome: Outcome,
    }
    let turns = [
        user(0, &["A0"]),
        user(1, &["A1", "B1"]),
        user(2, &[]),
        user(3, &["A3"]),
    ];
    let cases = [
        Case {
            name: "every turn anchored but the anchorless one",
            summary: "A0 A1 B1 A3.",
            covered: &[[0, 1], [3, 3]],
            uncovered: &[(2, Reason::NoAnchors)],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "a missing anchor in the middle",
            summary: "A0 A1 A3.",
            covered: &[[0, 0], [3, 3]],
            uncovered: &[(1, Reason::AnchorMissing), (2, Reason::NoAnchors)],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "the last turn missing still advances to `to`",
            summary: "A0 A1 B1.",
            covered: &[[0, 1]],
            uncovered: &[(2, Reason::NoAnchors), (3, Reason::AnchorMissing)],
            outcome: Outcome::Narrowed,
        },
        Case {
            name: "no anchor present at all",
            summary: "Nothing relevant.",
            covered: &[],
            uncovered: &[
                (0, Reason::AnchorMissing),
                (1, Reason::AnchorMissing),
                (2, Reason::NoAnchors),
                (3, Reason::AnchorMissing),
            ],
            outcome: Outcome::Rejected,
        },
    ];
    for c in cases {
        let v = decide_default(&proposal(0, 3, c.summary), &turns);
        assert_eq!(v.coverage_path, CoveragePath::Anchors, "{}", c.name);
        assert_eq!(v.covered, set(c.covered), "{}", c.name);
        let uncovered: Vec<(i64, Reason)> = v.turns.iter().map(|t| (t.id, t.reason)).collect();
        assert_eq!(uncovered, c.uncovered, "{}", c.name);
        assert!(
            v.turns.iter().all(|t| t.status == TurnStatus::Uncovered),
            "{}",
            c.name
        );
        assert_eq!(v.advanced_to, Some(3), "{}", c.name);
        assert_eq!(v.outcome, c.outcome, "{}", c.name);
    }
    let all = [user(0, &["A0"]), user(1, &["A1"])];
    assert_eq!(
        decide_default(&proposal(0, 1, "A0, A1."), &all).outcome,
        Outcome::Accepted
    );
}

#[test]
fn rule_6_without_a_report_past_the_ceiling_or_truncated_it_fails_closed() {
    struct Case {
        name: &'static str,
        summary: &'static str,
        budget: i64,
        advanced_to: Option<i64>,
        covered: &'static [[i64; 2]],
        uncovered: &'static [[i64; 2]],
        not_compacted: &'static [[i64; 2]],
        outcome: Outcome,
    }
    // Five turns of 10 tokens: 50 prose tokens need a budget of 10.
    let turns = [
        user(0, &["A0"]),
        user(1, &[]),
        user(2, &["A2"]),
        user(3, &["A3"]),
        user(4, &[]),
    ];
    let cases = [
        Case {
            name: "over the ceiling stops after the last anchored turn",
            summary: "A0 A2.",
            budget: 9,
            advanced_to: Some(2),
            covered: &[[0, 0], [2, 2]],
            uncovered: &[[1, 1]],
            not_compacted: &[[3, 4]],
            outcome: Outcome::Partial,
        },
        Case {
            name: "truncated under the ceiling stops there too",
            summary: "A0 A2 and then",
            budget: 10,
            advanced_to: Some(2),
            covered: &[[0, 0], [2, 2]],
            uncovered: &[[1, 1]],
            not_compacted: &[[3, 4]],
            outcome: Outcome::Partial,
        },
        Case {
            name: "an anchored tail advances to it",
            summary: "A0 A2 A3.",
            budget: 9,
            advanced_to: Some(3),
            covered: &[[0, 0], [2, 3]],
            uncovered: &[[1, 1]],
            not_compacted: &[[4, 4]],
            outcome: Outcome::Partial,
        },
        Case {
            name: "only the first turn anchored",
            summary: "A0.",
            budget: 9,
            advanced_to: Some(0),
            covered: &[[0, 0]],
            uncovered: &[],
            not_compacted: &[[1, 4]],
            outcome: Outcome::Partial,
        },
        Case {
            name: "no anchored turn at all is rejected",
            summary: "Nothing.",
            budget: 9,
            advanced_to: None,
            covered: &[],
            uncovered: &[],
            not_compacted: &[[0, 4]],
            outcome: Outcome::Rejected,
        },
    ];
    for c in cases {
        let p = gatekeeper_coverage::Proposal {
            summary_budget: c.budget,
            summary_tokens: 1,
            ..proposal(0, 4, c.summary)
        };
        let v = decide_default(&p, &turns);
        assert_eq!(v.advanced_to, c.advanced_to, "{}", c.name);
        assert_eq!(v.covered, set(c.covered), "{}", c.name);
        assert_eq!(v.uncovered, set(c.uncovered), "{}", c.name);
        assert_eq!(v.not_compacted, set(c.not_compacted), "{}", c.name);
        assert_eq!(v.outcome, c.outcome, "{}", c.name);
        assert!(
            v.turns
                .iter()
                .filter(|t| t.status == TurnStatus::NotCompacted)
                .all(|t| t.reason == Reason::BeyondLastAnchor),
            "{}",
            c.name
        );
    }
    // Every turn anchored: nothing is left behind even over the ceiling.
    let anchored = [user(0, &["A0"]), user(1, &["A1"])];
    let p = gatekeeper_coverage::Proposal {
        summary_budget: 1,
        summary_tokens: 0,
        ..proposal(0, 1, "A0 A1.")
    };
    let v = decide_default(&p, &anchored);
    assert_eq!((v.outcome, v.advanced_to), (Outcome::Accepted, Some(1)));
}

#[test]
fn rule_7_the_outcome_follows_the_sets_and_strict_mode_rejects_any_gap() {
    struct Case {
        name: &'static str,
        mode: Mode,
        summary: &'static str,
        budget: i64,
        outcome: Outcome,
        rejection: Option<Rejection>,
    }
    let turns = [user(0, &["A0"]), user(1, &["A1"]), user(2, &["A2"])];
    let cases = [
        Case {
            name: "narrow, all covered",
            mode: Mode::Narrow,
            summary: "A0 A1 A2.",
            budget: 100,
            outcome: Outcome::Accepted,
            rejection: None,
        },
        Case {
            name: "narrow, one uncovered",
            mode: Mode::Narrow,
            summary: "A0 A2.",
            budget: 100,
            outcome: Outcome::Narrowed,
            rejection: None,
        },
        Case {
            name: "narrow, tail not compacted",
            mode: Mode::Narrow,
            summary: "A0 A1.",
            budget: 1,
            outcome: Outcome::Partial,
            rejection: None,
        },
        Case {
            name: "narrow, nothing covered",
            mode: Mode::Narrow,
            summary: "None.",
            budget: 100,
            outcome: Outcome::Rejected,
            rejection: Some(Rejection::NothingCovered),
        },
        Case {
            name: "strict, all covered",
            mode: Mode::Strict,
            summary: "A0 A1 A2.",
            budget: 100,
            outcome: Outcome::Accepted,
            rejection: None,
        },
        Case {
            name: "strict, one uncovered",
            mode: Mode::Strict,
            summary: "A0 A2.",
            budget: 100,
            outcome: Outcome::Rejected,
            rejection: Some(Rejection::StrictMode),
        },
        Case {
            name: "strict, tail not compacted",
            mode: Mode::Strict,
            summary: "A0 A1.",
            budget: 1,
            outcome: Outcome::Rejected,
            rejection: Some(Rejection::StrictMode),
        },
        Case {
            name: "strict, all covered but truncated",
            mode: Mode::Strict,
            summary: "A0 A1 A2 and",
            budget: 100,
            outcome: Outcome::Rejected,
            rejection: Some(Rejection::StrictMode),
        },
        Case {
            name: "strict, nothing covered",
            mode: Mode::Strict,
            summary: "None.",
            budget: 100,
            outcome: Outcome::Rejected,
            rejection: Some(Rejection::NothingCovered),
        },
    ];
    for c in cases {
        let p = gatekeeper_coverage::Proposal {
            mode: c.mode,
            summary_budget: c.budget,
            summary_tokens: 0,
            ..proposal(0, 2, c.summary)
        };
        let v = decide_default(&p, &turns);
        assert_eq!(
            (v.outcome, v.rejection),
            (c.outcome, c.rejection),
            "{}",
            c.name
        );
    }
    // A strict rejection keeps the same detail a narrow verdict would have.
    let narrow = decide_default(&proposal(0, 2, "A0 A2."), &turns);
    let strict = decide_default(
        &gatekeeper_coverage::Proposal {
            mode: Mode::Strict,
            ..proposal(0, 2, "A0 A2.")
        },
        &turns,
    );
    assert_eq!(
        (strict.covered, strict.uncovered, strict.turns),
        (narrow.covered, narrow.uncovered, narrow.turns)
    );
}

#[test]
fn rule_8_malformed_proposals_are_errors_not_verdicts() {
    let three = [user(0, &["A0"]), user(1, &["A1"]), user(2, &["A2"])];
    let base = || proposal(0, 2, "A0 A1 A2.");
    struct Case {
        name: &'static str,
        proposal: gatekeeper_coverage::Proposal,
        turns: Vec<gatekeeper_coverage::TurnFacts>,
        error: fn(&ProposalError) -> bool,
    }
    let cases = [
        Case {
            name: "from after to",
            proposal: gatekeeper_coverage::Proposal {
                from: 3,
                to: 2,
                ..base()
            },
            turns: three.to_vec(),
            error: |e| matches!(e, ProposalError::FromAfterTo { from: 3, to: 2 }),
        },
        Case {
            name: "negative from",
            proposal: gatekeeper_coverage::Proposal { from: -1, ..base() },
            turns: three.to_vec(),
            error: |e| matches!(e, ProposalError::NegativeFrom { from: -1 }),
        },
        Case {
            name: "zero budget",
            proposal: gatekeeper_coverage::Proposal {
                summary_budget: 0,
                ..base()
            },
            turns: three.to_vec(),
            error: |e| matches!(e, ProposalError::NonPositiveBudget { budget: 0 }),
        },
        Case {
            name: "negative budget",
            proposal: gatekeeper_coverage::Proposal {
                summary_budget: -1,
                ..base()
            },
            turns: three.to_vec(),
            error: |e| matches!(e, ProposalError::NonPositiveBudget { budget: -1 }),
        },
        Case {
            name: "consumed range backwards",
            proposal: gatekeeper_coverage::Proposal {
                consumed: Some(ranges(&[[2, 1]])),
                ..base()
            },
            turns: three.to_vec(),
            error: |e| matches!(e, ProposalError::MalformedConsumed { .. }),
        },
        Case {
            name: "consumed beyond to",
            proposal: gatekeeper_coverage::Proposal {
                consumed: Some(ranges(&[[0, 3]])),
                ..base()
            },
            turns: three.to_vec(),
            error: |e| matches!(e, ProposalError::ConsumedOutsideRange { .. }),
        },
        Case {
            name: "consumed before from",
            proposal: gatekeeper_coverage::Proposal {
                from: 1,
                consumed: Some(ranges(&[[0, 2]])),
                ..base()
            },
            turns: three[1..].to_vec(),
            error: |e| matches!(e, ProposalError::ConsumedOutsideRange { .. }),
        },
        Case {
            name: "a turn missing",
            proposal: base(),
            turns: vec![three[0].clone(), three[2].clone()],
            error: |e| matches!(e, ProposalError::TurnsDoNotMatchRange { missing, unexpected, .. } if missing.to_string() == "1" && unexpected.is_empty()),
        },
        Case {
            name: "a turn outside the range",
            proposal: base(),
            turns: [three.to_vec(), vec![user(3, &[])]].concat(),
            error: |e| matches!(e, ProposalError::TurnsDoNotMatchRange { missing, unexpected, .. } if missing.is_empty() && unexpected.to_string() == "3"),
        },
        Case {
            // As many turns as the range holds, so only the ids tell: one just past `to`.
            name: "the range's count of turns with one past its end in place of its last",
            proposal: base(),
            turns: vec![three[0].clone(), three[1].clone(), user(3, &[])],
            error: |e| matches!(e, ProposalError::TurnsDoNotMatchRange { missing, unexpected, .. } if missing.to_string() == "2" && unexpected.to_string() == "3"),
        },
        Case {
            name: "a duplicated turn in place of another",
            proposal: base(),
            turns: vec![three[0].clone(), three[0].clone(), three[2].clone()],
            error: |e| matches!(e, ProposalError::TurnsDoNotMatchRange { missing, unexpected, .. } if missing.to_string() == "1" && unexpected.to_string() == "0"),
        },
        Case {
            name: "no turns at all",
            proposal: base(),
            turns: vec![],
            error: |e| matches!(e, ProposalError::TurnsDoNotMatchRange { missing, .. } if missing.to_string() == "0-2"),
        },
    ];
    for c in cases {
        let err = decide(&c.proposal, &c.turns, &Policy::default()).expect_err(c.name);
        assert!((c.error)(&err), "{}: got {err:?}", c.name);
        assert!(!err.to_string().is_empty(), "{}", c.name);
    }
}

#[test]
fn compression_ratios_parse_from_plain_decimals_only() {
    for (text, milli) in [
        ("5", Some(5000)),
        ("2.5", Some(2500)),
        ("6.125", Some(6125)),
        (".5", Some(500)),
        ("0", None),
        ("-1", None),
        ("1.2345", None),
        ("abc", None),
        ("", None),
    ] {
        assert_eq!(
            text.parse::<CompressionRatio>()
                .ok()
                .map(CompressionRatio::milli),
            milli,
            "{text:?}"
        );
    }
    assert_eq!(
        CompressionRatio::from_milli(2500).unwrap().to_string(),
        "2.5"
    );
}
