//! The response bodies of tenants' allocation lists, encoded once per kept
//! list.
//!
//! `GET /api/v1/allocations` is what scripts poll. The service keeps each
//! tenant's list between the writes that change it and hands out the same
//! shared list meanwhile (`Service::kept_allocations`); here its JSON, and
//! its brotli and gzip forms when a client asks for them, are made the first
//! time and reused until the service hands out another list. The response
//! then carries its `Content-Encoding`, so the compression layer leaves it
//! alone (compressing 9 KB of JSON per call cost more than everything else).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tessera_core::ids::TenantId;

use axum::body::Bytes;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use tessera_protocol::views::AllocationView;

/// At most this many tenants' bodies are kept; beyond it, all are dropped.
const MAX_KEPT: usize = 10_000;

/// How a body is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// Brotli.
    Br,
    /// Gzip.
    Gzip,
    /// As it is.
    Identity,
}

impl Coding {
    /// What the client prefers of what is offered, by its `Accept-Encoding`:
    /// brotli, then gzip, then none. A coding listed with `q=0` is refused.
    pub fn preferred(headers: &HeaderMap) -> Self {
        let accepted = |name: &str| {
            headers
                .get_all(header::ACCEPT_ENCODING)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .any(|item| {
                    let mut parts = item.split(';').map(str::trim);
                    let coding = parts.next().unwrap_or_default();
                    let refused = parts.any(|p| {
                        p.strip_prefix("q=")
                            .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0))
                    });
                    coding.eq_ignore_ascii_case(name) && !refused
                })
        };
        if accepted("br") {
            Self::Br
        } else if accepted("gzip") {
            Self::Gzip
        } else {
            Self::Identity
        }
    }
}

#[derive(Debug)]
struct Bodies {
    list: Arc<[AllocationView]>,
    json: Bytes,
    br: Option<Bytes>,
    gzip: Option<Bytes>,
}

/// The encoded lists, by tenant id.
#[derive(Debug, Default)]
pub struct ListBodies {
    kept: Mutex<HashMap<TenantId, Bodies>>,
}

fn encode(json: &[u8], coding: Coding) -> std::io::Result<Bytes> {
    match coding {
        Coding::Identity => Ok(Bytes::copy_from_slice(json)),
        Coding::Br => {
            let mut out = Vec::with_capacity(json.len() / 4);
            {
                // Quality 5 with a 4 MiB window: a fraction of a millisecond
                // for a list, about 1/9 of its JSON.
                let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                w.write_all(json)?;
            }
            Ok(out.into())
        }
        Coding::Gzip => {
            let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            w.write_all(json)?;
            Ok(w.finish()?.into())
        }
    }
}

impl ListBodies {
    /// A poisoned lock only means a thread panicked mid-update of a cache;
    /// the map is still a valid map.
    fn lock(&self) -> MutexGuard<'_, HashMap<TenantId, Bodies>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `list` (tenant `tenant`'s) in `coding`: the kept body when `list` is
    /// the one it was made from, else made now (outside the lock) and kept.
    pub fn body(
        &self,
        tenant: TenantId,
        list: &Arc<[AllocationView]>,
        coding: Coding,
    ) -> Result<Bytes, std::io::Error> {
        let kept_json = {
            let kept = self.lock();
            match kept.get(&tenant).filter(|b| Arc::ptr_eq(&b.list, list)) {
                Some(b) => {
                    let ready = match coding {
                        Coding::Identity => Some(&b.json),
                        Coding::Br => b.br.as_ref(),
                        Coding::Gzip => b.gzip.as_ref(),
                    };
                    if let Some(body) = ready {
                        return Ok(body.clone());
                    }
                    Some(b.json.clone())
                }
                None => None,
            }
        };
        let json = match kept_json {
            Some(json) => json,
            None => Bytes::from(serde_json::to_vec(&**list)?),
        };
        let body = encode(&json, coding)?;
        let mut kept = self.lock();
        if kept.len() >= MAX_KEPT && !kept.contains_key(&tenant) {
            kept.clear();
        }
        let entry = kept.entry(tenant).or_insert_with(|| Bodies {
            list: Arc::clone(list),
            json: json.clone(),
            br: None,
            gzip: None,
        });
        if !Arc::ptr_eq(&entry.list, list) {
            *entry = Bodies {
                list: Arc::clone(list),
                json,
                br: None,
                gzip: None,
            };
        }
        match coding {
            Coding::Identity => {}
            Coding::Br => entry.br = Some(body.clone()),
            Coding::Gzip => entry.gzip = Some(body.clone()),
        }
        Ok(body)
    }
}

/// A JSON response of `body` sent in `coding`.
pub fn json_response(body: Bytes, coding: Coding) -> Response {
    let mut res = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::VARY, HeaderValue::from_static("accept-encoding")),
        ],
        body,
    )
        .into_response();
    let encoding = match coding {
        Coding::Br => Some("br"),
        Coding::Gzip => Some("gzip"),
        Coding::Identity => None,
    };
    if let Some(e) = encoding {
        res.headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static(e));
    }
    res
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Read as _;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(accept).unwrap(),
        );
        h
    }

    #[test]
    fn the_client_chooses_the_coding() {
        assert_eq!(Coding::preferred(&headers("gzip, deflate, br")), Coding::Br);
        assert_eq!(Coding::preferred(&headers("gzip")), Coding::Gzip);
        assert_eq!(
            Coding::preferred(&headers("br;q=0, GZIP;q=0.5")),
            Coding::Gzip
        );
        assert_eq!(Coding::preferred(&headers("identity")), Coding::Identity);
        assert_eq!(Coding::preferred(&HeaderMap::new()), Coding::Identity);
    }

    #[test]
    fn a_list_is_encoded_once_and_decodes_to_its_json() {
        let bodies = ListBodies::default();
        let tenant = TenantId::new(1);
        let list: Arc<[AllocationView]> = Vec::new().into();
        let json = bodies.body(tenant, &list, Coding::Identity).unwrap();
        assert_eq!(&json[..], b"[]");
        let br = bodies.body(tenant, &list, Coding::Br).unwrap();
        let mut out = Vec::new();
        brotli::Decompressor::new(&br[..], 4096)
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"[]");
        let gz = bodies.body(tenant, &list, Coding::Gzip).unwrap();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"[]");
        // The same list: the very bytes kept (same allocation).
        let again = bodies.body(tenant, &list, Coding::Br).unwrap();
        assert_eq!(again.as_ptr(), br.as_ptr());
        // Another list (the service read it again): made anew.
        let other: Arc<[AllocationView]> = Vec::new().into();
        let fresh = bodies.body(tenant, &other, Coding::Br).unwrap();
        assert_ne!(fresh.as_ptr(), br.as_ptr());
    }
}
