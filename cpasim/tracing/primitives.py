"""SimPy queues that annotate themselves.

:class:`TracedStore`, :class:`TracedContainer` and :class:`TracedPool` behave exactly
like :class:`simpy.Store` / :class:`simpy.Container` (same events, same order) and
emit the queue records of ``annotations.md`` on the way:

- a request that finds the queue empty (get) or full (put) emits ``wait_empty`` /
  ``wait_full`` by the requesting SM, at once, before it blocks;
- ``enq`` / ``deq`` are emitted inside SimPy's ``_do_put`` / ``_do_get`` hooks, i.e. at
  the moment the units move.  A put that wakes a blocked getter therefore appears
  before that getter's ``deq``, and a get that frees room for a blocked putter before
  that putter's ``enq``.

Every queue emits ``declare`` (capacity, whether units carry connection ids) when it
is built.  That record, and the initial ``resize`` of a container, come from
``owner`` if given, otherwise from an SM named like the queue.

Units can also be moved *now*, without a SimPy event (``put_now`` / ``take_now`` on
a store, ``give`` / ``grab`` on a container, ``acquire_now`` on a pool).  A SimPy get
on a non-empty store still schedules an event and suspends the process until it is
processed: a whole event per unit moved.  Where a state machine already knows the
units are there (NAPI draining the completed RX ring, a fetch engine taking every
posted descriptor) or that there is room (an unbounded ring), these move the units
synchronously, emit the same ``enq``/``deq`` records, then wake whoever was blocked
on the other side, exactly as SimPy's own put/get would.

With tracing off (:data:`~cpasim.tracing.tracer.NULL_TRACER`) the constructor returns an
untraced subclass that makes no tracer calls at all, so the queue costs what a bare
SimPy queue costs (or less: its requests are built more cheaply, see
:func:`_get_request`).
"""

from __future__ import annotations

from heapq import heappush

import simpy
from simpy.events import NORMAL, PENDING
from simpy.resources.container import ContainerGet, ContainerPut
from simpy.resources.store import StoreGet, StorePut

from cpasim.tracing.records import DEQ, ENQ
from cpasim.tracing.tracer import NULL_SM, counted, packed

INF = float("inf")


# A request remembers the code of the enq/deq record its SM emits when the request
# is served (a store keeps packed codes of count 1, a container codes whose count
# goes to the tracer's side list: see cpasim.tracing.tracer).  SimPy may serve a
# request inside its constructor, before anything can be attached to it, so a put
# hands its code over through the queue's ``_code_now`` during construction (read
# when ``code`` is still the class default); a get is built by :func:`_get_request`,
# which sets the code first.
class _TracedStorePut(StorePut):
    code = None


class _TracedStoreGet(StoreGet):
    code = None


class _TracedContainerPut(ContainerPut):
    code = None


class _TracedContainerGet(ContainerGet):
    code = None


_new = object.__new__


def _get_request(cls, queue, code=None, amount=None):
    """A get request of class ``cls`` on ``queue`` (of ``amount`` units, for a
    container), as SimPy's ``Get.__init__`` makes it.

    Built in place, for speed (a get is the usual way a state machine blocks), and
    without SimPy's callback that serves waiting puts when the get is processed
    where no put can ever wait: an unbounded queue, or a pool (released without a
    put request)."""
    event = _new(cls)
    if amount is not None:
        if amount <= 0:
            raise ValueError(f"amount(={amount}) must be > 0.")
        event.amount = amount
    event.env = env = queue._env
    event.callbacks = [queue._trigger_put] if queue._puts_wait else []
    event._value = PENDING
    event.resource = queue
    event.proc = env._active_proc
    event.code = code
    queue.get_queue.append(event)
    queue._trigger_get(None)
    return event


def _put_request(queue, item):
    """A put request of ``item`` on the store ``queue``, as SimPy's ``StorePut`` makes
    it (the same attributes, callbacks and order), built in place: with many
    connections a full qdisc has hundreds of senders queued on it, each putting."""
    event = _new(StorePut)
    event.item = item
    event.env = env = queue._env
    event.callbacks = [queue._trigger_get]
    event._value = PENDING
    event.resource = queue
    event.proc = env._active_proc
    queue.put_queue.append(event)
    queue._trigger_put(None)
    return event


def _succeed(event, value=None) -> None:
    """``event.succeed(value)``, which the queue serving a pending request does
    often: scheduled as SimPy schedules it, without the checks and the second call."""
    event._ok = True
    event._value = value
    env = event.env
    heappush(env._queue, (env._now, NORMAL, next(env._eid), event))


