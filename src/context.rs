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

/// A turn of the log; its content only if it appears as itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextTurn {
    pub id: i64,
    pub role: Role,
    pub tokens: u32,
    pub content: Option<String>,
}

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
pub fn working_context(
    turns: Vec<ContextTurn>,
    spans: &[CheckpointSpan],
    summaries: &HashMap<i64, ContextSummary>,
) -> Result<Vec<ContextItem>, Incomplete> {
    let mut items = Vec::new();
    let mut summary_at: HashMap<i64, usize> = HashMap::default();
    let end = turns.last().map_or(0, |t| t.id + 1);
    let deciders = deciders(end, spans);
    for turn in turns {
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
            decider => items.push(ContextItem::Turn {
                id: turn.id,
                role: turn.role,
                content: turn
                    .content
                    .ok_or_else(|| Incomplete(format!("turn {}'s content", turn.id)))?,
                source: if decider.is_some() {
                    Source::RawLog
                } else {
                    Source::Live
                },
                tokens: turn.tokens,
            }),
        }
    }
    Ok(items)
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

    #[test]
    fn a_context_missing_what_its_reads_named_is_refused() {
        let spans = [span(1, 0, 1, &[(0, 0)])];
        let turn = |id, content: Option<&str>| ContextTurn {
            id,
            role: Role::User,
            tokens: 1,
            content: content.map(str::to_owned),
        };
        let summary = HashMap::from_iter([(
            1,
            ContextSummary {
                text: "s".into(),
                tokens: 1,
            },
        )]);
        let complete = working_context(vec![turn(0, None), turn(1, Some("b"))], &spans, &summary);
        assert_eq!(complete.unwrap().len(), 2);
        assert!(working_context(vec![turn(0, None), turn(1, None)], &spans, &summary).is_err());
        let none = HashMap::default();
        assert!(working_context(vec![turn(0, None), turn(1, Some("b"))], &spans, &none).is_err());
    }
}
