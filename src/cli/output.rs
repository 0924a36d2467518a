//! Human-readable output; `--json` prints the service's JSON instead.

use super::Remote;
use super::transcript::AppendSummary;
use crate::api::*;
use crate::coverage::{IdRanges, Reason};
use serde::Serialize;

pub fn print<T: Serialize + ?Sized>(remote: &Remote, value: &T, human: fn(&T) -> String) {
    if remote.json {
        println!(
            "{}",
            serde_json::to_string_pretty(value).expect("API values serialize")
        );
    } else {
        println!("{}", human(value));
    }
}

/// `covered 0-339,341-359 · uncovered 340 · not compacted 360-399`
pub fn coverage_line(covered: &IdRanges, uncovered: &IdRanges, not_compacted: &IdRanges) -> String {
    let mut parts = vec![format!("covered {covered}")];
    if !uncovered.is_empty() {
        parts.push(format!("uncovered {uncovered}"));
    }
    if !not_compacted.is_empty() {
        parts.push(format!("not compacted {not_compacted}"));
    }
    parts.join(" · ")
}

pub fn verdict(v: &VerdictResponse) -> String {
    let d = &v.verdict;
    let head = match (v.checkpoint_id, v.dry_run) {
        (Some(id), _) => format!("{} · checkpoint {id}", d.outcome.as_str()),
        (None, true) => format!("{} · dry run, nothing persisted", d.outcome.as_str()),
        (None, false) => format!("{} · nothing persisted", d.outcome.as_str()),
    };
    let mut lines = vec![
        head,
        coverage_line(&d.covered, &d.uncovered, &d.not_compacted),
    ];
    lines.push(format!(
        "prefix {} tokens · needs budget {} of {}{}",
        d.prefix_tokens,
        d.required_budget,
        d.summary_budget,
        if d.over_ceiling {
            " (over the ceiling)"
        } else {
            ""
        }
    ));
    if d.truncated {
        let signals: Vec<&str> = d.truncation_signals.iter().map(|s| s.as_str()).collect();
        lines.push(format!("truncated: {}", signals.join(", ")));
    }
    if !d.contradictions.is_empty() {
        lines.push(format!(
            "contradictions (reported but anchors missing): {}",
            d.contradictions
        ));
    }
    lines.join("\n")
}

pub fn reconstruct(r: &ReconstructResponse) -> String {
    let origin = match (r.source, r.checkpoint_id, r.reason) {
        (Source::Summary, Some(id), _) => format!("summary of checkpoint {id}"),
        (Source::RawLog, Some(id), Some(reason)) => {
            format!("raw log (checkpoint {id}: {})", reason.as_str())
        }
        (Source::RawLog, _, _) => "raw log".to_owned(),
        _ => "live".to_owned(),
    };
    format!("turn {} · {} · {}\n{}", r.turn, r.role, origin, r.text)
}

pub fn context(c: &ContextResponse) -> String {
    let budget = match (c.max_tokens, c.fits, c.smallest_max_tokens) {
        (Some(max), Some(true), _) => format!(" of {max}"),
        (Some(max), _, Some(smallest)) => {
            format!(" · does not fit {max}: the smallest context takes {smallest}")
        }
        _ => String::new(),
    };
    let mut lines = vec![format!(
        "{} · {} items · {} tokens{budget}",
        c.conversation,
        c.items.len(),
        c.total_tokens
    )];
    for item in &c.items {
        lines.push(match item {
            ContextItem::Summary {
                checkpoint_id,
                covers,
                tokens,
                ..
            } => {
                format!("[summary {checkpoint_id}] covers {covers} · {tokens} tokens")
            }
            ContextItem::Turn {
                id,
                role,
                source,
                tokens,
                ..
            } => {
                format!("[turn {id}] {role} · {} · {tokens} tokens", source.as_str())
            }
            ContextItem::Stub {
                id,
                role,
                tokens,
                stub_tokens,
                recall,
                ..
            } => {
                format!("[stub {id}] {role} · {tokens} tokens left out ({stub_tokens} here) · recall {recall}")
            }
        });
    }
    lines.join("\n")
}

