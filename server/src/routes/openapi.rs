//! The OpenAPI 3.1 document of the REST API, written out by hand: small,
//! and checked against the routes by a test.

use serde_json::{json, Value};

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

fn allocation_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Allocation"}}}
    })
}

fn id_param() -> Value {
    json!({"name": "id", "in": "path", "required": true, "schema": {"type": "integer", "format": "int64"}})
}

/// The document.
pub fn document() -> Value {
    let errors = json!({
        "400": error_response("Invalid input; `message` names the field and what to change"),
        "401": error_response("No session and no valid API token"),
        "403": error_response("Not allowed, or beyond the tenant's quota (`quota_exceeded`)"),
        "404": error_response("No such allocation or tenant visible to the caller"),
        "409": error_response("The allocation is not in a state that allows this"),
    });
    let with = |ok: (&str, Value)| {
        let mut r = errors.clone();
        if let Some(m) = r.as_object_mut() {
            m.insert(ok.0.to_owned(), ok.1);
        }
        r
    };
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Tessera API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Self-service GPU slices. Authenticate with a tenant API token (`Authorization: Bearer tsk_...`, created on the tenant page) or the browser session."
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"apiToken": []}, {"session": []}],
        "paths": paths(&with),
        "components": {
            "securitySchemes": {
                "apiToken": {"type": "http", "scheme": "bearer", "description": "Tenant API token `tsk_...`"},
                "session": {"type": "apiKey", "in": "cookie", "name": "tessera_session"}
            },
            "schemas": {
                "Error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string", "examples": ["invalid_request", "quota_exceeded", "not_found"]}, "message": {"type": "string"}}},
                "Shape": {
                    "oneOf": [
                        {"type": "object", "required": ["kind", "profile"], "properties": {"kind": {"const": "mig"}, "profile": {"type": "string", "examples": ["1g.10gb"]}}},
                        {"type": "object", "required": ["kind", "compute_percent", "memory_mib"], "properties": {"kind": {"const": "mps"}, "compute_percent": {"type": "integer", "minimum": 1, "maximum": 100}, "memory_mib": {"type": "integer", "minimum": 1}}},
                        {"type": "object", "required": ["kind"], "properties": {"kind": {"const": "time_slice"}}},
                        {"type": "object", "required": ["kind", "count", "nvlink_local"], "properties": {"kind": {"const": "whole"}, "count": {"type": "integer", "minimum": 1}, "nvlink_local": {"type": "boolean"}}}
                    ]
                },
                "NewAllocation": {
                    "type": "object",
                    "required": ["pool", "shape", "lease_hours"],
                    "additionalProperties": false,
                    "properties": {
                        "tenant": {"type": "string"},
                        "pool": {"type": "string", "examples": ["h100-mig"]},
                        "shape": {"$ref": "#/components/schemas/Shape"},
                        "lease_hours": {"type": "integer", "minimum": 1},
                        "purpose": {"type": "string", "maxLength": 500}
                    }
                },
                "Allocation": {
                    "type": "object",
                    "required": ["id", "tenant", "pool", "state", "shape", "shape_label", "created_at"],
                    "properties": {
                        "id": {"type": "integer", "format": "int64"},
                        "tenant": {"type": "string"},
                        "pool": {"type": "string"},
                        "state": {"enum": ["requested", "queued", "placed", "provisioning", "active", "releasing", "released", "failed", "expired"]},
                        "reason": {"type": ["string", "null"]},
                        "shape": {"$ref": "#/components/schemas/Shape"},
                        "shape_label": {"type": "string"},
                        "lease_hours": {"type": "integer"},
                        "lease_ends_at": {"type": ["string", "null"], "format": "date-time"},
                        "host": {"type": ["string", "null"]},
                        "gpus": {"type": "array", "items": {"type": "object", "properties": {"index": {"type": "integer"}, "uuid": {"type": "string"}, "model": {"type": "string"}}}},
                        "queue_position": {"type": ["integer", "null"]},
                        "connection": {"type": ["object", "null"], "properties": {"host": {"type": "string"}, "env": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}]}}, "k8s_resource": {"type": "string"}, "k8s_count": {"type": "integer"}, "pod_snippet": {"type": "string"}}},
                        "created_at": {"type": "string", "format": "date-time"}
                    }
                }
            }
        }
    })
}

fn paths(with: &dyn Fn((&str, Value)) -> Value) -> Value {
    json!({
        "/allocations": {
            "get": {
                "summary": "List the tenant's allocations (open first, then the newest that ended)",
                "parameters": [{"name": "tenant", "in": "query", "required": false, "schema": {"type": "string"}, "description": "Tenant slug; optional with a token or a single tenant"}],
                "responses": with(("200", json!({"description": "Allocations", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Allocation"}}}}})))
            },
            "post": {
                "summary": "Request a slice: placed at once within quota and capacity, otherwise queued",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewAllocation"}}}},
                "responses": with(("201", allocation_response("Created (state `placed` or `queued`)")))
            }
        },
        "/allocations/{id}": {
            "get": {"summary": "One allocation", "parameters": [id_param()], "responses": with(("200", allocation_response("The allocation")))}
        },
        "/allocations/{id}/release": {
            "post": {"summary": "Release: the agent tears the slice down; capacity and quota return", "parameters": [id_param()], "responses": with(("200", allocation_response("Releasing or released")))}
        },
        "/allocations/{id}/extend": {
            "post": {
                "summary": "Extend an active lease within the pool's limit",
                "parameters": [id_param()],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["hours"], "properties": {"hours": {"type": "integer", "minimum": 1}}, "additionalProperties": false}}}},
                "responses": with(("200", allocation_response("The allocation with its new end")))
            }
        }
    })
}
