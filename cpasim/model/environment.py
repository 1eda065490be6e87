"""A leaner SimPy environment for the model: the same events in the same order.

:class:`Kernel` is a :class:`simpy.Environment` whose two hot constructors do
less work per event: :meth:`Kernel.timeout` builds the timeout and pushes it on
the queue itself (SimPy goes through ``Timeout.__init__`` and
``Environment.schedule``), and :meth:`Kernel.process` starts a
:class:`_Process` whose resumption skips what the model never needs (a bound
method made anew at every wait; the search for a thrown exception's frame).
:meth:`Kernel.run_until` processes events like ``step()`` in a loop without a
call per event.  Every event still gets the id, time and priority SimPy would
give it, so a run on a Kernel is the run on a plain Environment, event for event:
components may be driven by either.  A tracer bound to a Kernel hands it its
buffer (:meth:`Kernel.note_times`): the Kernel notes each new time there before the
event runs, so that the records themselves never read the clock.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush

import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, PENDING, Initialize, Process, Timeout

_new = object.__new__


class _Process(Process):
    """A SimPy process with a cheaper resumption; failures take SimPy's own path."""

    def __init__(self, env, generator) -> None:
        self.env = env
        self.callbacks = []
        self._value = PENDING
        self._generator = generator
        self._send = generator.send
        # Bound once: SimPy's ``self._resume`` makes a new bound method per wait.
        self._resume = self._resume_fast
        self._target = Initialize(env, self)

    def _resume_fast(self, event) -> None:
        env = self.env
        env._active_proc = self
        send = self._send
        while True:
            if not event._ok:  # a failed event is thrown in: SimPy's code does that
                env._active_proc = None
                Process._resume(self, event)
                return
            try:
                event = send(event._value)
            except StopIteration as stop:
                self._ok = True
                self._value = stop.args[0] if stop.args else None
                env.schedule(self)
                event = None
                break
            except BaseException as exc:
                self._ok = False
                exc.__traceback__ = exc.__traceback__.tb_next  # as SimPy: not this frame
                self._value = exc
                env.schedule(self)
                event = None
                break
            try:
                callbacks = event.callbacks
            except AttributeError:
                raise RuntimeError(f"{self._generator!r} yielded {event!r}, not an event") from None
            if callbacks is not None:  # not processed yet: wait for it
                callbacks.append(self._resume)
                break
        self._target = event
        env._active_proc = None


