//! The `gatekeeper` command line: the service (`serve`, `migrate`) and client commands that
//! talk to a running service. Exit codes: 0 done, 1 error, 2 usage, 3 proposal rejected,
//! 4 not found.

mod output;
mod transcript;

use crate::api::CompactionRequestBody;
use crate::client::{Client, ClientError};
use crate::config::{DatabaseConfig, ServeConfig};
use crate::store::{Backend, PgStore, SqliteStore, Store};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "gatekeeper",
    version,
    about = "Guards the compaction checkpoints of LLM agents."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Where the client commands find the service (before or after the subcommand).
    #[command(flatten)]
    remote: Remote,
}

/// `gatekeeper` with no subcommand serves, configured from the environment alone.
#[derive(Parser)]
struct ServeFromEnv {
    #[command(flatten)]
    config: ServeConfig,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service (the default).
    Serve(Box<ServeConfig>),
    /// Create the database if missing and apply the migrations, then exit.
    Migrate(DatabaseConfig),
    /// Print the OpenAPI document (YAML, or JSON with --json).
    Openapi {
        #[arg(long)]
        json: bool,
    },
    /// Exit 0 if the service at --url answers /healthz, else 1 (for container health checks).
    Healthcheck {
        #[arg(
            long,
            env = "GATEKEEPER_HEALTHCHECK_URL",
            default_value = "http://127.0.0.1:8080/healthz"
        )]
        url: String,
    },
    /// Append a transcript: JSONL turns, or tau-bench conversations (resumes where the log ends).
    Append(AppendArgs),
    /// Propose a compaction from a JSON file or stdin.
    Compact(CompactArgs),
    /// Get a turn back: from the summary if covered, else from the raw log.
    Reconstruct(ReconstructArgs),
    /// The working context: summaries and uncovered turns in order.
    Context(ContextArgs),
    /// Find turns by the words, numbers and identifiers they hold, with what `reconstruct` answers
    /// for each: in one conversation (--conversation) or in all of them.
    Search(SearchArgs),
    /// The largest range from `--from` that a summary budget can cover, the anchors each of its
    /// turns needs, and whether to compact now.
    Plan(PlanArgs),
    /// Pin a turn (no summary ever covers it), or unpin it with --unpin.
    Pin(PinArgs),
    /// A conversation's log and latest checkpoint, or the service's readiness.
    Status(StatusArgs),
    /// Erase a conversation: its turns, checkpoints and everything kept for them.
    Delete(ConversationArg),
    /// Write a conversation to stdout as NDJSON (`import` restores it).
    Export(ConversationArg),
    /// Restore an export read from stdin into a conversation that does not exist yet.
    Import(ConversationArg),
    /// Serve the MCP tools (search_history, recall_turn, working_context, coverage) on stdin and
    /// stdout, answered by the service at --url with --key: for agents that start MCP servers
    /// as processes.
    Mcp,
}

#[derive(Args, Clone)]
pub struct Remote {
    /// Base URL of the gatekeeper.
    #[arg(
        long,
        env = "GATEKEEPER_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// API key (bearer), when the service has keys configured.
    #[arg(long, env = "GATEKEEPER_KEY", hide_env_values = true, global = true)]
    key: Option<String>,
    /// Print the service's JSON instead of a human summary.
    #[arg(long, global = true)]
    json: bool,
}

impl Remote {
    fn client(&self) -> Client {
        Client::new(&self.url, self.key.clone())
    }
}

#[derive(Args)]
struct AppendArgs {
    /// The transcript: a `.jsonl` of turns (`{"role", "content", ...}` per line), or a tau-bench
    /// `.jsonl`/`.jsonl.gz` of conversations.
    file: PathBuf,
    /// Conversation to append to (required for a file of turns; for tau-bench, each record's own
    /// name is used unless this is given together with `--only`).
    #[arg(long, short)]
    conversation: Option<String>,
    /// For tau-bench files: append only the conversation with this name.
    #[arg(long)]
    only: Option<String>,
    /// For tau-bench files: append at most this many conversations.
    #[arg(long)]
    limit: Option<usize>,
    /// Turns per request.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// Pin every appended turn: no summary will ever cover them (a line may also say
    /// `"pinned": true` for itself).
    #[arg(long)]
    pinned: bool,
}

