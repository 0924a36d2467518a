//! The working context (`GET .../context`): each deciding checkpoint's summary once, where its
//! first covered turn stood, and every other turn as itself, in turn order.
//!
//! Pure, and in two steps so that the store reads only what the answer holds: from the
//! checkpoints' spans (no summaries) [`reads`] says which summaries and which turns' contents
//! the answer needs; [`working_context`] then assembles it from those.

use crate::api::{ContextItem, Source};
use crate::coverage::{IdRanges, Role};
use foldhash::HashMap;

/// A checkpoint as the context needs it before its summary: its span and what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSpan {
    pub checkpoint_id: i64,
    pub from: i64,
    pub advanced_to: i64,
    pub covered: IdRanges,
}

/// What to read beyond the spans.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextReads {
    /// The checkpoints that stand for at least one turn, ascending.
    pub summaries: Vec<i64>,
    /// The turns that appear as themselves: uncovered by their deciding checkpoint, or live.
    pub verbatim: IdRanges,
}

/// A turn of the log; its content and anchors only if it appears as itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextTurn {
    pub id: i64,
    pub role: Role,
    pub tokens: u32,
    pub pinned: bool,
    pub content: Option<String>,
    pub anchors: Vec<String>,
}

/// A budget for the context (`max_tokens`), and how to count what a stub takes.
pub struct Budget<'a> {
    pub max_tokens: u64,
    /// The stubs' `recall` paths start with this (`/v1/conversations/{c}/reconstruct/`).
    pub recall_prefix: &'a str,
    pub count_tokens: &'a dyn Fn(&str) -> u32,
}

/// The context's items and, with a budget, whether they fit it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    pub items: Vec<ContextItem>,
    pub fits: Option<bool>,
    pub smallest_max_tokens: Option<u64>,
}

/// Characters of a turn a stub shows.
pub const PREVIEW_CHARS: usize = 160;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextSummary {
    pub text: String,
    pub tokens: u32,
}

/// The reads hold less than [`working_context`] needs: the store read another snapshot than
/// the one the spans came from, which a single read transaction rules out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the working context lacks {0}")]
pub struct Incomplete(String);

/// Which summaries and turn contents the context of a log of turns `0..end` needs.
pub fn reads(end: i64, spans: &[CheckpointSpan]) -> ContextReads {
    let mut reads = ContextReads::default();
    let mut summaries = Vec::new();
    for (id, decider) in (0..).zip(deciders(end, spans)) {
        match decider.map(|index| &spans[index]) {
            Some(span) if span.covered.contains(id) => summaries.push(span.checkpoint_id),
            _ => reads.verbatim.push(id),
        }
    }
    summaries.sort_unstable();
    summaries.dedup();
    reads.summaries = summaries;
    reads
}

