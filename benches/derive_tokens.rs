//! Throughput of anchor derivation and token counting over every tau-bench airline turn.
//!
//! `cargo bench --bench derive_tokens` (add `-- --quick` for a fast pass).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gatekeeper::coverage::derive::{AnchorSource, DEFAULT_ANCHOR_COUNT, Draft, derive_anchors};
use gatekeeper::tau_bench;
use gatekeeper::tokens::{TokenCounter, Tokenizer};

/// Every turn's text with the source the service would derive anchors as.
fn turns() -> Vec<(String, AnchorSource)> {
    let conversations = tau_bench::read_gz(&tau_bench::default_path()).expect("tau-bench data");
    conversations
        .iter()
        .flat_map(|c| &c.turns)
        .map(|t| {
            let source = if t.role == "tool" {
                AnchorSource::ToolOutput
            } else {
                AnchorSource::Prose
            };
            (t.text().into_owned(), source)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let turns = turns();
    let bytes: u64 = turns.iter().map(|(text, _)| text.len() as u64).sum();

    let mut group = c.benchmark_group("derive_anchors");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("all_turns", |b| {
        b.iter(|| {
            for (text, source) in &turns {
                black_box(derive_anchors(
                    black_box(text),
                    *source,
                    DEFAULT_ANCHOR_COUNT,
                ));
            }
        })
    });
    // What an append computes per turn since rule 2b: candidates (plain words too) and term keys.
    group.bench_function("term_profiles_all_turns", |b| {
        b.iter(|| {
            for (text, source) in &turns {
                black_box(Draft::new(black_box(text), *source));
            }
        })
    });
    // What an append computes for a turn whose anchors the client gave: its term keys only.
    group.bench_function("term_keys_all_turns", |b| {
        b.iter(|| {
            for (text, _) in &turns {
                black_box(Draft::terms_only(black_box(text)));
            }
        })
    });
    group.finish();

    let mut group = c.benchmark_group("token_count");
    group.throughput(Throughput::Bytes(bytes));
    for tokenizer in Tokenizer::ALL {
        // Built outside the timing: the first use per process loads the vocabulary.
        let counter = TokenCounter::new(tokenizer);
        counter.count("warm up");
        group.bench_function(tokenizer.to_string(), |b| {
            b.iter(|| {
                let mut total = 0u64;
                for (text, _) in &turns {
                    total += u64::from(counter.count(black_box(text)));
                }
                black_box(total)
            })
        });
    }
    // The same on a thread of its own each time, which starts with nothing remembered: words
    // recur within the turns, but none is known from an earlier pass.
    let counter = TokenCounter::new(Tokenizer::O200kBase);
    group.bench_function("o200k_base/first_pass", |b| {
        b.iter(|| {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| {
                        let mut total = 0u64;
                        for (text, _) in &turns {
                            total += u64::from(counter.count(black_box(text)));
                        }
                        black_box(total)
                    })
                    .join()
                    .expect("the counting thread")
            })
        })
    });
    // The reference: tiktoken-rs counting the same turns, on this thread (its regex caches are
    // fastest on the first thread that uses them; the service counts on others).
    for (name, bpe) in [
        (
            "tiktoken-rs/o200k_base",
            tiktoken_rs::o200k_base_singleton(),
        ),
        (
            "tiktoken-rs/cl100k_base",
            tiktoken_rs::cl100k_base_singleton(),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut total = 0usize;
                for (text, _) in &turns {
                    total += bpe.encode_ordinary(black_box(text)).len();
                }
                black_box(total)
            })
        });
    }
    group.finish();

    // A summary-sized text with a few characters that are not ASCII: the 40 real turns around
    // the first such turn, joined as a summarizer would quote them.
    let first = turns
        .iter()
        .position(|(t, _)| !t.is_ascii())
        .expect("a turn that is not ASCII");
    let around = &turns[first.saturating_sub(20)..(first + 20).min(turns.len())];
    let summary = around
        .iter()
        .map(|(t, _)| t.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut group = c.benchmark_group("summary_count");
    group.throughput(Throughput::Bytes(summary.len() as u64));
    let counter = TokenCounter::new(Tokenizer::O200kBase);
    group.bench_function("o200k_base", |b| {
        b.iter(|| counter.count(black_box(&summary)))
    });
    let bpe = tiktoken_rs::o200k_base_singleton();
    group.bench_function("tiktoken-rs/o200k_base", |b| {
        b.iter(|| bpe.encode_ordinary(black_box(&summary)).len())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
