"""The worker carries out operators' decisions, and looks timed-out
attempts up at the downstream, for the tools it has handlers for."""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Dict, List, Optional

from . import cancel, execute
from .errors import APIError, ArbiterError, FrozenError, HeldError, InProgressError, OutcomeUnknownError, Retriable
from .execute import Attempt, Spec
from .lookup import (
    LookupFunc,
    LookupRequest,
    ask_downstream,
    external_refs,
    lookup_due,
    lookup_lease,
    lookup_result_entry,
    now,
)
from .outcomes import Classifier
from .types import (
    COMPENSATION_REQUESTED,
    HELD,
    OUTCOME_IN_PROGRESS,
    PROCEED,
    RETRY_REQUESTED,
    TIMED_OUT,
    Action,
    Status,
    Reconciliation,
)

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Worker", "compensation_due"]

Handler = Callable[[Attempt], Any]
Compensator = Callable[[Attempt], Any]


@dataclass
class _Tool:
    run: Optional[Handler] = None
    compensate: Optional[Compensator] = None
    lookup: Optional[LookupFunc] = None
    not_done_statuses: Collection[int] = ()
    classify: Optional[Classifier] = None

    def statuses(self) -> List[Status]:
        s: List[Status] = []
        if self.run is not None:
            s.append(RETRY_REQUESTED)
        if self.compensate is not None:
            s.append(COMPENSATION_REQUESTED)
        if self.lookup is not None:
            s.append(TIMED_OUT)
        return s


@dataclass
class _Delay:
    failures: int = 0
    until: float = 0.0  # time.monotonic()