/// The context from the turns (in id order), the spans and the summaries [`reads`] named.
///
/// With a budget, the policy: summaries, pinned turns and live turns always stay as they are.
/// Every other turn (one a checkpoint spans but does not cover) stays verbatim while it fits,
/// newest first, and otherwise becomes a stub; a turn is skipped when it does not fit, so older,
/// smaller ones still can. A turn no bigger than its stub is never stubbed. When even every
/// such turn as a stub does not fit, that smallest context is the answer, with `fits: false`.
pub fn working_context(
    turns: Vec<ContextTurn>,
    spans: &[CheckpointSpan],
    summaries: &HashMap<i64, ContextSummary>,
    budget: Option<&Budget<'_>>,
) -> Result<Assembled, Incomplete> {
    let mut items = Vec::new();
    // Turns a budget may stub: (item index, the stub and what it takes).
    let mut stubbable: Vec<(usize, ContextItem, u32)> = Vec::new();
    let mut summary_at: HashMap<i64, usize> = HashMap::default();
    let end = turns.last().map_or(0, |t| t.id + 1);
    let deciders = deciders(end, spans);
    for mut turn in turns {
        let decider = usize::try_from(turn.id)
            .ok()
            .and_then(|id| deciders.get(id).copied().flatten())
            .map(|index| &spans[index]);
        match decider {
            Some(span) if span.covered.contains(turn.id) => {
                let index = match summary_at.get(&span.checkpoint_id) {
                    Some(&index) => index,
                    None => {
                        let summary = summaries.get(&span.checkpoint_id).ok_or_else(|| {
                            Incomplete(format!("checkpoint {}'s summary", span.checkpoint_id))
                        })?;
                        items.push(ContextItem::Summary {
                            checkpoint_id: span.checkpoint_id,
                            covers: IdRanges::new(),
                            text: summary.text.clone(),
                            tokens: summary.tokens,
                        });
                        summary_at.insert(span.checkpoint_id, items.len() - 1);
                        items.len() - 1
                    }
                };
                if let ContextItem::Summary { covers, .. } = &mut items[index] {
                    covers.push(turn.id);
                }
            }
            decider => {
                let content = (turn.content.take())
                    .ok_or_else(|| Incomplete(format!("turn {}'s content", turn.id)))?;
                if let Some(budget) = budget.filter(|_| decider.is_some() && !turn.pinned) {
                    let stub = stub_of(&turn, &content, budget);
                    stubbable.push((items.len(), stub.0, stub.1));
                }
                items.push(ContextItem::Turn {
                    id: turn.id,
                    role: turn.role,
                    content,
                    source: if decider.is_some() {
                        Source::RawLog
                    } else {
                        Source::Live
                    },
                    tokens: turn.tokens,
                });
            }
        }
    }
    let Some(budget) = budget else {
        return Ok(Assembled {
            items,
            fits: None,
            smallest_max_tokens: None,
        });
    };
    // The smallest context: every stubbable turn as the cheaper of itself and its stub.
    let whole: u64 = items.iter().map(|item| u64::from(item_tokens(item))).sum();
    let saved: u64 = (stubbable.iter())
        .map(|&(index, _, cost)| u64::from(item_tokens(&items[index]).saturating_sub(cost)))
        .sum();
    let smallest = whole - saved;
    let mut room = budget.max_tokens.saturating_sub(smallest);
    // Newest first: whether each stays verbatim (a turn cheaper than its stub always does).
    for (index, stub, cost) in stubbable.into_iter().rev() {
        let tokens = item_tokens(&items[index]);
        let more = u64::from(tokens.saturating_sub(cost));
        if more == 0 {
            continue;
        }
        if more <= room {
            room -= more;
        } else {
            items[index] = stub;
        }
    }
    Ok(Assembled {
        items,
        fits: Some(smallest <= budget.max_tokens),
        smallest_max_tokens: Some(smallest),
    })
}

/// Tokens an item takes in the context.
pub fn item_tokens(item: &ContextItem) -> u32 {
    match item {
        ContextItem::Summary { tokens, .. } | ContextItem::Turn { tokens, .. } => *tokens,
        ContextItem::Stub { stub_tokens, .. } => *stub_tokens,
    }
}

/// A turn's stub and what it takes: its tokens as the model would read the stub (its JSON).
fn stub_of(turn: &ContextTurn, content: &str, budget: &Budget<'_>) -> (ContextItem, u32) {
    let preview = match content.char_indices().nth(PREVIEW_CHARS) {
        Some((end, _)) => &content[..end],
        None => content,
    };
    let mut stub = ContextItem::Stub {
        id: turn.id,
        role: turn.role,
        tokens: turn.tokens,
        stub_tokens: 0,
        preview: preview.to_owned(),
        anchors: turn.anchors.clone(),
        recall: format!("{}{}", budget.recall_prefix, turn.id),
    };
    let text = serde_json::to_string(&stub).unwrap_or_default();
    let cost = (budget.count_tokens)(&text);
    if let ContextItem::Stub { stub_tokens, .. } = &mut stub {
        *stub_tokens = cost;
    }
    (stub, cost)
}

