"""The async API: the same client for asyncio code, never blocking the
event loop. Each request runs in a thread of the client's own pool, bounded
by ``max_workers``: a long wait for approval or an outage's report retries
occupy that pool, never the host application's default executor, and a
cancelled await stops waiting and retrying (arbiter.cancel). Guards work in
async code as they are: ``@client.guard(...)`` on an ``async def``, and
``async with client.guard(...)``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from types import TracebackType
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Type,
    TypeVar,
    Union,
)

from . import cancel
from .client import Client
from .execute import Attempt, Outcome, Spec
from .guard import Guard, arun
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
)

__all__ = ["AsyncClient", "MAX_WORKERS"]

MAX_WORKERS = cancel.MAX_WORKERS  # the default bound of an AsyncClient's own threads

T = TypeVar("T")


class AsyncClient:
    """Client for asyncio: every method of Client, awaitable. ``sync`` is
    the Client underneath (the same options). At most ``max_workers``
    requests run at once; more wait their turn in the client's queue.
    ``aclose()`` (or ``async with``) ends the pool: what is under way
    finishes, and later calls raise ArbiterError."""

    def __init__(self, base_url: str, api_key: str, *, max_workers: int = MAX_WORKERS, **options: Any) -> None:
        self._start(Client(base_url, api_key, **options), max_workers)

    @classmethod
    def from_env(cls, *, max_workers: int = MAX_WORKERS, **options: Any) -> "AsyncClient":
        c = cls.__new__(cls)
        c._start(Client.from_env(**options), max_workers)
        return c

    def _start(self, sync: Client, max_workers: int) -> None:
        self._threads = cancel.Pool("AsyncClient", max_workers, "arbiter-aio")
        self.sync = sync
        self.max_workers = max_workers

    async def aclose(self) -> None:
        """Ends the client's pool without waiting: requests under way and
        queued finish in their threads (an outcome report still lands);
        later calls raise ArbiterError. May be called more than once."""
        self._threads.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.aclose()

    async def _in_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self._threads.run(fn, *args, **kwargs)

    def _pool(self) -> ThreadPoolExecutor:
        return self._threads.executor()

    def guard(self, **spec: Any) -> Guard:
        """A guard on this client, for ``async with`` or an ``async def``."""
        return Guard(client=self.sync, executor=self._pool(), **spec)

    async def run(self, spec: Spec, fn: Callable[[Attempt], Awaitable[Any]]) -> Outcome:
        """Client.run for a coroutine function, run on the event loop."""
        return await arun(self.sync, spec, fn, executor=self._pool())

    async def submit(self, entry: Entry) -> EntryResult:
        return await self._in_thread(self.sync.submit, entry)

    async def submit_batch(self, entries: Sequence[Entry]) -> List[EntryResult]:
        return await self._in_thread(self.sync.submit_batch, entries)

    async def submit_wait(self, entry: Entry, wait: float) -> EntryResult:
        return await self._in_thread(self.sync.submit_wait, entry, wait)

    async def list_actions(
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
        return await self._in_thread(
            self.sync.list_actions,
            status=status,
            tool=tool,
            agent=agent,
            since=since,
            until=until,
            q=q,
            namespace=namespace,
            limit=limit,
            cursor=cursor,
        )

    async def action_by_key(self, key: str, namespace: str = "") -> Action:
        return await self._in_thread(self.sync.action_by_key, key, namespace=namespace)

    async def action(self, id: str) -> Action:
        return await self._in_thread(self.sync.action, id)

    async def entries_page(self, id: str, *, limit: int = 0, cursor: str = "") -> EntryPage:
        return await self._in_thread(self.sync.entries_page, id, limit=limit, cursor=cursor)

    async def entries(self, id: str) -> List[LedgerEntry]:
        return await self._in_thread(self.sync.entries, id)

    async def decide(
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
        return await self._in_thread(
            self.sync.decide,
            id,
            decision,
            reason=reason,
            expected_version=expected_version,
            acknowledge_duplicate_risk=acknowledge_duplicate_risk,
            external_ref=external_ref,
            result=result,
        )

    async def decide_many(self, decision: Decision, reason: str = "", **filter_and_options: Any) -> BulkDecisionResult:
        return await self._in_thread(self.sync.decide_many, decision, reason, **filter_and_options)

    async def create_webhook(
        self,
        url: str,
        event_types: Sequence[EventType],
        *,
        namespaces: Optional[Sequence[str]] = None,
        format: WebhookFormatOrDefault = "",
        description: str = "",
    ) -> Webhook:
        return await self._in_thread(
            self.sync.create_webhook,
            url,
            event_types,
            namespaces=namespaces,
            format=format,
            description=description,
        )

    async def webhooks(self) -> List[Webhook]:
        return await self._in_thread(self.sync.webhooks)

    async def webhook(self, id: str) -> Webhook:
        return await self._in_thread(self.sync.webhook, id)

    async def update_webhook(
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
        return await self._in_thread(
            self.sync.update_webhook,
            id,
            url=url,
            event_types=event_types,
            namespaces=namespaces,
            format=format,
            description=description,
            enabled=enabled,
        )

    async def delete_webhook(self, id: str) -> None:
        return await self._in_thread(self.sync.delete_webhook, id)

    async def rotate_webhook_secret(self, id: str) -> Webhook:
        return await self._in_thread(self.sync.rotate_webhook_secret, id)

    async def test_webhook(self, id: str) -> Delivery:
        return await self._in_thread(self.sync.test_webhook, id)

    async def webhook_deliveries(self, id: str, limit: int = 0) -> List[Delivery]:
        return await self._in_thread(self.sync.webhook_deliveries, id, limit=limit)

    async def redeliver(self, delivery_id: str) -> Delivery:
        return await self._in_thread(self.sync.redeliver, delivery_id)

    async def create_policy(
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
        return await self._in_thread(
            self.sync.create_policy,
            name,
            namespace,
            tools,
            condition=condition,
            approvals_required=approvals_required,
            expires_after=expires_after,
            escalate_after=escalate_after,
            enabled=enabled,
            mode=mode,
        )

    async def policies(self, namespace: str = "") -> List[Policy]:
        return await self._in_thread(self.sync.policies, namespace=namespace)

    async def policy(self, id: str) -> Policy:
        return await self._in_thread(self.sync.policy, id)

    async def update_policy(
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
        return await self._in_thread(
            self.sync.update_policy,
            id,
            name=name,
            tools=tools,
            condition=condition,
            approvals_required=approvals_required,
            expires_after=expires_after,
            escalate_after=escalate_after,
            enabled=enabled,
            mode=mode,
        )

    async def delete_policy(self, id: str) -> None:
        return await self._in_thread(self.sync.delete_policy, id)

    async def policy_versions(self, id: str) -> List[Policy]:
        return await self._in_thread(self.sync.policy_versions, id)

    async def test_policy(
        self,
        namespace: str,
        tools: Sequence[str],
        condition: str = "",
        limit: int = 0,
    ) -> PolicyTestResult:
        return await self._in_thread(self.sync.test_policy, namespace, tools, condition=condition, limit=limit)

    async def create_limit(
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
        return await self._in_thread(
            self.sync.create_limit,
            name,
            namespace,
            tools,
            window,
            max,
            condition=condition,
            amount=amount,
            group_by=group_by,
            over=over,
            approvals_required=approvals_required,
            mode=mode,
            enabled=enabled,
        )

    async def limits(self, namespace: str = "") -> List[Limit]:
        return await self._in_thread(self.sync.limits, namespace=namespace)

    async def limit(self, id: str) -> Limit:
        return await self._in_thread(self.sync.limit, id)

    async def update_limit(
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
        return await self._in_thread(
            self.sync.update_limit,
            id,
            name=name,
            tools=tools,
            condition=condition,
            amount=amount,
            group_by=group_by,
            window=window,
            max=max,
            over=over,
            approvals_required=approvals_required,
            mode=mode,
            enabled=enabled,
        )

    async def delete_limit(self, id: str) -> None:
        return await self._in_thread(self.sync.delete_limit, id)

    async def limit_versions(self, id: str) -> List[Limit]:
        return await self._in_thread(self.sync.limit_versions, id)

    async def limit_usage(self, id: str, group: str = "") -> LimitUsage:
        return await self._in_thread(self.sync.limit_usage, id, group=group)

    async def start_freeze(self, namespace: str, reason: str, tools: Optional[Sequence[str]] = None) -> Freeze:
        return await self._in_thread(self.sync.start_freeze, namespace, reason, tools=tools)

    async def lift_freeze(self, id: str, reason: str) -> Freeze:
        return await self._in_thread(self.sync.lift_freeze, id, reason)

    async def freezes(self, namespace: Optional[str] = None, active: bool = False) -> List[Freeze]:
        return await self._in_thread(self.sync.freezes, namespace=namespace, active=active)

    async def freeze(self, id: str) -> Freeze:
        return await self._in_thread(self.sync.freeze, id)

    async def create_breaker(
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
        return await self._in_thread(
            self.sync.create_breaker,
            name,
            namespace,
            tools,
            window=window,
            min_actions=min_actions,
            max_unknown_ratio=max_unknown_ratio,
            max_failure_ratio=max_failure_ratio,
            enabled=enabled,
        )

    async def breakers(self, namespace: Optional[str] = None) -> List[Breaker]:
        return await self._in_thread(self.sync.breakers, namespace=namespace)

    async def breaker(self, id: str) -> Breaker:
        return await self._in_thread(self.sync.breaker, id)

    async def update_breaker(
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
        return await self._in_thread(
            self.sync.update_breaker,
            id,
            name=name,
            tools=tools,
            window=window,
            min_actions=min_actions,
            max_unknown_ratio=max_unknown_ratio,
            max_failure_ratio=max_failure_ratio,
            enabled=enabled,
        )

    async def delete_breaker(self, id: str) -> None:
        return await self._in_thread(self.sync.delete_breaker, id)

    async def breaker_versions(self, id: str) -> List[Breaker]:
        return await self._in_thread(self.sync.breaker_versions, id)

    async def audit_key(self) -> str:
        return await self._in_thread(self.sync.audit_key)

    async def audit_checkpoint(self) -> str:
        return await self._in_thread(self.sync.audit_checkpoint)

    async def audit_proof(self, entry_id: str, size: Optional[int] = None) -> AuditProof:
        return await self._in_thread(self.sync.audit_proof, entry_id, size=size)

    async def audit_consistency(self, from_size: int, to_size: int) -> List[str]:
        return await self._in_thread(self.sync.audit_consistency, from_size, to_size)

    async def audit_export(
        self, namespace: str, since: Optional[datetime] = None, until: Optional[datetime] = None
    ) -> str:
        return await self._in_thread(self.sync.audit_export, namespace, since=since, until=until)

    async def health(self) -> None:
        return await self._in_thread(self.sync.health)

    async def ready(self) -> None:
        return await self._in_thread(self.sync.ready)

    async def metrics(self) -> str:
        return await self._in_thread(self.sync.metrics)

    async def openapi(self) -> Dict[str, Any]:
        return await self._in_thread(self.sync.openapi)

