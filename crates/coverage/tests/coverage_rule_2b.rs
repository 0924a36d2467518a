//! Rule 2b (derived anchors must tell their turn apart) and rule 2c (pinned turns), one table
//! each, on turns profiled exactly as appends profile them.

mod common;

use common::{derived, proposal, ranges};
use gatekeeper_coverage::{
    AnchorEvidence, AnchorRule, IdRanges, Outcome, Policy, Reason, TurnAnchors, TurnStatus,
    Verdict, decide, decide_with_evidence,
};

fn set(pairs: &[[i64; 2]]) -> IdRanges {
    IdRanges::from_ranges(ranges(pairs))
}

fn detail(v: &Verdict, id: i64) -> (Reason, Vec<String>, Vec<AnchorEvidence>) {
    let t = v
        .turns
        .iter()
        .find(|t| t.id == id)
        .expect("an uncovered turn");
    (
        t.reason,
        t.missing_anchors.iter().map(|a| a.to_string()).collect(),
        t.evidence.clone(),
    )
}

fn shared(anchor: &str, turns_sharing: u32) -> AnchorEvidence {
    AnchorEvidence {
        anchor: anchor.into(),
        turns_sharing,
    }
}

#[test]
fn rule_2b_a_turns_own_words_come_before_those_other_turns_of_the_range_share() {
    struct Case {
        name: &'static str,
        texts: &'static [&'static str],
        summary: &'static str,
        covered: &'static [[i64; 2]],
        /// Uncovered turns: id, missing anchors, the evidence checked.
        uncovered: Vec<(i64, Vec<&'static str>, Vec<AnchorEvidence>)>,
    }
    let cases = [
        Case {
            name: "a summary holding a turn's anchors covers it",
            texts: &["Rebook ZFA04Y for the honeymoon", "Weather in Boston"],
            summary: "ZFA04Y, honeymoon, Rebook; Boston, Weather.",
            covered: &[[0, 1]],
            uncovered: vec![],
        },
        Case {
            name: "a shared anchor counts only after the turn's own, which the summary lacks",
            texts: &[
                "Rebook ZFA04Y for the honeymoon",
                "Cancel ZFA04Y after the wedding",
            ],
            summary: "ZFA04Y was rebooked.",
            covered: &[],
            uncovered: vec![
                (
                    0,
                    vec!["Rebook", "honeymoon"],
                    vec![
                        shared("honeymoon", 1),
                        shared("Rebook", 1),
                        shared("ZFA04Y", 2),
                    ],
                ),
                (
                    1,
                    vec!["Cancel", "wedding"],
                    vec![
                        shared("wedding", 1),
                        shared("Cancel", 1),
                        shared("ZFA04Y", 2),
                    ],
                ),
            ],
        },
        Case {
            name: "a turn with no word of its own is covered by its least shared ones",
            texts: &["Rebook ZFA04Y for the honeymoon", "ZFA04Y honeymoon"],
            summary: "Rebook ZFA04Y honeymoon.",
            covered: &[[0, 1]],
            uncovered: vec![],
        },
        Case {
            name: "a word inside another turn's path is shared: the summary may hold it from the path",
            texts: &["The store module", "Edited src/store/mod.rs"],
            summary: "Edited src/store/mod.rs.",
            covered: &[[1, 1]],
            uncovered: vec![(
                0,
                vec!["module"],
                vec![shared("module", 1), shared("store", 2)],
            )],
        },
        Case {
            name: "sharing is counted case and width insensitively, as the summary is matched",
            texts: &["HAT170 delayed", "ｈａｔ１７０ cancelled"],
            summary: "HAT170 delayed.",
            covered: &[[0, 0]],
            uncovered: vec![(
                1,
                vec!["cancelled"],
                vec![shared("cancelled", 1), shared("ｈａｔ１７０", 2)],
            )],
        },
    ];
    for case in cases {
        let turns = derived(0, case.texts);
        let to = turns.len() as i64 - 1;
        let v = decide(&proposal(0, to, case.summary), &turns, &Policy::default()).unwrap();
        assert_eq!(v.covered, set(case.covered), "{}", case.name);
        for (id, missing, evidence) in &case.uncovered {
            let (reason, got_missing, got_evidence) = detail(&v, *id);
            assert_eq!(reason, Reason::AnchorMissing, "{}: turn {id}", case.name);
            let mut missing: Vec<String> = missing.iter().map(|m| m.to_string()).collect();
            missing.sort();
            assert_eq!(got_missing, missing, "{}: turn {id}", case.name);
            assert_eq!(got_evidence, *evidence, "{}: turn {id}", case.name);
        }
        assert_eq!(
            v.uncovered.count(),
            case.uncovered.len() as u64,
            "{}",
            case.name
        );
    }
}

