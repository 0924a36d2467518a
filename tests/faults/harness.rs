//! What the fault tests share: randomness, tau-bench data, formatting, and the violations a test
//! collects. The service under test is in `harness/service.rs`, the databases in
//! `harness/postgres.rs` and `harness/db.rs`, the checks every fault makes in `harness/checks.rs`.

pub(crate) mod checks;
pub(crate) mod db;
pub(crate) mod postgres;
pub(crate) mod replica;
pub(crate) mod service;

use crate::harness::service::LogFile;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// SplitMix64: enough randomness for choosing moments and sizes, reproducible from one seed.
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `[lo, hi]`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    pub(crate) fn fork(&mut self) -> Rng {
        Rng(self.next())
    }
}

/// The run's seed: `GATEKEEPER_FAULT_SEED`, or the clock.
pub(crate) fn seed() -> u64 {
    std::env::var("GATEKEEPER_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// A real turn of the tau-bench airline transcripts.
pub(crate) struct TauTurn {
    pub(crate) role: String,
    pub(crate) content: String,
}

pub(crate) fn tau() -> &'static [TauTurn] {
    static TURNS: OnceLock<Vec<TauTurn>> = OnceLock::new();
    TURNS.get_or_init(|| {
        let turns: Vec<TauTurn> = gatekeeper::tau_bench::read_default()
            .expect("the tau-bench data in ../shared/data")
            .iter()
            .flat_map(|c| &c.turns)
            .filter(|t| matches!(t.role.as_str(), "system" | "user" | "assistant" | "tool"))
            .filter(|t| !t.text().trim().is_empty())
            .map(|t| TauTurn {
                role: t.role.clone(),
                content: t.text().into_owned(),
            })
            .collect();
        assert!(turns.len() > 1000, "tau-bench has thousands of turns");
        turns
    })
}

/// An append body of tau-bench turns `idx` with explicit ids from `start`.
pub(crate) fn append_body(start: i64, idx: &[usize]) -> Value {
    let turns: Vec<Value> = idx
        .iter()
        .enumerate()
        .map(|(k, &i)| json!({ "id": start + k as i64, "role": tau()[i].role, "content": tau()[i].content }))
        .collect();
    json!({ "turns": turns })
}

pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `{503: 212, 0: 1}`, where 0 stands for "no answer".
pub(crate) fn tally(map: &BTreeMap<u16, u64>) -> String {
    let parts: Vec<String> = map
        .iter()
        .map(|(status, n)| format!("{status}: {}", thousands(*n)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// Violations found by concurrent tasks; a test fails with all of them at once.
#[derive(Default)]
pub(crate) struct Violations(Mutex<Vec<String>>);

impl Violations {
    pub(crate) fn push(&self, what: impl Into<String>) {
        let what = what.into();
        let mut all = self.0.lock().unwrap();
        if all.len() < 1000 {
            all.push(what);
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub(crate) fn assert_none(&self, test: &str, logs: &[Arc<LogFile>]) {
        let logs: Vec<&Path> = logs.iter().map(|l| l.0.as_path()).collect();
        let all = self.0.lock().unwrap();
        if !all.is_empty() {
            let shown: Vec<&str> = all.iter().take(40).map(String::as_str).collect();
            panic!(
                "{test}: {} violation(s):\n  {}\nservice logs: {logs:?}",
                all.len(),
                shown.join("\n  ")
            );
        }
    }
}
