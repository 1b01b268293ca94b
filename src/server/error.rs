//! Errors as the API returns them: a status code and `{"success": false, "error": …}`,
//! the shape seed 004's clients read. Every refusal says what was wrong.

use axum::{
    Json,
    body::Bytes,
    extract::{FromRequest, Request, rejection::BytesRejection},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;

/// What a body that did not arrive in time says (`conn` cuts it, this reports it).
pub const BODY_LATE: &str = "the request body did not arrive in time";

/// A refusal: status, message, and for 429 how long to wait.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What was wrong, for people.
    pub message: String,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A refusal with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the request itself is wrong.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: no such thing.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 503: the server cannot take it now; nothing was accepted.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// 500 for a store failure, logged here with its cause.
    pub fn internal(e: impl std::fmt::Display) -> ApiError {
        tracing::error!("request failed: {e:#}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error (see the server log)",
        )
    }
}

/// The body of every refusal.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody {
    /// Always false.
    #[schemars(schema_with = "always_false")]
    pub success: bool,
    /// What was wrong, for people.
    pub error: String,
    /// The HTTP status again.
    pub status: u16,
}

fn always_false(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "const": false })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            success: false,
            error: self.message,
            status: self.status.as_u16(),
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A JSON body whose errors are [`ApiError`]s: 400 saying where the JSON is wrong,
/// 413 when it is over the size limit, 415 when it is not labelled JSON.
pub struct JsonBody<T>(pub T);

/// Refuses a body not labelled `application/json` (or `…+json`) with 415. The label
/// matters for more than tidiness: a web page may send `text/plain` or no type at all
/// without asking the browser's CORS preflight first, but never JSON.
pub fn require_json_type(headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| {
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        });
    if json_type {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be JSON, sent with Content-Type: application/json",
        ))
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_json_type(req.headers())?;
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e: BytesRejection| match e.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the body is too large (see max_body_bytes in [http])",
                ),
                _ if e.body_text().contains(BODY_LATE) => ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!("{} (see body_timeout in [http])", BODY_LATE),
                ),
                status => ApiError::new(status, e.body_text()),
            })?;
        decode(&bytes).map(JsonBody)
    }
}

/// A query string whose errors are [`ApiError`]s (400 in the JSON shape, saying
/// which parameter is wrong), not axum's plain text.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::try_from_uri(&parts.uri)
            .map(|axum::extract::Query(q)| QueryParams(q))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

/// Parses a JSON body, saying where and what is wrong.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the body is empty; a JSON object was expected",
        ));
    }
    // Every body of this API is an object; serde would read a struct from an array
    // too (its fields in order), which no client means.
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(b'[') => {
            return Err(ApiError::bad_request(
                "the body must be a JSON object, not an array",
            ));
        }
        _ => {}
    }
    serde_json::from_slice(bytes).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "a field has the wrong type or value",
            serde_json::error::Category::Eof => "the JSON ends too soon",
            _ => "malformed JSON",
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}