#[test]
fn rule_2b_counts_sharing_within_the_proposals_range_only() {
    // Turn 0 shares ZFA04Y with turn 1 but lies outside [1, 2].
    let turns = derived(0, &["ZFA04Y", "ZFA04Y", "Boston weather"]);
    let summary = "Boston weather.";
    let v = decide(&proposal(1, 2, summary), &turns[1..], &Policy::default()).unwrap();
    assert_eq!(detail(&v, 1).2, [shared("ZFA04Y", 1)]);
    let v = decide(&proposal(0, 2, summary), &turns, &Policy::default()).unwrap();
    assert_eq!(detail(&v, 1).2, [shared("ZFA04Y", 2)]);
    assert_eq!(v.covered, set(&[[2, 2]]));
}

#[test]
fn rule_2b_checks_one_anchor_per_forty_tokens_and_at_least_the_anchor_count() {
    // Ranked by tier: the code, the capitalized name, then plain words, longer first.
    let mut turns = derived(
        0,
        &["Code ZFA04Y for Seattle: honeymoon wheelchair blanket"],
    );
    let policy = |anchor_count, tokens_per_anchor, anchor_rule| Policy {
        anchor_count,
        tokens_per_anchor,
        anchor_rule,
        ..Policy::default()
    };
    let all = AnchorRule::All;
    let cases = [
        (
            "one anchor: the first",
            10,
            policy(1, 40, all),
            "ZFA04Y.",
            true,
        ),
        (
            "three: all must be there",
            10,
            policy(3, 40, all),
            "ZFA04Y, Seattle.",
            false,
        ),
        (
            "three, all there",
            10,
            policy(3, 40, all),
            "ZFA04Y, Seattle, wheelchair.",
            true,
        ),
        (
            "any: one of the three",
            10,
            policy(3, 40, AnchorRule::Any),
            "wheelchair.",
            true,
        ),
        (
            "any: a fourth is not checked",
            10,
            policy(3, 40, AnchorRule::Any),
            "honeymoon.",
            false,
        ),
        (
            "none asked, none by size: nothing can cover",
            10,
            policy(0, 0, all),
            "ZFA04Y.",
            false,
        ),
        (
            "120 tokens ask three even if the count is one",
            120,
            policy(1, 40, all),
            "ZFA04Y, Seattle.",
            false,
        ),
        (
            "121 tokens ask four",
            121,
            policy(1, 40, all),
            "ZFA04Y, Seattle, wheelchair.",
            false,
        ),
        (
            "four, all there",
            121,
            policy(1, 40, all),
            "ZFA04Y, Seattle, wheelchair, honeymoon.",
            true,
        ),
    ];
    for (name, tokens, policy, summary, covered) in cases {
        turns[0].tokens = tokens;
        let v = decide(&proposal(0, 0, summary), &turns, &policy).unwrap();
        assert_eq!(v.covered.contains(0), covered, "{name}: {v:?}");
    }
}

#[test]
fn given_anchors_stay_authoritative_even_when_other_turns_share_them() {
    let mut turns = derived(0, &["Rebook ZFA04Y", "Cancel ZFA04Y"]);
    turns[1].anchors = TurnAnchors::Given(vec!["ZFA04Y".into()]);
    let v = decide(&proposal(0, 1, "ZFA04Y."), &turns, &Policy::default()).unwrap();
    assert_eq!(
        v.covered,
        set(&[[1, 1]]),
        "the client's anchor is all turn 1 needs"
    );
    assert_eq!(detail(&v, 0).1, ["Rebook"], "turn 0 still needs its own");
}

#[test]
fn the_decision_says_which_candidates_decided_each_covered_turn() {
    let turns = derived(0, &["Rebook ZFA04Y for the honeymoon", "Cancel ZFA04Y"]);
    let d = decide_with_evidence(
        &proposal(0, 1, "Rebook, ZFA04Y, honeymoon, Cancel."),
        &turns,
        &Policy::default(),
    )
    .unwrap();
    assert_eq!(d.verdict.covered, set(&[[0, 1]]));
    let used = |i: usize| -> Vec<&str> {
        turns[i]
            .profile
            .candidates()
            .enumerate()
            .filter(|(b, _)| d.candidates_used[i] & (1 << b) != 0)
            .map(|(_, c)| c.text)
            .collect()
    };
    assert_eq!(used(0), ["ZFA04Y", "honeymoon", "Rebook"]);
    assert_eq!(used(1), ["Cancel", "ZFA04Y"]);
    let d = decide_with_evidence(
        &proposal(0, 1, "Cancel ZFA04Y."),
        &turns,
        &Policy::default(),
    )
    .unwrap();
    assert_eq!(
        d.candidates_used,
        [0, 0b11],
        "an uncovered turn used nothing"
    );
}

