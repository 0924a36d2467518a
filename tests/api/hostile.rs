//! Hostile and malformed input (issue 6, item 3): one table of requests over every endpoint,
//! each sent byte-exactly over a plain socket. Every row must get the right status with a
//! problem+json that names what is wrong, and after every row tenant A's conversation `c` must
//! read back exactly as before (summary, checkpoints with their summaries, every turn).
//!
//! How statuses are chosen (issue 3 and `src/http/extract.rs`): 401 for credentials (checked
//! before anything else), 400 when the bytes cannot be read as what they claim to be (JSON
//! syntax, invalid UTF-8, a malformed path or query, a bad conversation id), 404 for what this
//! tenant does not hold, 409 for ids that clash with the log or a stale `expected_checkpoint`,
//! 413 over the body limit, 415 for a body that is not `application/json`, and 422 for JSON of
//! the wrong shape or meaning (wrong types, missing or unknown members, bad ranges). Where the
//! contract is silent, the row's comment says why its status was chosen.

use crate::support::*;
use gatekeeper::config::ServeConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const KEY_A: &str = "hostile-tenant-a-key-0001";
const KEY_B: &str = "hostile-tenant-b-key-0002";
const KEYS: &str = "tenantA:hostile-tenant-a-key-0001,tenantB:hostile-tenant-b-key-0002";

/// Tenant A's conversation every row must leave untouched.
const C: &str = "/v1/conversations/c";
const TURNS: &str = "/v1/conversations/c/turns";
const COMPACTIONS: &str = "/v1/conversations/c/compactions";

/// 2^63: one past `i64::MAX`.
const TWO_63: &str = "9223372036854775808";
const SQL: &str = "'; DROP TABLE turns; --";
/// `'; DROP TABLE turns; --`, percent-encoded for a path segment.
const SQL_IN_PATH: &str = "%27%3B%20DROP%20TABLE%20turns%3B%20--";

/// The 100 MB body, built once.
fn huge_body() -> &'static [u8] {
    static BODY: OnceLock<Vec<u8>> = OnceLock::new();
    BODY.get_or_init(|| {
        let (head, tail) = (br#"{"turns":[{"role":"user","content":""#, br#""}]}"#);
        let size = 100 * 1024 * 1024;
        let mut body = Vec::with_capacity(size);
        body.extend_from_slice(head);
        body.resize(size - tail.len(), b'a');
        body.extend_from_slice(tail);
        body
    })
}

enum Auth {
    A,
    B,
    Missing,
    /// The `Authorization` header's exact bytes.
    Raw(Vec<u8>),
}

enum Body {
    Empty,
    Bytes(Vec<u8>),
    /// [`huge_body`].
    Huge,
}

enum Expect {
    /// problem+json with this status; `field` must equal the problem's `field` member and
    /// `detail` must occur in its `detail` (case-insensitively).
    Problem {
        status: u16,
        field: Option<&'static str>,
        detail: &'static str,
    },
    /// A success; when `stored` is set, the turn `(conversation, id)` must then read back with
    /// every member of the given object.
    Success {
        status: u16,
        stored: Option<(&'static str, i64, Value)>,
    },
}

struct Case {
    name: &'static str,
    method: &'static str,
    target: String,
    auth: Auth,
    content_type: Option<&'static str>,
    /// Further headers, their values as exact bytes.
    headers: Vec<(&'static str, Vec<u8>)>,
    body: Body,
    expect: Expect,
}

/// A POST of `body` as `application/json` with tenant A's key.
fn post(name: &'static str, target: impl Into<String>, body: impl Into<Vec<u8>>) -> Case {
    Case {
        name,
        method: "POST",
        target: target.into(),
        auth: Auth::A,
        content_type: Some("application/json"),
        headers: Vec::new(),
        body: Body::Bytes(body.into()),
        expect: Expect::Success {
            status: 0,
            stored: None,
        },
    }
}

/// A GET with tenant A's key.
fn get(name: &'static str, target: impl Into<String>) -> Case {
    Case {
        method: "GET",
        content_type: None,
        body: Body::Empty,
        ..post(name, target, "")
    }
}

impl Case {
    fn problem(mut self, status: u16, field: Option<&'static str>, detail: &'static str) -> Self {
        self.expect = Expect::Problem {
            status,
            field,
            detail,
        };
        self
    }

    fn success(mut self, status: u16) -> Self {
        self.expect = Expect::Success {
            status,
            stored: None,
        };
        self
    }

    fn stored(mut self, conversation: &'static str, id: i64, turn: Value) -> Self {
        self.expect = Expect::Success {
            status: 201,
            stored: Some((conversation, id, turn)),
        };
        self
    }

