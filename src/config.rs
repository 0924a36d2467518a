//! Typed configuration: every setting is a flag and an environment variable, checked at start.

use crate::coverage::derive::DEFAULT_ANCHOR_COUNT;
use crate::coverage::profile::MAX_CANDIDATES;
use crate::coverage::{AnchorRule, CompressionRatio, Mode, Policy};
use crate::domain::{Limits, TenantId};
use crate::store::FeedHeartbeat;
use crate::tokens::Tokenizer;
use clap::{Args, ValueEnum};
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The slowest rate limit: one request an hour (a slower one would ask clients to wait longer
/// than `Retry-After` can usefully say).
pub const MIN_RATE_LIMIT_PER_SEC: f64 = 1.0 / 3600.0;

/// The longest an Idempotency-Key's answer is kept: ten years.
pub const MAX_IDEMPOTENCY_TTL_SECS: u64 = 10 * 365 * 24 * 60 * 60;

/// The embedded database file inside the data folder, used when no `DATABASE_URL` is set.
pub const DEFAULT_SQLITE_FILE: &str = "gatekeeper.db";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `gatekeeper serve` settings.
#[derive(Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on. Without API keys only loopback addresses are allowed.
    #[arg(long, env = "GATEKEEPER_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub database: DatabaseConfig,

    /// API keys as comma-separated `tenant:key` pairs. None: single tenant, loopback only.
    #[arg(long, env = "GATEKEEPER_API_KEYS", hide_env_values = true)]
    pub api_keys: Option<String>,

    /// File with one `tenant:key` pair per line (blank lines and `#` comments ignored).
    #[arg(long, env = "GATEKEEPER_API_KEYS_FILE")]
    pub api_keys_file: Option<PathBuf>,

    #[command(flatten)]
    pub decision: DecisionConfig,

    /// Largest request body in bytes.
    #[arg(long, env = "GATEKEEPER_MAX_BODY_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Most turns in one append.
    #[arg(long, env = "GATEKEEPER_MAX_BATCH_TURNS", default_value_t = 10_000)]
    pub max_batch_turns: usize,

    /// CPU tasks (token counting, derivation, decisions) one tenant may run at once; 0: one per
    /// core when the keys name one tenant (or there are none), half the cores (at least one)
    /// when they name several. More wait behind their own tenant's, not in front of others'.
    #[arg(long, env = "GATEKEEPER_CPU_TASKS_PER_TENANT", default_value_t = 0)]
    pub cpu_tasks_per_tenant: usize,

    /// Checkpoints one conversation may hold; a proposal past it is 409.
    #[arg(
        long,
        env = "GATEKEEPER_MAX_CHECKPOINTS_PER_CONVERSATION",
        default_value_t = 10_000
    )]
    pub max_checkpoints_per_conversation: u32,

    /// Largest summary a proposal may carry, in bytes.
    #[arg(long, env = "GATEKEEPER_MAX_SUMMARY_BYTES", default_value_t = 1024 * 1024)]
    pub max_summary_bytes: usize,

    /// Most anchors a client may give one turn.
    #[arg(long, env = "GATEKEEPER_MAX_ANCHORS_PER_TURN", default_value_t = 64)]
    pub max_anchors_per_turn: usize,

    /// Seconds a request may take before it is answered 503.
    #[arg(long, env = "GATEKEEPER_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Requests per second each tenant may make on average; 0 (the default) for no limit.
    #[arg(long, env = "GATEKEEPER_RATE_LIMIT_PER_SEC", default_value_t = 0.0)]
    pub rate_limit_per_sec: f64,

    /// Requests a tenant may make at once before the rate applies.
    #[arg(long, env = "GATEKEEPER_RATE_LIMIT_BURST", default_value_t = 50)]
    pub rate_limit_burst: u32,

    /// Requests served at once, all tenants together; past it, 503 with Retry-After.
    #[arg(long, env = "GATEKEEPER_MAX_IN_FLIGHT", default_value_t = 256)]
    pub max_in_flight: usize,

    /// Requests one tenant may have served at once; past it, 503 with Retry-After, and other
    /// tenants are not slowed.
    #[arg(
        long,
        env = "GATEKEEPER_MAX_IN_FLIGHT_PER_TENANT",
        default_value_t = 64
    )]
    pub max_in_flight_per_tenant: usize,

    /// MiB of memory for cached reconstruct answers; 0 to read every answer from the database.
    #[arg(long, env = "GATEKEEPER_RECONSTRUCT_CACHE_MIB", default_value_t = 64)]
    pub reconstruct_cache_mib: u64,

    /// Seconds an Idempotency-Key's answer is kept (per tenant).
    #[arg(
        long,
        env = "GATEKEEPER_IDEMPOTENCY_TTL_SECS",
        default_value_t = 86_400
    )]
    pub idempotency_ttl_secs: u64,

    /// Days a conversation is kept after its last append, then erased by a background task;
    /// unset: kept for ever. A tenant's line in the keys file may set its own
    /// (`tenant:key retention_days=N`, or `retention_days=off` to keep its conversations).
    #[arg(long, env = "GATEKEEPER_RETENTION_DAYS")]
    pub retention_days: Option<u32>,

    /// Seconds between retention's looks for idle conversations (each erases them in batches
    /// of 100 until none is left).
    #[arg(long, env = "GATEKEEPER_RETENTION_SWEEP_SECS", default_value_t = 3600)]
    pub retention_sweep_secs: u64,

    /// Seconds in-flight requests get to finish after SIGTERM or Ctrl-C before the process exits.
    #[arg(long, env = "GATEKEEPER_DRAIN_TIMEOUT_SECS", default_value_t = 25)]
    pub drain_timeout_secs: u64,

    /// Log format.
    #[arg(
        long,
        env = "GATEKEEPER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// Log filter (tracing-subscriber syntax), e.g. `info` or `gatekeeper=debug`.
    #[arg(long, env = "GATEKEEPER_LOG", default_value = "info")]
    pub log_level: String,
}

