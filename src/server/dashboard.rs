//! The web dashboard: its files (`web/`: plain HTML, CSS and ES modules, no build
//! step) embedded in the binary and served at `/`. The files hold no data: the page
//! reads everything over the API with the login cookie, so without the token it shows
//! only its login state.

use axum::{
    extract::Path,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

/// The files of `web/`.
#[derive(rust_embed::Embed)]
#[folder = "web/"]
struct Files;

/// What the browser may do with a dashboard page: its own scripts, styles and
/// connections only (a request's text can never run as script), no framing.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; media-src 'self'; worker-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the dashboard.
pub async fn index() -> Response {
    file("index.html")
}

/// `GET /favicon.ico`: the icon browsers ask for on their own (an SVG).
pub async fn favicon() -> Response {
    file("favicon.svg")
}

/// `GET /sw.js`: the service worker, served from the root so that its scope is the
/// whole dashboard.
pub async fn service_worker() -> Response {
    file("sw.js")
}

/// `GET /manifest.webmanifest`: what makes the dashboard an installable app.
pub async fn manifest() -> Response {
    file("manifest.webmanifest")
}

/// `GET /ui/{name}`: its scripts and styles.
pub async fn asset(Path(name): Path<String>) -> Response {
    file(&name)
}

fn file(name: &str) -> Response {
    let Some(f) = Files::get(name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let kind = match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("webmanifest") => "application/manifest+json",
        _ => "application/octet-stream",
    };
    let mut r = f.data.into_owned().into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}