    fn auth(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    fn content_type(mut self, content_type: Option<&'static str>) -> Self {
        self.content_type = content_type;
        self
    }

    fn header(mut self, name: &'static str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn body(mut self, body: Body) -> Self {
        self.body = body;
        self
    }

    fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }
}

/// `{"turns": [<turn>]}`.
fn turns(turn: &str) -> String {
    format!(r#"{{"turns": [{turn}]}}"#)
}

/// A proposal over `c` with these members added to a valid `from`/`to`/`summary`/budget.
fn proposal(extra: &str) -> String {
    let base = r#""from": 0, "to": 3, "summary": "HOST-0 and HOST-3.", "summary_budget": 1000"#;
    if extra.is_empty() {
        format!("{{{base}}}")
    } else {
        format!("{{{base}, {extra}}}")
    }
}

/// A proposal body spelled out in full.
fn propose_raw(members: &str) -> String {
    format!("{{{members}}}")
}

#[rustfmt::skip]
fn table() -> Vec<Case> {
    let bad = |c: Case, status, field, detail| c.problem(status, field, detail);
    let ok_turn = r#"{"role": "user", "content": "I need to change reservation ZFA04Y."}"#;
    let valid_turns = turns(ok_turn);
    let long_id = "x".repeat(129);
    let very_long_id = "y".repeat(10_000);
    let ten_thousand_anchors = format!(
        r#"{{"role": "user", "content": "x", "anchors": [{}]}}"#,
        vec![r#""A""#; 10_000].join(",")
    );
    let ten_thousand_one_turns = format!(
        r#"{{"turns": [{}]}}"#,
        vec![r#"{"role": "user", "content": "x"}"#; 10_001].join(",")
    );
    let deep = "[".repeat(10_000);
    let deep_in_turns = format!(r#"{{"turns": [{{"role": "user", "content": {deep}"#);
    let mut invalid_utf8 = turns(r#"{"role": "user", "content": "ok XX ok"}"#).into_bytes();
    let at = invalid_utf8.windows(2).position(|w| w == b"XX").unwrap();
    invalid_utf8.splice(at..at + 2, [0xff, 0xfe]);
    let mut overlong_utf8 = proposal("").into_bytes();
    let at = overlong_utf8.windows(4).position(|w| w == b"HOST").unwrap();
    overlong_utf8.splice(at..at + 1, [0xc0, 0xaf]);
    let mut truncated_utf8 = turns(r#"{"role": "user", "content": "caf@"}"#).into_bytes();
    let at = truncated_utf8.iter().position(|b| *b == b'@').unwrap();
    truncated_utf8.splice(at..=at, [0xc3]);
    let mut bom = vec![0xef, 0xbb, 0xbf];
    bom.extend_from_slice(valid_turns.as_bytes());
    let utf16: Vec<u8> = valid_turns
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    let sql_turn = json!({
        "role": "user",
        "content": format!("My name is Robert{SQL} and my booking is {SQL}"),
        "anchors": [SQL, "Robert');DROP TABLE checkpoints;--"],
        "external_id": "1' OR '1'='1",
    });
    let nul_turn = json!({
        "role": "tool",
        "content": "{\"reservation_id\": \"NUL\u{0}123\", \"note\": \"a\u{0}b\"}\u{0}",
    });
    let basic = format!(
        "Basic {}",
        base64_encode(format!("tenantA:{KEY_A}").as_bytes())
    );

    vec![
        // ---- Malformed and truncated JSON: 400, naming the body -------------------------
        bad(post("truncated append", TURNS, r#"{"turns": [{"role": "user", "content": "hi"#), 400, Some("body"), "EOF"),
        bad(post("truncated proposal", COMPACTIONS, r#"{"from": 0, "to": 3, "summ"#), 400, Some("body"), "EOF"),
        bad(post("empty body", TURNS, ""), 400, Some("body"), "EOF"),
        bad(post("trailing comma", COMPACTIONS, r#"{"from": 0, "to": 3, "summary": "x", "summary_budget": 10,}"#), 400, Some("body"), "not valid JSON"),
        bad(post("single quotes", TURNS, "{'turns': []}"), 400, Some("body"), "key must be a string"),
        bad(post("unquoted keys", COMPACTIONS, "{from: 0, to: 3}"), 400, Some("body"), "key must be a string"),
        bad(post("trailing garbage", TURNS, format!("{valid_turns} x")), 400, Some("body"), "trailing characters"),
        bad(post("two documents", TURNS, format!("{valid_turns}{valid_turns}")), 400, Some("body"), "trailing characters"),
        bad(post("NaN budget", COMPACTIONS, r#"{"from": 0, "to": 3, "summary": "x", "summary_budget": NaN}"#), 400, Some("body"), "expected value"),
        bad(post("a comment", TURNS, format!("// hi\n{valid_turns}")), 400, Some("body"), "expected value"),
        bad(post("a raw newline in a string", TURNS, "{\"turns\": [{\"role\": \"user\", \"content\": \"a\nb\"}]}"), 400, Some("body"), "control character"),
        bad(post("form-encoded body labelled JSON", TURNS, "turns=hello"), 400, Some("body"), "not valid JSON"),
        // serde_json refuses a number beyond f64 while parsing, before any member is known, so
        // the problem names the body and says what is wrong (RFC 8259 §9 lets parsers limit
        // ranges); 400 like other unreadable JSON.
        bad(post("1e400 as a turn id", TURNS, turns(r#"{"id": 1e400, "role": "user", "content": "x"}"#)), 400, Some("body"), "number out of range"),
        bad(post("1e400 as a budget", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": "x", "summary_budget": 1e400"#)), 400, Some("body"), "number out of range"),
        bad(post("10,000 nested arrays", COMPACTIONS, deep.clone()), 400, Some("body"), "recursion limit"),
        bad(post("10,000 nested arrays as content", TURNS, deep_in_turns), 400, Some("body"), "recursion limit"),
        // ---- Invalid UTF-8 and unrepresentable strings: 400 ---------------------------------
        bad(post("invalid UTF-8 in content", TURNS, invalid_utf8), 400, Some("body"), "not valid JSON"),
        bad(post("overlong UTF-8 in a summary", COMPACTIONS, overlong_utf8), 400, Some("body"), "not valid JSON"),
        bad(post("truncated UTF-8 sequence", TURNS, truncated_utf8), 400, Some("body"), "not valid JSON"),
        // RFC 8259 §8.1: a parser MAY ignore a BOM; this one does not, and says so.
        bad(post("UTF-8 byte order mark", TURNS, bom), 400, Some("body"), "expected value"),
        bad(post("UTF-16 body", TURNS, utf16), 400, Some("body"), "not valid JSON"),
        // A lone surrogate is no Unicode scalar value, so no string the service could store.
        bad(post("lone surrogate escape", TURNS, turns(r#"{"role": "user", "content": "\ud800"}"#)), 400, Some("body"), "escape"),
        // ---- Wrong types: 422 naming the member -------------------------------------------------
        bad(post("string turn id", TURNS, turns(r#"{"id": "0", "role": "user", "content": "x"}"#)), 422, Some("turns[0].id"), "invalid type: string"),
        bad(post("fractional turn id", TURNS, turns(r#"{"id": 1.5, "role": "user", "content": "x"}"#)), 422, Some("turns[0].id"), "invalid type: floating point"),
        bad(post("object role", TURNS, turns(r#"{"role": {"name": "user"}, "content": "x"}"#)), 422, Some("turns[0].role"), "role"),
        bad(post("unknown role", TURNS, turns(r#"{"role": "wizard", "content": "x"}"#)), 422, Some("turns[0].role"), "unknown variant `wizard`"),
        bad(post("numeric content", TURNS, turns(r#"{"role": "user", "content": 42}"#)), 422, Some("turns[0].content"), "invalid type: integer"),
        bad(post("null content", TURNS, turns(r#"{"role": "user", "content": null}"#)), 422, Some("turns[0].content"), "invalid type: null"),
        bad(post("anchors as a string", TURNS, turns(r#"{"role": "user", "content": "x", "anchors": "INV-1"}"#)), 422, Some("turns[0].anchors"), "expected a sequence"),
        bad(post("negative tokens", TURNS, turns(r#"{"role": "user", "content": "x", "tokens": -1}"#)), 422, Some("turns[0].tokens"), "expected u32"),
        bad(post("tokens of 2^32", TURNS, turns(r#"{"role": "user", "content": "x", "tokens": 4294967296}"#)), 422, Some("turns[0].tokens"), "expected u32"),
        bad(post("turns as an object", TURNS, r#"{"turns": {"0": {"role": "user", "content": "x"}}}"#), 422, Some("turns"), "expected a sequence"),
        // The contract's bodies are JSON objects. serde would read an array positionally as the
        // struct's members, in declaration order, bypassing every member name (and so the
        // unknown-member check): the body as a whole is of the wrong shape, 422 naming `body`.
        bad(post("body is an array", TURNS, format!("[{ok_turn}]")), 422, Some("body"), "body"),
        // Positional again, one level down; sent to another conversation, so that if it is taken
        // as a turn, `c` still holds only what it held.
        bad(post("turn as a positional array", "/v1/conversations/positional/turns", r#"{"turns": [[null, "user", "taken positionally"]]}"#), 422, Some("turns[0]"), "turns[0]"),
        bad(post("proposal as a positional array", COMPACTIONS, r#"[0, 3, "HOST-0 and HOST-3.", 1000, null, null, null, null, true]"#), 422, Some("body"), "body"),
        bad(post("body is null", COMPACTIONS, "null"), 422, Some("body"), "body"),
        bad(post("array summary", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": ["HOST-0"], "summary_budget": 1000"#)), 422, Some("summary"), "invalid type: sequence"),
        bad(post("string from", COMPACTIONS, propose_raw(r#""from": "0", "to": 3, "summary": "x", "summary_budget": 1000"#)), 422, Some("from"), "invalid type: string"),
        bad(post("string dry_run", COMPACTIONS, proposal(r#""dry_run": "yes""#)), 422, Some("dry_run"), "expected a boolean"),
        bad(post("unknown mode", COMPACTIONS, proposal(r#""mode": "yolo""#)), 422, Some("mode"), "unknown variant `yolo`"),
        bad(post("string expected_checkpoint", COMPACTIONS, proposal(r#""expected_checkpoint": "1""#)), 422, Some("expected_checkpoint"), "invalid type: string"),
        // ---- Missing and unknown members: 422 -----------------------------------------------
        bad(post("empty object", TURNS, "{}"), 422, Some("body"), "missing field `turns`"),
        bad(post("turn without content", TURNS, turns(r#"{"role": "user"}"#)), 422, Some("turns[0]"), "missing field `content`"),
        bad(post("turn without role", TURNS, turns(r#"{"content": "x"}"#)), 422, Some("turns[0]"), "missing field `role`"),
        bad(post("proposal without summary", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary_budget": 1000"#)), 422, Some("body"), "missing field `summary`"),
        bad(post("proposal without budget", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": "x""#)), 422, Some("body"), "missing field `summary_budget`"),
        bad(post("misspelled content", TURNS, turns(r#"{"role": "user", "content": "x", "contnet": "y"}"#)), 422, None, "unknown field `contnet`"),
        bad(post("unknown top-level member", TURNS, format!(r#"{{"turns": [{ok_turn}], "conversation": "d"}}"#)), 422, None, "unknown field `conversation`"),
        // The contract's own example: a misspelled `consumed` must never make a reported
        // proposal unreported.
        bad(post("misspelled consumed", COMPACTIONS, proposal(r#""consumd": [[0, 3]]"#)), 422, None, "unknown field `consumd`"),
        bad(post("checkpoint_id in a proposal", COMPACTIONS, proposal(r#""checkpoint_id": 2"#)), 422, None, "unknown field `checkpoint_id`"),
        // Duplicate members: RFC 8259 §4 leaves their meaning to the parser. Taking the last
        // one silently is the misspelled-`consumed` hazard again (a client that checked the
        // first `consumed` sends a different report), so the contract's reason for rejecting
        // unknown members applies: 422 naming the member. Dry run, so it can persist nothing.
        bad(post("duplicate consumed", COMPACTIONS, proposal(r#""consumed": [[0, 3]], "consumed": [[0, 0]], "dry_run": true"#)), 422, Some("consumed"), "`consumed` appears more than once"),
        // ---- Ids in the body: negative, huge, clashing --------------------------------------
        bad(post("negative turn id", TURNS, turns(r#"{"id": -1, "role": "user", "content": "x"}"#)), 422, Some("turns[0].id"), "negative"),
        bad(post("turn id 2^63", TURNS, turns(&format!(r#"{{"id": {TWO_63}, "role": "user", "content": "x"}}"#))), 422, Some("turns[0].id"), "expected i64"),
        bad(post("turn id i64::MAX is a gap", TURNS, turns(r#"{"id": 9223372036854775807, "role": "user", "content": "x"}"#)), 409, Some("turns[0].id"), "the next id is 4"),
        bad(post("turn 0 replayed with other content", TURNS, turns(r#"{"id": 0, "role": "user", "content": "something else"}"#)), 409, None, "[0]"),
        // The first turn alone would be appended: the batch is all or nothing.
        bad(post("valid turn then a clashing one", TURNS, r#"{"turns": [{"id": 4, "role": "user", "content": "fine"}, {"id": 1, "role": "user", "content": "clash"}]}"#), 409, None, "nothing"),
        bad(post("valid turn then an invalid one", TURNS, format!(r#"{{"turns": [{ok_turn}, {{"role": "user", "content": "x", "anchors": [""]}}]}}"#)), 422, Some("turns[1].anchors[0]"), "empty"),
        bad(post("same new id twice, different turns", TURNS, r#"{"turns": [{"id": 4, "role": "user", "content": "a"}, {"id": 4, "role": "user", "content": "b"}]}"#), 409, None, "twice"),
        bad(post("empty batch", TURNS, r#"{"turns": []}"#), 422, Some("turns"), "at least one"),
        bad(post("10,001 turns in one batch", TURNS, ten_thousand_one_turns), 422, Some("turns"), "10001 turns"),
        // ---- Anchors, external ids and labels ----------------------------------------------
        bad(post("10,000 anchors on one turn", TURNS, turns(&ten_thousand_anchors)), 422, Some("turns[0].anchors"), "10000 anchors"),
        bad(post("\\u0000 in an anchor", TURNS, turns(r#"{"role": "user", "content": "x", "anchors": ["INV\u00002093"]}"#)), 422, Some("turns[0].anchors[0]"), "control characters"),
        bad(post("\\u0000 in external_id", TURNS, turns(r#"{"role": "user", "content": "x", "external_id": "msg\u0000"}"#)), 422, Some("turns[0].external_id"), "control characters"),
        bad(post("\\u0000 in finish_reason", COMPACTIONS, proposal(r#""finish_reason": "length\u0000""#)), 422, Some("finish_reason"), "control characters"),
        bad(post("bell in end_marker", COMPACTIONS, proposal(r#""end_marker": "</summary>\u0007""#)), 422, Some("end_marker"), "control characters"),
        bad(post("whitespace-only anchor", TURNS, turns(r#"{"role": "user", "content": "x", "anchors": [" \t "]}"#)), 422, Some("turns[0].anchors[0]"), "only whitespace"),
        bad(post("257-character anchor", TURNS, turns(&format!(r#"{{"role": "user", "content": "x", "anchors": ["{}"]}}"#, "a".repeat(257)))), 422, Some("turns[0].anchors[0]"), "longer than 256"),
        // ---- Stored verbatim, in other conversations (so `c` stays as it was) ---------------
        post("\\u0000 in content is stored verbatim", "/v1/conversations/nul-content/turns", json!({ "turns": [nul_turn.clone()] }).to_string())
            .stored("nul-content", 0, nul_turn),
        post("SQL-looking content, anchors and external id are stored verbatim", "/v1/conversations/sql-content/turns", json!({ "turns": [sql_turn.clone()] }).to_string())
            .stored("sql-content", 0, sql_turn),
        // ---- Proposal ranges ---------------------------------------------------------------
        bad(post("from > to", COMPACTIONS, propose_raw(r#""from": 3, "to": 1, "summary": "x", "summary_budget": 1000"#)), 422, Some("to"), "before `from`"),
        bad(post("negative from", COMPACTIONS, propose_raw(r#""from": -1, "to": 3, "summary": "x", "summary_budget": 1000"#)), 422, Some("from"), "negative"),
        bad(post("to beyond the log", COMPACTIONS, propose_raw(r#""from": 0, "to": 99, "summary": "x", "summary_budget": 1000"#)), 422, Some("to"), "not in the log"),
        bad(post("range wholly beyond the log", COMPACTIONS, propose_raw(r#""from": 4, "to": 4, "summary": "x", "summary_budget": 1000"#)), 422, Some("to"), "not in the log"),
        bad(post("to = i64::MAX", COMPACTIONS, propose_raw(r#""from": 0, "to": 9223372036854775807, "summary": "x", "summary_budget": 1000"#)), 422, Some("to"), "not in the log"),
        bad(post("to = 2^63", COMPACTIONS, propose_raw(&format!(r#""from": 0, "to": {TWO_63}, "summary": "x", "summary_budget": 1000"#))), 422, Some("to"), "expected i64"),
        bad(post("consumed outside the range", COMPACTIONS, proposal(r#""consumed": [[0, 9]]"#)), 422, Some("consumed[0]"), "outside"),
        bad(post("consumed [[3,1]]", COMPACTIONS, proposal(r#""consumed": [[3, 1]]"#)), 422, Some("consumed[0]"), "starts after it ends"),
        bad(post("consumed [[1]]", COMPACTIONS, proposal(r#""consumed": [[1]]"#)), 422, Some("consumed[0]"), "length 2"),
        bad(post("consumed [1,2]", COMPACTIONS, proposal(r#""consumed": [1, 2]"#)), 422, Some("consumed[0]"), "expected an array of length 2"),
        bad(post("consumed as a string", COMPACTIONS, proposal(r#""consumed": "all""#)), 422, Some("consumed"), "expected a sequence"),
        bad(post("expected_checkpoint stale", COMPACTIONS, proposal(r#""expected_checkpoint": 99"#)), 409, Some("expected_checkpoint"), "latest checkpoint is 1"),
        bad(post("expected_checkpoint null with a checkpoint", COMPACTIONS, proposal(r#""expected_checkpoint": null"#)), 409, Some("expected_checkpoint"), "latest checkpoint is 1"),
        // A summary holding none of the range's anchors covers nothing: rejected, nothing kept.
        bad(post("SQL-looking summary is rejected, not run", COMPACTIONS, propose_raw(&format!(r#""from": 3, "to": 3, "summary": "{SQL}", "summary_budget": 1000"#))), 422, None, "covers no turn"),
        // ---- Budgets -----------------------------------------------------------------------
        bad(post("budget 0", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": "x", "summary_budget": 0"#)), 422, Some("summary_budget"), "must be positive"),
        bad(post("budget -1", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": "x", "summary_budget": -1"#)), 422, Some("summary_budget"), "must be positive"),
        bad(post("budget 2^63", COMPACTIONS, propose_raw(&format!(r#""from": 0, "to": 3, "summary": "x", "summary_budget": {TWO_63}"#))), 422, Some("summary_budget"), "expected i64"),
        bad(post("budget as a string", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": "x", "summary_budget": "1000""#)), 422, Some("summary_budget"), "invalid type: string"),
        // The largest budget is a valid one: decided without overflow, and a dry run keeps nothing.
        post("budget i64::MAX on a dry run", COMPACTIONS, propose_raw(r#""from": 0, "to": 3, "summary": "HOST-0 and HOST-3.", "summary_budget": 9223372036854775807, "dry_run": true"#)).success(200),
        bad(get("plan: budget 0", format!("{C}/compaction-plan?summary_budget=0")), 400, Some("summary_budget"), "must be positive"),
        bad(get("plan: budget -1", format!("{C}/compaction-plan?summary_budget=-1")), 400, Some("summary_budget"), "must be positive"),
        bad(get("plan: budget 2^63", format!("{C}/compaction-plan?summary_budget={TWO_63}")), 400, Some("query"), "summary_budget"),
        bad(get("plan: budget 1e400", format!("{C}/compaction-plan?summary_budget=1e400")), 400, Some("query"), "summary_budget"),
        bad(get("plan: non-numeric budget", format!("{C}/compaction-plan?summary_budget=lots")), 400, Some("query"), "summary_budget"),
        bad(get("plan: no budget", format!("{C}/compaction-plan?from=0")), 400, Some("query"), "summary_budget"),
        bad(get("plan: unknown parameter", format!("{C}/compaction-plan?summary_budget=10&budget=10")), 400, Some("query"), "unknown field `budget`"),
        bad(get("plan: budget twice", format!("{C}/compaction-plan?summary_budget=10&summary_budget=20")), 400, Some("query"), "duplicate field"),
        bad(get("plan: non-numeric from", format!("{C}/compaction-plan?summary_budget=10&from=zero")), 400, Some("query"), "from"),
        // `from` is a well-formed turn id that the log does not hold: the plan documents 404.
        bad(get("plan: negative from", format!("{C}/compaction-plan?summary_budget=10&from=-1")), 404, None, "not in the log"),
        bad(get("context: max_tokens -1", format!("{C}/context?max_tokens=-1")), 400, Some("max_tokens"), "must not be negative"),
        bad(get("context: max_tokens 2^63", format!("{C}/context?max_tokens={TWO_63}")), 400, Some("query"), "max_tokens"),
        bad(get("context: non-numeric max_tokens", format!("{C}/context?max_tokens=lots")), 400, Some("query"), "max_tokens"),
        bad(get("context: max_tokens twice", format!("{C}/context?max_tokens=1&max_tokens=2")), 400, Some("query"), "duplicate field"),
        bad(get("context: unknown parameter", format!("{C}/context?budget=10")), 400, Some("query"), "unknown field `budget`"),
        bad(get("search: no q", format!("{C}/search")), 400, Some("query"), "missing field `q`"),
        bad(get("search: empty q", format!("{C}/search?q=")), 400, Some("q"), "must not be empty"),
        bad(get("search: q past 1,024 characters", format!("{C}/search?q={}", "x".repeat(1025))), 400, Some("q"), "1025 characters"),
        bad(get("search: limit 0", format!("{C}/search?q=flight&limit=0")), 400, Some("limit"), "between 1 and 50"),
        bad(get("search: limit 2^63", format!("{C}/search?q=flight&limit={TWO_63}")), 400, Some("query"), "limit"),
        bad(get("search: q twice", format!("{C}/search?q=a&q=b")), 400, Some("query"), "duplicate field"),
        bad(get("search: unknown parameter", format!("{C}/search?q=flight&prefix=a")), 400, Some("query"), "unknown field `prefix`"),
        bad(get("tenant search: prefix with a slash", "/v1/search?q=flight&conversation_prefix=a%2Fb".to_owned()), 400, Some("conversation_prefix"), "at most 128"),
        bad(get("plan: from beyond the log", format!("{C}/compaction-plan?summary_budget=10&from=4")), 404, None, "not in the log"),
        get("plan: budget i64::MAX", format!("{C}/compaction-plan?summary_budget=9223372036854775807&from=0")).success(200),
        // ---- Ids in the path ---------------------------------------------------------------
        // A negative id is a well-formed integer naming no turn: 404, the contract's answer for
        // "this tenant's log does not hold it".
        bad(get("turn -1", format!("{C}/turns/-1")), 404, None, "not in the log"),
        bad(get("turn just past the log", format!("{C}/turns/4")), 404, None, "not in the log"),
        bad(get("turn 2^63", format!("{C}/turns/{TWO_63}")), 400, Some("path"), "parse"),
        bad(get("turn 1e400", format!("{C}/turns/1e400")), 400, Some("path"), "parse"),
        bad(get("non-numeric turn", format!("{C}/turns/first")), 400, Some("path"), "parse"),
        bad(get("reconstruct -1", format!("{C}/reconstruct/-1")), 404, None, "not in the log"),
        bad(get("reconstruct i64::MAX", format!("{C}/reconstruct/9223372036854775807")), 404, None, "not in the log"),
        bad(get("reconstruct 2^64", format!("{C}/reconstruct/18446744073709551616")), 400, Some("path"), "parse"),
        bad(get("reconstruct 0x1", format!("{C}/reconstruct/0x1")), 400, Some("path"), "parse"),
        bad(get("checkpoint 0", format!("{C}/compactions/0")), 404, None, "checkpoint 0"),
        bad(get("checkpoint i64::MIN", format!("{C}/compactions/-9223372036854775808")), 404, None, "does not exist"),
        bad(get("checkpoint 1.0", format!("{C}/compactions/1.0")), 400, Some("path"), "parse"),
        bad(get("checkpoint %20", format!("{C}/compactions/%201")), 400, Some("path"), "parse"),
        // ---- Conversation ids --------------------------------------------------------------
        // A raw `/` splits the segment, so no route matches: 404 from the fallback. Encoded as
        // `%2F` it reaches the id check and is 400.
        bad(post("conversation id with a raw /", "/v1/conversations/c/x/turns", valid_turns.clone()), 404, None, "no such route"),
        bad(post("conversation id ..", "/v1/conversations/../turns", valid_turns.clone()), 400, Some("conversation"), "not a conversation id"),
        bad(get("conversation id .", "/v1/conversations/./context"), 400, Some("conversation"), "not a conversation id"),
        bad(get("conversation id %2E%2E", "/v1/conversations/%2E%2E/compactions"), 400, Some("conversation"), "not a conversation id"),
        bad(get("conversation id %2F", "/v1/conversations/%2F/turns/0"), 400, Some("conversation"), "not a conversation id"),
        bad(post("conversation id c%2F..%2Fd", "/v1/conversations/c%2F..%2Fd/compactions", proposal("")), 400, Some("conversation"), "not a conversation id"),
        bad(get("conversation id with a space", "/v1/conversations/c%20/reconstruct/0"), 400, Some("conversation"), "not a conversation id"),
        bad(get("conversation id in unicode", "/v1/conversations/%C3%A9t%C3%A9"), 400, Some("conversation"), "not a conversation id"),
        bad(get("conversation id with \\u0000", "/v1/conversations/c%00/context"), 400, Some("conversation"), "not a conversation id"),
        bad(get("129-character conversation id", format!("/v1/conversations/{long_id}/compaction-plan?summary_budget=10")), 400, Some("conversation"), "1 to 128"),
        // The id is echoed cut short (an ellipsis), not 10 KB back.
        bad(get("10,000-character conversation id", format!("/v1/conversations/{very_long_id}")), 400, Some("conversation"), "…"),
        bad(get("SQL-looking conversation id", format!("/v1/conversations/{SQL_IN_PATH}")), 400, Some("conversation"), "DROP TABLE"),
        bad(post("SQL-looking conversation id on append", format!("/v1/conversations/{SQL_IN_PATH}/turns"), valid_turns.clone()), 400, Some("conversation"), "not a conversation id"),
        bad(get("a conversation that does not exist", "/v1/conversations/C"), 404, None, "does not exist"),
        bad(post("proposal on a conversation that does not exist", "/v1/conversations/nope/compactions", proposal("")), 404, None, "does not exist"),
        // ---- Content types -----------------------------------------------------------------
        bad(post("text/plain", TURNS, valid_turns.clone()).content_type(Some("text/plain")), 415, None, "application/json"),
        bad(post("no content type", COMPACTIONS, proposal("")).content_type(None), 415, None, "application/json"),
        bad(post("multipart", TURNS, format!("--x\r\nContent-Disposition: form-data; name=\"turns\"\r\n\r\n{valid_turns}\r\n--x--\r\n")).content_type(Some("multipart/form-data; boundary=x")), 415, None, "application/json"),
        bad(post("form-urlencoded", COMPACTIONS, "from=0&to=3").content_type(Some("application/x-www-form-urlencoded")), 415, None, "application/json"),
        bad(post("a list of media types", TURNS, valid_turns.clone()).content_type(Some("application/json, text/plain")), 415, None, "application/json"),
        bad(post("text/json", TURNS, valid_turns.clone()).content_type(Some("text/json")), 415, None, "application/json"),
        // Media types are case-insensitive (RFC 9110 §8.3.1): accepted, so the empty batch is
        // what fails.
        bad(post("upper-case media type", TURNS, r#"{"turns": []}"#).content_type(Some("Application/JSON")), 422, Some("turns"), "at least one"),
        // ---- Size: the default 32 MiB limit ------------------------------------------------
        bad(post("100 MB body", TURNS, "").body(Body::Huge), 413, None, "length limit"),
        // ---- Idempotency-Key: 1 to 255 visible ASCII characters, else 400 before anything is
        // looked up or written (the bodies are valid appends and proposals) -------------------
        bad(post("empty Idempotency-Key", TURNS, valid_turns.clone()).header("Idempotency-Key", ""), 400, Some("Idempotency-Key"), "1 to 255"),
        bad(post("256-character Idempotency-Key", COMPACTIONS, proposal("")).header("Idempotency-Key", "k".repeat(256)), 400, Some("Idempotency-Key"), "1 to 255"),
        bad(post("Idempotency-Key with a space", TURNS, valid_turns.clone()).header("Idempotency-Key", "retry 1"), 400, Some("Idempotency-Key"), "visible ASCII"),
        bad(post("non-ASCII Idempotency-Key", COMPACTIONS, proposal("")).header("Idempotency-Key", "cl\u{e9}".as_bytes()), 400, Some("Idempotency-Key"), "visible ASCII"),
        bad(post("Idempotency-Key with \\xff", TURNS, valid_turns.clone()).header("Idempotency-Key", [b"k".as_slice(), &[0xff]].concat()), 400, Some("Idempotency-Key"), "visible ASCII"),
        // ---- Methods -----------------------------------------------------------------------
        bad(get("PUT a conversation", C).method("PUT"), 405, None, "PUT"),
        // ---- The tenant's conversations: list, import -------------------------------------
        bad(get("a list page of 0", "/v1/conversations?limit=0"), 400, Some("limit"), "between 1 and 1000"),
        bad(get("a list cursor outside the id alphabet", "/v1/conversations?cursor=a%2Fb"), 400, Some("cursor"), "at most 128"),
        bad(get("a turn list from -1", format!("{TURNS}?from=-1")), 400, Some("from"), "must not be negative"),
        bad(get("a turn list page of 10,001", format!("{TURNS}?limit=10001")), 400, Some("limit"), "between 1 and 10000"),
        bad(get("a turn list from 2^63", format!("{TURNS}?from={TWO_63}")), 400, Some("query"), "from"),
        bad(post("an import sent as JSON", format!("{C}/import"), r#"{"type":"conversation"}"#), 415, None, "x-ndjson"),
        bad(post("an import without its header", format!("{C}-new/import"), r#"{"type":"turn"}"#).content_type(Some("application/x-ndjson")), 422, None, "line 1"),
        // ---- Credentials: 401 before anything else is looked at ----------------------------
        bad(post("no key", TURNS, valid_turns.clone()).auth(Auth::Missing), 401, None, "credentials"),
        bad(post("no key and a malformed body", COMPACTIONS, "{").auth(Auth::Missing), 401, None, "credentials"),
        bad(get("`Bearer` without a key", C).auth(Auth::Raw(b"Bearer".to_vec())), 401, None, "credentials"),
        bad(get("`Bearer ` and spaces", format!("{C}/turns/0")).auth(Auth::Raw(b"Bearer    ".to_vec())), 401, None, "credentials"),
        bad(get("Basic credentials", format!("{C}/reconstruct/0")).auth(Auth::Raw(basic.into_bytes())), 401, None, "credentials"),
        bad(get("the key without a scheme", format!("{C}/context")).auth(Auth::Raw(KEY_A.as_bytes().to_vec())), 401, None, "credentials"),
        bad(get("a wrong key", format!("{C}/compactions")).auth(Auth::Raw(format!("Bearer {KEY_A}x").into_bytes())), 401, None, "credentials"),
        bad(get("both tenants' keys", format!("{C}/compactions/1")).auth(Auth::Raw(format!("Bearer {KEY_A} {KEY_B}").into_bytes())), 401, None, "credentials"),
        bad(get("a key with invalid UTF-8", format!("{C}/compaction-plan?summary_budget=10")).auth(Auth::Raw([b"Bearer ".as_slice(), KEY_A.as_bytes(), &[0xff]].concat())), 401, None, "credentials"),
        // RFC 9110 §11.1: the scheme is case-insensitive (and RFC 6750's "Bearer" is an ABNF
        // literal, case-insensitive too), so tenant A's key with `bearer` reads `c`.
        get("`bearer` in lower case", C).auth(Auth::Raw(format!("bearer {KEY_A}").into_bytes())).success(200),
        // ---- Another tenant's key: `c` does not exist for it -------------------------------
        bad(get("tenant B reads the conversation", C).auth(Auth::B), 404, None, "does not exist"),
        bad(get("tenant B reads a turn", format!("{C}/turns/0")).auth(Auth::B), 404, None, "not in the log"),
        bad(get("tenant B lists the turns", TURNS).auth(Auth::B), 404, None, "does not exist"),
        bad(get("tenant B reconstructs", format!("{C}/reconstruct/0")).auth(Auth::B), 404, None, "not in the log"),
        bad(get("tenant B reads the context", format!("{C}/context")).auth(Auth::B), 404, None, "does not exist"),
        bad(get("tenant B lists checkpoints", format!("{C}/compactions")).auth(Auth::B), 404, None, "does not exist"),
        bad(get("tenant B reads checkpoint 1", format!("{C}/compactions/1")).auth(Auth::B), 404, None, "does not exist"),
        bad(get("tenant B plans", format!("{C}/compaction-plan?summary_budget=100&from=0")).auth(Auth::B), 404, None, "does not exist"),
        bad(post("tenant B proposes", COMPACTIONS, proposal("")).auth(Auth::B), 404, None, "does not exist"),
        bad(post("tenant B proposes a dry run", COMPACTIONS, proposal(r#""dry_run": true"#)).auth(Auth::B), 404, None, "does not exist"),
    ]
}

/// Standard base64 (for a `Basic` header), without pulling in a crate.
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// What came back over the socket.
struct Reply {
    status: u16,
    content_type: Option<String>,
    body: String,
}

/// Sends `case` byte-exactly (no URL normalisation, headers as given) and reads the reply. The
/// body is written on its own thread while the reply is read, so a server that answers before
/// reading everything (413) is heard rather than seen as a broken pipe.
async fn send(addr: &str, case: &Case) -> Reply {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n",
        case.method, case.target
    )
    .into_bytes();
    let auth: Option<Vec<u8>> = match &case.auth {
        Auth::A => Some(format!("Bearer {KEY_A}").into_bytes()),
        Auth::B => Some(format!("Bearer {KEY_B}").into_bytes()),
        Auth::Missing => None,
        Auth::Raw(bytes) => Some(bytes.clone()),
    };
    if let Some(auth) = auth {
        head.extend_from_slice(b"Authorization: ");
        head.extend_from_slice(&auth);
        head.extend_from_slice(b"\r\n");
    }
    for (name, value) in &case.headers {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    if let Some(content_type) = case.content_type {
        head.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
    }
    let body: Body = match &case.body {
        Body::Empty => Body::Empty,
        Body::Bytes(bytes) => Body::Bytes(bytes.clone()),
        Body::Huge => Body::Huge,
    };
    let addr = addr.to_owned();
    tokio::task::spawn_blocking(move || {
        let body: &[u8] = match &body {
            Body::Empty => b"",
            Body::Bytes(bytes) => bytes,
            Body::Huge => huge_body(),
        };
        head.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        let mut stream = std::net::TcpStream::connect(&addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let raw = std::thread::scope(|scope| {
            scope.spawn(move || {
                // The server may close early (413): a failed write is expected then.
                let _ = writer
                    .write_all(&head)
                    .and_then(|()| writer.write_all(body));
            });
            let mut raw = Vec::new();
            let read = stream.read_to_end(&mut raw);
            if raw.is_empty() {
                read.expect("a reply");
            }
            raw
        });
        parse_reply(&raw)
    })
    .await
    .unwrap()
}

fn parse_reply(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("a reply head: {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        let mut out = Vec::new();
        let mut rest = body.as_slice();
        while let Some(at) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = std::str::from_utf8(&rest[..at]).unwrap_or("0");
            let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[at + 2..at + 2 + size]);
            rest = &rest[at + 2 + size..];
            rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        }
        body = out;
    }
    Reply {
        status,
        content_type: header("content-type").cloned(),
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// What is wrong with `reply` for `expect`, if anything.
async fn judge(app: &TestApp, expect: &Expect, reply: &Reply) -> Result<(), String> {
    match expect {
        Expect::Problem {
            status,
            field,
            detail,
        } => {
            if reply.status != *status {
                return Err(format!("status {} instead of {status}", reply.status));
            }
            if reply.content_type.as_deref() != Some("application/problem+json") {
                return Err(format!("content type {:?}", reply.content_type));
            }
            let body: Value = serde_json::from_str(&reply.body)
                .map_err(|e| format!("problem body is not JSON ({e})"))?;
            for member in ["type", "title", "detail"] {
                if body[member].as_str().is_none_or(str::is_empty) {
                    return Err(format!("no `{member}`"));
                }
            }
            if body["status"] != json!(status) {
                return Err(format!("`status` is {}", body["status"]));
            }
            if let Some(field) = field
                && body["field"] != json!(field)
            {
                return Err(format!("`field` is {} instead of {field:?}", body["field"]));
            }
            let shown = body["detail"].as_str().unwrap_or_default();
            if !shown.to_lowercase().contains(&detail.to_lowercase()) {
                return Err(format!("`detail` does not say {detail:?}"));
            }
            Ok(())
        }
        Expect::Success { status, stored } => {
            if reply.status != *status {
                return Err(format!("status {} instead of {status}", reply.status));
            }
            let Some((conversation, id, expected)) = stored else {
                return Ok(());
            };
            let response = app.with_key(KEY_A).turn(conversation, *id).await;
            if response.status() != StatusCode::OK {
                return Err(format!("reading it back: {}", response.status()));
            }
            let read: Value = response.json().await.map_err(|e| e.to_string())?;
            for (member, value) in expected.as_object().unwrap() {
                if &read[member] != value {
                    return Err(format!(
                        "`{member}` read back as {} instead of {value}",
                        read[member]
                    ));
                }
            }
            Ok(())
        }
    }
}

#[tokio::test]
async fn hostile_input_gets_a_clear_4xx_and_changes_nothing() {
    let started = Instant::now();
    let app = spawn_app_with(ServeConfig {
        api_keys: Some(KEYS.into()),
        ..Default::default()
    })
    .await;
    let a = app.with_key(KEY_A);
    let seed: Vec<Value> = tau_turns(4)
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t["anchors"] = json!([format!("HOST-{i}")]);
            t
        })
        .collect();
    expect(a.append("c", json!(seed)).await, StatusCode::CREATED).await;
    let checkpoint = json!({ "from": 0, "to": 2, "summary": "HOST-0, HOST-1 and HOST-2.", "summary_budget": 1000 });
    expect(a.propose("c", checkpoint).await, StatusCode::CREATED).await;
    let mut before = a.full_snapshot("c").await;
    assert_eq!(before["conversation"]["next_id"], 4, "{before}");
    assert_eq!(before["conversation"]["checkpoints"], 1, "{before}");

    let table = table();
    assert!(table.len() >= 50, "only {} rows", table.len());
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut per_status: BTreeMap<u16, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in &table {
        let reply = send(&addr, case).await;
        *per_status.entry(reply.status).or_default() += 1;
        if let Err(why) = judge(&app, &case.expect, &reply).await {
            let shown: String = reply.body.chars().take(400).collect();
            failures.push(format!("{}: {why}; body: {shown}", case.name));
        }
        // Another tenant's or no key: nothing of `c` may show in the answer.
        if !matches!(case.auth, Auth::A) && reply.body.contains("HOST-") {
            failures.push(format!(
                "{}: the reply shows c's data: {}",
                case.name, reply.body
            ));
        }
        let after = a.full_snapshot("c").await;
        if after != before {
            failures.push(format!(
                "{}: conversation c changed\nbefore: {before}\nafter:  {after}",
                case.name
            ));
            // Judge the following rows against what is there now.
            before = after;
        }
    }
    let summary: Vec<String> = per_status
        .iter()
        .map(|(status, n)| format!("{status}×{n}"))
        .collect();
    eprintln!(
        "hostile input: {} rows tried in {:.1?}: {}",
        table.len(),
        started.elapsed(),
        summary.join(" ")
    );
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        table.len(),
        failures.join("\n")
    );
}