#[derive(Clone, Args)]
pub struct DatabaseConfig {
    /// `postgres://…` or `sqlite://…`; the database is created if missing. Unset: the embedded
    /// SQLite file `gatekeeper.db` in the data folder.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Folder for the embedded SQLite database when no DATABASE_URL is set.
    #[arg(long, env = "GATEKEEPER_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,

    /// Most pooled database connections. On Postgres, reconstruct's batched lookups hold 2
    /// more per database (the primary and each replica).
    #[arg(long, env = "GATEKEEPER_DB_POOL_SIZE", default_value_t = 16)]
    pub pool_size: u32,

    /// Seconds to wait for a pooled connection before answering 503.
    #[arg(long, env = "GATEKEEPER_DB_ACQUIRE_TIMEOUT_SECS", default_value_t = 5)]
    pub acquire_timeout_secs: u64,

    /// Seconds to keep retrying at start while Postgres is not up yet.
    #[arg(long, env = "GATEKEEPER_DB_STARTUP_WAIT_SECS", default_value_t = 60)]
    pub startup_wait_secs: u64,

    /// Postgres: seconds without a message after which the checkpoint feed checks that its
    /// connection still answers (`SELECT 1` on it).
    #[arg(long, env = "GATEKEEPER_DB_FEED_HEARTBEAT_SECS", default_value_t = 5)]
    pub feed_heartbeat_secs: u64,

    /// Postgres: seconds the feed's check may take before its connection counts as dead (the
    /// feed is then down and connects again). A dead feed is noticed within the heartbeat plus
    /// this.
    #[arg(long, env = "GATEKEEPER_DB_FEED_TIMEOUT_SECS", default_value_t = 5)]
    pub feed_timeout_secs: u64,

    /// Postgres streaming replicas for reads, comma-separated `postgres://…` URLs. A read goes to
    /// a healthy replica that has replayed the position it carries (Gatekeeper-Min-Position);
    /// writes, and reads no replica can answer in time, go to the primary.
    #[arg(
        long,
        env = "GATEKEEPER_READ_DATABASE_URLS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub read_database_urls: Vec<String>,

    /// Milliseconds a read with a position waits for a replica to replay it before the primary
    /// answers it.
    #[arg(long, env = "GATEKEEPER_READ_MAX_WAIT_MS", default_value_t = 100)]
    pub read_max_wait_ms: u64,