#: The attributes of an untraced queue (SimPy's and :func:`_setup`'s).
_RESOURCE_SLOTS = ("_env", "_capacity", "put_queue", "get_queue", "tracer", "name", "qid")
_RESOURCE_SLOTS += ("_puts_wait",)


class _Untraceable:
    """Chooses the untraced variant of a queue class when tracing is off."""

    _untraced: type

    def __new__(cls, env, tracer, *args, **kwargs):
        if not tracer.enabled:
            cls = cls._untraced
        return object.__new__(cls)


def _resource(queue, env, capacity) -> None:
    """What SimPy's ``BaseResource.__init__`` sets, without its ``bind_early``: that binds
    the ``BoundClass`` attributes of the queue's own class, and these classes have none
    (their put and get are methods).  A system of many connections builds a dozen
    queues each, and the binding was a tenth of its building."""
    if capacity <= 0:
        raise ValueError('"capacity" must be > 0.')
    queue._env = env
    queue._capacity = capacity
    queue.put_queue = []
    queue.get_queue = []


def _setup(queue, tracer, name, owner, capacity, conn_flow):
    queue.tracer = tracer
    queue.name = name
    queue.qid = tracer.queue(*name)
    queue._puts_wait = queue._capacity != INF  # else a put never blocks
    if not tracer.enabled:
        # Untraced: no codes to keep.  A run of many connections has a dozen queues
        # each, and every byte of them competes for the cache.
        return NULL_SM
    queue._emit = tracer.emit_packed
    queue._emit_counted = tracer.emit_counted
    queue._enq_codes = {}  # SM handle -> packed code of its enq on this queue
    queue._deq_codes = {}
    queue._deq_counted = {}  # a store's deq of several items: codes with a side count
    queue._code_now = None
    owner = owner if owner is not None else tracer.sm(*name)
    tracer.declare(queue.qid, owner, capacity, conn_flow)
    return owner


def _code(queue, codes: dict, op: int, sm, pack) -> float:
    """The code (``pack`` of the index) of ``sm``'s ``op`` on ``queue``, kept in ``codes``.

    Packed codes are negative, never 0, so a caller looks one up with
    ``codes.get(sm) or _code(...)``."""
    code = codes[sm] = pack(queue.tracer.code(op, sm.id, queue.qid))
    return code


def _packed_one(index: int) -> float:
    return packed(index, 1)


class TracedStore(_Untraceable, simpy.Store):
    """A FIFO of items; ``capacity`` None means unbounded."""

    def __init__(
        self,
        env,
        tracer,
        qsys: str,
        q: str,
        qinst: str = "0",
        *,
        capacity: int | None = None,
        conn_flow: bool = True,
        owner=None,
    ):
        _resource(self, env, INF if capacity is None else capacity)
        self.items = []
        _setup(self, tracer, (qsys, q, qinst), owner, capacity, conn_flow)

    def put(self, item, sm) -> StorePut:
        code = self._enq_codes.get(sm) or _code(self, self._enq_codes, ENQ, sm, _packed_one)
        self._code_now = code
        event = _TracedStorePut(self, item)
        if event._value is PENDING:
            event.code = code
            if len(self.items) >= self._capacity:
                sm.wait_full(self.qid, 1)
        return event

    def get(self, sm) -> StoreGet:
        code = self._deq_codes.get(sm) or _code(self, self._deq_codes, DEQ, sm, _packed_one)
        event = _get_request(_TracedStoreGet, self, code)
        if event._value is PENDING and not self.items:
            sm.wait_empty(self.qid, 1)
        return event

    def put_now(self, item, sm) -> None:
        """Append ``item`` now (``enq``); the store must have room."""
        items = self.items
        if len(items) >= self._capacity:
            raise RuntimeError(f"{':'.join(self.name)}: put without room")
        items.append(item)
        code = self._enq_codes.get(sm) or _code(self, self._enq_codes, ENQ, sm, _packed_one)
        self._emit(code)
        if self.get_queue:
            self._trigger_get(None)

    def take_now(self, n: int, sm) -> list:
        """Remove up to ``n`` items from the head now (one ``deq``)."""
        items = self.items
        k = min(n, len(items))
        if k == 0:
            return []
        out = items[:k]
        del items[:k]
        if k == 1:
            code = self._deq_codes.get(sm) or _code(self, self._deq_codes, DEQ, sm, _packed_one)
            self._emit(code)
        else:
            code = self._deq_counted.get(sm) or _code(self, self._deq_counted, DEQ, sm, counted)
            self._emit_counted(code, k)
        if self.put_queue:
            self._trigger_put(None)
        return out

    def take_one(self, sm):
        """Remove the head item now (one ``deq``) and return it; there must be one.
        (``take_now(1)``, without the list: a MAC takes its frames one by one.)"""
        item = self.items.pop(0)
        code = self._deq_codes.get(sm) or _code(self, self._deq_codes, DEQ, sm, _packed_one)
        self._emit(code)
        if self.put_queue:
            self._trigger_put(None)
        return item

    # SimPy's generic trigger loops, specialised: a store serves at most one request
    # per trigger (its _do_put/_do_get return None).  The same request is served at
    # the same moment, without a ``triggered`` check per request.
    def _trigger_put(self, get_event) -> None:
        queue = self.put_queue
        if queue and len(self.items) < self._capacity:
            self._do_put(queue.pop(0))

    def _trigger_get(self, put_event) -> None:
        queue = self.get_queue
        if queue and self.items:
            self._do_get(queue.pop(0))

    def _do_put(self, event):
        if len(self.items) < self._capacity:
            self.items.append(event.item)
            _succeed(event)
            code = event.code
            self._emit(self._code_now if code is None else code)

    def _do_get(self, event):
        if self.items:
            _succeed(event, self.items.pop(0))
            self._emit(event.code)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({':'.join(self.name)}, {len(self.items)} items)"


