"""Linux 2.6.13's UDP output: ``ip_push_pending_frames`` and the ``IP Send`` state machine.

With ``ip.send_path = "2.6.13"`` a UDP ``sendto()`` runs as that kernel's did
(Saidi 2009, section 6.2.1, tables 6.1 and 6.2).  In the sending
application's state machine (Saidi 2009's ``Sys Send``), at the granularity of the
thesis's figure 5.3 (a state per function of the call):

``udp_sendmsg``
    the call's own body: entering and leaving it (``cpu.cost.syscall``,
    ``send_call``, ``udp_send``) and the application's own work (``user``),
    category ``stack``;
then, fragment by fragment as ``ip_append_data`` fills one buffer per fragment:
``alloc_skb``
    allocating the fragment's buffer (``cpu.cost.skb_alloc`` less the data part,
    category ``buffer``), and ``__kmalloc`` — its data part, a share of
    ``skb_alloc`` taken from Saidi 2009's figure 5.7 (:data:`KMALLOC_SHARE`);
``do_csum_partial_copy_from_user``
    copying the fragment's payload in and checksumming it on the way
    (``cpu.cost.copy_send`` per byte, its fixed part once per call, and
    ``cpu.cost.csum_per_byte``, category ``copy``): a datagram larger than the
    MTU cannot leave its checksum to the NIC, whatever ``nic.csum_offload``
    says, because the checksum covers every fragment (one that fits a frame
    can, with ``nic.csum_offload``);
``ip_push_pending_frames``
    hands the datagram to ``IP Send`` (queue ``IP Send call``) and
    returns when it is out (``IP Send return``).  The caller is inside the call,
    on its own core, so this is not a wait while ``IP Send`` works: the state
    carries ``IP Send``'s cycles on the critical path, as Saidi 2009's analysis
    charged them, and scaling it to 0 (``--scale
    'tx:App:ip_push_pending_frames=0'``) exposes the states of ``IP Send`` the
    call spent its time in (Saidi 2009's table 6.2).  Once ``IP Send`` blocks on
    a full ``qdisc`` (giving the core up) the caller waits on the return
    (``wait_empty``), so the path follows ``IP Send`` to the device;
``release_sock``
    ``spin_unlock_bh`` on leaving: a softirq raised meanwhile and still pending
    (the interrupt handler waits for this core) runs here, on the caller's core,
    as in ``do_softirq`` below; otherwise the state does not appear.

``IP Send`` (one per host; it works on the caller's core)
    ``Wait`` — for a datagram;
    ``ip_fragment`` — cuts it into MTU-sized fragments (``cpu.cost.fragment``
    per fragment);
    with ``ip.netfilter``, the defect fixed in Linux 2.6.16 (netfilter hooked
    after fragmentation): ``ip_defrag`` — connection tracking gathers the
    fragments again (``cpu.cost.reassemble`` per fragment), ``memcpy`` — into
    one buffer (``cpu.cost.memcpy_per_byte``), ``nf_hook`` — the tables walk
    the whole datagram (``cpu.cost.netfilter``), ``ip_fragment`` — and cut it
    up once more;
    ``dev_queue_xmit`` — hands each fragment to the device as 2.6.13's
    ``dev_queue_xmit`` → ``qdisc_run`` did, in the sender's context: when the
    driver is idle and the ring has a free descriptor, ``qdisc_restart`` — the
    driver's ``e1000_xmit_frame`` runs as ``Driver TX``'s ``xmit`` on this core
    (``cpu.cost.descriptor`` + ``cpu.cost.xmit_frame`` and one tail write,
    ``pcie.mmio_latency``, per fragment) while ``IP Send`` waits for its return,
    the way the caller waits for ``IP Send`` (Saidi 2009's table 6.2:
    ``qdisc_restart`` 32.57%, 98.45% "waiting" for the driver); otherwise (ring
    full: the queue stopped; or the driver busy with a frame: the queue being
    run) the fragment goes into the ``qdisc`` for ``Driver TX`` to post later
    (giving the core up while the ``qdisc`` is full);
    ``do_softirq`` — after each fragment, as 2.6.13's ``dev_queue_xmit`` ended
    in ``local_bh_enable`` → ``do_softirq``: if the interrupt handler waits for
    a core of this pool (an interrupt came while the sender held the core), the
    sender hands its core over and the handler and NAPI's poll run on it
    (``run``), NAPI handing it back when done, while ``IP Send`` sits in
    ``do_softirq`` (Saidi 2009's table 6.2: ``do_softirq`` 3.94%, 99.36%
    "waiting").  Unless ``cpu.irq_preempt``, the model runs no interrupt
    preemptively, so the handler's own work is deferred to this point too;
    NET_TX's restart of a stopped queue is not run here (``Driver TX`` takes a
    core of its own);
    then returns to the caller.

With ``cpu.irq_preempt`` the caller's ``alloc_skb`` and copy and ``IP Send``'s
fragmenting and netfilter states are interruptible work (:meth:`Cpu.interruptible`):
an interrupt takes the core in the middle of them, handler and NAPI's poll run on
it (``run``, the state's core lent) and the state goes on when NAPI hands it back.
Inside ``dev_queue_xmit`` (softirqs off, and interrupts off in the driver's
transmit) the handler waits for ``do_softirq`` as without.  Left out: Linux ran
only the hard interrupt, not NAPI's poll, inside netfilter's reassembly
(``ip_ct_gather_frags`` turns softirqs off around ``ip_defrag``).
"""