    /// Bytes of WAL a replica may be behind the primary and still answer reads without a
    /// position; past it, it is skipped.
    #[arg(long, env = "GATEKEEPER_READ_MAX_LAG_BYTES", default_value_t = 16 << 20)]
    pub read_max_lag_bytes: u64,

    /// Postgres: hash partitions per big table (turns, search_blocks, term_counts, checkpoints),
    /// by (tenant, conversation); 0 for none. A database laid out otherwise is rebuilt at start,
    /// rows kept. Unset: the layout is left as it is.
    #[arg(long, env = "GATEKEEPER_PG_PARTITIONS", value_parser = clap::value_parser!(u32).range(0..=i64::from(crate::store::MAX_PARTITIONS)))]
    pub pg_partitions: Option<u32>,
}

#[derive(Clone, Args)]
pub struct DecisionConfig {
    /// Mode for proposals that do not name one.
    #[arg(long, env = "GATEKEEPER_DEFAULT_MODE", default_value = "narrow", value_parser = parse_mode)]
    pub default_mode: Mode,

    /// Compression ratio R for system, user and assistant turns.
    #[arg(long, env = "GATEKEEPER_PROSE_RATIO", default_value = "5")]
    pub prose_ratio: CompressionRatio,

    /// Compression ratio R for tool turns.
    #[arg(long, env = "GATEKEEPER_TOOL_RATIO", default_value = "3")]
    pub tool_ratio: CompressionRatio,

    /// How many anchors must be present for a turn to count as anchored: all or any.
    #[arg(long, env = "GATEKEEPER_ANCHOR_RULE", default_value = "all", value_parser = parse_anchor_rule)]
    pub anchor_rule: AnchorRule,

    /// Anchors derived for a turn that arrives without any; rule 2b checks at least this many.
    #[arg(long, env = "GATEKEEPER_ANCHOR_COUNT", default_value_t = DEFAULT_ANCHOR_COUNT)]
    pub anchor_count: usize,

    /// Rule 2b checks one derived anchor per this many tokens of a turn (at least the anchor
    /// count, at most 16); 0 checks the anchor count alone.
    #[arg(long, env = "GATEKEEPER_TOKENS_PER_ANCHOR", default_value_t = Policy::DEFAULT_TOKENS_PER_ANCHOR)]
    pub tokens_per_anchor: u32,

    /// Tokenizer for counting: o200k_base or cl100k_base.
    #[arg(long, env = "GATEKEEPER_TOKENIZER", default_value = "o200k_base")]
    pub tokenizer: Tokenizer,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_anchor_rule(s: &str) -> Result<AnchorRule, String> {
    s.parse()
}

impl DecisionConfig {
    pub fn policy(&self) -> Policy {
        Policy {
            prose_ratio: self.prose_ratio,
            tool_ratio: self.tool_ratio,
            anchor_rule: self.anchor_rule,
            anchor_count: self.anchor_count,
            tokens_per_anchor: self.tokens_per_anchor,
        }
    }
}

/// A settings struct as its flags' defaults, ignoring the environment: the one source of
/// defaults for the command line and for code (tests build the app from these).
fn flag_defaults<T: Args + clap::FromArgMatches>() -> T {
    let command = T::augment_args(clap::Command::new("defaults")).mut_args(|a| a.env(None::<&str>));
    let matches = command
        .try_get_matches_from(["defaults"])
        .expect("every setting has a default or is optional");
    T::from_arg_matches(&matches).expect("the defaults parse")
}

impl Default for ServeConfig {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        flag_defaults()
    }
}

impl Default for DecisionConfig {
    fn default() -> Self {
        flag_defaults()
    }
}

impl DatabaseConfig {
    /// The URL to connect to: `DATABASE_URL`, or the SQLite file in the data folder.
    pub fn url(&self) -> String {
        match self.database_url.as_deref().map(str::trim) {
            // An empty DATABASE_URL (as compose files often leave it) means unset.
            Some(url) if !url.is_empty() => url.to_owned(),
            _ => format!(
                "sqlite://{}",
                self.data_dir.join(DEFAULT_SQLITE_FILE).display()
            ),
        }
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_secs(self.acquire_timeout_secs)
    }