class Worker:
    """Polls for actions an operator asked to retry (retry_requested) or to
    compensate (compensation_requested) and runs the registered handler
    through the guard with the action's original key, tool, effect and
    params. For tools with a lookup it also polls for timed-out actions and
    asks the downstream what happened before a person has to. The ledger's
    answer decides who runs: of several workers only one gets proceed for an
    attempt. Actions are handled one at a time, oldest first.

    ``poll`` is the pause between polls while there is work (seconds); while
    idle it doubles up to ``max_poll``. ``agent`` names the worker in the
    ledger. ``lookup_timeout`` bounds one lookup (the lookup lease asked is
    10 s longer, to report the answer); ``lookup_retry`` is the pause before
    a failed lookup is asked again, doubling with each lookup of the
    attempt."""

    def __init__(
        self,
        client: Client,
        *,
        namespace: str = "",
        poll: float = 1.0,
        max_poll: float = 30.0,
        agent: str = "",
        lookup_timeout: float = 30.0,
        lookup_retry: float = 30.0,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.poll = poll if poll > 0 else 1.0
        self.max_poll = max(max_poll, self.poll)
        self.agent = agent
        self.lookup_timeout = min(lookup_timeout if lookup_timeout > 0 else 30.0, 3000.0)
        self.lookup_retry = lookup_retry if lookup_retry > 0 else 30.0
        self.log = logger or logging.getLogger("arbiter.worker")
        self._mu = threading.Lock()
        self._tools: Dict[str, _Tool] = {}
        self._delays: Dict[str, _Delay] = {}
        # run_async's thread: the worker's own, never one of the event
        # loop's default executor, which a poll loop would hold for good.
        self._threads = cancel.Pool("Worker", 1, "arbiter-worker")

    def handle(self, tool: str, run: Optional[Handler], compensate: Optional[Compensator] = None, *,
               not_done_statuses: Collection[int] = (), classify: Optional[Classifier] = None) -> None:
        """Registers the function that performs tool's effect (called with
        an Attempt whose ``params`` are the action's stored params; it
        returns the result, or a Done with the external ref) and the one that
        undoes it (returns the undoing's id; None if the agent cannot undo
        it).

        ``not_done_statuses`` and ``classify`` say how the handlers'
        exceptions are read, as they do for arbiter.guard (see
        arbiter.outcomes): the downstream HTTP statuses that prove the
        effect did not happen (recorded ``failed``), and a callable that
        replaces the rule. Without them the default rule applies: an
        exception that does not prove the effect did not happen is recorded
        ``outcome_unknown`` (for a compensation, the undo is left to a
        person). A later handle() for the same tool replaces all three
        settings; its lookup stays."""
        with self._mu:
            t = self._tools.setdefault(tool, _Tool())
            t.run, t.compensate = run, compensate
            t.not_done_statuses, t.classify = tuple(not_done_statuses), classify

    def handle_lookup(self, tool: str, lookup: LookupFunc) -> None:
        """Registers how to find out whether tool's effect happened: the
        worker then polls for timed-out actions of the tool and looks each
        attempt up before a person decides. When the answer makes the ledger
        request a retry, it runs at once with the handler of handle()."""
        with self._mu:
            self._tools.setdefault(tool, _Tool()).lookup = lookup

    # --- running ---

    def run(self, stop: Optional[threading.Event] = None) -> None:
        """Polls and works until stop is set. Failures to reach Arbiter are
        logged and retried with backoff."""
        stop = stop or threading.Event()
        idle = 0
        while not stop.is_set():
            try:
                n = self.run_once()
                idle = 0 if n > 0 else idle + 1
            except ArbiterError as e:
                self.log.warning("arbiter worker: poll failed: %s", e)
                idle += 1
            pause = min(self.poll * 2 ** max(idle - 1, 0), self.max_poll)
            # Half jitter: workers started together drift apart, and none
            # polls much faster than asked.
            stop.wait(pause / 2 + random.uniform(0, pause / 2))

    def start(self) -> "Running":
        """Runs the worker in a background thread; stop it with
        ``.stop()``."""
        return Running(self)

    async def run_async(self) -> None:
        """Runs the worker in a thread of its own (not the event loop's
        default executor) until the awaiting task is cancelled. The action
        in hand is finished first: its handler is never interrupted, but,
        as for a cancelled AsyncClient call, its waiting and report retries
        stop (a report not yet recorded is given up, and the action times
        out for a lookup or a person). One run_async of a worker at a time:
        another waits for the first to end."""
        stop = threading.Event()
        try:
            await self._threads.run(self.run, stop)
        finally:
            stop.set()

    def run_once(self) -> int:
        """Polls once and handles every action waiting for a handler of this
        worker. Returns how many it tried."""
        todo = self._waiting()
        self._forget_delays(todo)
        tried = 0
        for a in todo:
            tool = self._due(a)
            if tool is None:
                continue
            tried += 1
            if a.status == TIMED_OUT:
                try:
                    self._look_up(a, tool)
                except ArbiterError as e:
                    self.log.warning("arbiter worker: could not look up action %s (%r): %s", a.id, a.key, e)
                    self._delay(a.id)
                continue
            self._work(a, tool)
        return tried

    def _waiting(self) -> List[Action]:
        # Per tool, so actions of tools other workers handle are not fetched
        # at every poll.
        with self._mu:
            wanted = {name: t.statuses() for name, t in sorted(self._tools.items())}
        found: List[Action] = []
        for name, statuses in wanted.items():
            if not statuses:
                continue
            cursor = ""
            while True:
                page = self.client.list_actions(status=statuses, tool=name, namespace=self.namespace, limit=500,
                                                cursor=cursor)
                found.extend(page.actions)
                if not page.next_cursor:
                    break
                cursor = page.next_cursor
        return sorted(found, key=lambda a: a.id)  # UUIDv7: creation order

    def _due(self, a: Action) -> Optional[_Tool]:
        """The tool of an action that has work for this worker now."""
        with self._mu:
            t = self._tools.get(a.tool)
            d = self._delays.get(a.id)
        if t is None or (d is not None and time.monotonic() < d.until):
            return None
        at = now()
        if a.status == RETRY_REQUESTED:
            ok = t.run is not None
        elif a.status == COMPENSATION_REQUESTED:
            # Not while another worker's compensation holds the lease, nor
            # after a lease passed without a report, nor after a failure
            # that said it may not be retried: an operator decides.
            ok = (t.compensate is not None and (a.lease_until is None or at >= a.lease_until)
                  and compensation_due(a.reconciliation))
        elif a.status == TIMED_OUT:
            ok = t.lookup is not None and lookup_due(a, at, self.lookup_retry)
        else:
            ok = False
        return t if ok else None

    def _work(self, a: Action, t: _Tool) -> None:
        """Runs one action through the guard and logs what came of it."""
        spec = Spec(key=a.key, tool=a.tool, effect=a.effect, params=a.params, timeout=self._lease_of(a),
                    agent=self.agent, reference=a.reference or "", compensate=t.compensate,
                    not_done_statuses=t.not_done_statuses, classify=t.classify)
        ran = False
        handler = t.run

        def run(attempt: Attempt) -> Any:
            nonlocal ran
            ran = True
            if handler is None:
                raise Retriable(f"no handler for {a.tool} in this worker")
            return handler(attempt)

        where = f"action {a.id} ({a.key!r}, {a.tool}, {a.status})"
        self.log.info("arbiter worker: picked up %s", where)
        try:
            out = execute.run(self.client, spec, run)
        except InProgressError as e:
            self.log.info("arbiter worker: another worker is running %s (attempt %d)", where, e.attempt)
        except HeldError as e:
            self.log.warning("arbiter worker: %s is held for an operator: %s", where, e.url)
        except FrozenError as e:
            # Nothing ran and nothing changed: it runs once the freeze is lifted.
            self.log.info("arbiter worker: %s is frozen; trying again later: %s", where, e.detail)
        except Exception as e:  # a handler's failure, recorded as the guard classified it
            if ran:
                what = "its outcome is unknown" if isinstance(e, OutcomeUnknownError) else "recorded failed"
                self.log.warning("arbiter worker: ran %s and %s: %s", where, what, e)
                self._clear(a.id)
                return
            self.log.warning("arbiter worker: could not handle %s: %s", where, e)
        else:
            if out.compensated:
                self.log.info("arbiter worker: compensated %s (%s)", where, out.external_ref)
            elif out.ran:
                self.log.info("arbiter worker: ran attempt %d of %s and recorded succeeded", out.attempt, where)
            else:
                self.log.info("arbiter worker: %s had already finished; replayed", where)
            self._clear(a.id)
            return
        # Still waiting (say, the compensation failed): try again later, not
        # at every poll.
        self._delay(a.id)

    def _look_up(self, a: Action, t: _Tool) -> None:
        """Takes a lookup lease on the action's timed-out attempt, runs the
        tool's lookup and reports its answer; runs the retry the ledger then
        requests."""
        assert t.lookup is not None
        where = f"action {a.id} ({a.key!r}, attempt {a.attempt})"
        # The timeline first: failing to read it costs no lookup of the budget.
        entries = self.client.entries(a.id)
        spec = Spec(key=a.key, tool=a.tool, agent=self.agent)
        take = spec.entry("lookup", a.attempt)
        take.timeout = lookup_lease(self.lookup_timeout)
        try:
            res = self.client.submit(take)
        except APIError as e:
            if e.code in ("stale_attempt", "invalid_transition"):
                self.log.info("arbiter worker: %s moved on before the lookup: %s", where, e)
                return
            raise
        if res.outcome == OUTCOME_IN_PROGRESS:
            self.log.info("arbiter worker: another worker is looking up %s", where)
            return
        if res.outcome == HELD:
            self.log.info("arbiter worker: no lookups left for %s; held for an operator", where)
            return
        if res.outcome != PROCEED:
            raise ArbiterError(f"arbiter: lookup {a.key!r}: unexpected outcome {res.outcome!r}")

        q = LookupRequest(action_id=a.id, key=a.key, tool=a.tool, effect=a.effect, attempt=a.attempt,
                          params=a.params, reference=a.reference or "", external_refs=external_refs(a, entries),
                          created_at=a.created_at)
        self.log.info("arbiter worker: looking up the timed-out %s", where)
        found = ask_downstream(t.lookup, q, self.lookup_timeout)
        answer = lookup_result_entry(spec.entry("lookup_result", a.attempt), found)
        stored = execute.report(self.client, Attempt(action_id=a.id, key=a.key, tool=a.tool, number=a.attempt),
                                answer)
        status = stored.action.status if stored.action else ""
        self.log.info("arbiter worker: %s: the lookup answered %s; now %s", where, found.answer, status)
        if status == RETRY_REQUESTED and t.run is not None and stored.action is not None:
            self._work(stored.action, t)

    def _lease_of(self, a: Action) -> float:
        """The lease the agent asked for in the action's last intent, so the
        retry runs under the same terms; 0 (the server's default) if the
        timeline cannot tell."""
        try:
            entries = self.client.entries(a.id)
        except ArbiterError:
            return 0
        for e in reversed(entries):
            if e.type == "intent":
                t = e.payload.get("timeout") if isinstance(e.payload, dict) else None
                return float(t) if isinstance(t, (int, float)) and t >= 1 else 0
        return 0

    def _delay(self, action_id: str) -> None:
        with self._mu:
            d = self._delays.setdefault(action_id, _Delay())
            d.failures += 1
            d.until = time.monotonic() + max(self.poll, self.client.backoff.pause(d.failures))

    def _clear(self, action_id: str) -> None:
        with self._mu:
            self._delays.pop(action_id, None)

    def _forget_delays(self, waiting: List[Action]) -> None:
        # Actions no longer waiting (resolved elsewhere) leave the map.
        ids = {a.id for a in waiting}
        with self._mu:
            for k in [k for k in self._delays if k not in ids]:
                del self._delays[k]


class Running:
    """A worker running in a background thread."""

    def __init__(self, worker: Worker) -> None:
        self._stop = threading.Event()
        self.thread = threading.Thread(target=worker.run, args=(self._stop,), name="arbiter-worker", daemon=True)
        self.thread.start()

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stops polling and waits for the action in hand to finish."""
        self._stop.set()
        self.thread.join(timeout)



def compensation_due(rc: "Optional[Reconciliation]") -> bool:
    """Whether a worker may run a requested compensation, as far as its
    history goes (sdk/vectors.json "compensations"): not after its lease
    passed without a report, and not after a failure that said it may not
    be retried."""
    if rc is None:
        return True
    return not rc.compensation_timed_out and (rc.compensation_failures == 0 or rc.compensation_retriable)