class Kernel(simpy.Environment):
    """The model's environment (see the module docstring)."""

    _notes = None  # a tracer's buffer: (mark, append, buffer, flush); see note_times

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self._lines: list[Line] = []  # the Lines of events made on it

    def queued(self) -> int:
        """Events scheduled and not processed yet: on the event queue, or in a
        :class:`Line` behind its oldest."""
        waiting = 0
        for line in self._lines:
            if line.waiting:
                waiting += len(line.waiting) - 1  # the oldest is on the queue
        return len(self._queue) + waiting

    def note_times(self, notes) -> None:
        """Note the simulated time in a tracer's buffer before each event (None: stop).

        ``notes`` is ``(mark, append, buffer, flush)``: ``mark[0]`` the time last noted,
        ``mark[1]`` the buffer length at which to ``flush`` (the length grows by one
        with every time noted).  A tracer hands it over so that its records need not
        read the clock one by one (:class:`cpasim.tracing.tracer.ClockedSM`)."""
        self._notes = notes
        # ``run()`` steps through ``self.step``: only a traced run pays for the notes.
        if notes is not None:
            self.step = self._noted_step
        else:
            self.__dict__.pop("step", None)

    def advance(self, t: float) -> None:
        """Move the clock forward to ``t`` between events (a paused run's end)."""
        if t > self._now:
            self._now = t
            if self._notes is not None:
                self._note(t)

    def _note(self, now: float) -> None:
        """Note ``now`` in the tracer's buffer unless it is the time last noted.
        (:meth:`_run_until_noted` does the same inline, once per event.)"""
        mark, note, _, _ = self._notes
        if now != mark[0]:
            mark[0] = now
            mark[1] += 1
            note(now)

    def _noted_step(self) -> None:
        """``step()``, noting the time of the event it processes (see :meth:`note_times`)."""
        if not self._queue:
            return simpy.Environment.step(self)
        self._note(self._queue[0][0])
        simpy.Environment.step(self)
        mark, _, buffer, flush = self._notes
        if len(buffer) >= mark[1]:
            flush()

    def process(self, generator) -> Process:
        return _Process(self, generator)

    def timeout(self, delay: float = 0, value=None) -> Timeout:
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        event = _new(Timeout)
        event.env = self
        event.callbacks = []
        event._value = value
        event._delay = delay
        event._ok = True
        heappush(self._queue, (self._now + delay, NORMAL, next(self._eid), event))
        return event

    def run_until(self, t: float) -> bool:
        """Process every event scheduled before ``t``, as repeated ``step()`` would.

        Returns False when an event stopped the simulation (``StopSimulation``), whose
        remaining callbacks are then rescheduled, as ``step()`` does."""
        if self._notes is not None:
            return self._run_until_noted(t)
        queue = self._queue
        while queue and queue[0][0] < t:
            self._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            try:
                for callback in callbacks:
                    callback(event)
            except StopSimulation:
                self._stopped(event, callbacks, callback)
                return False
            if not event._ok and not hasattr(event, "_defused"):
                _raise_failure(event)
        return True

    def _stopped(self, event, callbacks, callback) -> None:
        """``callback`` stopped the run: reschedule the event's other callbacks, as
        ``step()`` does."""
        event.callbacks = callbacks[callbacks.index(callback) + 1 :]
        self.schedule(event, -1)

    def _run_until_noted(self, t: float) -> bool:
        """:meth:`run_until`, noting each new time in the tracer's buffer and flushing
        it between events once a chunk is full.  A second copy of the loop, so that an
        untraced run tests for the notes once per call, not once per event."""
        queue = self._queue
        mark, note, buffer, flush = self._notes
        while queue and queue[0][0] < t:
            now, _, _, event = heappop(queue)
            self._now = now
            if now != mark[0]:
                mark[0] = now
                mark[1] += 1
                note(now)
            callbacks, event.callbacks = event.callbacks, None
            try:
                for callback in callbacks:
                    callback(event)
            except StopSimulation:
                self._stopped(event, callbacks, callback)
                return False
            if not event._ok and not hasattr(event, "_defused"):
                _raise_failure(event)
            if len(buffer) >= mark[1]:
                flush()
        return True


class Line:
    """Events that happen in the order they are scheduled, each ``delay`` after (the
    frames a wire carries): only the oldest waits on the event queue, the others in
    line behind it, so that the queue every event goes through stays short (a wire
    holds tens of frames).  Each keeps the id SimPy gives an event scheduled when it
    is, so events happen at the same times and in the same order as on SimPy's queue
    alone.  Works on a plain SimPy environment too (only a :class:`Kernel` counts
    what waits in line among its queued events).

    :meth:`advance` must be the first thing the oldest event's processing does."""

    __slots__ = ("env", "delay", "waiting")

    def __init__(self, env, delay: float) -> None:
        self.env = env
        self.delay = delay
        self.waiting: deque[tuple] = deque()  # queue entries, oldest (the one queued) first
        if isinstance(env, Kernel):
            env._lines.append(self)

    def schedule(self, event) -> None:
        """``event`` happens ``delay`` from now (it has its value, as a timeout has)."""
        env = self.env
        entry = (env._now + self.delay, NORMAL, next(env._eid), event)
        waiting = self.waiting
        if not waiting:
            heappush(env._queue, entry)
        waiting.append(entry)

    def advance(self) -> None:
        """The oldest is being processed: the next in line takes its place."""
        waiting = self.waiting
        waiting.popleft()
        if waiting:
            heappush(self.env._queue, waiting[0])


def wake_sooner(env, process, delay: float):
    """Have ``process``, asleep on a timeout, wake ``delay`` ns from now instead.

    Its resumption moves to a new timeout (returned); the old one still fires, to
    no one.  What a timer whose deadline moved closer does, without a wake-up event
    of its own each time it might have.  Works on a plain SimPy environment too."""
    old = process._target
    old.callbacks.remove(process._resume)
    event = env.timeout(delay)
    event.callbacks.append(process._resume)
    process._target = event
    return event


def _raise_failure(event) -> None:
    """An event failed and nobody defused it: raise its exception, as ``step()`` does."""
    exc = type(event._value)(*event._value.args)
    exc.__cause__ = event._value
    raise exc
