"""Every piece of module-level connection state, in one file.

- the sync pools sessions given a conninfo string share (one per conninfo,
  per process: re-created in a forked child, closed at exit);
- the async pools, one per conninfo and event loop;
- the LISTEN hubs of the followers, one per conninfo and event loop;
- the notifiers that send the appends' NOTIFYs, one per conninfo, per process
  (sync and async sessions alike: posting to one is a dict update).

Each is created on first use: nothing connects at import.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeAlias, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from ._core import reason
from ._notify import Notifier

if TYPE_CHECKING:
    from .follow import Hub

DEFAULT_POOL_SIZE = 10
DEFAULT_TIMEOUT = 10.0
"""Seconds to wait for a pooled connection before an append fails."""
FIRST_WAIT = 0.5
"""Seconds a borrow waits for a pooled connection before it asks the server, on a connection
of its own, whether it takes any: one that refuses (down, no such database, a password it
refuses) fails the borrow then, not after the pool's whole timeout; one that takes it, or is
too slow to answer within its connect timeout, leaves the borrow to wait for the rest."""
_PROBE_REUSE = 1.0  # seconds an answer holds for every borrow of a pool: one probe, not a storm

Pool: TypeAlias = "ConnectionPool[psycopg.Connection[Any]]"
APool: TypeAlias = "AsyncConnectionPool[psycopg.AsyncConnection[Any]]"
Source: TypeAlias = "str | ConnectionPool[Any] | psycopg.Connection[Any]"
ASource: TypeAlias = "str | AsyncConnectionPool[Any] | psycopg.AsyncConnection[Any]"

_Value = TypeVar("_Value")


class _Closing(Protocol):
    def close(self) -> None: ...


_Closable = TypeVar("_Closable", bound=_Closing)


# What the shared sync and async pools have in common; each also checks a connection before
# lending it, so one the server ended is replaced rather than handed out.
# (``kwargs`` is given per pool: a pool keeps the dict it is handed.)
_POOL_OPTIONS: dict[str, Any] = {
    "min_size": 1,
    "max_size": DEFAULT_POOL_SIZE,
    "timeout": DEFAULT_TIMEOUT,
}


class _PerProcess(Generic[_Closable]):
    """Values keyed by conninfo, one set per process (re-created in a forked child, which must
    not share its parent's sockets), closed at exit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._values: dict[str, _Closable] = {}
        self._registered = False

    def get(self, conninfo: str, make: Callable[[], _Closable]) -> _Closable:
        """The value for ``conninfo``, made by ``make()`` if this process has none yet."""
        with self._lock:
            if self._pid != os.getpid():
                self._pid, self._values = os.getpid(), {}
            value = self._values.get(conninfo)
            if value is None:
                if not self._registered:
                    # Runs before the interpreter stops its daemon threads: what the last
                    # appends posted is sent rather than left to the followers' poll.
                    atexit.register(self.close)
                    self._registered = True
                value = self._values[conninfo] = make()
            return value

    def close(self) -> None:
        with self._lock:
            values, self._values = list(self._values.values()), {}
        for value in values:
            value.close()


_SHARED: _PerProcess[Pool] = _PerProcess()  # the pools sessions given a conninfo string share
_NOTIFIERS: _PerProcess[Notifier] = _PerProcess()


def notifier_for(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> Notifier:
    """The notifier of this process for the pool's server (its conninfo and connection kwargs)."""
    conninfo = str(pool.conninfo)
    kwargs = pool.kwargs if isinstance(pool.kwargs, dict) else {}
    return _NOTIFIERS.get(conninfo, lambda: Notifier(conninfo, kwargs))


class PerLoop(Generic[_Value]):
    """Values keyed by conninfo, one set per event loop (gone with their loop)."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Value]] = (
            weakref.WeakKeyDictionary()
        )

    def here(self) -> dict[str, _Value]:
        return self._by_loop.setdefault(asyncio.get_running_loop(), {})

    def pop_here(self) -> dict[str, _Value]:
        return self._by_loop.pop(asyncio.get_running_loop(), {})


class Probe(NamedTuple):
    """The server's answer to a probe: ``why`` it refused a connection (``None``: it took one),
    and whether that was a refusal rather than no answer in time (a slow server is waited for)."""

    why: str | None
    refused: bool


_PROBES: weakref.WeakKeyDictionary[Any, tuple[float, Probe]] = weakref.WeakKeyDictionary()


def first_wait(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> float:
    """How long a borrow waits before probing (all of the pool's timeout: no probe when the
    timeout is as short, or the pool's conninfo is no string to connect with)."""
    if not isinstance(pool.conninfo, str):
        return float(pool.timeout)
    return min(FIRST_WAIT, float(pool.timeout))


def probed(pool: ConnectionPool[Any] | AsyncConnectionPool[Any]) -> Probe | None:
    """The answer of the pool's probe of the last second, if there was one."""
    known = _PROBES.get(pool)
    return known[1] if known is not None and time.monotonic() - known[0] < _PROBE_REUSE else None


def remember(
    pool: ConnectionPool[Any] | AsyncConnectionPool[Any], refused: psycopg.Error | None
) -> Probe:
    """Keep (as text, no traceback holding the pool) and return a probe's answer."""
    probe = Probe(
        None if refused is None else reason(refused),
        refused is not None and not isinstance(refused, psycopg.errors.ConnectionTimeout),
    )
    _PROBES[pool] = (time.monotonic(), probe)
    return probe


_ASYNC_POOLS: PerLoop[APool] = PerLoop()
HUBS: PerLoop[Hub] = PerLoop()


def shared_pool(conninfo: str) -> Pool:
    """The pool this process's sync sessions share for ``conninfo``."""
    return _SHARED.get(conninfo, lambda: _new_pool(conninfo))


def _new_pool(conninfo: str) -> Pool:
    return ConnectionPool(
        conninfo,
        name="dsh-todo",
        kwargs={"autocommit": True},
        check=ConnectionPool.check_connection,
        open=True,
        **_POOL_OPTIONS,
    )


async def async_shared_pool(conninfo: str) -> APool:
    """The pool this event loop's async sessions share for ``conninfo``."""
    pools = _ASYNC_POOLS.here()
    pool = pools.get(conninfo)
    if pool is None:
        pool = AsyncConnectionPool(
            conninfo,
            name="dsh-todo-async",
            kwargs={"autocommit": True},
            check=AsyncConnectionPool.check_connection,
            open=False,
            **_POOL_OPTIONS,
        )
        pools[conninfo] = pool
    await pool.open()  # every caller: a second one may come while the first is opening it
    return pool


def close_shared_pools() -> None:
    """Close the pools sessions opened for conninfo strings (they reopen when next used).

    The notifiers of the process send what they hold and close their connections too.
    """
    _NOTIFIERS.close()
    _SHARED.close()


async def close_async_shared_pools() -> None:
    """Close the pools async sessions opened for conninfo strings on this event loop."""
    for pool in _ASYNC_POOLS.pop_here().values():
        await pool.close()
