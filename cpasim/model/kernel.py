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
components may be driven by either.
"""

from __future__ import annotations

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
        queue = self._queue
        while queue and queue[0][0] < t:
            self._now, _, _, event = heappop(queue)
            callbacks, event.callbacks = event.callbacks, None
            try:
                for callback in callbacks:
                    callback(event)
            except StopSimulation:
                event.callbacks = callbacks[callbacks.index(callback) + 1 :]
                self.schedule(event, -1)
                return False
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
        return True
