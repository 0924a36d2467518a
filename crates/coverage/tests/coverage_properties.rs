//! Invariants of the decision over random ranges, anchors, reports and summaries.

mod common;

use common::{given, given_mut, turn};
use gatekeeper_coverage::{
    IdRange, IdRanges, Mode, Outcome, Policy, Proposal, Reason, Rejection, Role, TurnFacts, decide,
};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

/// Words that stress the matcher: prefixes of each other, case and width variants, ligatures,
/// sharp s, composed and decomposed accents, inner punctuation and spaces, and marks NFKC
/// cannot compose away (`İ` folds to `i` + U+0307; `q` + U+0323 has no precomposed form), so
/// only the rule that marks are word characters keeps `i` out of `İSTANBUL`.
const VOCABULARY: &[&str] = &[
    "A1",
    "A12",
    "a1",
    "cat",
    "concatenate",
    "New York",
    "new york",
    "v1.2",
    "v1.23",
    "ﬁle",
    "file",
    "Straße",
    "STRASSE",
    "café",
    "cafe\u{301}",
    "cafe",
    "ＨＡＴ１",
    "HAT1",
    "INV-7",
    "INV-77",
    "user_id",
    "ab-cd",
    "cd-ef",
    "İSTANBUL",
    "i",
    "istanbul",
    "q\u{323}",
    "q",
];
const SEPARATORS: &[&str] = &[" ", ", ", "\n  ", "-", "(", ")", ".", "x", ""];

/// A word character as rule 2 says: a letter, a digit or a combining mark, one with a canonical
/// combining class (written here, not the matcher's own test).
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || unicode_normalization::char::canonical_combining_class(c) != 0
}

/// An independent reading of the anchor rule: normalize whole strings, scan every position.
fn naive_present(anchor: &str, summary: &str) -> bool {
    neighbours(&norm(anchor), &norm(summary))
        .iter()
        .any(|(before, after)| !before.is_some_and(word_char) && !after.is_some_and(word_char))
}

