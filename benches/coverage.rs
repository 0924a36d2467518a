//! The decision's cost: 2,000 real turns x 3 anchors against a 16 KB summary.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatekeeper::coverage::derive::{AnchorSource, derive_anchors};
use gatekeeper::coverage::{IdRange, Mode, Policy, Proposal, Role, TurnFacts, decide};
use gatekeeper::tau_bench;
use std::hint::black_box;

/// 2,000 tau-bench turns (repeated as needed) with derived anchors, made distinct per turn so
/// the automaton holds about 6,000 patterns, and a 16 KB summary carrying most of them.
fn workload() -> (Vec<TurnFacts>, String) {
    let conversations = tau_bench::read_default().expect("tau-bench data beside the repository");
    let mut turns = Vec::with_capacity(2000);
    let mut summary = String::from("<summary>\n");
    for (i, t) in conversations
        .iter()
        .flat_map(|c| &c.turns)
        .cycle()
        .take(2000)
        .enumerate()
    {
        let role: Role = t.role.parse().expect("tau-bench roles");
        let source = if role == Role::Tool {
            AnchorSource::ToolOutput
        } else {
            AnchorSource::Prose
        };
        let mut anchors = derive_anchors(&t.text(), source, 3);
        anchors.push(format!("T{i}"));
        anchors.truncate(3);
        if summary.len() < 16 * 1024 - 64 && i % 10 != 9 {
            summary.push_str(&anchors.join(", "));
            summary.push_str("; ");
        }
        turns.push(TurnFacts {
            id: i as i64,
            role,
            tokens: 150,
            anchors,
        });
    }
    while summary.len() < 16 * 1024 {
        summary.push_str("The customer was satisfied. ");
    }
    summary.push_str("</summary>");
    (turns, summary)
}

fn bench_decide(c: &mut Criterion) {
    let (turns, summary) = workload();
    let proposal = |consumed| Proposal {
        from: 0,
        to: 1999,
        summary: summary.clone(),
        summary_budget: 4096,
        summary_tokens: 4000,
        consumed,
        finish_reason: Some("stop".into()),
        end_marker: Some("</summary>".into()),
        mode: Mode::Narrow,
    };
    let policy = Policy::default();
    let mut group = c.benchmark_group("decide_2000_turns_3_anchors_16kb");
    group.throughput(Throughput::Elements(2000));
    let unreported = proposal(None);
    group.bench_function("anchors_path", |b| {
        b.iter(|| decide(black_box(&unreported), &turns, &policy).unwrap())
    });
    let reported = proposal(Some(vec![IdRange::new(0, 1999)]));
    group.bench_function("reported_path", |b| {
        b.iter(|| decide(black_box(&reported), &turns, &policy).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_decide);
criterion_main!(benches);