class _UntracedStore(TracedStore):
    # Slots: a run of many connections has a dozen of these each, met by every
    # segment; an attribute in a slot is read from the object itself, not from the
    # values of its dictionary, one cache line further.
    __slots__ = _RESOURCE_SLOTS + ("items",)

    def put(self, item, sm=None) -> StorePut:
        return _put_request(self, item)

    def put_now(self, item, sm=None) -> None:
        items = self.items
        if len(items) >= self._capacity:
            raise RuntimeError(f"{':'.join(self.name)}: put without room")
        items.append(item)
        if self.get_queue:
            self._trigger_get(None)

    def take_now(self, n: int, sm=None) -> list:
        items = self.items
        k = min(n, len(items))
        if k == 0:
            return []
        out = items[:k]
        del items[:k]
        if self.put_queue:
            self._trigger_put(None)
        return out

    def take_one(self, sm=None):
        item = self.items.pop(0)
        if self.put_queue:
            self._trigger_put(None)
        return item

    def get(self, sm=None) -> StoreGet:
        return _get_request(StoreGet, self)

    def _do_put(self, event):
        if len(self.items) < self._capacity:
            self.items.append(event.item)
            _succeed(event)

    def _do_get(self, event):
        if self.items:
            _succeed(event, self.items.pop(0))


TracedStore._untraced = _UntracedStore
_UntracedStore._untraced = _UntracedStore


