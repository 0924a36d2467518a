//! The real binary started with settings from its environment, end to end: the anchor rule,
//! the anchor count and the tokenizer change what it answers, and `gatekeeper healthcheck`
//! tells a healthy server from a dead port by its exit code.

use gatekeeper::tokens::{TokenCounter, Tokenizer};
use gatekeeper_test_support::db::ScratchDir;
use gatekeeper_test_support::{free_port, tau_turns};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// `gatekeeper serve` on SQLite in a folder of its own, with `env` set; ready when returned.
struct Server {
    base: String,
    child: Child,
    _dir: ScratchDir,
}

async fn serve(env: &[(&str, &str)]) -> Server {
    let dir = ScratchDir::new("gk-settings");
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_gatekeeper"));
    command
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env_remove("DATABASE_URL")
        .env_remove("GATEKEEPER_API_KEYS")
        .env("GATEKEEPER_DATA_DIR", dir.path())
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let child = command.spawn().expect("the binary starts");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if reqwest::get(format!("{base}/readyz"))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Server {
                base,
                child,
                _dir: dir,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the service did not become ready");
}

async fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

/// The first turns of the tau-bench data as one text, which the two tokenizers count apart.
fn long_text() -> String {
    let turns = tau_turns(8);
    let texts: Vec<&str> = turns
        .iter()
        .map(|t| t["content"].as_str().unwrap())
        .collect();
    texts.join("\n")
}

/// What a server answers that its settings decide: the append's token count and provisional
/// anchors of a real text, and the outcome of a summary that keeps one of a turn's two anchors.
async fn answers(base: &str) -> (u64, usize, String) {
    let turns = json!({ "turns": [
        { "role": "user", "content": long_text() },
        { "role": "user", "content": "Rebook ALPHA-1 onto BETA-2, please.", "anchors": ["ALPHA-1", "BETA-2"] },
    ]});
    let (status, appended) = post(base, "/v1/conversations/c/turns", &turns).await;
    assert_eq!(status, 201, "{appended}");
    let proposal =
        json!({ "from": 1, "to": 1, "summary": "Rebooked ALPHA-1.", "summary_budget": 5000 });
    let (_, verdict) = post(base, "/v1/conversations/c/compactions", &proposal).await;
    (
        appended["turns"][0]["tokens"].as_u64().unwrap(),
        appended["turns"][0]["anchors"].as_array().unwrap().len(),
        verdict["outcome"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_server_started_with_anchor_rule_any_anchor_count_2_and_cl100k_answers_by_them() {
    let text = long_text();
    let (cl100k, o200k) = (
        TokenCounter::new(Tokenizer::Cl100kBase).count(&text),
        TokenCounter::new(Tokenizer::O200kBase).count(&text),
    );
    assert_ne!(cl100k, o200k, "a text the tokenizers count apart");
    let tuned = serve(&[
        ("GATEKEEPER_ANCHOR_RULE", "any"),
        ("GATEKEEPER_ANCHOR_COUNT", "2"),
        ("GATEKEEPER_TOKENIZER", "cl100k_base"),
    ])
    .await;
    let default = serve(&[]).await;
    let (tuned, default) = (answers(&tuned.base).await, answers(&default.base).await);
    // The defaults first, so that each setting is seen to change something.
    assert_eq!(default, (u64::from(o200k), 4, "rejected".to_owned()));
    let mut wrong = Vec::new();
    if tuned.0 != u64::from(cl100k) {
        wrong.push(format!("tokens {} (cl100k_base counts {cl100k})", tuned.0));
    }
    if tuned.1 != 2 {
        wrong.push(format!("{} provisional anchors, not 2", tuned.1));
    }
    if tuned.2 != "accepted" {
        wrong.push(format!(
            "one of two anchors kept is {}, not accepted",
            tuned.2
        ));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// `gatekeeper healthcheck` with `args` and `env`: its exit code and stderr.
async fn healthcheck(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_gatekeeper"))
        .arg("healthcheck")
        .args(args)
        .env_remove("GATEKEEPER_HEALTHCHECK_URL")
        .envs(env.iter().copied())
        .output()
        .await
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn healthcheck_exits_0_against_a_healthy_server_and_1_against_a_dead_port() {
    let mut server = serve(&[]).await;
    let url = format!("{}/healthz", server.base);
    assert_eq!(healthcheck(&["--url", &url], &[]).await.0, Some(0));
    assert_eq!(
        healthcheck(&[], &[("GATEKEEPER_HEALTHCHECK_URL", &url)])
            .await
            .0,
        Some(0),
        "the URL from the environment, as the image's HEALTHCHECK gives none"
    );
    // The same port once the server is gone, and a port nothing ever listened on.
    server.child.kill().await.unwrap();
    server.child.wait().await.unwrap();
    let never = format!("http://127.0.0.1:{}/healthz", free_port());
    for url in [&url, &never] {
        let (code, stderr) = healthcheck(&["--url", url], &[]).await;
        assert_eq!(code, Some(1), "{url}: {stderr}");
        assert!(stderr.contains("did not answer"), "{url}: {stderr}");
    }
}