#[test]
fn rule_2c_a_pinned_turn_is_never_covered_whatever_the_path() {
    let mut turns = derived(
        0,
        &["Rebook ZFA04Y", "Always answer in French", "Cancel HAT170"],
    );
    turns[1].pinned = true;
    let summary = "Rebook ZFA04Y; always answer in French; Cancel HAT170.";
    let reported = gatekeeper_coverage::Proposal {
        consumed: Some(ranges(&[[0, 2]])),
        ..proposal(0, 2, summary)
    };
    let truncated = gatekeeper_coverage::Proposal {
        finish_reason: Some("length".into()),
        ..proposal(0, 2, summary)
    };
    for (name, p) in [
        ("anchors path (rule 5)", proposal(0, 2, summary)),
        ("reported path (rule 4)", reported),
        ("fail-closed path (rule 6)", truncated),
    ] {
        let v = decide(&p, &turns, &Policy::default()).unwrap();
        assert_eq!(v.covered, set(&[[0, 0], [2, 2]]), "{name}");
        let pinned = v.turns.iter().find(|t| t.id == 1).unwrap();
        assert_eq!(
            (pinned.status, pinned.reason),
            (TurnStatus::Uncovered, Reason::Pinned),
            "{name}"
        );
        assert!(
            pinned.missing_anchors.is_empty() && pinned.evidence.is_empty(),
            "{name}: a pin, not anchors, decided it"
        );
        assert!(
            v.contradictions.is_empty(),
            "{name}: a pin is no contradiction"
        );
        assert_eq!(v.outcome, Outcome::Narrowed, "{name}");
    }
}

#[test]
fn rule_2c_a_pinned_last_turn_does_not_carry_a_fail_closed_checkpoint() {
    let mut turns = derived(0, &["Rebook ZFA04Y", "Cancel HAT170"]);
    turns[1].pinned = true;
    let p = gatekeeper_coverage::Proposal {
        finish_reason: Some("length".into()),
        ..proposal(0, 1, "Rebook ZFA04Y, Cancel HAT170")
    };
    let v = decide(&p, &turns, &Policy::default()).unwrap();
    assert_eq!(
        v.advanced_to,
        Some(0),
        "the checkpoint stops at the last turn it covers"
    );
    assert_eq!(v.not_compacted, set(&[[1, 1]]));
}

#[test]
fn a_turn_the_checkpoint_does_not_advance_over_lists_no_evidence_it_is_checked_afresh_later() {
    let turns = derived(0, &["Rebook ZFA04Y", "Cancel HAT170"]);
    let p = gatekeeper_coverage::Proposal {
        finish_reason: Some("length".into()),
        ..proposal(0, 1, "Rebook ZFA04Y, and then")
    };
    let v = decide(&p, &turns, &Policy::default()).unwrap();
    assert_eq!(v.not_compacted, set(&[[1, 1]]));
    let (reason, missing, evidence) = detail(&v, 1);
    assert_eq!(reason, Reason::BeyondLastAnchor);
    assert!(!missing.is_empty(), "its anchors are named: {missing:?}");
    assert!(evidence.is_empty(), "{evidence:?}");
}

#[test]
fn under_the_any_rule_a_derived_anchor_other_turns_share_is_not_enough_alone() {
    let turns = derived(
        0,
        &[
            "Rebook ZFA04Y for the honeymoon",
            "Cancel ZFA04Y after the wedding",
        ],
    );
    let any = Policy {
        anchor_rule: AnchorRule::Any,
        ..Policy::default()
    };
    let shared_only = decide(&proposal(0, 1, "ZFA04Y was rebooked."), &turns, &any).unwrap();
    assert!(shared_only.covered.is_empty(), "{shared_only:?}");
    let own = decide(&proposal(0, 1, "The honeymoon."), &turns, &any).unwrap();
    assert_eq!(own.covered, set(&[[0, 0]]));
}

#[test]
fn a_pinned_turn_between_derived_ones_leaves_their_sharing_counts_as_they_are() {
    let mut turns = derived(
        0,
        &[
            "Rebook ZFA04Y for the honeymoon",
            "Always answer in French",
            "Cancel ZFA04Y after the wedding",
        ],
    );
    let v = decide(&proposal(0, 2, "Nothing kept."), &turns, &Policy::default()).unwrap();
    let unpinned = detail(&v, 2).2;
    turns[1].pinned = true;
    let v = decide(&proposal(0, 2, "Nothing kept."), &turns, &Policy::default()).unwrap();
    let (reason, _, evidence) = detail(&v, 2);
    assert_eq!(reason, Reason::AnchorMissing);
    assert!(evidence.contains(&shared("ZFA04Y", 2)), "{evidence:?}");
    assert_eq!(evidence, unpinned, "a pin changes no other turn's evidence");
}