/// NFKC, full case folding, NFKC again, whitespace collapsed.
fn norm(s: &str) -> String {
    let folded: String = caseless::default_case_fold_str(&s.nfkc().collect::<String>())
        .nfkc()
        .collect();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Each place a normalized anchor occurs in a normalized summary, word-bounded or not: the
/// characters just before and just after it.
fn neighbours(anchor: &str, summary: &str) -> Vec<(Option<char>, Option<char>)> {
    if anchor.is_empty() {
        return Vec::new();
    }
    (summary.char_indices())
        .filter(|(i, _)| summary[*i..].starts_with(anchor))
        .map(|(i, _)| {
            let before = summary[..i].chars().next_back();
            (before, summary[i + anchor.len()..].chars().next())
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Case {
    proposal: Proposal,
    turns: Vec<TurnFacts>,
    shuffle_keys: Vec<u32>,
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool)
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (0i64..5, 1usize..30).prop_flat_map(move |(from, len)| {
        let word = || proptest::sample::select(VOCABULARY);
        let to = from + len as i64 - 1;
        let turns = proptest::collection::vec(
            (
                role(),
                0u32..600,
                proptest::collection::vec(word(), 0..4),
                proptest::bool::weighted(0.1),
            ),
            len,
        );
        let summary_words =
            proptest::collection::vec((word(), proptest::sample::select(SEPARATORS)), 0..40);
        let consumed = proptest::option::of(proptest::collection::vec((from..=to, 0i64..6), 0..4));
        (
            turns,
            summary_words,
            prop_oneof![Just(""), Just("."), Just(" and the"), Just("</s>")],
            consumed,
            proptest::option::of(prop_oneof![
                Just("stop"),
                Just("length"),
                Just("max_tokens")
            ]),
            proptest::option::of(Just("</s>")),
            prop_oneof![Just(Mode::Narrow), Just(Mode::Strict)],
            (1i64..1500, 0u32..1500),
            proptest::collection::vec(any::<u32>(), len),
        )
            .prop_map(
                move |(
                    turns,
                    words,
                    tail,
                    consumed,
                    finish,
                    marker,
                    mode,
                    (budget, tokens),
                    keys,
                )| {
                    let mut summary: String = words.iter().flat_map(|(w, s)| [*w, *s]).collect();
                    summary.push_str(tail);
                    let consumed = consumed.map(|rs| {
                        rs.into_iter()
                            .map(|(start, extra)| IdRange::new(start, (start + extra).min(to)))
                            .collect()
                    });
                    Case {
                        proposal: Proposal {
                            from,
                            to,
                            summary,
                            summary_budget: budget,
                            summary_tokens: tokens,
                            consumed,
                            finish_reason: finish.map(String::from),
                            end_marker: marker.map(String::from),
                            mode,
                        },
                        turns: turns
                            .into_iter()
                            .enumerate()
                            .map(|(i, (role, tokens, anchors, pinned))| TurnFacts {
                                pinned,
                                ..turn(from + i as i64, role, tokens, &anchors)
                            })
                            .collect(),
                        shuffle_keys: keys,
                    }
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_three_sets_are_disjoint_and_together_are_exactly_the_range(c in case()) {
        let v = decide(&c.proposal, &c.turns, &Policy::default()).unwrap();
        let all: Vec<i64> = [&v.covered, &v.uncovered, &v.not_compacted].iter().flat_map(|s| s.ids()).collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), all.len(), "sets overlap");
        prop_assert_eq!(sorted, (c.proposal.from..=c.proposal.to).collect::<Vec<_>>());
        let listed = IdRanges::from_ids(v.turns.iter().map(|t| t.id));
        prop_assert_eq!(listed, IdRanges::from_ids(v.uncovered.ids().chain(v.not_compacted.ids())));
    }

    #[test]
    fn every_covered_turns_anchors_are_in_the_summary(c in case()) {
        let v = decide(&c.proposal, &c.turns, &Policy::default()).unwrap();
        for t in c.turns.iter().filter(|t| v.covered.contains(t.id)) {
            for a in given(t) {
                prop_assert!(naive_present(a, &c.proposal.summary), "turn {} covered without {:?}", t.id, a);
            }
        }
    }

    #[test]
    fn the_matcher_agrees_with_a_naive_scan(c in case()) {
        for a in VOCABULARY {
            prop_assert_eq!(
                gatekeeper_coverage::anchor_present(a, &c.proposal.summary),
                naive_present(a, &c.proposal.summary),
                "{:?} in {:?}", a, c.proposal.summary
            );
        }
    }

    #[test]
    fn not_compacted_is_empty_or_a_suffix_after_advanced_to(c in case()) {
        let v = decide(&c.proposal, &c.turns, &Policy::default()).unwrap();
        match v.not_compacted.ranges() {
            [] => prop_assert_eq!(v.advanced_to, Some(c.proposal.to)),
            [only] => {
                prop_assert_eq!(only.end, c.proposal.to);
                prop_assert_eq!(only.start, v.advanced_to.map_or(c.proposal.from, |a| a + 1));
            }
            more => prop_assert!(false, "not_compacted is not one suffix: {:?}", more),
        }
    }

    #[test]
    fn a_pinned_turn_is_never_covered_and_is_listed_as_pinned_when_compacted(c in case()) {
        let v = decide(&c.proposal, &c.turns, &Policy::default()).unwrap();
        for t in c.turns.iter().filter(|t| t.pinned) {
            prop_assert!(!v.covered.contains(t.id), "pinned turn {} covered", t.id);
            if v.uncovered.contains(t.id) {
                let detail = v.turns.iter().find(|d| d.id == t.id).unwrap();
                prop_assert_eq!(detail.reason, Reason::Pinned);
            }
        }
    }

    #[test]
    fn strict_mode_only_ever_accepts_or_rejects(c in case()) {
        let p = Proposal { mode: Mode::Strict, ..c.proposal.clone() };
        let v = decide(&p, &c.turns, &Policy::default()).unwrap();
        prop_assert!(matches!(v.outcome, Outcome::Accepted | Outcome::Rejected));
        if v.outcome == Outcome::Accepted {
            prop_assert!(v.uncovered.is_empty() && v.not_compacted.is_empty() && !v.truncated);
        }
    }

    #[test]
    fn the_verdict_never_depends_on_the_order_of_turns_or_anchors(c in case()) {
        let policy = Policy::default();
        let expected = decide(&c.proposal, &c.turns, &policy).unwrap();
        let mut shuffled: Vec<(u32, TurnFacts)> = c.shuffle_keys.iter().copied().zip(c.turns.iter().cloned()).collect();
        shuffled.sort_by_key(|(k, _)| *k);
        let shuffled: Vec<TurnFacts> = shuffled
            .into_iter()
            .map(|(k, mut t)| {
                let anchors = given_mut(&mut t);
                let n = anchors.len().max(1);
                anchors.rotate_left(k as usize % n);
                anchors.reverse();
                t
            })
            .collect();
        prop_assert_eq!(decide(&c.proposal, &shuffled, &policy).unwrap(), expected);
    }

    #[test]
    fn outcome_matches_the_sets(c in case()) {
        let v = decide(&c.proposal, &c.turns, &Policy::default()).unwrap();
        let expected = if v.covered.is_empty() || v.rejection.is_some() {
            Outcome::Rejected
        } else if !v.not_compacted.is_empty() {
            Outcome::Partial
        } else if !v.uncovered.is_empty() {
            Outcome::Narrowed
        } else {
            Outcome::Accepted
        };
        prop_assert_eq!(v.outcome, expected);
        prop_assert_eq!(v.covered.is_empty(), v.rejection == Some(Rejection::NothingCovered));
    }
}

/// Every branch the properties above are meant to exercise, by name.
const BRANCHES: &[&str] = &[
    "accepted",
    "narrowed",
    "partial",
    "rejected: nothing covered",
    "rejected: strict mode",
    "uncovered: not_reported",
    "uncovered: anchor_missing",
    "uncovered: no_anchors",
    "uncovered: pinned",
    "not compacted: beyond_last_anchor",
    "over the ceiling",
    "within the ceiling",
    "truncated",
    "not truncated",
    "a turn with all of its anchors in the summary",
    "a turn with some of its anchors in the summary",
    "an anchor's text touching a combining mark",
    "an anchor present between punctuation",
];

#[test]
fn the_generator_reaches_every_outcome_reason_and_boundary_the_properties_speak_of() {
    common::assert_branches_reached(2000, case(), BRANCHES, |c| {
        let v = decide(&c.proposal, &c.turns, &Policy::default()).unwrap();
        let mut reached = vec![match (v.outcome, v.rejection) {
            (Outcome::Accepted, _) => "accepted",
            (Outcome::Narrowed, _) => "narrowed",
            (Outcome::Partial, _) => "partial",
            (Outcome::Rejected, Some(Rejection::StrictMode)) => "rejected: strict mode",
            (Outcome::Rejected, _) => "rejected: nothing covered",
        }];
        reached.extend(v.turns.iter().map(|d| match d.reason {
            Reason::NotReported => "uncovered: not_reported",
            Reason::AnchorMissing => "uncovered: anchor_missing",
            Reason::NoAnchors => "uncovered: no_anchors",
            Reason::Pinned => "uncovered: pinned",
            Reason::BeyondLastAnchor => "not compacted: beyond_last_anchor",
        }));
        reached.push(if v.over_ceiling {
            "over the ceiling"
        } else {
            "within the ceiling"
        });
        reached.push(if v.truncated {
            "truncated"
        } else {
            "not truncated"
        });
        for t in &c.turns {
            let present = given(t)
                .iter()
                .filter(|a| naive_present(a, &c.proposal.summary));
            match present.count() {
                0 => {}
                n if n == given(t).len() => {
                    reached.push("a turn with all of its anchors in the summary")
                }
                _ => reached.push("a turn with some of its anchors in the summary"),
            }
        }
        let mark = |c: Option<char>| c.is_some_and(unicode_normalization::char::is_combining_mark);
        let punctuation = |c: Option<char>| c.is_some_and(|c| !c.is_whitespace() && !word_char(c));
        let summary = norm(&c.proposal.summary);
        for a in VOCABULARY {
            let around = neighbours(&norm(a), &summary);
            if around.iter().any(|&(b, f)| mark(b) || mark(f)) {
                reached.push("an anchor's text touching a combining mark");
            }
            if around
                .iter()
                .any(|&(b, f)| punctuation(b) && punctuation(f))
            {
                reached.push("an anchor present between punctuation");
            }
        }
        reached
    });
}
