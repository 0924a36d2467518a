use super::*;

fn args(v: Value) -> Option<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => panic!("arguments are an object"),
    }
}

#[test]
fn each_tool_reads_its_rest_endpoint() {
    let get = |p: &str| Ok(Call::Get(p.to_owned()));
    let cases: Vec<(&str, Value, Result<Call, String>)> = vec![
        (
            "search_history",
            json!({"query": "ZFA04Y"}),
            get("/v1/search?q=ZFA04Y"),
        ),
        (
            "search_history",
            json!({"query": "HTTP 503", "conversation": "c-1", "limit": 3}),
            get("/v1/conversations/c-1/search?q=HTTP+503&limit=3"),
        ),
        (
            "recall_turn",
            json!({"conversation": "c", "turn": 7}),
            get("/v1/conversations/c/reconstruct/7"),
        ),
        (
            "working_context",
            json!({"conversation": "c"}),
            get("/v1/conversations/c/context"),
        ),
        (
            "working_context",
            json!({"conversation": "c", "max_tokens": 20000}),
            get("/v1/conversations/c/context?max_tokens=20000"),
        ),
        (
            "coverage",
            json!({"conversation": "c", "checkpoint_id": 2}),
            get("/v1/conversations/c/compactions/2"),
        ),
        (
            "coverage",
            json!({"conversation": "c"}),
            Ok(Call::LatestCoverage {
                conversation: "c".into(),
            }),
        ),
    ];
    for (tool, arguments, want) in cases {
        assert_eq!(
            call(tool, args(arguments.clone())),
            want,
            "{tool} {arguments}"
        );
    }
}

#[test]
fn an_argument_never_reaches_another_route() {
    let call = call(
        "recall_turn",
        args(json!({"conversation": "../../healthz?x=", "turn": 1})),
    );
    assert_eq!(
        call,
        Ok(Call::Get(
            "/v1/conversations/..%2F..%2Fhealthz%3Fx=/reconstruct/1".into()
        ))
    );
    assert_eq!(conversation_path("a/b"), "/v1/conversations/a%2Fb");
}

#[test]
fn bad_arguments_and_unknown_tools_are_refused_with_the_reason() {
    let refused = |tool: &str, v: Value| call(tool, args(v)).unwrap_err();
    assert!(refused("recall_turn", json!({"conversation": "c"})).contains("missing field `turn`"));
    assert!(
        refused("recall_turn", json!({"conversation": "c", "turn": "seven"}))
            .contains("invalid type")
    );
    assert!(refused("search_history", json!({"q": "x"})).contains("unknown field `q`"));
    assert!(refused("working_context", json!({})).contains("missing field `conversation`"));
    assert!(refused("forget", json!({})).contains("no tool named \"forget\""));
    assert!(
        call("coverage", None)
            .unwrap_err()
            .contains("missing field `conversation`")
    );
}

#[test]
fn every_tool_declares_an_object_schema_with_its_required_arguments() {
    let names: Vec<&str> = list().iter().map(|(n, _, _)| *n).collect();
    assert_eq!(
        names,
        [
            "search_history",
            "recall_turn",
            "working_context",
            "coverage"
        ]
    );
    for (name, description, schema) in list() {
        assert_eq!(schema["type"], "object", "{name}");
        assert!(
            description.len() > 100,
            "{name} tells a model when to call it"
        );
        for required in schema["required"].as_array().unwrap() {
            assert!(
                schema["properties"]
                    .get(required.as_str().unwrap())
                    .is_some(),
                "{name}"
            );
        }
    }
}

#[test]
fn a_problem_reads_as_its_status_title_and_detail() {
    let problem =
        json!({"title": "Not Found", "detail": "turn 9 is not in the log", "status": 404});
    assert_eq!(
        problem_text(404, &problem),
        "404 Not Found: turn 9 is not in the log"
    );
}
