"""FQ-CoDel (RFC 8290), as Linux's sch_fq_codel: a CoDel queue per flow, served
by deficit round robin, new flows first.

Flows.  Linux hashes each packet's 5-tuple into 1024 buckets; here every
connection is its own flow (the few connections of a run never share a
bucket), a traced queue ``Bottleneck queue`` of instance ``<dir>:<conn>``.

Enqueue (``fq_codel_enqueue``).  The packet joins its flow's queue; a flow
that was in neither list joins the tail of the *new* list with a deficit of
one quantum (``link.mtu + bottleneck.overhead``, Linux's psched_mtu).  If
the bytes queued now exceed ``bottleneck.queue`` (Linux counts packets,
``limit``, and memory; here the queue's bytes stand for both), the fattest
flow loses packets from its head until half of its bytes are gone or 64
packets were dropped (``fq_codel_drop``), reason ``bottleneck_queue_full``;
repeated until the queue is within its bytes again.

Dequeue (``fq_codel_dequeue``).  Take the first flow of the new list, else of
the old list.  A flow out of deficit gets another quantum and moves to the
tail of the old list.  Otherwise its CoDel (the flow's own state, the whole
queue's bytes for its "one packet or less" test) gives the next packet, whose
bytes are charged to the deficit; a flow with nothing left moves from the new
to the old list (while the old list has flows, so that they are not starved)
or leaves the lists.  ECN marking is not modelled (every flow is not ECN
capable).

The bottleneck, idle, waits on its ``Bottleneck wake-up`` queue: a packet
reaching an idle bottleneck enqueues one unit there, so that the wait names
the one queue it ends on whichever flow the packet belongs to.
"""

from __future__ import annotations

from collections import deque

from cpasim.model.codel import CoDel
from cpasim.tracing import TracedStore

#: Packets fq_codel_drop removes at most per overflow (Linux drop_batch_size).
DROP_BATCH = 64


class _Flow:
    """One flow's queue and its CoDel state; the ``queue`` CoDel dequeues from."""

    __slots__ = ("fq", "store", "bytes", "deficit", "listed", "codel")

    def __init__(self, fq: FqCoDel, conn: str):
        self.fq = fq
        box = fq.box
        inst = f"{box.name}:{conn}"
        self.store = TracedStore(
            box.env, fq.tracer, box.qsys, "Bottleneck queue", inst, owner=box.sm
        )
        self.bytes = 0
        self.deficit = 0
        self.listed = False  # in the new or the old list
        self.codel = CoDel(fq.quantum)

    @property
    def backlog(self) -> int:
        return self.fq.backlog

    def take(self):
        if not self.store.items:
            return None
        item = self.store.take_now(1, self.fq.box.sm)[0]
        self._forget(item)
        return item

    def _forget(self, item) -> None:
        size = item[1].length + self.fq.box.overhead
        self.bytes -= size
        self.fq.backlog -= size

    def drop(self, item, reason: str) -> None:
        self.fq.box.lose(item[1], reason)


class FqCoDel:
    """The flows of one bottleneck ``box`` (see the module docstring)."""

    def __init__(self, box, tracer, quantum: int):
        self.box = box
        self.tracer = tracer
        self.quantum = quantum
        self.flows: dict[str, _Flow] = {}
        self.new_flows: deque[_Flow] = deque()
        self.old_flows: deque[_Flow] = deque()
        self.backlog = 0  # bytes queued over all flows
        self.wake = TracedStore(
            box.env, tracer, box.qsys, "Bottleneck wake-up", box.name, owner=box.sm
        )

    def enqueue(self, frame, size: int, carrier, now: float) -> None:
        flow = self.flows.get(frame.conn)
        if flow is None:
            flow = self.flows[frame.conn] = _Flow(self, frame.conn)
        flow.store.put_now((now, frame), carrier)
        flow.bytes += size
        self.backlog += size
        if not flow.listed:
            flow.listed = True
            flow.deficit = self.quantum
            self.new_flows.append(flow)
        while self.backlog > self.box.limit:
            self._drop_from_fattest(carrier)

    def _drop_from_fattest(self, carrier) -> None:
        fat = None
        for flow in self.flows.values():  # the first of equals, as Linux's scan
            if fat is None or flow.bytes > fat.bytes:
                fat = flow
        threshold = fat.bytes >> 1
        dropped = n = 0
        while True:
            item = fat.store.take_now(1, carrier)[0]
            fat._forget(item)
            self.box.lose(item[1], "bottleneck_queue_full")
            dropped += item[1].length + self.box.overhead
            n += 1
            if n >= DROP_BATCH or dropped >= threshold or not fat.store.items:
                return

    def dequeue(self, now: float):
        """The next ``(enqueued_ns, frame)`` to send, or None."""
        new, old = self.new_flows, self.old_flows
        while True:
            head = new if new else old
            if not head:
                return None
            flow = head[0]
            if flow.deficit <= 0:
                flow.deficit += self.quantum
                head.popleft()
                old.append(flow)
                continue
            item = flow.codel.dequeue(flow, now)
            if item is None:
                head.popleft()
                if head is new and old:
                    old.append(flow)
                else:
                    flow.listed = False
                continue
            flow.deficit -= item[1].length + self.box.overhead
            return item
