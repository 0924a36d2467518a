//! The decision's cost: 2,000 real turns against a 16 KB summary, with anchors the client gave
//! (rule 2) and with anchors the service derives per range (rule 2b).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatekeeper::coverage::derive::{AnchorSource, Draft, derive_anchors, rank_by_rarity};
use gatekeeper::coverage::{
    IdRange, Mode, Policy, Proposal, Role, TermProfile, TurnAnchors, TurnFacts, decide, distinctive,
};
use gatekeeper::tau_bench;
use std::hint::black_box;

const TURNS: usize = 2000;
const SUMMARY_BYTES: usize = 16 * 1024;

/// 2,000 tau-bench turns (repeated as needed), each with its role and text.
fn texts() -> Vec<(Role, String)> {
    let conversations = tau_bench::read_default().expect("tau-bench data beside the repository");
    conversations
        .iter()
        .flat_map(|c| &c.turns)
        .cycle()
        .take(TURNS)
        .map(|t| {
            (
                t.role.parse().expect("tau-bench roles"),
                t.text().into_owned(),
            )
        })
        .collect()
}

fn source(role: Role) -> AnchorSource {
    if role == Role::Tool {
        AnchorSource::ToolOutput
    } else {
        AnchorSource::Prose
    }
}

/// Anchors as a client would send them, made distinct per turn so the matcher holds about
/// 6,000 patterns, and a 16 KB summary carrying most of them.
fn given_workload() -> (Vec<TurnFacts>, String) {
    let mut turns = Vec::with_capacity(TURNS);
    let mut summary = String::from("<summary>\n");
    for (i, (role, text)) in texts().into_iter().enumerate() {
        let mut anchors = derive_anchors(&text, source(role), 3);
        anchors.push(format!("T{i}"));
        anchors.truncate(3);
        if summary.len() < SUMMARY_BYTES - 64 && i % 10 != 9 {
            summary.push_str(&anchors.join(", "));
            summary.push_str("; ");
        }
        turns.push(TurnFacts {
            id: i as i64,
            role,
            tokens: 150,
            anchors: TurnAnchors::Given(anchors),
            pinned: false,
            profile: Draft::terms_only(&text).into_profile(),
        });
    }
    (turns, finish(summary))
}

/// Derived anchors: profiles ranked by rarity as appends rank them, and a 16 KB summary holding
/// the distinctive anchors of most turns.
fn derived_workload() -> (Vec<TurnFacts>, String) {
    let texts = texts();
    let drafts = texts
        .iter()
        .map(|(role, text)| Draft::new(text, source(*role)));
    let (profiles, _) = rank_by_rarity(drafts, &Default::default());
    let turns: Vec<TurnFacts> = texts
        .iter()
        .zip(profiles)
        .enumerate()
        .map(
            |(i, ((role, _), profile)): (usize, (&(Role, String), TermProfile))| TurnFacts {
                id: i as i64,
                role: *role,
                tokens: 150,
                anchors: TurnAnchors::Derived,
                pinned: false,
                profile,
            },
        )
        .collect();
    let refs: Vec<&TurnFacts> = turns.iter().collect();
    let mut summary = String::from("<summary>\n");
    for (i, check) in distinctive::checks(&refs, &Policy::default())
        .iter()
        .enumerate()
    {
        if summary.len() < SUMMARY_BYTES - 64 && i % 10 != 9 {
            summary.push_str(&check.anchors().collect::<Vec<_>>().join(", "));
            summary.push_str("; ");
        }
    }
    (turns, finish(summary))
}

fn finish(mut summary: String) -> String {
    while summary.len() < SUMMARY_BYTES {
        summary.push_str("The customer was satisfied. ");
    }
    summary.push_str("</summary>");
    summary
}

fn proposal(summary: &str, consumed: Option<Vec<IdRange>>) -> Proposal {
    Proposal {
        from: 0,
        to: TURNS as i64 - 1,
        summary: summary.to_owned(),
        summary_budget: 4096,
        summary_tokens: 4000,
        consumed,
        finish_reason: Some("stop".into()),
        end_marker: Some("</summary>".into()),
        mode: Mode::Narrow,
    }
}

fn bench_decide(c: &mut Criterion) {
    let policy = Policy::default();
    let (turns, summary) = given_workload();
    let mut group = c.benchmark_group("decide_2000_turns_3_anchors_16kb");
    group.throughput(Throughput::Elements(TURNS as u64));
    let unreported = proposal(&summary, None);
    group.bench_function("anchors_path", |b| {
        b.iter(|| decide(black_box(&unreported), &turns, &policy).unwrap())
    });
    let reported = proposal(&summary, Some(vec![IdRange::new(0, TURNS as i64 - 1)]));
    group.bench_function("reported_path", |b| {
        b.iter(|| decide(black_box(&reported), &turns, &policy).unwrap())
    });
    let (turns, summary) = derived_workload();
    let derived = proposal(&summary, None);
    group.bench_function("derived_anchors_rule_2b", |b| {
        b.iter(|| decide(black_box(&derived), &turns, &policy).unwrap())
    });
    let refs: Vec<&TurnFacts> = turns.iter().collect();
    group.bench_function("rule_2b_anchors_alone", |b| {
        b.iter(|| distinctive::checks(black_box(&refs), &policy).len())
    });
    group.finish();
}

criterion_group!(benches, bench_decide);
criterion_main!(benches);
