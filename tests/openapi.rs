//! The committed `openapi.yaml` is exactly what the code generates and what the service serves.

#[test]
fn the_committed_openapi_yaml_matches_the_code() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml at the root");
    let generated = gatekeeper::http::openapi::yaml();
    assert!(
        committed == generated,
        "openapi.yaml is stale: regenerate it with `cargo run -- openapi > openapi.yaml`"
    );
}

#[test]
fn the_json_document_describes_the_api() {
    let yaml: serde_json::Value = serde_json::to_value(
        serde_json::from_str::<serde_json::Value>(&gatekeeper::http::openapi::json()).unwrap(),
    )
    .unwrap();
    assert_eq!(yaml["openapi"], "3.1.0");
    assert!(
        yaml["paths"]["/v1/conversations/{conversation}/reconstruct/{turn}"]["get"].is_object()
    );
    assert_eq!(
        yaml["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}

#[tokio::test]
async fn the_running_service_serves_the_committed_document() {
    let app = gatekeeper_test_support::spawn_app().await;
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml"))
        .expect("openapi.yaml at the root");
    let served = app.get("/openapi.yaml").await;
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "application/yaml");
    assert!(
        served.text().await.unwrap() == committed,
        "GET /openapi.yaml is not the committed openapi.yaml"
    );
    let served = app.get("/openapi.json").await;
    assert_eq!(served.headers()["content-type"], "application/json");
    assert!(served.text().await.unwrap() == gatekeeper::http::openapi::json());
}