    pub fn startup_wait(&self) -> Duration {
        Duration::from_secs(self.startup_wait_secs)
    }

    pub fn feed_heartbeat(&self) -> FeedHeartbeat {
        FeedHeartbeat {
            every: Duration::from_secs(self.feed_heartbeat_secs),
            timeout: Duration::from_secs(self.feed_timeout_secs),
        }
    }
}

impl ServeConfig {
    pub fn limits(&self) -> Limits {
        Limits {
            max_batch_turns: self.max_batch_turns,
            max_anchors_per_turn: self.max_anchors_per_turn,
            max_summary_bytes: self.max_summary_bytes,
        }
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// Reads the keys from the flag, the env and the file, and checks the listen address.
    pub fn api_keys(&self) -> Result<ApiKeys, String> {
        let mut text = self.api_keys.clone().unwrap_or_default().replace(',', "\n");
        if let Some(path) = &self.api_keys_file {
            let file = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the API keys file {}: {e}", path.display()))?;
            text.push('\n');
            text.push_str(&file);
        }
        let keys = ApiKeys::parse(&text)?;
        if keys.is_empty() && !self.listen.ip().is_loopback() {
            return Err(format!(
                "no API keys are configured, so the service will only listen on loopback, not {}; \
                 set GATEKEEPER_API_KEYS=tenant:key or listen on 127.0.0.1",
                self.listen
            ));
        }
        Ok(keys)
    }

    /// Every check that can fail before anything starts, as one line.
    pub fn validate(&self) -> Result<ApiKeys, String> {
        if self.max_body_bytes == 0
            || self.max_batch_turns == 0
            || self.request_timeout_secs == 0
            || self.max_summary_bytes == 0
            || self.max_checkpoints_per_conversation == 0
        {
            return Err(
                "max body bytes, max batch turns, max summary bytes, max checkpoints per conversation and request timeout must be positive".into(),
            );
        }
        // A verdict tracks up to 64 anchors per turn; a profile keeps 16 candidates.
        if self.max_anchors_per_turn == 0 || self.max_anchors_per_turn > 64 {
            return Err(format!(
                "max anchors per turn must be between 1 and 64, got {}",
                self.max_anchors_per_turn
            ));
        }
        let most = self.max_anchors_per_turn.min(MAX_CANDIDATES);
        if self.decision.anchor_count == 0 || self.decision.anchor_count > most {
            return Err(format!(
                "anchor count must be between 1 and {most} (the max anchors per turn, and the 16 candidates a turn keeps)"
            ));
        }
        let rate = self.rate_limit_per_sec;
        if !(rate == 0.0 || (rate >= MIN_RATE_LIMIT_PER_SEC && rate.is_finite())) {
            return Err(format!(
                "the rate limit must be 0 (off) or at least {MIN_RATE_LIMIT_PER_SEC} requests a second (one an hour), got {rate}"
            ));
        }
        if self.idempotency_ttl_secs == 0 || self.idempotency_ttl_secs > MAX_IDEMPOTENCY_TTL_SECS {
            return Err(format!(
                "the Idempotency-Key TTL must be between 1 and {MAX_IDEMPOTENCY_TTL_SECS} seconds (ten years), got {}",
                self.idempotency_ttl_secs
            ));
        }
        if self.retention_days == Some(0) || self.retention_sweep_secs == 0 {
            return Err("retention days and the retention sweep interval must be positive".into());
        }
        if self.max_in_flight == 0 || self.max_in_flight_per_tenant == 0 {
            return Err("the in-flight request limits must be positive".into());
        }
        if self.database.pool_size == 0 {
            return Err("the database pool size must be positive".into());
        }
        if self.database.feed_heartbeat_secs == 0 || self.database.feed_timeout_secs == 0 {
            return Err("the feed heartbeat and the feed timeout must be positive".into());
        }
        let backend = crate::store::Backend::of_url(&self.database.url())?;
        if self.database.pg_partitions.is_some() && backend != crate::store::Backend::Postgres {
            return Err("GATEKEEPER_PG_PARTITIONS applies to a Postgres DATABASE_URL only".into());
        }
        for url in &self.database.read_database_urls {
            if backend != crate::store::Backend::Postgres
                || crate::store::Backend::of_url(url) != Ok(crate::store::Backend::Postgres)
            {
                return Err(format!(
                    "read replicas ({}) must be postgres:// URLs, beside a Postgres DATABASE_URL",
                    redact_url(url)
                ));
            }
        }
        tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .map_err(|e| format!("log level {:?} is not a valid filter: {e}", self.log_level))?;
        self.api_keys()
    }
}

impl fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeConfig")
            .field("listen", &self.listen)
            .field("database_url", &redact_url(&self.database.url()))
            .field(
                "read_database_urls",
                &self
                    .database
                    .read_database_urls
                    .iter()
                    .map(|u| redact_url(u))
                    .collect::<Vec<_>>(),
            )
            .field("pool_size", &self.database.pool_size)
            .field("feed_heartbeat", &self.database.feed_heartbeat())
            .field("api_keys", &self.api_keys.as_ref().map(|_| "<redacted>"))
            .field("api_keys_file", &self.api_keys_file)
            .field("default_mode", &self.decision.default_mode)
            .field("policy", &self.decision.policy())
            .field("anchor_count", &self.decision.anchor_count)
            .field("tokens_per_anchor", &self.decision.tokens_per_anchor)
            .field("tokenizer", &self.decision.tokenizer)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_batch_turns", &self.max_batch_turns)
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("retention_days", &self.retention_days)
            .field("retention_sweep_secs", &self.retention_sweep_secs)
            .field("drain_timeout_secs", &self.drain_timeout_secs)
            .finish_non_exhaustive()
    }
}

