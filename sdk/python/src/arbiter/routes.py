"""Every operation of the HTTP API the client calls, in one table.
Requests are built from it only, and a test checks it against
web/openapi.json, so the client cannot silently fall out of step."""

from __future__ import annotations

from typing import Dict, Tuple

ROUTES: Dict[str, Tuple[str, str]] = {
    "submit": ("POST", "/v1/entries"),
    "submit_batch": ("POST", "/v1/entries"),
    "submit_wait": ("POST", "/v1/entries"),
    "list_actions": ("GET", "/v1/actions"),
    "action_by_key": ("GET", "/v1/actions"),
    "action": ("GET", "/v1/actions/{id}"),
    "entries": ("GET", "/v1/actions/{id}/entries"),
    "decide": ("POST", "/v1/actions/{id}/decisions"),
    "decide_many": ("POST", "/v1/decisions"),
    "create_webhook": ("POST", "/v1/webhooks"),
    "webhooks": ("GET", "/v1/webhooks"),
    "webhook": ("GET", "/v1/webhooks/{id}"),
    "update_webhook": ("PATCH", "/v1/webhooks/{id}"),
    "delete_webhook": ("DELETE", "/v1/webhooks/{id}"),
    "rotate_webhook_secret": ("POST", "/v1/webhooks/{id}/rotate-secret"),
    "test_webhook": ("POST", "/v1/webhooks/{id}/test"),
    "webhook_deliveries": ("GET", "/v1/webhooks/{id}/deliveries"),
    "redeliver": ("POST", "/v1/deliveries/{id}/redeliver"),
    "create_policy": ("POST", "/v1/policies"),
    "policies": ("GET", "/v1/policies"),
    "policy": ("GET", "/v1/policies/{id}"),
    "update_policy": ("PATCH", "/v1/policies/{id}"),
    "delete_policy": ("DELETE", "/v1/policies/{id}"),
    "policy_versions": ("GET", "/v1/policies/{id}/versions"),
    "test_policy": ("POST", "/v1/policies/test"),
    "create_limit": ("POST", "/v1/limits"),
    "limits": ("GET", "/v1/limits"),
    "limit": ("GET", "/v1/limits/{id}"),
    "update_limit": ("PATCH", "/v1/limits/{id}"),
    "delete_limit": ("DELETE", "/v1/limits/{id}"),
    "limit_versions": ("GET", "/v1/limits/{id}/versions"),
    "limit_usage": ("GET", "/v1/limits/{id}/usage"),
    "health": ("GET", "/healthz"),
    "ready": ("GET", "/readyz"),
    "metrics": ("GET", "/metrics"),
    "openapi": ("GET", "/v1/openapi.json"),
}
