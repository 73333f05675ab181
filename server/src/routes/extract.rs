//! Request bodies of the JSON APIs. (Who is calling: [`crate::auth::extract`].)

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use tessera_service::ServiceError;

/// A JSON body whose errors name the offending field (`gpus[0].memory_mib: ...`).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !is_json {
            return Err(ApiError::bad_body(
                "body",
                "send JSON with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError(ServiceError::TooLarge(
                    "the body is over the server's limit ([limits] max_body_kib)".to_owned(),
                ))
            } else {
                ApiError::bad_body("body", e.body_text())
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Path parameters, or a 400 `{code, message}` that says what does not
/// parse (axum's own answer is plain text).
#[derive(Debug)]
pub struct PathParams<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(p) = Path::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_body("path", e.body_text()))?;
        Ok(Self(p))
    }
}

/// A query string, or a 400 that says what does not parse.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(q) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_body("query", e.body_text()))?;
        Ok(Self(q))
    }
}

/// Parses JSON, naming the path of the first bad field.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." || path.is_empty() {
            "body".to_owned()
        } else {
            path
        };
        // serde's message already names a missing or unknown field; strip the position noise.
        let message = inner.to_string();
        let message = message
            .split(" at line ")
            .next()
            .unwrap_or(&message)
            .to_owned();
        ApiError(ServiceError::invalid(field, message))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tessera_protocol::agent::HostReport;

    #[test]
    fn errors_name_the_field() {
        let err = parse_json::<HostReport>(br#"{"hostname":"a","agent_version":"1","cpu_milli":1,"memory_mib":"lots","backend":"x","gpus":[]}"#)
            .unwrap_err();
        assert!(err.0.to_string().starts_with("memory_mib:"), "{}", err.0);
        let err = parse_json::<HostReport>(
            br#"{"hostname":"a","agent_version":"1","cpu_milli":1,"memory_mib":1,"backend":"x","gpus":[{"index":0,"uuid":"GPU-1","name":"L4","memory_mib":-1,"mig_capable":false,"mig_enabled":false}]}"#,
        )
        .unwrap_err();
        assert!(
            err.0.to_string().starts_with("gpus[0].memory_mib:"),
            "{}",
            err.0
        );
        let err = parse_json::<HostReport>(br#"{"hostname":"a"}"#).unwrap_err();
        assert!(
            err.0.to_string().contains("missing field `agent_version`"),
            "{}",
            err.0
        );
    }
}
