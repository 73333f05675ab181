//! The agent's side of the agent API.

use reqwest::StatusCode;
use std::time::Duration;
use tessera_protocol::agent::{
    ApiErrorBody, DesiredState, EnrollRequest, EnrollResponse, HostReport, PolledReport, ReportAck,
    TelemetryAck, TelemetryBatch, AGENT_API_PREFIX, DESIRED_MAX_WAIT_S, REPORT_DIGEST_HEADER,
    REPORT_HEADER, TELEMETRY_ROUTE,
};
use thiserror::Error;

/// Why a call to the server failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Network trouble or a server error: retry later.
    #[error("server unreachable or failing: {0}")]
    Transient(String),
    /// The server refused the credential or token: retrying will not help.
    #[error("refused by the server ({code}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// Stable code.
        code: String,
        /// Message.
        message: String,
    },
}

/// Time allowed for an ordinary request (and for a long poll, on top of its wait).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Slack on top of a long poll's `wait_s` before the client gives up on it.
const LONG_POLL_SLACK: Duration = Duration::from_secs(10);

/// HTTP client for one server. Each clone shares one connection pool; build one
/// per host (`ServerClient::new`) to give each host its own connections.
#[derive(Debug, Clone)]
pub struct ServerClient {
    base: String,
    http: reqwest::Client,
}

impl ServerClient {
    /// A client for `server` (e.g. `http://127.0.0.1:3000`) that trusts
    /// what `trust` says for an `https://` server.
    pub fn new(server: &str, trust: &tessera_trust::Trust) -> Result<Self, ClientError> {
        let http = trust
            .build(reqwest::Client::builder().timeout(REQUEST_TIMEOUT))
            .map_err(|e| ClientError::Transient(e.to_string()))?;
        Ok(Self {
            base: format!("{}{AGENT_API_PREFIX}", server.trim_end_matches('/')),
            http,
        })
    }

    /// Trades a join token for a credential.
    pub async fn enroll(&self, req: &EnrollRequest) -> Result<EnrollResponse, ClientError> {
        let resp = self
            .http
            .post(format!("{}/enroll", self.base))
            .json(req)
            .send()
            .await;
        decode(resp).await
    }

    /// Sends a report.
    pub async fn report(
        &self,
        credential: &str,
        report: &HostReport,
    ) -> Result<ReportAck, ClientError> {
        let resp = self
            .http
            .post(format!("{}/report", self.base))
            .bearer_auth(credential)
            .json(report)
            .send()
            .await;
        decode(resp).await
    }

    /// Sends a telemetry batch, gzip-compressed (JSON of samples shrinks
    /// about tenfold).
    pub async fn telemetry(
        &self,
        credential: &str,
        batch: &TelemetryBatch,
    ) -> Result<TelemetryAck, ClientError> {
        use std::io::Write;
        let json = serde_json::to_vec(batch).map_err(|e| ClientError::Transient(e.to_string()))?;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&json)
            .map_err(|e| ClientError::Transient(e.to_string()))?;
        let body = gz
            .finish()
            .map_err(|e| ClientError::Transient(e.to_string()))?;
        let resp = self
            .http
            .post(format!("{}{TELEMETRY_ROUTE}", self.base))
            .bearer_auth(credential)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::CONTENT_ENCODING, "gzip")
            .body(body)
            .send()
            .await;
        decode(resp).await
    }

    /// Fetches the host's desired state. With `after` (the generation the agent
    /// has), the server holds the request until the generation differs or
    /// `wait_s` seconds (at most `DESIRED_MAX_WAIT_S`) pass, then answers the
    /// new state, or `None` when it is still generation `after` (asked with
    /// `Prefer: return=minimal`: an idle host's poll carries no body). With
    /// `report` (the digest of the last report, which the next one would
    /// repeat), the poll may stand for that report: see [`Polled`].
    pub async fn desired(
        &self,
        credential: &str,
        after: Option<i64>,
        wait_s: u64,
        report: Option<&str>,
    ) -> Result<Polled, ClientError> {
        let wait_s = wait_s.min(DESIRED_MAX_WAIT_S);
        let mut url = format!("{}/desired?wait_s={wait_s}", self.base);
        if let Some(after) = after {
            url.push_str(&format!("&after={after}"));
        }
        let mut request = self
            .http
            .get(url)
            .bearer_auth(credential)
            .header("prefer", "return=minimal")
            // The server may hold the request for `wait_s`: the client's own
            // timeout must not cut a healthy long poll short.
            .timeout(Duration::from_secs(wait_s) + LONG_POLL_SLACK);
        if let Some(digest) = report {
            request = request.header(REPORT_DIGEST_HEADER, digest);
        }
        let resp = request.send().await;
        let report_noted = resp.as_ref().is_ok_and(|r| {
            r.status().is_success()
                && r.headers()
                    .get(REPORT_HEADER)
                    .and_then(|v| PolledReport::parse(v.as_bytes()))
                    == Some(PolledReport::Noted)
        });
        if let Ok(r) = &resp {
            if r.status() == StatusCode::NO_CONTENT && after.is_some() {
                return Ok(Polled {
                    state: None,
                    report_noted,
                });
            }
        }
        decode(resp).await.map(|state| Polled {
            state: Some(state),
            report_noted,
        })
    }
}

/// A desired-state poll's answer.
#[derive(Debug)]
pub struct Polled {
    /// The desired state; `None`: still the generation the agent has.
    pub state: Option<DesiredState>,
    /// The poll stood for the report it named: if the agent's next report
    /// is that one, it need not send it.
    pub report_noted: bool,
}

/// Why the server could not be asked, in words: a refused certificate says
/// which setting fixes it (reqwest's own text stops at "error sending
/// request").
fn unreachable(e: &reqwest::Error) -> String {
    match tessera_trust::certificate_problem(e) {
        Some(problem) => format!(
            "the server's TLS certificate is not trusted ({problem}): give the agent the CA that issued it with --server-ca (TESSERA_SERVER_CA), or pin the certificate with --server-cert-sha256"
        ),
        None => e.to_string(),
    }
}

async fn decode<T: serde::de::DeserializeOwned>(
    resp: reqwest::Result<reqwest::Response>,
) -> Result<T, ClientError> {
    let resp = resp.map_err(|e| ClientError::Transient(unreachable(&e)))?;
    let status = resp.status();
    if status.is_success() {
        return resp
            .json::<T>()
            .await
            .map_err(|e| ClientError::Transient(e.to_string()));
    }
    let body: Option<ApiErrorBody> = resp.json().await.ok();
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        return Err(ClientError::Transient(format!(
            "{status}: {}",
            body.map(|b| b.message).unwrap_or_default()
        )));
    }
    let (code, message) = body
        .map(|b| (b.code, b.message))
        .unwrap_or_else(|| ("unknown".into(), status.to_string()));
    Err(ClientError::Refused {
        status: status.as_u16(),
        code,
        message,
    })
}
