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
        "paths": merge(paths(&with), quota_paths(&with)),
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
                "QuotaAmount": {"type": "object", "required": ["gpus", "memory_gib", "max_slices"], "additionalProperties": false, "properties": {"gpus": {"type": "number", "minimum": 0, "examples": [1.5]}, "memory_gib": {"type": "number", "minimum": 0}, "max_slices": {"type": "integer", "minimum": 0}}},
                "NewQuotaRequest": {
                    "type": "object",
                    "required": ["tenant", "pool", "amount", "justification"],
                    "additionalProperties": false,
                    "properties": {
                        "tenant": {"type": "string"},
                        "pool": {"type": "string"},
                        "amount": {"$ref": "#/components/schemas/QuotaAmount", "description": "The increase asked for"},
                        "ends_at": {"type": ["string", "null"], "format": "date-time", "description": "Temporary until then; permanent when omitted"},
                        "justification": {"type": "string", "maxLength": 1000},
                        "slice": {"oneOf": [{"$ref": "#/components/schemas/NewAllocation"}, {"type": "null"}], "description": "A refused slice request, requested again automatically on approval"}
                    }
                },
                "QuotaDecision": {
                    "type": "object",
                    "required": ["decision"],
                    "additionalProperties": false,
                    "properties": {
                        "decision": {"enum": ["approve", "reject"]},
                        "amount": {"$ref": "#/components/schemas/QuotaAmount", "description": "Approve a different amount"},
                        "ends_at": {"type": "string", "format": "date-time", "description": "Approve until then"},
                        "reason": {"type": "string", "description": "Required when rejecting"}
                    }
                },
                "QuotaRequest": {
                    "type": "object",
                    "required": ["id", "tenant", "pool", "amount", "state", "justification", "requested_by", "created_at"],
                    "properties": {
                        "id": {"type": "integer", "format": "int64"},
                        "tenant": {"type": "string"},
                        "pool": {"type": "string"},
                        "amount": {"type": "object", "description": "compute (milli-GPU), memory (MiB), max_slices"},
                        "state": {"type": "object", "properties": {"state": {"enum": ["proposed", "pending", "approved", "rejected", "withdrawn"]}, "reason": {"type": "string"}}},
                        "justification": {"type": "string"},
                        "requested_by": {"type": "string"},
                        "decided_by": {"type": ["string", "null"]},
                        "allocation_id": {"type": ["integer", "null"], "description": "The slice requested on approval"},
                        "created_at": {"type": "string", "format": "date-time"}
                    }
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

fn merge(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

fn json_body(schema: &str) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn request_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequest"}}}
    })
}

/// Quota requests, quotas, notifications and webhooks: for a signed-in
/// person (the session), not a tenant API token.
fn quota_paths(with: &dyn Fn((&str, Value)) -> Value) -> Value {
    let slug =
        json!({"name": "slug", "in": "path", "required": true, "schema": {"type": "string"}});
    let ok = |d: &str| json!({"description": d});
    json!({
        "/tenants/{slug}/quotas": {"get": {"summary": "Quota (permanent and temporary), use and headroom per pool, and the tenant's quota requests", "parameters": [slug], "responses": with(("200", ok("The tenant's quota page")))}},
        "/quota-requests": {"post": {"summary": "Ask for more quota: tenant admins submit (pending), members propose (proposed)", "requestBody": json_body("NewQuotaRequest"), "responses": with(("201", request_response("The request")))}},
        "/quota-requests/{id}": {"get": {"summary": "One quota request", "parameters": [id_param()], "responses": with(("200", request_response("The request")))}},
        "/quota-requests/{id}/submit": {"post": {"summary": "A tenant admin submits a member's proposal", "parameters": [id_param()], "responses": with(("200", request_response("Now pending")))}},
        "/quota-requests/{id}/withdraw": {"post": {"summary": "The requester or a tenant admin withdraws it before a decision", "parameters": [id_param()], "responses": with(("200", request_response("Withdrawn")))}},
        "/quota-requests/{id}/decide": {"post": {"summary": "A platform admin approves (optionally a different amount or end) or rejects with a reason; 409 when already decided", "parameters": [id_param()], "requestBody": json_body("QuotaDecision"), "responses": with(("200", request_response("Decided")))}},
        "/approvals": {"get": {"summary": "Pending quota requests, oldest first, with the tenant's quota, use and history and the pool's capacity (platform admins)", "responses": with(("200", ok("The approval queue")))}},
        "/admin/quotas": {
            "get": {"summary": "Every tenant's quota and use per pool (platform admins)", "responses": with(("200", ok("Quotas")))},
            "put": {"summary": "Set a tenant's permanent quota in a pool (platform admins)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["tenant", "pool", "amount"], "properties": {"tenant": {"type": "string"}, "pool": {"type": "string"}, "amount": {"$ref": "#/components/schemas/QuotaAmount"}}}}}}, "responses": with(("200", ok("The quota now")))}
        },
        "/admin/quota-grants": {"post": {"summary": "Grant temporary extra quota until `ends_at` (platform admins)", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["tenant", "pool", "amount", "ends_at"], "properties": {"tenant": {"type": "string"}, "pool": {"type": "string"}, "amount": {"$ref": "#/components/schemas/QuotaAmount"}, "ends_at": {"type": "string", "format": "date-time"}, "reason": {"type": "string"}}}}}}, "responses": with(("201", ok("The quota now")))}},
        "/admin/quota-grants/{id}": {"delete": {"summary": "End a temporary grant now (platform admins)", "parameters": [id_param()], "responses": with(("204", ok("Ended")))}},
        "/notifications": {"get": {"summary": "The caller's notifications, newest first, and the unread count", "responses": with(("200", ok("Notifications")))}},
        "/notifications/read": {"post": {"summary": "Mark one (`{\"id\": 5}`) or all (`{}`) notifications read", "responses": with(("200", ok("Notifications")))}},
        "/tenants/{slug}/webhook": {
            "get": {"summary": "The tenant's webhook and its latest deliveries (tenant admins)", "parameters": [slug.clone()], "responses": with(("200", ok("The webhook")))},
            "put": {"summary": "Set the webhook URL; answers the HMAC signing secret once (tenant admins)", "parameters": [slug.clone()], "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["url"], "properties": {"url": {"type": "string", "format": "uri"}}}}}}, "responses": with(("200", ok("The webhook and its secret")))},
            "delete": {"summary": "Remove the webhook (tenant admins)", "parameters": [slug.clone()], "responses": with(("204", ok("Removed")))}
        },
        "/tenants/{slug}/webhook/test": {"post": {"summary": "Queue a `webhook.test` event", "parameters": [slug], "responses": with(("202", ok("Queued")))}}
    })
}
