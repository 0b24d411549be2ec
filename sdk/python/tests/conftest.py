"""The SDK's tests run against a real `arbiter serve` started by
sdk/with-server, which exports its URL and keys."""

from __future__ import annotations

import os
import time
import uuid
from typing import Callable, TypeVar

import pytest

import arbiter

T = TypeVar("T")


def _env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set: run the tests under sdk/with-server (see sdk/python/run-tests)")
    return v


@pytest.fixture(scope="session")
def url() -> str:
    return _env("ARBITER_URL")


def _client(url: str, key: str) -> arbiter.Client:
    # Short pauses: tests wait for the sweeper, not for production backoff.
    return arbiter.Client(url, key, timeout=10, backoff=arbiter.Backoff(first=0.05, largest=0.5))


@pytest.fixture
def agent(url: str) -> arbiter.Client:
    return _client(url, _env("ARBITER_AGENT_KEY"))


@pytest.fixture
def operator(url: str) -> arbiter.Client:
    return _client(url, _env("ARBITER_OPERATOR_KEY"))


@pytest.fixture
def reader(url: str) -> arbiter.Client:
    return _client(url, _env("ARBITER_READER_KEY"))


@pytest.fixture
def admin(url: str) -> arbiter.Client:
    return _client(url, _env("ARBITER_ADMIN_KEY"))


@pytest.fixture
def uniq() -> str:
    """A part for keys and tools no other test uses: the tests share one
    server and namespace."""
    return uuid.uuid4().hex[:12]


def eventually(cond: Callable[[], T], timeout: float = 10.0, every: float = 0.05, what: str = "") -> T:
    """Polls cond until it returns something true, and returns it."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what or cond}")
        time.sleep(every)


def wait_status(client: arbiter.Client, key: str, status: str, timeout: float = 10.0) -> arbiter.Action:
    def check() -> "arbiter.Action | None":
        try:
            a = client.action_by_key(key)
        except arbiter.APIError as e:
            if e.code == "not_found":  # not yet
                return None
            raise
        return a if a.status == status else None

    return eventually(check, timeout, what=f"{key} {status}")


def types_of(client: arbiter.Client, action_id: str) -> list:
    return [e.type for e in client.entries(action_id)]


@pytest.fixture
def proxy(url: str):
    from urllib.parse import urlparse

    from proxy import Proxy

    u = urlparse(url)
    p = Proxy(u.hostname or "127.0.0.1", u.port or 80)
    yield p
    p.close()


@pytest.fixture
def agent_via(proxy) -> arbiter.Client:
    """The agent's client, through the proxy."""
    return _client(proxy.url, _env("ARBITER_AGENT_KEY"))
