"""A leaner SimPy environment for the model: the same events in the same order, but
for the waits that need none.

:class:`Kernel` is a :class:`simpy.Environment` whose two hot constructors do
less work per event: :meth:`Kernel.timeout` builds the timeout and pushes it on
the queue itself (SimPy goes through ``Timeout.__init__`` and
``Environment.schedule``), and :meth:`Kernel.process` starts a
:class:`_Process` whose resumption skips what the model never needs (a bound
method made anew at every wait; the search for a thrown exception's frame).
:meth:`Kernel.run_until` processes events like ``step()`` in a loop without a
call per event.  Every event still gets the id, time and priority SimPy would
give it, so a run on a Kernel is the run on a plain Environment, event for event:
components may be driven by either.  :meth:`Kernel.timer` is a timeout kept
apart from the others until it is the earliest of its kind (see there), so that
a thousand connections' sleeping timers do not deepen the queue every event
passes through; :func:`timer` asks a plain Environment for a timeout instead.  A
tracer bound to a Kernel hands it its
buffer (:meth:`Kernel.note_times`): the Kernel notes each new time there before the
event runs, so that the records themselves never read the clock.

:meth:`Kernel.sleep` is what a process yields to wait a while (a state's work, a
DMA's hold): a timeout, unless that timeout would be the very next event processed,
with nothing left to run before it; then the clock moves on at once and the process
goes on without one.  Sparing that event changes nothing that happens, only what it
costs: the same records come at the same times, in the same order, and the events
after it keep their order (their ids move down by one).
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush

import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, PENDING, Event, Initialize, Process, Timeout

_new = object.__new__

#: What :meth:`Kernel.sleep` returns when the process goes on at once: an event
#: already processed, which a process that yields it passes straight through.
GONE_ON = _new(Event)
GONE_ON.env, GONE_ON.callbacks, GONE_ON._ok, GONE_ON._value = None, None, True, None

#: The callbacks of "no event being processed": nobody's resumption is last in them.
_NO_CALLBACKS = (None,)


class _Process(Process):
    """A SimPy process with a cheaper resumption; failures take SimPy's own path."""

    # Slots, for what every resumption reads: with many connections (three processes
    # each) the next one to resume is a cold one.
    __slots__ = ("env", "callbacks", "_value", "_ok", "_generator", "_send", "_resume")
    __slots__ += ("_target",)

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
    # While run_until runs: its bound, and the callbacks of the event it processes
    # (what sleep needs to know that nothing else would run first).
    _until = float("-inf")
    _callbacks = _NO_CALLBACKS
    #: What reads the model's state at instants of its own, in the pauses between
    #: events (a time series' :class:`~cpasim.series.Sampler`): ``next_ns``, the next
    #: instant, and ``sample(at)``.  A sleep that goes on past such an instant takes
    #: the sample on its way, as the pause there would have.
    sampler = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Timers not yet due to be in the queue, and those that are in it (both heaps
        # of the queue's own entries: see timer).
        self._timers: list = []
        self._timers_queued: list = []
        self._lines: list[Line] = []  # the Lines of events made on it

    def queued(self) -> int:
        """Events scheduled and not processed yet: on the event queue, or in a
        :class:`Line` behind its oldest."""
        waiting = 0
        for line in self._lines:
            if line.waiting:
                waiting += len(line.waiting) - 1  # the oldest is on the queue
        return len(self._queue) + len(self._timers) + waiting

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

    def timer(self, delay: float, value=None) -> Timeout:
        """:meth:`timeout` for a timer: the same event, id and time, queued apart.

        A connection's retransmission and delayed-ACK timers sleep for tens or
        hundreds of milliseconds, and a moved timer leaves its old timeout behind
        (:func:`wake_sooner`): with many connections they are most of the queue, and
        every event, however short-lived, pays for the queue's depth on its way
        through.  So a timer's entry waits in a queue of its own (``_timers``) and
        enters the event queue only when no timer already there comes before it.  The
        entry is the one :meth:`timeout` would push, so the order of events is the
        same; when a timer entered fires, the earliest waiting one follows it in
        (:meth:`_timer_fired`, its first callback), and at every moment the queue
        holds a timer that comes before every timer waiting.  Events scheduled but not
        processed: :func:`pending`."""
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        event = _new(Timeout)
        event.env = self
        event.callbacks = [self._timer_fired]
        event._value = value
        event._delay = delay
        event._ok = True
        entry = (self._now + delay, NORMAL, next(self._eid), event)
        queued = self._timers_queued
        if not queued or entry < queued[0]:
            heappush(queued, entry)
            heappush(self._queue, entry)
        else:
            heappush(self._timers, entry)
        return event

    def _timer_fired(self, event) -> None:
        """A timer's entry left the event queue (the earliest of the timers there: the
        queue's least entry); the earliest waiting timer goes in if no other timer
        there comes before it."""
        queued, waiting = self._timers_queued, self._timers
        heappop(queued)
        if waiting and (not queued or waiting[0] < queued[0]):
            entry = heappop(waiting)
            heappush(queued, entry)
            heappush(self._queue, entry)

    def sleep(self, delay: float):
        """What the active process yields to wait ``delay`` from now: a timeout, or,
        when that timeout would be the next event processed anyway, nothing to wait
        for: the clock moves on by ``delay`` at once and the process goes on.

        That is the case when nothing is due before the timeout (its time would be
        the earliest in the queue, and SimPy serves equal times in the order they
        were scheduled, so an event already due at that time goes first), the process
        is the last to be resumed by the event being processed (nothing else runs
        between its yield and the next event) and the time is inside the current
        :meth:`run_until` (outside it, a paused run would have ended first).  The
        tracer's buffer is flushed and the new time noted as between two events.
        Only for a process that yields the result at once; the events after it keep
        their order (only the ids SimPy gives them move down by one)."""
        t = self._now + delay
        if t < self._until and delay >= 0:
            queue = self._queue
            if not queue or queue[0][0] > t:
                proc = self._active_proc
                if proc is not None and self._callbacks[-1] is proc._resume:
                    sampler = self.sampler
                    if sampler is not None:
                        # The state now is the state at each instant up to t: nothing
                        # else happens before then.
                        while sampler.next_ns <= t:
                            sampler.sample(sampler.next_ns)
                    if self._notes is not None:
                        self._jump_noted(t)
                    self._now = t
                    return GONE_ON
        return self.timeout(delay)

    def _jump_noted(self, t: float) -> None:
        """The tracer's side of a jump to ``t`` (:meth:`sleep`): the end of one event
        and the start of the next, as :meth:`_run_until_noted` does them."""
        mark, note, buffer, flush = self._notes
        if len(buffer) >= mark[1]:
            flush()
        if t != mark[0]:
            mark[0] = t
            mark[1] += 1
            note(t)

    def run_until(self, t: float, reach: float | None = None) -> bool:
        """Process every event scheduled before ``t``, as repeated ``step()`` would.

        Returns False when an event stopped the simulation (``StopSimulation``), whose
        remaining callbacks are then rescheduled, as ``step()`` does.  ``reach``
        (default ``t``): how far a :meth:`sleep` may go on without an event, past a
        pause at ``t`` that only takes a sample (:attr:`sampler`)."""
        self._until = t if reach is None else reach
        try:
            if self._notes is not None:
                return self._run_until_noted(t)
            return self._run_until(t)
        finally:
            self._until = float("-inf")
            self._callbacks = _NO_CALLBACKS

    def _run_until(self, t: float) -> bool:
        queue = self._queue
        while queue and queue[0][0] < t:
            self._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            self._callbacks = callbacks
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
            self._callbacks = callbacks
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


def timer(env, delay: float) -> Timeout:
    """A timer's timeout: :meth:`Kernel.timer`, or a plain Environment's timeout."""
    make = getattr(env, "timer", None)
    return make(delay) if make is not None else env.timeout(delay)


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


def sleeper(env):
    """How a component's process waits a while on ``env``: :meth:`Kernel.sleep` on the
    model's Kernel, ``timeout`` on a plain SimPy environment (which drives the
    components in unit tests)."""
    sleep = getattr(env, "sleep", None)
    if sleep is not None:
        return sleep
    return lambda delay: env.timeout(delay)  # looked up when waited: a stand-in env may have none


def pending(env) -> int:
    """Events scheduled and not yet processed (the queue's, and on a Kernel its timers
    and the events of its Lines waiting to enter it: :meth:`Kernel.queued`)."""
    queued = getattr(env, "queued", None)
    return queued() if queued is not None else len(env._queue)


def wake_sooner(env, process, delay: float):
    """Have ``process``, asleep on a timer, wake ``delay`` ns from now instead.

    Its resumption moves to a new timer (returned); the old one still fires, to
    no one.  What a timer whose deadline moved closer does, without a wake-up event
    of its own each time it might have.  Works on a plain SimPy environment too."""
    old = process._target
    old.callbacks.remove(process._resume)
    event = timer(env, delay)
    event.callbacks.append(process._resume)
    process._target = event
    return event


def _raise_failure(event) -> None:
    """An event failed and nobody defused it: raise its exception, as ``step()`` does."""
    exc = type(event._value)(*event._value.args)
    exc.__cause__ = event._value
    raise exc