from __future__ import annotations

from cpasim.protocol import IP_HEADER
from cpasim.tracing import TracedStore

#: The share of a packet buffer's allocation (``cpu.cost.skb_alloc``) that is the data
#: buffer's ``__kmalloc``: Saidi 2009's figure 5.7 (its TCP sender's CPU time by function)
#: gives __alloc_skb 661 us, __kmalloc 224, kmem_cache_alloc 180, cache_alloc_refill 23.
KMALLOC_SHARE = 224 / (661 + 224 + 180 + 23)


class IpSend:
    """The ``IP Send`` state machine of one host (see the module docstring)."""

    def __init__(self, env, sys: str, tracer, *, netfilter: bool, cpu, ip):
        self.env = env
        self.cpu = cpu
        self.ip = ip
        self.netfilter = netfilter
        self.sm = tracer.sm(sys, "IP Send", "0")
        self.calls = TracedStore(env, tracer, sys, "IP Send call", "0")
        self.returns = TracedStore(env, tracer, sys, "IP Send return", "0")
        ip.dev.driver.serve_calls()
        env.process(self._run())

    def sendmsg(self, sm, pkt, *, user: float):
        """Generator run by ``sendto()`` in the caller's SM ``sm``, which holds a core."""
        cpu, ip = self.cpu, self.ip
        cpu.interruptible()  # the caller's process
        fragmented = pkt.length > ip.mtu
        payload = pkt.payload
        # ip_append_data fills one buffer per fragment: the first carries the UDP header.
        first = ip.frag_payload - (pkt.length - pkt.payload - IP_HEADER)
        sizes = [min(payload, first)] if fragmented else [payload]
        while fragmented and sum(sizes) < payload:
            sizes.append(min(ip.frag_payload, payload - sum(sizes)))
        # Only a datagram that fits one frame can leave its checksum to the NIC.
        csum = fragmented or not ip.dev.csum_offload
        yield cpu.spend(
            sm,
            "udp_sendmsg",
            stack=cpu.cycles("syscall") + cpu.cycles("send_call") + cpu.cycles("udp_send") + user,
        )
        alloc = cpu.cycles("skb_alloc")
        kmalloc = alloc * KMALLOC_SHARE
        alloc -= kmalloc
        fixed = cpu.cycles("copy_send")  # the copy's fixed part, once per call
        for n in sizes:
            yield cpu.spend(sm, "alloc_skb", buffer=alloc)
            yield cpu.spend(sm, "__kmalloc", buffer=kmalloc)
            copy = cpu.cycles("copy_send", n) - cpu.cycles("copy_send") + fixed
            fixed = 0.0
            yield cpu.spend(
                sm,
                "do_csum_partial_copy_from_user",
                copy=copy + (cpu.cycles("csum", n) if csum else 0.0),
            )
        sm.begin("ip_push_pending_frames")
        done = self.env.event()
        self.calls.put_now((pkt, done, sm), sm)
        yield done
        self.returns.take_now(1, sm)
        driver = ip.dev.driver
        if driver.softirq_pending(cpu):
            # release_sock's spin_unlock_bh: a softirq raised meanwhile runs here.
            sm.begin("release_sock")
            yield driver.run_softirq(sm, cpu)

    def _run(self):
        sm, cpu, ip, calls = self.sm, self.cpu, self.ip, self.calls
        qdisc, driver = ip.dev.qdisc, ip.dev.driver
        cpu.interruptible()
        driver_returns = driver.returns
        while True:
            sm.begin("Wait")
            pkt, done, caller = yield calls.get(sm)
            sm.run_on(caller)  # on the caller's core: the caller's time is others' work
            frags = ip.fragment(pkt) if pkt.length > ip.mtu else [pkt]
            n = len(frags)
            yield cpu.spend(sm, "ip_fragment", stack=cpu.cycles("fragment") * n)
            if self.netfilter:
                yield cpu.spend(sm, "ip_defrag", stack=cpu.cycles("reassemble") * n)
                yield cpu.spend(sm, "memcpy", copy=cpu.cycles("memcpy", pkt.length))
                yield cpu.spend(sm, "nf_hook", stack=cpu.cycles("netfilter"))
                yield cpu.spend(sm, "ip_fragment", stack=cpu.cycles("fragment") * n)
            sm.begin("dev_queue_xmit")
            blocked = False
            for frag in frags:
                if driver.idle():
                    sm.begin("qdisc_restart")
                    yield driver.call(sm, frag)
                    driver_returns.take_now(1, sm)
                    sm.begin("dev_queue_xmit")
                else:
                    if not blocked and len(qdisc.items) >= qdisc.capacity:
                        # The core goes while the qdisc is full: from here the caller is
                        # blocked too, on this call's return.
                        caller.wait_empty(self.returns.qid, 1)
                        sm.run_on(sm)  # the core is given up: from here on cores of its own
                        blocked = True
                    yield from cpu.put(sm, qdisc, frag)
                if driver.softirq_pending(cpu):
                    # local_bh_enable on leaving dev_queue_xmit: the pending softirq
                    # (the interrupt and NAPI's poll) runs here, on this core.
                    sm.begin("do_softirq")
                    yield driver.run_softirq(sm, cpu)
                    sm.begin("dev_queue_xmit")
            if not blocked:
                sm.run_on(sm)
            self.returns.put_now(None, sm)
            done.succeed()
