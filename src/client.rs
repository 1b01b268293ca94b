//! The HTTP client of the native API, for `hitl ask --server` and for `hitl answer` /
//! `hitl cancel` of requests that live on a server rather than in the spool.
//!
//! Waiting is a long poll (`/wait`, held open by the server until the request ends),
//! never a busy loop. Errors say which server and what it answered.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{
    config::Paths,
    protocol::{Answer, Reply, Request},
};

/// Longest single long poll; the loop asks again until the request ends.
const POLL_SECS: u64 = 60;

/// A client of one server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

/// Why the server refused an answer, with its message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The HTTP status.
    pub status: u16,
    /// The server's message.
    pub message: String,
}

impl Client {
    /// A client of `base` (like `http://127.0.0.1:4000`), with the token from
    /// `HITL_TOKEN` or the user's `token` file when there is one.
    pub fn new(base: &str) -> Result<Client> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!("{base:?} is not an http:// URL");
        }
        let token = std::env::var("HITL_TOKEN")
            .ok()
            .filter(|t| !t.trim().is_empty())
            .or_else(|| std::fs::read_to_string(Paths::from_env().config_dir.join("token")).ok())
            .map(|t| t.trim().to_string());
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .context("starting the HTTP client")?;
        Ok(Client { base, token, http })
    }

    fn with_token(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    async fn send(&self, r: reqwest::RequestBuilder, what: &str) -> Result<(StatusCode, Value)> {
        let response = self
            .with_token(r)
            .send()
            .await
            .with_context(|| format!("{what}: cannot reach {}", self.base))?;
        let status = response.status();
        let body = response.json::<Value>().await.with_context(|| {
            format!(
                "{what}: {} answered {status} with a body that is not JSON",
                self.base
            )
        })?;
        Ok((status, body))
    }

    fn refused(status: StatusCode, body: &Value) -> Refused {
        Refused {
            status: status.as_u16(),
            message: body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .to_string(),
        }
    }

    /// Creates a request; returns its id. `idempotency_key` makes a retry safe.
    pub async fn create(&self, request: &Request, idempotency_key: &str) -> Result<String> {
        let body = json!({
            "content": request.content,
            "type": request.kind.as_str(),
            "options": request.options,
            "timeout": request.timeout.unwrap_or(0),
            "priority": request.priority,
            "context": request.context,
            "agent_id": request.agent_id,
            "agent_name": request.agent_name,
            "working_dir": request.working_dir,
            "idempotency_key": idempotency_key,
        });
        let url = format!("{}/api/v1/requests", self.base);
        let (status, v) = self.send(self.http.post(url).json(&body), "asking").await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("{} refused the question ({status})", self.base));
        }
        v.get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| anyhow!("{} answered without a request id", self.base))
    }

    /// Waits until request `id` ends and returns its answer (a timeout's too).
    /// `None`: it ended without one (withdrawn, abandoned).
    pub async fn wait(&self, id: &str) -> Result<Option<Answer>> {
        loop {
            let url = format!(
                "{}/api/v1/requests/{id}/wait?timeout={POLL_SECS}",
                self.base
            );
            let r = self
                .http
                .get(url)
                .timeout(Duration::from_secs(POLL_SECS + 30));
            let (status, v) = self.send(r, "waiting for the answer").await?;
            match status {
                StatusCode::ACCEPTED => continue,
                s if s.is_success() => {
                    return match v.get("answer") {
                        Some(a) => Ok(Some(
                            serde_json::from_value(a.clone()).context("reading the answer")?,
                        )),
                        None => Ok(None),
                    };
                }
                s => {
                    return Err(anyhow!(Client::refused(s, &v)))
                        .with_context(|| format!("waiting for request {id} on {}", self.base));
                }
            }
        }
    }

    /// The request `id` and its status, as the server has it.
    pub async fn get(&self, id: &str) -> Result<Option<(Request, String)>> {
        let url = format!("{}/api/v1/requests/{id}", self.base);
        let (status, v) = self
            .send(self.http.get(url), "looking the request up")
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)))
                .with_context(|| format!("looking request {id} up on {}", self.base));
        }
        let request =
            serde_json::from_value(v["request"].clone()).context("reading the request")?;
        let status = v["status"].as_str().unwrap_or("pending").to_string();
        Ok(Some((request, status)))
    }

    /// Answers request `id` with `reply`, as `by`. A refusal (already answered, timed
    /// out, wrong field) comes back as a [`Refused`] error.
    pub async fn respond(&self, request: &Request, reply: &Reply, by: &str) -> Result<Answer> {
        let mut body = match reply {
            Reply::Text(t) if request.kind == crate::protocol::Kind::Select => {
                json!({ "choice": t })
            }
            Reply::Text(t) => json!({ "response": t }),
            Reply::Choices(c) => json!({ "choices": c }),
            Reply::Approval { approved, comment } => {
                json!({ "approved": approved, "permission": approved, "comment": comment })
            }
            Reply::Cancel { reason } => json!({ "cancelled": true, "comment": reason }),
        };
        body["respondedBy"] = json!(by);
        let url = format!("{}/api/v1/requests/{}/respond", self.base, request.id);
        let (status, v) = self
            .send(self.http.post(url).json(&body), "answering")
            .await?;
        if !status.is_success() {
            return Err(anyhow!(Client::refused(status, &v)));
        }
        serde_json::from_value(v["answer"].clone()).context("reading the answer the server wrote")
    }
}
