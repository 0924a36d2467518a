//! The coverage map: a conversation drawn as a strip of turns, served from the binary.
//!
//! The pages hold no data, so they need no key: their script reads everything from the REST API
//! with the bearer key the person types (kept in session storage). One HTML page serves both the
//! list (`/ui/`) and a conversation (`/ui/conversations/{c}`); the script tells them apart by
//! path. No framework, no build step, nothing fetched from elsewhere: the CSP forbids it.

use crate::http::extract::Conversation;
use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

const PAGE: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const MAP_SCRIPT: &str = include_str!("ui/map.js");
const STYLE: &str = include_str!("ui/app.css");
const ICON: &str = include_str!("ui/icon.svg");

/// Only this origin's script, style and API; no inline script or style, no framing.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

/// The UI's routes, outside `/v1`: no authentication, admission or rate limit (they serve only
/// the five embedded files).
pub fn routes<T: Clone + Send + Sync + 'static>() -> Router<T> {
    Router::new()
        // Relative, so a proxy that mounts the service under a prefix keeps it.
        .route("/ui", get(|| async { Redirect::permanent("ui/") }))
        .route("/ui/", get(list_page))
        .route("/ui/conversations/{conversation}", get(conversation_page))
        .route("/ui/app.js", get(|| script(SCRIPT)))
        .route("/ui/map.js", get(|| script(MAP_SCRIPT)))
        .route("/ui/app.css", get(style))
        // Else the browser asks for /favicon.ico, and its 404 is an error on every page's console.
        .route(
            "/ui/icon.svg",
            get(|| async { asset("image/svg+xml", ICON) }),
        )
}

async fn list_page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

/// A malformed id is the API's 400 problem, not a page that could never load.
async fn conversation_page(Conversation(_): Conversation) -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

async fn script(body: &'static str) -> Response {
    asset("text/javascript; charset=utf-8", body)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        // The files change with the binary: a browser must not keep last version's script.
        (header::CACHE_CONTROL, "no-cache"),
    ]
    .map(|(name, value): (HeaderName, &str)| (name, HeaderValue::from_static(value)));
    (headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn get(path: &str) -> Response {
        routes::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    async fn text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn every_ui_file_is_served_without_a_key_under_a_policy_of_self_only() {
        for (path, kind) in [
            ("/ui/", "text/html"),
            ("/ui/conversations/airline-7", "text/html"),
            ("/ui/app.js", "text/javascript"),
            ("/ui/map.js", "text/javascript"),
            ("/ui/app.css", "text/css"),
            ("/ui/icon.svg", "image/svg+xml"),
        ] {
            let response = get(path).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let headers = response.headers();
            assert!(
                headers[header::CONTENT_TYPE]
                    .to_str()
                    .unwrap()
                    .starts_with(kind),
                "{path}"
            );
            assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CSP, "{path}");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        }
        assert!(CSP.contains("script-src 'self';") && !CSP.contains("unsafe"));
    }

    #[tokio::test]
    async fn the_page_loads_only_files_of_its_own_origin_and_no_inline_script() {
        let page = text(get("/ui/").await).await;
        assert!(page.contains(r#"<script src="/ui/map.js" defer></script>"#));
        assert!(page.contains(r#"<script src="/ui/app.js" defer></script>"#));
        assert!(page.contains(r#"<link rel="stylesheet" href="/ui/app.css">"#));
        // Every script tag has a src of this origin; none has a body or an event attribute.
        assert_eq!(page.matches("<script").count(), 2);
        assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("//cdn"));
        assert!(!page.contains(" style=") && !page.contains(" onclick="));
    }

    #[tokio::test]
    async fn a_malformed_conversation_id_is_a_400_problem_not_a_page() {
        let response = get("/ui/conversations/no%20spaces").await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        assert!(text(response).await.contains("conversation"));
    }

    #[tokio::test]
    async fn ui_without_its_slash_redirects_relative_to_the_list() {
        let response = get("/ui").await;
        assert_eq!(response.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(response.headers()[header::LOCATION], "ui/");
    }
}
