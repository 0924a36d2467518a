//! Transcripts on disk: JSONL turns or tau-bench conversations, appended resumably.

use crate::api::{AppendTurn, AppendTurnsRequest};
use crate::client::{Client, ClientError};
use crate::coverage::Role;
use crate::tau_bench;
use anyhow::{Context, anyhow, bail};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

pub struct Transcript {
    pub conversation: String,
    pub turns: Vec<AppendTurn>,
}

#[derive(Debug, Serialize)]
pub struct AppendSummary {
    pub conversation: String,
    /// Turns the log already held (skipped on resume).
    pub already_stored: u64,
    pub appended: u64,
    pub next_id: i64,
}

/// Reads `path` (plain or gzipped JSONL). A line with a `turns` array is a tau-bench
/// conversation; anything else is one turn per line for `conversation`.
pub fn read(
    path: &Path,
    conversation: Option<&str>,
    only: Option<&str>,
    limit: Option<usize>,
) -> anyhow::Result<Vec<Transcript>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let gzipped = reader.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn BufRead> = if gzipped {
        Box::new(BufReader::new(flate2::read::GzDecoder::new(reader)))
    } else {
        Box::new(reader)
    };
    let mut text = String::new();
    BufReader::new(reader)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| anyhow!("{} is empty", path.display()))?;
    let is_tau = serde_json::from_str::<serde_json::Value>(first)
        .is_ok_and(|v| v.get("turns").is_some_and(|t| t.is_array()));
    if is_tau {
        let conversations = tau_bench::read_jsonl(text.as_bytes())?;
        let chosen: Vec<Transcript> = conversations
            .into_iter()
            .filter(|c| only.is_none_or(|name| c.conversation == name))
            .take(limit.unwrap_or(usize::MAX))
            .map(|c| {
                let turns = c
                    .turns
                    .iter()
                    .map(|t| {
                        let role: Role = t
                            .role
                            .parse()
                            .map_err(|e: String| anyhow!("{}: {e}", c.conversation))?;
                        Ok(AppendTurn {
                            id: None,
                            role,
                            content: t.text().into_owned(),
                            tokens: None,
                            anchors: None,
                            external_id: None,
                            pinned: false,
                        })
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let conversation = match (conversation, only) {
                    (Some(name), Some(_)) => name.to_owned(),
                    _ => c.conversation,
                };
                Ok(Transcript {
                    conversation,
                    turns,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        if chosen.is_empty() {
            bail!("no conversation in {} matches", path.display());
        }
        return Ok(chosen);
    }
    let Some(conversation) = conversation else {
        bail!(
            "{} holds turns, not tau-bench conversations: say which conversation with --conversation",
            path.display()
        );
    };
    let turns = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str::<AppendTurn>(l)
                .with_context(|| format!("{} line {}", path.display(), n + 1))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(vec![Transcript {
        conversation: conversation.to_owned(),
        turns,
    }])
}

/// Appends the turns the log does not hold yet, in batches, each turn with its index as id.
/// The last stored turn is sent again with the first batch: if the file no longer matches the
/// log, the service answers 409 instead of silently appending after a different history.
pub async fn append_resumable(
    client: &Client,
    transcript: &Transcript,
    batch: usize,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<AppendSummary> {
    let stored = match client.conversation(&transcript.conversation).await {
        Ok(status) => status.next_id,
        Err(ClientError::Problem(p)) if p.status == 404 => 0,
        Err(e) => return Err(e.into()),
    };
    let stored_usize = usize::try_from(stored)
        .unwrap_or(usize::MAX)
        .min(transcript.turns.len());
    progress.inc(stored_usize as u64);
    let numbered: Vec<AppendTurn> = transcript
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| AppendTurn {
            id: Some(t.id.unwrap_or(i as i64)),
            ..t.clone()
        })
        .collect();
    let start = stored_usize.saturating_sub(1);
    let mut next_id = stored;
    let mut appended = 0;
    for chunk in numbered[start..].chunks(batch) {
        let response = client
            .append(
                &transcript.conversation,
                &AppendTurnsRequest {
                    turns: chunk.to_vec(),
                },
            )
            .await
            .with_context(|| format!("appending to {}", transcript.conversation))?;
        appended += response.appended;
        next_id = response.next_id;
        progress.inc(response.appended);
    }
    Ok(AppendSummary {
        conversation: transcript.conversation.clone(),
        already_stored: stored_usize as u64,
        appended,
        next_id,
    })
}