#[derive(Args)]
struct CompactArgs {
    conversation: String,
    /// A JSON proposal (`{"from", "to", "summary", "summary_budget", ...}`); `-` or absent: stdin.
    file: Option<PathBuf>,
    /// Decide without persisting.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args)]
struct ReconstructArgs {
    conversation: String,
    turn: i64,
}

#[derive(Args)]
struct ConversationArgs {
    conversation: String,
}

#[derive(Args)]
struct ContextArgs {
    conversation: String,
    /// Fit the context in this many tokens: turns left out become stubs that say how to recall
    /// them.
    #[arg(long)]
    max_tokens: Option<u64>,
}

#[derive(Args)]
struct SearchArgs {
    /// Words, numbers or identifiers (`ZFA04Y`, `src/store/mod.rs`, `HTTP 503`).
    query: String,
    /// Search this conversation only (default: every conversation of the tenant).
    #[arg(long, short = 'c')]
    conversation: Option<String>,
    /// Across conversations: only those whose id starts with this.
    #[arg(long, conflicts_with = "conversation")]
    prefix: Option<String>,
    /// Most hits (1 to 50; default 10).
    #[arg(long)]
    limit: Option<u32>,
}

#[derive(Args)]
struct PlanArgs {
    conversation: String,
    /// Summary budget in tokens.
    #[arg(long)]
    budget: i64,
    /// First turn of the range (default: after the latest checkpoint).
    #[arg(long)]
    from: Option<i64>,
}

#[derive(Args)]
struct PinArgs {
    conversation: String,
    turn: i64,
    /// Let later summaries cover the turn again.
    #[arg(long)]
    unpin: bool,
}

#[derive(Args)]
struct ConversationArg {
    conversation: String,
}

#[derive(Args)]
struct StatusArgs {
    /// A conversation; without one, the service's readiness.
    conversation: Option<String>,
}

/// What a command ended with, mapped to the exit code.
pub enum Failure {
    Rejected,
    NotFound(String),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Problem(p) if p.status == 404 => Failure::NotFound(p.detail),
            other => Failure::Other(other.into()),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Other(e.into())
    }
}

