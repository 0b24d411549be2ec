"""The client: one method per route of the HTTP API, over urllib."""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from email.message import Message
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import execute as _execute
from . import guard as _guard
from .backoff import Backoff
from .errors import APIError, NetworkError, answer_error, api_error
from .routes import ROUTES
from .types import (
    Action,
    ActionPage,
    AuditProof,
    Breaker,
    BulkDecisionResult,
    Decision,
    DecisionResult,
    Delivery,
    Entry,
    EntryPage,
    EventType,
    EntryResult,
    Freeze,
    LedgerEntry,
    Limit,
    LimitOver,
    LimitUsage,
    Mode,
    Policy,
    PolicyTestResult,
    Status,
    Webhook,
    WebhookFormat,
    WebhookFormatOrDefault,
    decode,
    format_time,
)

__all__ = ["Client", "MAX_APPROVAL_WAIT"]

MAX_APPROVAL_WAIT = 60  # seconds: the longest one request may wait for a decision

F = TypeVar("F", bound=Callable[..., Any])


class Client:
    """Talks to one Arbiter server with one API key. Safe to share between
    threads.

    ``timeout`` bounds each request in seconds (a request that runs out of
    time counts as Arbiter being unavailable). ``report_budget`` bounds how
    long an outcome report is retried while Arbiter cannot be reached; past
    it the report is given up, and the action times out and waits for an
    operator. ``backoff`` paces those retries (full jitter). Links in errors
    such as HeldError point to ``dashboard_url`` (default: base_url).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        report_budget: float = 120.0,
        backoff: Backoff = Backoff(),
        dashboard_url: Optional[str] = None,
        user_agent: str = "arbiter-python-client",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.report_budget = report_budget
        self.backoff = backoff
        self.dashboard_url = (dashboard_url or self.base_url).rstrip("/")
        self.user_agent = user_agent
        self._opener = urllib.request.build_opener()

    @classmethod
    def from_env(cls, **kwargs: Any) -> "Client":
        """A client for ARBITER_URL (default http://127.0.0.1:8080) with the
        key in ARBITER_API_KEY."""
        return cls(os.environ.get("ARBITER_URL", "http://127.0.0.1:8080"), os.environ.get("ARBITER_API_KEY", ""), **kwargs)

    def action_url(self, action_id: str) -> str:
        """The dashboard page of the action."""
        return f"{self.dashboard_url}/actions/{urllib.parse.quote(action_id, safe='')}"

    # --- guarded calls (see guard.py) ---

    def guard(self, **spec: Any) -> _guard.Guard:
        """A guard on this client: a decorator and a context manager. See
        arbiter.guard for the arguments."""
        return _guard.Guard(client=self, **spec)

    def run(self, spec: _execute.Spec, fn: Callable[[_execute.Attempt], Any]) -> _execute.Outcome:
        """Performs one side effect the safe way, as the ledger decides, and
        returns what it came to: the core of guard, as Go's Client.Guard
        (see arbiter.execute.run)."""
        return _execute.run(self, spec, fn)

    # --- transport ---

    def _send(
        self,
        name: str,
        id: str = "",
        query: Optional[Mapping[str, str]] = None,
        body: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        answer_headers: Optional[Dict[str, str]] = None,
    ) -> Tuple[int, bytes]:
        """Sends one request; every request goes through here. The answer's
        headers are put in answer_headers when given (names lower-cased)."""
        method, path = ROUTES[name]
        if "{id}" in path:
            if not id:
                raise APIError("invalid", f"{name}: the id is empty")
            path = path.replace("{id}", urllib.parse.quote(id, safe=""))
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None
        req_headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            req_headers["Content-Type"] = "application/json"
        if self.api_key:
            req_headers["Authorization"] = "Bearer " + self.api_key
        req_headers.update(headers or {})
        req = urllib.request.Request(url, data=data, method=method, headers=req_headers)
        t = self.timeout if timeout is None else timeout
        try:
            with self._opener.open(req, timeout=t if t > 0 else None) as res:
                _keep_headers(res.headers, answer_headers)
                return res.status, res.read()
        except urllib.error.HTTPError as e:
            _keep_headers(e.headers, answer_headers)
            try:
                raw = e.read()
            except (OSError, http.client.HTTPException) as read_err:
                raise NetworkError(method, path, read_err) from read_err
            finally:
                e.close()
            return e.code, raw
        except (OSError, http.client.HTTPException) as e:  # URLError, timeouts, resets
            raise NetworkError(method, path, e) from e

    def _call(self, name: str, id: str = "", query: Optional[Mapping[str, str]] = None, body: Any = None) -> Any:
        status, raw = self._send(name, id, query, body)
        if not 200 <= status <= 299:
            raise answer_error(status, raw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise APIError("unexpected_answer", f"{name}: the answer is not JSON: {e}", status) from e

    def _text(self, name: str, id: str = "", query: Optional[Mapping[str, str]] = None, accept: str = "") -> str:
        """Sends a request whose successful answer is text (a non-2xx
        answer raises as _call does) and returns that text as sent."""
        headers = {"Accept": f"{accept}, application/json"} if accept else None
        status, raw = self._send(name, id, query, headers=headers)
        if not 200 <= status <= 299:
            raise answer_error(status, raw)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise APIError("unexpected_answer", f"{name}: the answer is not UTF-8: {e}", status) from e

    # --- entries ---

    def submit(self, entry: Entry) -> EntryResult:
        """Sends one entry. Every outcome but rejected is returned, whatever
        the HTTP status (in_progress and held are answered 409). A rejected
        entry raises APIError (KeyReusedError for key_reused) whose
        ``result`` is the answer; a failed request raises NetworkError or
        APIError. A frozen answer's error.retry_after is set from its
        Retry-After header when the body does not say."""
        return self._submit(entry)

    def _submit(self, entry: Entry, timeout: Optional[float] = None) -> EntryResult:
        headers: Dict[str, str] = {}
        status, raw = self._send("submit", body=entry.to_json(), timeout=timeout, answer_headers=headers)
        return _entry_result(status, raw, headers)

    def submit_wait(self, entry: Entry, wait: float) -> EntryResult:
        """Sends one intent and, if it is held for approval, asks the server
        to hold the answer until the action is approved (proceed) or denied
        (denied), for up to wait seconds (at most 60). Any other answer
        comes at once, as from submit."""
        n = int(min(max(wait, 0), MAX_APPROVAL_WAIT))
        timeout = self.timeout + n if self.timeout > 0 else 0
        headers: Dict[str, str] = {}
        status, raw = self._send("submit_wait", body=entry.to_json(), headers={"Prefer": f"wait={n}"},
                                 timeout=timeout, answer_headers=headers)
        return _entry_result(status, raw, headers)

    def submit_batch(self, entries: Sequence[Entry]) -> List[EntryResult]:
        """Sends 1–500 entries in one request, applied in order, answered
        one EntryResult each. A rejected entry does not affect the others and
        does not raise here: check each result's outcome."""
        out = self._call("submit_batch", body={"entries": [e.to_json() for e in entries]})
        results = [decode(EntryResult, r) for r in out.get("results", [])]
        if len(results) != len(entries):
            raise APIError("unexpected_answer", f"{len(results)} results for {len(entries)} entries")
        return results

    # --- actions ---

    def list_actions(
        self,
        *,
        status: Union[Status, Iterable[Status], None] = None,
        tool: str = "",
        agent: str = "",
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        q: str = "",
        namespace: str = "",
        limit: int = 0,
        cursor: str = "",
    ) -> ActionPage:
        """One page of actions matching the filters, newest first."""
        query: Dict[str, str] = {}
        if status:
            query["status"] = status if isinstance(status, str) else ",".join(status)
        for k, v in (("tool", tool), ("agent", agent), ("q", q), ("namespace", namespace), ("cursor", cursor)):
            if v:
                query[k] = v
        if since is not None:
            query["since"] = format_time(since)
        if until is not None:
            query["until"] = format_time(until)
        if limit:
            query["limit"] = str(limit)
        return decode(ActionPage, self._call("list_actions", query=query))

    def action(self, id: str) -> Action:
        return decode(Action, self._call("action", id))

    def action_by_key(self, key: str, namespace: str = "") -> Action:
        """The action for key in the API key's namespace (admin keys name
        the namespace)."""
        query = {"key": key}
        if namespace:
            query["namespace"] = namespace
        return decode(Action, self._call("action_by_key", query=query))

    def entries_page(self, id: str, *, limit: int = 0, cursor: str = "") -> EntryPage:
        """One page of the action's timeline, oldest first: at most limit
        entries (1-1000, default 1000), from the cursor of the previous page."""
        query: Dict[str, str] = {}
        if limit:
            query["limit"] = str(limit)
        if cursor:
            query["cursor"] = cursor
        return decode(EntryPage, self._call("entries", id, query=query))

    def iter_entries(self, id: str, *, limit: int = 0, cursor: str = "") -> Iterator[LedgerEntry]:
        """Every entry of the action's timeline, oldest first, from cursor (the
        start when empty), fetching the next page as the loop reaches it."""
        while True:
            page = self.entries_page(id, limit=limit, cursor=cursor)
            yield from page.entries
            if not page.next_cursor or page.next_cursor == cursor:
                return
            cursor = page.next_cursor

    def entries(self, id: str) -> List[LedgerEntry]:
        """The action's whole timeline, oldest first, read page by page."""
        return list(self.iter_entries(id))

    def decide(
        self,
        id: str,
        decision: Decision,
        reason: str = "",
        *,
        expected_version: Optional[int] = None,
        acknowledge_duplicate_risk: bool = False,
        external_ref: Optional[str] = None,
        result: Any = None,
    ) -> DecisionResult:
        """An operator decision on the action (operator or admin key)."""
        body: Dict[str, Any] = {"decision": decision, "reason": reason}
        if expected_version is not None:
            body["expected_version"] = expected_version
        if acknowledge_duplicate_risk:
            body["acknowledge_duplicate_risk"] = True
        if external_ref is not None:
            body["external_ref"] = external_ref
        if result is not None:
            body["result"] = result
        return decode(DecisionResult, self._call("decide", id, body=body))

    def decide_many(
        self,
        decision: Decision,
        reason: str = "",
        *,
        ids: Optional[Sequence[str]] = None,
        status: Union[Status, Iterable[Status], None] = None,
        tool: str = "",
        agent: str = "",
        namespace: str = "",
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        acknowledge_duplicate_risk: bool = False,
        dry_run: bool = False,
        max_count: int = 0,
    ) -> BulkDecisionResult:
        """One decision on the actions the filter selects (at least one
        criterion), each decided as if alone. ``dry_run`` counts and writes
        nothing; otherwise ``reason`` and ``max_count`` are required, and
        more allowed actions than ``max_count`` is 409 too_many_matched."""
        flt: Dict[str, Any] = _given(ids=_list(ids), tool=tool or None, agent=agent or None,
                                     namespace=namespace or None,
                                     since=format_time(since) if since else None,
                                     until=format_time(until) if until else None)
        if status:
            flt["status"] = [status] if isinstance(status, str) else list(status)
        body: Dict[str, Any] = {"filter": flt, "decision": decision}
        if reason:
            body["reason"] = reason
        if acknowledge_duplicate_risk:
            body["acknowledge_duplicate_risk"] = True
        if dry_run:
            body["dry_run"] = True
        if max_count:
            body["max_count"] = max_count
        return decode(BulkDecisionResult, self._call("decide_many", body=body))

    # --- webhooks (admin) ---

    def create_webhook(
        self,
        url: str,
        event_types: Sequence[EventType],
        *,
        namespaces: Optional[Sequence[str]] = None,
        format: WebhookFormatOrDefault = "",
        description: str = "",
    ) -> Webhook:
        body: Dict[str, Any] = {"url": url, "event_types": list(event_types)}
        if namespaces is not None:
            body["namespaces"] = list(namespaces)
        if format:
            body["format"] = format
        if description:
            body["description"] = description
        return decode(Webhook, self._call("create_webhook", body=body))

    def webhooks(self) -> List[Webhook]:
        return [decode(Webhook, w) for w in self._call("webhooks")["endpoints"]]

    def webhook(self, id: str) -> Webhook:
        return decode(Webhook, self._call("webhook", id))

    def update_webhook(
        self,
        id: str,
        *,
        url: Optional[str] = None,
        event_types: Optional[Sequence[EventType]] = None,
        namespaces: Optional[Sequence[str]] = None,
        format: Optional[WebhookFormat] = None,
        description: Optional[str] = None,
        enabled: Optional[bool] = None,
    ) -> Webhook:
        """Changes the fields that are given (not None)."""
        body = _given(url=url, event_types=_list(event_types), namespaces=_list(namespaces), format=format,
                      description=description, enabled=enabled)
        return decode(Webhook, self._call("update_webhook", id, body=body))

    def delete_webhook(self, id: str) -> None:
        self._call("delete_webhook", id)

    def rotate_webhook_secret(self, id: str) -> Webhook:
        return decode(Webhook, self._call("rotate_webhook_secret", id))

    def test_webhook(self, id: str) -> Delivery:
        return decode(Delivery, self._call("test_webhook", id))

    def webhook_deliveries(self, id: str, limit: int = 0) -> List[Delivery]:
        query = {"limit": str(limit)} if limit else None
        return [decode(Delivery, d) for d in self._call("webhook_deliveries", id, query=query)["deliveries"]]

    def redeliver(self, delivery_id: str) -> Delivery:
        return decode(Delivery, self._call("redeliver", delivery_id))

    # --- approval policies ---

    def create_policy(
        self,
        name: str,
        namespace: str,
        tools: Sequence[str],
        *,
        condition: Optional[str] = None,
        approvals_required: Optional[int] = None,
        expires_after: Optional[int] = None,
        escalate_after: Optional[int] = None,
        enabled: Optional[bool] = None,
        mode: Optional[Mode] = None,
    ) -> Policy:
        """Adds a policy (admin key); ``mode`` "shadow" records its matches
        and holds nothing (default "enforce")."""
        body = _given(name=name, namespace=namespace, tools=list(tools), condition=condition,
                      approvals_required=approvals_required, expires_after=expires_after,
                      escalate_after=escalate_after, enabled=enabled, mode=mode)
        return decode(Policy, self._call("create_policy", body=body))

    def policies(self, namespace: str = "") -> List[Policy]:
        query = {"namespace": namespace} if namespace else None
        return [decode(Policy, p) for p in self._call("policies", query=query)["policies"]]

    def policy(self, id: str) -> Policy:
        return decode(Policy, self._call("policy", id))

    def update_policy(
        self,
        id: str,
        *,
        name: Optional[str] = None,
        tools: Optional[Sequence[str]] = None,
        condition: Optional[str] = None,
        approvals_required: Optional[int] = None,
        expires_after: Optional[int] = None,
        escalate_after: Optional[int] = None,
        enabled: Optional[bool] = None,
        mode: Optional[Mode] = None,
    ) -> Policy:
        """Changes the fields that are given, as a new version (an
        escalate_after of 0 removes it)."""
        body = _given(name=name, tools=_list(tools), condition=condition, approvals_required=approvals_required,
                      expires_after=expires_after, escalate_after=escalate_after, enabled=enabled, mode=mode)
        return decode(Policy, self._call("update_policy", id, body=body))

    def delete_policy(self, id: str) -> None:
        self._call("delete_policy", id)

    def policy_versions(self, id: str) -> List[Policy]:
        return [decode(Policy, p) for p in self._call("policy_versions", id)["versions"]]

    def test_policy(self, namespace: str, tools: Sequence[str], condition: str = "", limit: int = 0) -> PolicyTestResult:
        """What a rule would have caught among the namespace's latest first
        intents; nothing is written."""
        body = _given(namespace=namespace, tools=list(tools), condition=condition or None, limit=limit or None)
        return decode(PolicyTestResult, self._call("test_policy", body=body))

    # --- limits across actions ---

    def create_limit(
        self,
        name: str,
        namespace: str,
        tools: Sequence[str],
        window: int,
        max: float,
        *,
        condition: Optional[str] = None,
        amount: Optional[str] = None,
        group_by: Optional[str] = None,
        over: Optional[LimitOver] = None,
        approvals_required: Optional[int] = None,
        mode: Optional[Mode] = None,
        enabled: Optional[bool] = None,
    ) -> Limit:
        """Adds a limit (admin key): the first intents of ``tools`` that
        ``condition`` matches are charged ``amount`` (CEL; empty charges 1)
        in their group (``group_by``, CEL; empty is one group), and one that
        would take its group's use within ``window`` seconds over ``max`` is
        held for approval (``over`` "hold", the default) or denied ("deny").
        CEL that does not compile raises APIError ``invalid_limit``."""
        body = _given(name=name, namespace=namespace, tools=list(tools), window=window, max=max,
                      condition=condition, amount=amount, group_by=group_by, over=over,
                      approvals_required=approvals_required, mode=mode, enabled=enabled)
        return decode(Limit, self._call("create_limit", body=body))

    def limits(self, namespace: str = "") -> List[Limit]:
        """The limits the key may see (not agent keys), of one namespace if
        given."""
        query = {"namespace": namespace} if namespace else None
        return [decode(Limit, x) for x in self._call("limits", query=query)["limits"]]

    def limit(self, id: str) -> Limit:
        return decode(Limit, self._call("limit", id))

    def update_limit(
        self,
        id: str,
        *,
        name: Optional[str] = None,
        tools: Optional[Sequence[str]] = None,
        condition: Optional[str] = None,
        amount: Optional[str] = None,
        group_by: Optional[str] = None,
        window: Optional[int] = None,
        max: Optional[float] = None,
        over: Optional[LimitOver] = None,
        approvals_required: Optional[int] = None,
        mode: Optional[Mode] = None,
        enabled: Optional[bool] = None,
    ) -> Limit:
        """Changes the fields that are given, as a new version (admin key).
        Charges already made stay as they were."""
        body = _given(name=name, tools=_list(tools), condition=condition, amount=amount, group_by=group_by,
                      window=window, max=max, over=over, approvals_required=approvals_required, mode=mode,
                      enabled=enabled)
        return decode(Limit, self._call("update_limit", id, body=body))

    def delete_limit(self, id: str) -> None:
        """Stops a limit from applying; its versions stay readable (admin
        key)."""
        self._call("delete_limit", id)

    def limit_versions(self, id: str) -> List[Limit]:
        """Every version of a limit, oldest first."""
        return [decode(Limit, x) for x in self._call("limit_versions", id)["versions"]]

    def limit_usage(self, id: str, group: str = "") -> LimitUsage:
        """A limit's counted use now: the 100 groups with the most, or only
        ``group`` if given."""
        query = {"group": group} if group else None
        return decode(LimitUsage, self._call("limit_usage", id, query=query))

    # --- freezes and breakers ---

    def start_freeze(self, namespace: str, reason: str, tools: Optional[Sequence[str]] = None) -> Freeze:
        """Starts a freeze of the namespace's ``tools`` (patterns; default
        every tool, ``["*"]``), saying why (an operator key of the
        namespace, or an admin key). While it is active, new keys of those
        tools wait for approval (``approval.frozen_by``) and every other
        intent that would run or compensate is answered frozen; it holds on
        every replica within a second."""
        body = _given(namespace=namespace, tools=_list(tools), reason=reason)
        return decode(Freeze, self._call("start_freeze", body=body))

    def lift_freeze(self, id: str, reason: str) -> Freeze:
        """Lifts an active freeze, saying why: the actions only it held are
        approved and their callers proceed. A freeze already lifted raises
        APIError ``conflict`` (409)."""
        return decode(Freeze, self._call("lift_freeze", id, body={"reason": reason}))

    def freezes(self, namespace: Optional[str] = None, active: bool = False) -> List[Freeze]:
        """The freezes the key may see, newest first (at most 500): of one
        namespace if given, only those not lifted if ``active``."""
        query: Dict[str, str] = {}
        if namespace:
            query["namespace"] = namespace
        if active:
            query["active"] = "true"
        return [decode(Freeze, f) for f in self._call("freezes", query=query or None)["freezes"]]

    def freeze(self, id: str) -> Freeze:
        return decode(Freeze, self._call("freeze", id))

    def create_breaker(
        self,
        name: str,
        namespace: str,
        tools: Sequence[str],
        *,
        window: Optional[int] = None,
        min_actions: Optional[int] = None,
        max_unknown_ratio: Optional[float] = None,
        max_failure_ratio: Optional[float] = None,
        enabled: Optional[bool] = None,
    ) -> Breaker:
        """Adds a breaker (admin key): once at least ``min_actions``
        (default 10) of the ``tools``' actions of the last ``window``
        seconds (default 300) have an outcome or lost it, a share timed out
        above ``max_unknown_ratio`` or failed above ``max_failure_ratio``
        (0–1; give one or both) starts a freeze of those tools. Numbers out
        of range, or no ratio, raise APIError ``invalid_breaker``."""
        body = _given(name=name, namespace=namespace, tools=list(tools), window=window, min_actions=min_actions,
                      max_unknown_ratio=max_unknown_ratio, max_failure_ratio=max_failure_ratio, enabled=enabled)
        return decode(Breaker, self._call("create_breaker", body=body))

    def breakers(self, namespace: Optional[str] = None) -> List[Breaker]:
        """The breakers the key may see (not agent keys), of one namespace
        if given, each with what it counts now (``state``)."""
        query = {"namespace": namespace} if namespace else None
        return [decode(Breaker, b) for b in self._call("breakers", query=query)["breakers"]]

    def breaker(self, id: str) -> Breaker:
        """One breaker, with what it counts now (``state``)."""
        return decode(Breaker, self._call("breaker", id))

    def update_breaker(
        self,
        id: str,
        *,
        name: Optional[str] = None,
        tools: Optional[Sequence[str]] = None,
        window: Optional[int] = None,
        min_actions: Optional[int] = None,
        max_unknown_ratio: Optional[float] = None,
        max_failure_ratio: Optional[float] = None,
        enabled: Optional[bool] = None,
    ) -> Breaker:
        """Changes the fields that are given, as a new version (admin key)."""
        body = _given(name=name, tools=_list(tools), window=window, min_actions=min_actions,
                      max_unknown_ratio=max_unknown_ratio, max_failure_ratio=max_failure_ratio, enabled=enabled)
        return decode(Breaker, self._call("update_breaker", id, body=body))

    def delete_breaker(self, id: str) -> None:
        """Stops a breaker (admin key); a freeze it started stays until a
        person lifts it, and its versions stay readable."""
        self._call("delete_breaker", id)

    def breaker_versions(self, id: str) -> List[Breaker]:
        """Every version of a breaker, oldest first (without ``state``)."""
        return [decode(Breaker, b) for b in self._call("breaker_versions", id)["versions"]]

    # --- the evidence log ---

    def audit_key(self) -> str:
        """The key that checks the log's checkpoints, in the note format
        (``origin+hash+base64``), as ``arbiter audit key`` prints it. Any
        key, or none, may ask."""
        return self._text("audit_key", accept="text/plain").strip()

    def audit_checkpoint(self) -> str:
        """The newest signed checkpoint, a C2SP signed note (origin, tree
        size and base64 root hash, then its signature), exactly as sent. Any
        key, or none, may ask; before the first checkpoint is signed (about
        10 s after the first entry) it raises APIError ``not_found``."""
        return self._text("audit_checkpoint", accept="text/plain")

    def audit_proof(self, entry_id: str, size: Optional[int] = None) -> AuditProof:
        """The inclusion proof of the entry with that id against the newest
        checkpoint, or the one of tree size ``size`` (readers of its
        namespace, operators and admins; an agent key raises ``forbidden``).
        An entry not logged yet, or not in that checkpoint yet, raises
        APIError ``not_found``."""
        query = {"size": str(size)} if size is not None else None
        return decode(AuditProof, self._call("audit_proof", entry_id, query=query))

    def audit_consistency(self, from_size: int, to_size: int) -> List[str]:
        """The RFC 6962 consistency proof (base64 hashes) that the tree of
        size ``from_size`` is a prefix of the tree of size ``to_size`` (at
        most the newest checkpoint's)."""
        out = self._call("audit_consistency", query={"from": str(from_size), "to": str(to_size)})
        return list(out["proof"])

    def audit_export(self, namespace: str, since: Optional[datetime] = None, until: Optional[datetime] = None) -> str:
        """The namespace's evidence bundle, NDJSON, as ``arbiter audit
        export`` writes it: a first line with the ``checkpoint`` and the
        ``verifier_key``, then one line per logged entry recorded in
        [since, until), in log order, with its inclusion proof. ``arbiter
        audit verify BUNDLE --key KEY`` checks it offline."""
        query = {"namespace": namespace}
        if since is not None:
            query["since"] = format_time(since)
        if until is not None:
            query["until"] = format_time(until)
        return self._text("audit_export", query=query, accept="application/x-ndjson")

    # --- the service ---

    def health(self) -> None:
        """Raises unless the server process is up."""
        self._call("health")

    def ready(self) -> None:
        """Raises unless the database answers and the schema is current (a
        server that is not ready answers 503: is_unavailable is true)."""
        self._call("ready")

    def metrics(self) -> str:
        """The Prometheus metrics in the text format."""
        status, raw = self._send("metrics")
        if not 200 <= status <= 299:
            raise answer_error(status, raw)
        return raw.decode("utf-8")

    def openapi(self) -> Dict[str, Any]:
        """The OpenAPI 3.1 document the server implements."""
        return dict(self._call("openapi"))


def _entry_result(status: int, raw: bytes, headers: Optional[Mapping[str, str]] = None) -> EntryResult:
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not data.get("outcome"):
        # Not an entry result: the request itself failed (401, 413, 503, …).
        raise answer_error(status, raw)
    r = decode(EntryResult, data)
    if r.error is not None and r.error.retry_after is None and headers is not None:
        r.error.retry_after = _retry_after(headers.get("retry-after"))
    if r.outcome == "rejected":
        code, msg = ("unexpected_answer", "entry rejected without an error")
        if r.error is not None:
            code, msg = r.error.code, r.error.message
        err = api_error(code, msg, status)
        err.result = r
        raise err
    return r


def _keep_headers(got: Optional[Message], into: Optional[Dict[str, str]]) -> None:
    if got is not None and into is not None:
        for k, v in got.items():
            into[k.lower()] = str(v)


def _retry_after(value: Optional[str]) -> Optional[int]:
    """A Retry-After header in seconds (Arbiter sends seconds, never a
    date); None when absent or not a positive number."""
    try:
        n = int((value or "").strip())
    except ValueError:
        return None
    return n if n > 0 else None


def _given(**fields: Any) -> Dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _list(v: Optional[Sequence[str]]) -> Optional[List[str]]:
    return None if v is None else list(v)
