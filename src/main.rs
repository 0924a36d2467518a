#![forbid(unsafe_code)]
//! The `gatekeeper` binary: a thin shell over the library's command line.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    gatekeeper::cli::main().await
}
