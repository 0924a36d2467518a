#![forbid(unsafe_code)]
//! The `gatekeeper` binary: a thin shell over the library.

use clap::{Parser, Subcommand};
use gatekeeper::config::{DatabaseConfig, ServeConfig};
use gatekeeper::store::Store;
use std::process::ExitCode;

#[derive(Parser)]
#[command(version, about = "Guards the compaction checkpoints of LLM agents.")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
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
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Serve(config)) => gatekeeper::server::run(*config).await,
        None => match ServeFromEnv::try_parse_from(["gatekeeper"]) {
            Ok(ServeFromEnv { config }) => gatekeeper::server::run(config).await,
            Err(e) => e.exit(),
        },
        Some(Command::Migrate(db)) => Store::connect(&db.url(), db.pool_size, db.acquire_timeout())
            .await
            .map(|store| println!("migrations applied ({:?})", store.backend())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gatekeeper: {e:#}");
            ExitCode::FAILURE
        }
    }
}
