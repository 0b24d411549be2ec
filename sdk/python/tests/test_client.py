"""The client covers every route of web/openapi.json, and each round-trips
against the real server."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import arbiter
from arbiter.routes import ROUTES
from conftest import wait_status

OPENAPI = json.loads((Path(__file__).resolve().parents[3] / "web" / "openapi.json").read_text(encoding="utf-8"))


def test_routes_match_openapi() -> None:
    documented = {(m.upper(), p) for p, ops in OPENAPI["paths"].items() for m in ops
                  if m in ("get", "post", "put", "patch", "delete")}
    covered = {(m, p) for m, p in ROUTES.values()}
    assert covered == documented
    for name in ROUTES:
        assert callable(getattr(arbiter.Client, name)), name
        assert callable(getattr(arbiter.AsyncClient, name)), name


def test_entries_round_trip(agent: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("rt", uniq)
    res = agent.submit(arbiter.Entry(key=k, type="intent", tool="t.rt", effect="idempotent", params={"n": 1},
                                     timeout=60, reference=f"ref-{uniq}", key_ttl=86400))
    assert (res.outcome, res.attempt, res.type, res.key) == ("proceed", 1, "intent", k)
    assert res.action is not None and res.lease_until is not None
    assert res.action.reconciliation is not None and res.action.reconciliation.key_expires_at is not None
    results = agent.submit_batch([
        arbiter.Entry(key=k, type="heartbeat", attempt=1),
        arbiter.Entry(key=k, type="note", message="half way"),
        arbiter.Entry(key=k, type="succeeded", attempt=1, result={"ok": True}),
        arbiter.Entry(key=k, type="succeeded", attempt=1, result={"ok": True}),
        arbiter.Entry(key=k, type="heartbeat", attempt=7),
    ])
    assert [r.outcome for r in results] == ["recorded", "recorded", "recorded", "duplicate", "rejected"]
    assert results[4].error is not None and results[4].error.code in ("stale_attempt", "invalid_transition")
    with pytest.raises(arbiter.APIError) as e:
        agent.submit(arbiter.Entry(key="", type="intent", tool="t"))
    assert (e.value.code, e.value.status) == ("invalid", 400)


def test_actions_and_decisions_round_trip(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    k = arbiter.key("dec", uniq)
    res = agent.submit(arbiter.Entry(key=k, type="intent", tool=f"t.dec.{uniq}", timeout=1))
    assert res.action is not None
    a = operator.action(res.action.id)
    assert (a.key, a.status, a.namespace) == (k, "in_progress", "sdk")
    page = agent.list_actions(status=["in_progress", "timed_out"], tool=f"t.dec.{uniq}", limit=5,
                              since=datetime.now(timezone.utc) - timedelta(minutes=5))
    assert [x.id for x in page.actions] == [a.id] and page.next_cursor is None
    d = operator.decide(a.id, "confirm", "it happened", expected_version=a.version, external_ref="x_1",
                        result={"by": "hand"})
    assert d.action is not None and d.entry is not None
    assert (d.action.status, d.action.external_ref, d.entry.type) == ("confirmed", "x_1", "decision")
    with pytest.raises(arbiter.APIError) as e:
        operator.decide(a.id, "confirm", "again", expected_version=a.version)
    assert e.value.code == "version_conflict"
    with pytest.raises(arbiter.APIError) as e:
        agent.decide(a.id, "abandon", "agents may not decide")
    assert e.value.status == 403
    with pytest.raises(arbiter.APIError) as e:
        agent.action_by_key(arbiter.key("missing", uniq))
    assert (e.value.code, e.value.status) == ("not_found", 404)
    timeline = agent.entries(a.id)
    assert [x.seq for x in timeline] == list(range(1, len(timeline) + 1))
    assert timeline[0].actor.kind == "agent" and timeline[-1].actor.name == "sdk-operator@example.com"


def test_bulk_decisions_round_trip(agent: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    tool = f"t.bulk.{uniq}"
    for i in range(3):
        agent.submit(arbiter.Entry(key=arbiter.key("bulk", uniq, str(i)), type="intent", tool=tool, timeout=1))
    for i in range(3):
        wait_status(agent, arbiter.key("bulk", uniq, str(i)), "timed_out")
    dry = operator.decide_many("abandon", tool=tool, status="timed_out", dry_run=True)
    assert (dry.matched, dry.allowed, len(dry.sample)) == (3, 3, 3)
    with pytest.raises(arbiter.APIError) as e:
        operator.decide_many("abandon", "psp outage", tool=tool, max_count=2)
    assert (e.value.code, e.value.status) == ("too_many_matched", 409)
    done = operator.decide_many("abandon", "psp outage", tool=tool, max_count=3)
    assert (done.applied, done.skipped) == (3, [])
    assert {a.status for a in agent.list_actions(tool=tool).actions} == {"abandoned"}


def test_webhooks_round_trip(admin: arbiter.Client, uniq: str) -> None:
    w = admin.create_webhook("http://127.0.0.1:9/hook", ["action.timed_out"], namespaces=["sdk"],
                             description=f"py {uniq}")
    assert w.secret is not None and w.secret.startswith("whsec_")
    assert w.id in [x.id for x in admin.webhooks()]
    assert admin.webhook(w.id).description == f"py {uniq}"
    w2 = admin.update_webhook(w.id, event_types=["action.timed_out", "action.decided"], enabled=False)
    assert (w2.enabled, w2.event_types) == (False, ["action.decided", "action.timed_out"])
    rotated = admin.rotate_webhook_secret(w.id)
    assert rotated.secret and rotated.secret != w.secret
    admin.update_webhook(w.id, enabled=True)
    d = admin.test_webhook(w.id)
    assert (d.event_type, d.endpoint_id) == ("webhook.test", w.id)
    assert d.id in [x.id for x in admin.webhook_deliveries(w.id, limit=10)]
    again = admin.redeliver(d.id)
    assert again.webhook_id == d.webhook_id
    admin.delete_webhook(w.id)
    with pytest.raises(arbiter.APIError) as e:
        admin.webhook(w.id)
    assert e.value.status == 404


def test_policies_round_trip(admin: arbiter.Client, operator: arbiter.Client, uniq: str) -> None:
    p = admin.create_policy(f"big {uniq}", "sdk", [f"pay.{uniq}.*"], condition="params.amount > 100",
                            approvals_required=2, expires_after=3600)
    assert (p.version, p.approvals_required, p.enabled) == (1, 2, True)
    assert p.id in [x.id for x in operator.policies("sdk")]
    p2 = admin.update_policy(p.id, condition="params.amount > 1000")
    assert (p2.version, operator.policy(p.id).condition) == (2, "params.amount > 1000")
    agent = arbiter.Client(admin.base_url, os.environ["ARBITER_AGENT_KEY"])
    agent.submit(arbiter.Entry(key=arbiter.key("small", uniq), type="intent", tool=f"pay.{uniq}.refund",
                               params={"amount": 500}))
    t = admin.test_policy("sdk", [f"pay.{uniq}.*"], "params.amount > 1000", limit=100)
    assert t.matched == 0 and t.examined >= 1
    t = admin.test_policy("sdk", [f"pay.{uniq}.*"], "params.amount > 100", limit=100)
    assert t.matched == 1 and [a.key for a in t.sample] == [arbiter.key("small", uniq)]
    with pytest.raises(arbiter.APIError) as e:
        admin.create_policy("bad", "sdk", ["x"], condition="params.amount >")
    assert e.value.code == "invalid_policy"
    admin.delete_policy(p.id)
    assert [v.version for v in admin.policy_versions(p.id)] == [1, 2]


def test_service_routes(agent: arbiter.Client) -> None:
    agent.health()
    agent.ready()
    assert "arbiter_entries_total" in agent.metrics()
    assert agent.openapi()["paths"].keys() == OPENAPI["paths"].keys()


def test_unauthorized_is_an_api_error(url: str) -> None:
    with pytest.raises(arbiter.APIError) as e:
        arbiter.Client(url, "ak_nope").list_actions()
    assert (e.value.status, arbiter.is_unavailable(e.value)) == (401, False)