/// The URL with any password replaced, for logs: in the user info and in a `password` or
/// `sslpassword` query parameter.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match (base.find("://"), base.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &base[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => {
                    format!("{}{user}:<redacted>{}", &base[..scheme + 3], &base[at..])
                }
                None => base.to_owned(),
            }
        }
        _ => base.to_owned(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|param| match param.split_once('=') {
                Some((name, _)) if is_secret_param(name) => format!("{name}=<redacted>"),
                _ => param.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

fn is_secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "password" || name == "sslpassword"
}

/// Tenants' keys, kept only as SHA-256 digests.
#[derive(Clone, Default)]
pub struct ApiKeys {
    entries: Vec<(TenantId, [u8; 32])>,
    /// Tenants with a retention of their own: `Some(days)`, or `None` for none.
    retention: Vec<(TenantId, Option<u32>)>,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenants: Vec<&str> = self.entries.iter().map(|(t, _)| t.as_str()).collect();
        f.debug_struct("ApiKeys")
            .field("tenants", &tenants)
            .finish_non_exhaustive()
    }
}

impl ApiKeys {
    /// Parses `tenant:key` pairs, one per line, each optionally followed by
    /// `retention_days=N` or `retention_days=off`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        let mut retention: Vec<(TenantId, Option<u32>)> = Vec::new();
        for (n, line) in text.lines().map(str::trim).enumerate() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // Errors never quote the entry: written backwards (`key:tenant`), its first half is
            // a secret.
            let entry = n + 1;
            let (tenant, key) = line
                .split_once(':')
                .ok_or_else(|| format!("API key entry {entry} is not `tenant:key`"))?;
            let mut words = key.split_whitespace();
            let key = words.next().unwrap_or_default();
            let days = match words.next() {
                None => None,
                Some(option) => Some(retention_option(option, entry)?),
            };
            if words.next().is_some() {
                return Err(format!(
                    "API key entry {entry} has more than one option after its key (only retention_days=N|off)"
                ));
            }
            if key.len() < 16 {
                return Err(format!(
                    "the API key of entry {entry} is shorter than 16 characters (entries are `tenant:key`, the tenant first)"
                ));
            }
            let tenant = TenantId::parse(tenant.trim()).map_err(|_| {
                format!("API key entry {entry}: the tenant is not 1 to 64 of A-Z a-z 0-9 . _ -")
            })?;
            let key = digest(key);
            if entries.iter().any(|(_, k)| *k == key) {
                return Err(format!(
                    "API key entry {entry} repeats an earlier entry's key: a key must name one tenant"
                ));
            }
            if let Some(days) = days {
                match retention.iter().find(|(t, _)| *t == tenant) {
                    Some((_, earlier)) if *earlier != days => {
                        return Err(format!(
                            "API key entry {entry} gives its tenant another retention than an earlier entry"
                        ));
                    }
                    Some(_) => {}
                    None => retention.push((tenant.clone(), days)),
                }
            }
            entries.push((tenant, key));
        }
        Ok(Self { entries, retention })
    }

    /// The tenants with a retention of their own (`None`: keep their conversations).
    pub fn retention(&self) -> &[(TenantId, Option<u32>)] {
        &self.retention
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many tenants the keys name (a tenant may have several keys); no keys is one tenant.
    pub fn tenant_count(&self) -> usize {
        let mut tenants: Vec<&TenantId> = self.entries.iter().map(|(t, _)| t).collect();
        tenants.sort_unstable_by_key(|t| t.as_str());
        tenants.dedup();
        tenants.len().max(1)
    }

    /// The tenant whose key this is; every entry is compared, each in constant time.
    pub fn tenant_for(&self, presented: &str) -> Option<TenantId> {
        use subtle::ConstantTimeEq;
        let presented = digest(presented);
        let mut found = None;
        for (tenant, key) in &self.entries {
            if bool::from(key.ct_eq(&presented)) {
                found = Some(tenant.clone());
            }
        }
        found
    }
}