/// For each turn id in `0..end`, the index of the newest checkpoint whose `[from, advanced_to]`
/// holds it. Newest first, each checkpoint takes the turns of its range no newer one took,
/// skipping taken runs through a "next untaken" forest: about turns + checkpoints steps, where
/// asking every checkpoint for every turn took turns × checkpoints.
fn deciders(end: i64, spans: &[CheckpointSpan]) -> Vec<Option<usize>> {
    let n = usize::try_from(end).unwrap_or(0);
    let mut decider = vec![None; n];
    // next[i]: the smallest untaken id ≥ i (n: none).
    let mut next: Vec<usize> = (0..=n).collect();
    fn untaken(next: &mut [usize], mut i: usize) -> usize {
        while next[i] != i {
            next[i] = next[next[i]];
            i = next[i];
        }
        i
    }
    for (index, c) in spans.iter().enumerate().rev() {
        let (Ok(from), Ok(to)) = (usize::try_from(c.from), usize::try_from(c.advanced_to)) else {
            continue;
        };
        let mut i = untaken(&mut next, from.min(n));
        while i < n && i <= to {
            decider[i] = Some(index);
            next[i] = i + 1;
            i = untaken(&mut next, i + 1);
        }
    }
    decider
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coverage::IdRange;

    fn span(
        checkpoint_id: i64,
        from: i64,
        advanced_to: i64,
        covered: &[(i64, i64)],
    ) -> CheckpointSpan {
        CheckpointSpan {
            checkpoint_id,
            from,
            advanced_to,
            covered: IdRanges::from_ranges(covered.iter().map(|&(a, b)| IdRange::new(a, b))),
        }
    }

    /// The definition: the newest checkpoint whose range holds the turn.
    fn newest_holding(id: i64, spans: &[CheckpointSpan]) -> Option<usize> {
        spans
            .iter()
            .rposition(|c| c.from <= id && id <= c.advanced_to)
    }

    #[test]
    fn each_turn_is_decided_by_the_newest_checkpoint_whose_range_holds_it() {
        let cases: &[&[(i64, i64)]] = &[
            &[],
            &[(0, 4)],
            &[(0, 4), (2, 6)],
            &[(2, 6), (0, 9)],
            &[(5, 5), (0, 3), (3, 8), (1, 1)],
            &[(0, 20), (30, 40)],
        ];
        for ranges in cases {
            let spans: Vec<_> = (1..)
                .zip(*ranges)
                .map(|(id, &(from, to))| span(id, from, to, &[]))
                .collect();
            let deciders = deciders(12, &spans);
            for id in 0..12 {
                assert_eq!(
                    deciders[id as usize],
                    newest_holding(id, &spans),
                    "turn {id} of {ranges:?}"
                );
            }
        }
    }

    #[test]
    fn only_deciding_summaries_and_the_contents_shown_are_read() {
        // (spans, log length) → (summaries read, turns read verbatim)
        type Case = (
            &'static [(i64, i64, i64, &'static [(i64, i64)])],
            i64,
            &'static [i64],
            &'static [(i64, i64)],
        );
        let cases: &[Case] = &[
            (&[], 3, &[], &[(0, 2)]),
            // 0-3 covered but for 2; 4-5 live.
            (&[(1, 0, 3, &[(0, 1), (3, 3)])], 6, &[1], &[(2, 2), (4, 5)]),
            // A newer checkpoint over the same turns hides the older summary entirely.
            (&[(1, 0, 3, &[(0, 3)]), (2, 0, 5, &[(0, 5)])], 6, &[2], &[]),
            // A newer one that covers nothing: its turns come from the raw log, no summary read.
            (&[(1, 0, 3, &[(0, 3)]), (2, 0, 3, &[])], 4, &[], &[(0, 3)]),
            // Side by side, and a straddling one that leaves the older ones a part each.
            (
                &[
                    (1, 0, 4, &[(0, 4)]),
                    (2, 5, 9, &[(5, 9)]),
                    (3, 3, 6, &[(3, 4)]),
                ],
                10,
                &[1, 2, 3],
                &[(5, 6)],
            ),
        ];
        for (spans, end, summaries, verbatim) in cases {
            let spans: Vec<_> = spans
                .iter()
                .map(|&(id, from, to, covered)| span(id, from, to, covered))
                .collect();
            let reads = reads(*end, &spans);
            assert_eq!(reads.summaries, *summaries, "{spans:?}");
            let want = IdRanges::from_ranges(verbatim.iter().map(|&(a, b)| IdRange::new(a, b)));
            assert_eq!(reads.verbatim, want, "{spans:?}");
        }
    }

    fn turn(id: i64, tokens: u32, content: Option<&str>) -> ContextTurn {
        ContextTurn {
            id,
            role: Role::User,
            tokens,
            pinned: false,
            content: content.map(str::to_owned),
            anchors: vec![format!("A{id}")],
        }
    }

    #[test]
    fn a_context_missing_what_its_reads_named_is_refused() {
        let spans = [span(1, 0, 1, &[(0, 0)])];
        let summary = HashMap::from_iter([(
            1,
            ContextSummary {
                text: "s".into(),
                tokens: 1,
            },
        )]);
        let both = || vec![turn(0, 1, None), turn(1, 1, Some("b"))];
        let complete = working_context(both(), &spans, &summary, None).unwrap();
        assert_eq!(complete.items.len(), 2);
        assert_eq!((complete.fits, complete.smallest_max_tokens), (None, None));
        let lacking = vec![turn(0, 1, None), turn(1, 1, None)];
        assert!(working_context(lacking, &spans, &summary, None).is_err());
        assert!(working_context(both(), &spans, &HashMap::default(), None).is_err());
    }

    /// What each item of a budgeted context is: `S` summary, `T` verbatim turn, `-` stub.
    fn shape(assembled: &Assembled) -> String {
        (assembled.items.iter())
            .map(|item| match item {
                ContextItem::Summary { .. } => 'S',
                ContextItem::Turn { .. } => 'T',
                ContextItem::Stub { .. } => '-',
            })
            .collect()
    }

    #[test]
    fn a_budget_keeps_the_newest_uncovered_turns_that_fit_and_stubs_the_rest() {
        // Turns 0-5 in a checkpoint that covers 0 and 3 (summary 10 tokens); 6-7 live. A stub
        // costs 5 tokens here, whatever it says.
        let count = |_: &str| 5;
        let budget = |max_tokens| Budget {
            max_tokens,
            recall_prefix: "/v1/conversations/c/reconstruct/",
            count_tokens: &count,
        };
        let spans = [span(1, 0, 5, &[(0, 0), (3, 3)])];
        let summaries = HashMap::from_iter([(
            1,
            ContextSummary {
                text: "s".into(),
                tokens: 10,
            },
        )]);
        let sizes = [1, 40, 3, 1, 30, 20, 7, 8];
        let log = |pinned: Option<i64>| -> Vec<ContextTurn> {
            (0..8)
                .map(|id| {
                    let covered = id == 0 || id == 3;
                    let content = (!covered).then_some("text");
                    ContextTurn {
                        pinned: Some(id) == pinned,
                        ..turn(id, sizes[id as usize], content)
                    }
                })
                .collect()
        };
        // Fixed: summary 10 + live 7 + 8 = 25; turn 2 (3 tokens) is cheaper than a stub, so
        // the smallest context is 25 + 3 + three stubs of 5 = 43.
        // (max_tokens, pinned turn, shape, fits)
        let cases: &[(u64, Option<i64>, &str, bool)] = &[
            (10_000, None, "STTTTTT", true),
            (43, None, "S-T--TT", true),
            (42, None, "S-T--TT", false),
            // 15 more: turn 5 (20 for its stub's 5) fits, newest first; 4 and 1 do not.
            (58, None, "S-T-TTT", true),
            // 25 more: turn 5 fits, then 4 (25 more) does not.
            (68, None, "S-T-TTT", true),
            // 40 more: turns 5 and 4; not 1 (35 more).
            (83, None, "S-TTTTT", true),
            // A pinned turn is never a stub, even over budget.
            (0, Some(1), "STT--TT", false),
        ];
        for &(max_tokens, pinned, want, fits) in cases {
            let budget = budget(max_tokens);
            let got = working_context(log(pinned), &spans, &summaries, Some(&budget)).unwrap();
            assert_eq!(
                shape(&got),
                want,
                "max_tokens {max_tokens}, pinned {pinned:?}"
            );
            assert_eq!(got.fits, Some(fits), "max_tokens {max_tokens}");
            let total: u64 = got.items.iter().map(|i| u64::from(item_tokens(i))).sum();
            if fits {
                assert!(total <= max_tokens, "max_tokens {max_tokens}: {total}");
            } else {
                assert_eq!(Some(total), got.smallest_max_tokens, "the smallest context");
            }
        }
        let got = working_context(log(None), &spans, &summaries, Some(&budget(43))).unwrap();
        assert_eq!(got.smallest_max_tokens, Some(43));
        let ContextItem::Stub {
            id,
            tokens,
            stub_tokens,
            preview,
            anchors,
            recall,
            ..
        } = &got.items[1]
        else {
            panic!("turn 1 is a stub");
        };
        assert_eq!((*id, *tokens, *stub_tokens), (1, 40, 5));
        assert_eq!(preview, "text");
        assert_eq!(anchors, &["A1"]);
        assert_eq!(recall, "/v1/conversations/c/reconstruct/1");
    }

    #[test]
    fn a_stub_previews_at_most_its_first_characters() {
        let long = "é".repeat(PREVIEW_CHARS + 40);
        let count = |_: &str| 1;
        let budget = Budget {
            max_tokens: 0,
            recall_prefix: "/r/",
            count_tokens: &count,
        };
        let spans = [span(1, 0, 0, &[])];
        let turns = vec![turn(0, 100, Some(&long))];
        let got = working_context(turns, &spans, &HashMap::default(), Some(&budget)).unwrap();
        let ContextItem::Stub { preview, .. } = &got.items[0] else {
            panic!("a stub")
        };
        assert_eq!(preview.chars().count(), PREVIEW_CHARS);
        assert!(long.starts_with(preview.as_str()));
    }
}