pub fn plan(p: &CompactionPlanResponse) -> String {
    let mut out = match p.to {
        Some(to) => format!(
            "range {}-{to} · {} tokens · needs budget {} of {} · anchors take {} tokens",
            p.from, p.prefix_tokens, p.required_budget, p.summary_budget, p.anchor_tokens
        ),
        None => format!(
            "nothing fits: turn {} alone needs budget {} of {}",
            p.from, p.required_budget, p.summary_budget
        ),
    };
    let why = match p.advice_reason {
        AdviceReason::Fits => "the range is worth a summary".to_owned(),
        AdviceReason::FirstTurnOverBudget => {
            format!("turn {} alone needs {}", p.from, p.required_budget)
        }
        AdviceReason::NextTurnOverBudget => format!(
            "{} tokens, worth a summary from {}, and the next turn needs budget {}",
            p.prefix_tokens,
            p.worthwhile_tokens,
            p.budget_for_next_turn.unwrap_or(0)
        ),
        AdviceReason::RangeTooSmall => format!(
            "{} tokens, worth a summary from {}",
            p.prefix_tokens, p.worthwhile_tokens
        ),
        AdviceReason::RecentRejections => format!(
            "the last {} proposals from {} were rejected",
            p.recent_rejections, p.from
        ),
    };
    out.push_str(&format!("\nadvice: {} ({why})", p.advice.as_str()));
    if !p.turns.is_empty() {
        out.push_str("\nthe summary must keep, per turn:");
    }
    for t in &p.turns {
        let what = match t.unanchored {
            Some(Reason::Pinned) => "(pinned: never covered)".to_owned(),
            Some(_) => "(no anchors: covered only through a coverage report)".to_owned(),
            None => t.anchors.join(", "),
        };
        out.push_str(&format!("\n  {:>5}  {what}", t.id));
    }
    out
}

pub fn pinned(t: &TurnResponse) -> String {
    if t.pinned {
        format!("turn {} pinned: no summary will cover it", t.id)
    } else {
        format!("turn {} unpinned: later summaries may cover it", t.id)
    }
}

pub fn imported(i: &ImportResponse) -> String {
    format!(
        "conversation {} imported: {} turns, {} checkpoints",
        i.conversation, i.turns, i.checkpoints
    )
}

pub fn status(s: &ConversationResponse) -> String {
    let latest = match &s.latest_checkpoint {
        Some(c) => format!(
            "latest checkpoint {} ({}, {}-{})",
            c.checkpoint_id,
            c.outcome.as_str(),
            c.from,
            c.advanced_to
        ),
        None => "no checkpoint".to_owned(),
    };
    format!(
        "{} · {} turns · {} tokens · {} checkpoints · {latest}",
        s.conversation, s.next_id, s.total_tokens, s.checkpoints
    )
}

pub fn append(summaries: &[AppendSummary]) -> String {
    summaries
        .iter()
        .map(|s| {
            format!(
                "{} · appended {} · already stored {} · next id {}",
                s.conversation, s.appended, s.already_stored, s.next_id
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn search(s: &SearchResponse) -> String {
    let terms: Vec<String> = (s.terms.iter())
        .map(|t| {
            let more = if t.complete { "" } else { "+" };
            format!("{} ({}{more} turns)", t.term, t.turns)
        })
        .collect();
    let ignored = if s.ignored.is_empty() {
        String::new()
    } else {
        format!(" · not searched: {}", s.ignored.join(", "))
    };
    let mut lines = vec![format!(
        "{} hits for {}{ignored}{}",
        s.hits.len(),
        terms.join(", "),
        if s.complete {
            ""
        } else {
            " · incomplete: a term is in more turns than a search reads"
        }
    )];
    for h in &s.hits {
        let source = match (h.source, h.terms_in_summary) {
            (Source::Summary, Some(true)) => "summary (kept the words)".to_owned(),
            (Source::Summary, _) => "summary (without the words: recall the turn)".to_owned(),
            (source, _) => source.as_str().to_owned(),
        };
        lines.push(format!(
            "{}/{} [{}] score {} · {source} · {}",
            h.conversation, h.turn, h.role, h.score, h.recall
        ));
        lines.push(format!("    {}", h.snippet.text.replace('\n', " ")));
    }
    lines.join("\n")
}
