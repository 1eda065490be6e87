"""Taking from and adding to traced queues *now*, without a SimPy event.

A SimPy ``get`` on a non-empty store still schedules an event and suspends the
process until it is processed: a whole event per unit moved.  Where a state
machine already knows the units are there (NAPI draining the completed RX
ring, a fetch engine taking every posted descriptor) or that there is room (an
unbounded ring), these functions move the units synchronously and emit the
same ``enq``/``deq`` records the traced queue would, then wake whoever was
blocked on the other side, exactly as SimPy's own put/get would.

Each function works on the traced and the untraced variants alike (with tracing
off the SM handle is :data:`~cpasim.trace.NULL_SM` and records nothing).
"""

from __future__ import annotations


def take(store, sm, n: int) -> list:
    """Remove up to ``n`` items from the head of ``store`` now (one ``deq``)."""
    items = store.items
    k = min(n, len(items))
    if k == 0:
        return []
    out = items[:k]
    del items[:k]
    sm.deq(store.qid, k)
    if store.put_queue:
        store._trigger_put(None)
    return out


def put(store, item, sm) -> None:
    """Append ``item`` to ``store`` now (``enq``); the store must have room."""
    items = store.items
    if len(items) >= store._capacity:
        raise RuntimeError(f"{':'.join(store.name)}: put without room")
    items.append(item)
    sm.enq(store.qid, 1)
    if store.get_queue:
        store._trigger_get(None)


def grab(container, sm, n: int) -> int:
    """Take up to ``n`` units from ``container`` now (one ``deq``); return how many."""
    k = min(n, int(container._level))
    if k > 0:
        container._level -= k
        sm.deq(container.qid, k)
        if container.put_queue:
            container._trigger_put(None)
    return k


def give(container, sm, n: int) -> None:
    """Add ``n`` units to ``container`` now (one ``enq``); there must be room."""
    if container._level + n > container._capacity:
        raise RuntimeError(f"{':'.join(container.name)}: {n} units do not fit")
    container._level += n
    sm.enq(container.qid, n)
    if container.get_queue:
        container._trigger_get(None)


def acquire_free(pool, sm) -> bool:
    """Take a unit of ``pool`` now if one is free and nobody queues for it."""
    if pool._level >= 1 and not pool.get_queue:
        pool._level -= 1
        sm.deq(pool.qid, 1)
        return True
    return False