pub async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let remote = &cli.remote;
    let result = match cli.command {
        None => match ServeFromEnv::try_parse_from(["gatekeeper"]) {
            Ok(ServeFromEnv { config }) => crate::server::run(config).await.map_err(Failure::from),
            Err(e) => return usage_error(e),
        },
        Some(Command::Serve(config)) => crate::server::run(*config).await.map_err(Failure::from),
        Some(Command::Migrate(db)) => migrate(db).await,
        Some(Command::Openapi { json }) => {
            print!(
                "{}",
                if json {
                    crate::http::openapi::json()
                } else {
                    crate::http::openapi::yaml()
                }
            );
            Ok(())
        }
        Some(Command::Healthcheck { url }) => healthcheck(&url).await,
        Some(Command::Mcp) => crate::mcp::serve_stdio(remote.url.clone(), remote.key.clone())
            .await
            .map_err(Failure::from),
        Some(Command::Append(args)) => append(args, remote).await,
        Some(Command::Compact(args)) => compact(args, remote).await,
        Some(Command::Reconstruct(args)) => show(
            remote,
            remote
                .client()
                .reconstruct(&args.conversation, args.turn)
                .await,
            output::reconstruct,
        ),
        Some(Command::Context(args)) => show(
            remote,
            remote
                .client()
                .context(&args.conversation, args.max_tokens)
                .await,
            output::context,
        ),
        Some(Command::Search(args)) => {
            let query = crate::client::SearchQuery {
                q: &args.query,
                conversation: args.conversation.as_deref(),
                conversation_prefix: args.prefix.as_deref(),
                limit: args.limit,
            };
            show(remote, remote.client().search(&query).await, output::search)
        }
        Some(Command::Plan(args)) => {
            let plan = remote
                .client()
                .plan(&args.conversation, args.budget, args.from)
                .await;
            show(remote, plan, output::plan)
        }
        Some(Command::Pin(args)) => show(
            remote,
            remote
                .client()
                .set_pinned(&args.conversation, args.turn, !args.unpin)
                .await,
            output::pinned,
        ),
        Some(Command::Status(args)) => status(args, remote).await,
        Some(Command::Delete(args)) => {
            let erased = remote.client().erase(&args.conversation).await;
            show(remote, erased.map(|()| args.conversation), |c| {
                format!("conversation {c} erased")
            })
        }
        Some(Command::Export(args)) => match remote.client().export(&args.conversation).await {
            Ok(ndjson) => {
                print!("{ndjson}");
                Ok(())
            }
            Err(e) => Err(e.into()),
        },
        Some(Command::Import(args)) => {
            let mut ndjson = String::new();
            match std::io::Read::read_to_string(&mut std::io::stdin(), &mut ndjson) {
                Ok(_) => show(
                    remote,
                    remote.client().import(&args.conversation, ndjson).await,
                    output::imported,
                ),
                Err(e) => Err(Failure::Other(anyhow::anyhow!(
                    "cannot read the export from stdin: {e}"
                ))),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Rejected) => ExitCode::from(3),
        Err(Failure::NotFound(detail)) => {
            eprintln!("gatekeeper: not found: {detail}");
            ExitCode::from(4)
        }
        Err(Failure::Other(e)) => {
            eprintln!("gatekeeper: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Help and version print as usual; a bad flag or environment value is one clear line, exit 2.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    let text = e.to_string();
    let message: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    eprintln!(
        "gatekeeper: {} (see --help)",
        message.join(" ").trim_start_matches("error: ")
    );
    ExitCode::from(2)
}

fn show<T: serde::Serialize>(
    remote: &Remote,
    answer: Result<T, ClientError>,
    human: fn(&T) -> String,
) -> Result<(), Failure> {
    output::print(remote, &answer?, human);
    Ok(())
}

async fn healthcheck(url: &str) -> Result<(), Failure> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build()
        .map_err(anyhow::Error::from)?;
    match client.get(url).send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(Failure::Other(anyhow::anyhow!(
            "{url} answered {}",
            r.status()
        ))),
        Err(e) => Err(Failure::Other(anyhow::anyhow!("{url} did not answer: {e}"))),
    }
}

/// `gatekeeper migrate`: what `serve` does to the database before it listens (without waiting
/// for a server that is not up).
async fn migrate(db: DatabaseConfig) -> Result<(), Failure> {
    let db = DatabaseConfig {
        startup_wait_secs: 0,
        ..db
    };
    match Backend::of_url(&db.url()).map_err(anyhow::Error::msg)? {
        Backend::Postgres => migrate_on::<PgStore>(&db).await,
        Backend::Sqlite => migrate_on::<SqliteStore>(&db).await,
    }
}

async fn migrate_on<S: Store>(db: &DatabaseConfig) -> Result<(), Failure> {
    let store = S::connect(db).await?;
    let profiled = store
        .backfill_profiles()
        .await
        .map_err(|e| Failure::Other(e.into()))?;
    let indexed = (store.backfill_search().await).map_err(|e| Failure::Other(e.into()))?;
    println!(
        "migrations applied ({:?} at {}); {profiled} turns given term profiles, {indexed} indexed for search",
        store.backend(),
        crate::config::redact_url(&db.url())
    );
    Ok(())
}

async fn append(args: AppendArgs, remote: &Remote) -> Result<(), Failure> {
    let client = remote.client();
    let mut transcripts = transcript::read(
        &args.file,
        args.conversation.as_deref(),
        args.only.as_deref(),
        args.limit,
    )?;
    if args.pinned {
        for turn in transcripts.iter_mut().flat_map(|t| &mut t.turns) {
            turn.pinned = true;
        }
    }
    let total: u64 = transcripts.iter().map(|t| t.turns.len() as u64).sum();
    let progress = indicatif::ProgressBar::new(total);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} turns {per_sec} {msg}")
            .expect("static template"),
    );
    let mut summary = Vec::new();
    for t in transcripts {
        let appended =
            transcript::append_resumable(&client, &t, args.batch.max(1), &progress).await?;
        summary.push(appended);
    }
    progress.finish_and_clear();
    output::print(remote, summary.as_slice(), output::append);
    Ok(())
}

async fn compact(args: CompactArgs, remote: &Remote) -> Result<(), Failure> {
    let text = match args.file.as_deref() {
        None => std::io::read_to_string(std::io::stdin())?,
        Some(p) if p.as_os_str() == "-" => std::io::read_to_string(std::io::stdin())?,
        Some(p) => std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?,
    };
    let mut request: CompactionRequestBody = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the proposal is not valid JSON for the API: {e}"))?;
    request.dry_run |= args.dry_run;
    match remote
        .client()
        .propose(&args.conversation, &request, None)
        .await
    {
        Ok(verdict) => {
            output::print(remote, &verdict, output::verdict);
            Ok(())
        }
        Err(ClientError::Rejected(verdict)) => {
            output::print(remote, &*verdict, output::verdict);
            Err(Failure::Rejected)
        }
        Err(other) => Err(other.into()),
    }
}

async fn status(args: StatusArgs, remote: &Remote) -> Result<(), Failure> {
    let client = remote.client();
    match args.conversation {
        Some(conversation) => {
            let status = client.conversation(&conversation).await?;
            output::print(remote, &status, output::status);
        }
        None => {
            let ready = client.ready().await.map_err(Failure::from)?;
            if remote.json {
                println!(
                    "{}",
                    serde_json::json!({ "url": remote.url, "ready": ready })
                );
            } else {
                println!(
                    "{} · {}",
                    remote.url,
                    if ready { "ready" } else { "not ready" }
                );
            }
            if !ready {
                return Err(Failure::Other(anyhow::anyhow!("the service is not ready")));
            }
        }
    }
    Ok(())
}