class TracedContainer(_Untraceable, simpy.Container):
    """An amount of units (bytes, credits, window); ``capacity`` None means unbounded.

    The initial level ``init`` is recorded as a ``resize``.
    """

    _declare_capacity = True  # False: declared unbounded whatever SimPy's capacity

    _unannotated = 0  # units held or asked for by unannotated holders (TracedPool only)

    def __init__(
        self,
        env,
        tracer,
        qsys: str,
        q: str,
        qinst: str = "0",
        *,
        capacity: int | None = None,
        init: int = 0,
        conn_flow: bool = True,
        owner=None,
    ):
        _resource(self, env, INF if capacity is None else capacity)
        if init < 0:
            raise ValueError('"init" must be >= 0.')
        if init > self._capacity:
            raise ValueError('"init" must be <= "capacity".')
        self._level = init
        declared = capacity if self._declare_capacity else None
        owner = _setup(self, tracer, (qsys, q, qinst), owner, declared, conn_flow)
        owner.resize(self.qid, init)

    # SimPy serves container requests in FIFO order, so a blocked request waits for
    # room (or units) for itself and for every request queued before it: that sum
    # is the ``n`` of its wait record.
    def put(self, amount: int, sm) -> ContainerPut:
        code = self._enq_codes.get(sm) or _code(self, self._enq_codes, ENQ, sm, counted)
        self._code_now = code
        event = _TracedContainerPut(self, amount)
        if event._value is PENDING:
            event.code = code
            need = 0
            for waiting in self.put_queue:  # a loop: cheaper than sum() over a generator
                need += waiting.amount
            sm.wait_full(self.qid, need)
        return event

    def get(self, amount: int, sm) -> ContainerGet:
        code = self._deq_codes.get(sm) or _code(self, self._deq_codes, DEQ, sm, counted)
        event = _get_request(_TracedContainerGet, self, code, amount)
        if event._value is PENDING:
            need = 0
            for waiting in self.get_queue:  # a loop: cheaper than sum() over a generator
                if waiting.code is not None:  # an untraced holder's turn is not on record
                    need += waiting.amount
            # Blocked only by units held untraced (TracedPool.take_untraced), the SM
            # is not waiting on record: to the trace the units are there, and its
            # wait stays in its own state until it takes one.
            if self._level + self._unannotated < need:
                sm.wait_empty(self.qid, need)
        return event

    def give(self, n: int, sm) -> None:
        """Add ``n`` units now (one ``enq``); there must be room."""
        if self._level + n > self._capacity:
            raise RuntimeError(f"{':'.join(self.name)}: {n} units do not fit")
        self._level += n
        code = self._enq_codes.get(sm) or _code(self, self._enq_codes, ENQ, sm, counted)
        self._emit_counted(code, n)
        if self.get_queue:
            self._trigger_get(None)

    def grab(self, n: int, sm) -> int:
        """Take up to ``n`` units now (one ``deq``); return how many."""
        k = min(n, int(self._level))
        if k > 0:
            self._level -= k
            code = self._deq_codes.get(sm) or _code(self, self._deq_codes, DEQ, sm, counted)
            self._emit_counted(code, k)
            if self.put_queue:
                self._trigger_put(None)
        return k

    def resize(self, level: int, sm) -> None:
        """Set the level to ``level`` now (e.g. a window update); wakes whoever can go."""
        if not 0 <= level <= self._capacity:
            raise ValueError(
                f"{':'.join(self.name)}: resize to {level} outside 0..{self._capacity}"
            )
        self._level = level
        sm.resize(self.qid, level)
        self._trigger_get(None)
        self._trigger_put(None)

    # SimPy's generic trigger loops, specialised: a container serves requests from
    # the head of the queue while they fit, as SimPy's loop does.
    def _trigger_put(self, get_event) -> None:
        queue = self.put_queue
        while queue and self._capacity - self._level >= queue[0].amount:
            self._do_put(queue.pop(0))

    def _trigger_get(self, put_event) -> None:
        queue = self.get_queue
        while queue and self._level >= queue[0].amount:
            self._do_get(queue.pop(0))

    def _do_put(self, event):
        if self._capacity - self._level >= event.amount:
            self._level += event.amount
            _succeed(event)
            code = event.code
            self._emit_counted(self._code_now if code is None else code, event.amount)
            return True
        return None

    def _do_get(self, event):
        if self._level >= event.amount:
            self._level -= event.amount
            _succeed(event)
            self._emit_counted(event.code, event.amount)
            return True
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({':'.join(self.name)}, level {self._level})"


class _PlainContainerOps:
    """The container hot paths without tracer calls, for the untraced variants."""

    def put(self, amount: int, sm=None) -> ContainerPut:
        return ContainerPut(self, amount)

    def get(self, amount: int, sm=None) -> ContainerGet:
        return _get_request(ContainerGet, self, amount=amount)

    def give(self, n: int, sm=None) -> None:
        if self._level + n > self._capacity:
            raise RuntimeError(f"{':'.join(self.name)}: {n} units do not fit")
        self._level += n
        if self.get_queue:
            self._trigger_get(None)

    def grab(self, n: int, sm=None) -> int:
        k = min(n, int(self._level))
        if k > 0:
            self._level -= k
            if self.put_queue:
                self._trigger_put(None)
        return k

    def _do_put(self, event):
        if self._capacity - self._level >= event.amount:
            self._level += event.amount
            _succeed(event)
            return True
        return None

    def _do_get(self, event):
        if self._level >= event.amount:
            self._level -= event.amount
            _succeed(event)
            return True
        return None


class _UntracedContainer(_PlainContainerOps, TracedContainer):
    __slots__ = _RESOURCE_SLOTS + ("_level",)  # as _UntracedStore's


TracedContainer._untraced = _UntracedContainer
_UntracedContainer._untraced = _UntracedContainer