/// `retention_days=N` (N ≥ 1) or `retention_days=off`.
fn retention_option(option: &str, entry: usize) -> Result<Option<u32>, String> {
    let refused = || {
        format!(
            "API key entry {entry}: after the key only `retention_days=N` (N ≥ 1) or `retention_days=off` may follow"
        )
    };
    match option.strip_prefix("retention_days=").ok_or_else(refused)? {
        "off" => Ok(None),
        days => match days.parse::<u32>() {
            Ok(days) if days > 0 => Ok(Some(days)),
            _ => Err(refused()),
        },
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// CPU tasks per tenant for a setting of 0: a lone tenant may use every core; among several,
/// none may take more than half of them, so a noisy one always leaves the others a core (with
/// all cores to one tenant, a neighbour's p99 was 3.9× its p99 alone; with half, 2.1–2.2×).
pub fn default_cpu_tasks_per_tenant(cores: usize, tenants: usize) -> usize {
    if tenants <= 1 {
        cores.max(1)
    } else {
        (cores / 2).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_entry_may_give_its_tenant_a_retention_of_its_own() {
        let keys = ApiKeys::parse(
            "a:aaaaaaaaaaaaaaaa1 retention_days=30\n\
             a:aaaaaaaaaaaaaaaa2 retention_days=30\n\
             b:bbbbbbbbbbbbbbbb1 retention_days=off\n\
             c:cccccccccccccccc1",
        )
        .unwrap();
        let tenant = |t| TenantId::parse(t).unwrap();
        assert_eq!(
            keys.retention(),
            [(tenant("a"), Some(30)), (tenant("b"), None)]
        );
        assert_eq!(
            keys.tenant_for("aaaaaaaaaaaaaaaa2"),
            Some(tenant("a")),
            "the key ends at the space"
        );
        for (entry, refused) in [
            ("a:aaaaaaaaaaaaaaaa1 retention_days=0", "retention_days=N"),
            ("a:aaaaaaaaaaaaaaaa1 retention_days=-1", "retention_days=N"),
            ("a:aaaaaaaaaaaaaaaa1 retention=3", "retention_days=N"),
            (
                "a:aaaaaaaaaaaaaaaa1 retention_days=3 retention_days=4",
                "more than one option",
            ),
            (
                "a:aaaaaaaaaaaaaaaa1 retention_days=3\na:aaaaaaaaaaaaaaaa2 retention_days=4",
                "another retention",
            ),
        ] {
            let error = ApiKeys::parse(entry).unwrap_err();
            assert!(error.contains(refused), "{entry}: {error}");
            assert!(
                !error.contains("aaaaaaaaaaaaaaaa"),
                "never the key: {error}"
            );
        }
    }

    #[test]
    fn a_lone_tenant_gets_every_core_and_several_at_most_half_each() {
        for (cores, tenants, tasks) in [
            (1, 1, 1),
            (2, 1, 2),
            (8, 1, 8),
            (1, 3, 1),
            (2, 2, 1),
            (3, 2, 1),
            (8, 5, 4),
        ] {
            assert_eq!(
                default_cpu_tasks_per_tenant(cores, tenants),
                tasks,
                "{cores} cores, {tenants} tenants"
            );
        }
    }

    #[test]
    fn tenants_are_counted_once_however_many_keys_they_have() {
        let keys = ApiKeys::parse("a:aaaaaaaaaaaaaaaa1\na:aaaaaaaaaaaaaaaa2\nb:bbbbbbbbbbbbbbbb1")
            .unwrap();
        assert_eq!(keys.tenant_count(), 2);
        assert_eq!(ApiKeys::default().tenant_count(), 1, "no keys: one tenant");
    }

    #[test]
    fn keys_map_to_their_tenant_and_nothing_else() {
        let keys = ApiKeys::parse("acme:0123456789abcdef\n# comment\n\nglobex : fedcba9876543210")
            .unwrap();
        assert_eq!(
            keys.tenant_for("0123456789abcdef").unwrap().as_str(),
            "acme"
        );
        assert_eq!(
            keys.tenant_for("fedcba9876543210").unwrap().as_str(),
            "globex"
        );
        assert!(keys.tenant_for("0123456789abcdeF").is_none());
        assert!(keys.tenant_for("").is_none());
        assert!(!format!("{keys:?}").contains("0123"));
    }

    #[test]
    fn malformed_key_entries_are_refused_with_a_reason() {
        assert!(
            ApiKeys::parse("no-colon")
                .unwrap_err()
                .contains("tenant:key")
        );
        assert!(ApiKeys::parse("a:short").unwrap_err().contains("shorter"));
        assert!(ApiKeys::parse("bad tenant:0123456789abcdef").is_err());
    }

    #[test]
    fn passwords_in_database_urls_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:<redacted>@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact_url("postgres://u@h/db?sslmode=require&password=secret&Password=s2"),
            "postgres://u@h/db?sslmode=require&password=<redacted>&Password=<redacted>"
        );
        assert_eq!(
            redact_url("postgres://u:a@h/db?sslpassword=k"),
            "postgres://u:<redacted>@h/db?sslpassword=<redacted>"
        );
    }

    #[test]
    fn passwords_are_redacted_with_tls_query_parameters_present() {
        assert_eq!(
            redact_url(
                "postgres://u:secret@db.example:5432/gk?sslmode=verify-full&sslrootcert=/etc/gk/ca.pem"
            ),
            "postgres://u:<redacted>@db.example:5432/gk?sslmode=verify-full&sslrootcert=/etc/gk/ca.pem"
        );
        // An `@` in a query value is not the end of the user info.
        assert_eq!(
            redact_url(
                "postgres://u:secret@h/gk?sslmode=verify-ca&sslrootcert=/certs/ops@corp/ca.pem"
            ),
            "postgres://u:<redacted>@h/gk?sslmode=verify-ca&sslrootcert=/certs/ops@corp/ca.pem"
        );
        // An unescaped `@` or `/` in the password is still inside the user info.
        assert_eq!(
            redact_url("postgres://u:p@ss/w@h/gk?sslmode=require"),
            "postgres://u:<redacted>@h/gk?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://h/gk?sslmode=prefer&sslrootcert=/ca.pem"),
            "postgres://h/gk?sslmode=prefer&sslrootcert=/ca.pem"
        );
    }

    #[test]
    fn a_key_entry_written_backwards_is_refused_without_quoting_the_secret() {
        let secret = "s3cr3t-0123456789abcdef";
        let error = ApiKeys::parse(&format!("{secret}:acme")).unwrap_err();
        assert!(error.contains("shorter than 16"), "{error}");
        assert!(!error.contains("s3cr3t"), "{error}");
        let error = ApiKeys::parse("bad tenant!:0123456789abcdef").unwrap_err();
        assert!(!error.contains("0123"), "{error}");
    }

    #[test]
    fn one_key_for_two_tenants_is_refused() {
        let error = ApiKeys::parse("a:0123456789abcdef\nb:0123456789abcdef").unwrap_err();
        assert!(error.contains("repeats"), "{error}");
        assert!(!error.contains("0123"), "{error}");
    }
}