class TracedPool(TracedContainer):
    """``size`` identical resources (cores, channels) as a credit queue of free units.

    Declared unbounded with an initial ``resize(size)``: acquiring depends on whoever
    released the unit, and a capacity what-if (+k) means k more resources.
    """

    _declare_capacity = False

    def __init__(self, env, tracer, qsys: str, q: str, qinst: str = "0", *, size: int, owner=None):
        if size < 1:
            raise ValueError(f"{qsys}:{q}:{qinst}: pool size must be >= 1, got {size}")
        super().__init__(
            env, tracer, qsys, q, qinst, capacity=size, init=size, conn_flow=False, owner=owner
        )
        self._release_codes = {}  # SM handle -> packed code of its enq of one unit
        self._acquire_codes = {}  # SM handle -> packed code of its deq of one unit
        self._puts_wait = False  # units come back by release(), which never waits

    @property
    def size(self) -> int:
        return self._capacity

    @property
    def free(self) -> int:
        return self._level

    def acquire(self, sm) -> ContainerGet:
        """Take one free unit (``deq``); yield the returned event."""
        return self.get(1, sm)

    def acquire_now(self, sm) -> bool:
        """Take a unit now (``deq``) if one is free and nobody queues for it."""
        if self._level >= 1 and not self.get_queue:
            self._level -= 1
            code = self._acquire_codes.get(sm) or _code(
                self, self._acquire_codes, DEQ, sm, _packed_one
            )
            self._emit(code)
            return True
        return False

    def release(self, sm) -> None:
        """Give one unit back (``enq``) now; never blocks, so there is nothing to yield."""
        if self._level >= self._capacity:
            raise RuntimeError(f"{':'.join(self.name)}: release without a matching acquire")
        self._level += 1
        try:
            code = self._release_codes[sm]
        except KeyError:
            code = _code(self, self._release_codes, ENQ, sm, _packed_one)
        self._emit(code)
        if self.get_queue:
            self._trigger_get(None)

    def hand_over(self, sm, to, request=None) -> None:
        """The unit ``sm`` holds goes straight to ``to``, ahead of whoever queues: ``sm``'s
        ``enq`` and ``to``'s ``deq``, the level unchanged.  ``request``: ``to``'s pending
        :meth:`acquire`, which this serves (a softirq run on the holder's core)."""
        code = self._release_codes.get(sm) or _code(self, self._release_codes, ENQ, sm, _packed_one)
        self._emit(code)
        if request is None:
            code = self._acquire_codes.get(to) or _code(
                self, self._acquire_codes, DEQ, to, _packed_one
            )
            self._emit(code)
            return
        self.get_queue.remove(request)
        _succeed(request)
        self._emit_counted(request.code, 1)

    # A unit held by something that is not annotated (M5's bridge forwarding a CPU's
    # register write, cpasim.model.m5bus): it queues with the traced requests, in
    # order, and records nothing.  To the trace the unit stays free: an SM that
    # queues behind such a holder records no wait (get), so its wait is its own
    # state's time and the identity invariant holds.
    def take_untraced(self) -> bool:
        """Take a unit now, recording nothing, if one is free and nobody queues."""
        if self._level >= 1 and not self.get_queue:
            self._level -= 1
            self._unannotated += 1
            return True
        return False

    def wait_untraced(self) -> ContainerGet:
        """A request for a unit, in turn with the others, that records nothing when served."""
        self._unannotated += 1
        return _get_request(_TracedContainerGet, self, None, 1)

    def release_untraced(self) -> None:
        """Give back a unit taken by :meth:`take_untraced` or :meth:`wait_untraced`."""
        if self._unannotated < 1:
            raise RuntimeError(f"{':'.join(self.name)}: release without a matching acquire")
        self._unannotated -= 1
        self._level += 1
        if self.get_queue:
            self._trigger_get(None)

    def _do_get(self, event):
        if self._level >= event.amount:
            self._level -= event.amount
            _succeed(event)
            if event.code is not None:  # None: a wait_untraced request
                self._emit_counted(event.code, event.amount)
            return True
        return None


class _UntracedPool(_PlainContainerOps, TracedPool):
    def acquire(self, sm=None) -> ContainerGet:
        return _get_request(ContainerGet, self, amount=1)

    def acquire_now(self, sm=None) -> bool:
        if self._level >= 1 and not self.get_queue:
            self._level -= 1
            return True
        return False

    def release(self, sm=None) -> None:
        if self._level >= self._capacity:
            raise RuntimeError(f"{':'.join(self.name)}: release without a matching acquire")
        self._level += 1
        if self.get_queue:
            self._trigger_get(None)

    def hand_over(self, sm, to, request=None) -> None:
        if request is not None:
            self.get_queue.remove(request)
            _succeed(request)


TracedPool._untraced = _UntracedPool
_UntracedPool._untraced = _UntracedPool
