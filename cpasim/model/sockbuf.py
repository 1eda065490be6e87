"""Linux's socket-buffer arithmetic (Linux 6.7+), as pure functions on integers.

Every function mirrors one kernel function or expression, named in its doc, so a
reader can hold the two side by side.  Sizes are bytes; ``ratio`` is Linux 6.7's
``tp->scaling_ratio``: the share of buffer memory (in 1/256) that is payload.

* ``sock_setsockopt(SO_SNDBUF/SO_RCVBUF)`` (net/core/sock.c): the request is
  clamped by ``net.core.wmem_max``/``rmem_max``, then doubled ("to account for
  struct sk_buff etc. overhead") with a floor of one or two minimal skbs, and the
  buffer is locked (``SOCK_*BUF_LOCK``: no autotuning).
* ``tcp_win_from_space`` / ``tcp_space_from_win`` (include/net/tcp.h): window
  = space × ratio / 256; ``ratio`` starts at ``TCP_DEFAULT_SCALING_RATIO`` (50 %)
  and becomes skb->len / skb->truesize of the first full-sized received segment
  (``tcp_measure_rcv_mss``).
* ``tcp_select_initial_window`` (tcp_output.c): the SYN's window and the window
  scale.
* ``__tcp_select_window`` (tcp_output.c): the window an outgoing segment offers.
* ``tcp_grow_window`` (tcp_input.c): ``rcv_ssthresh``, the window's slow start.
* ``tcp_rcv_space_adjust`` (tcp_input.c): receive-buffer autotuning (DRS).
* ``tcp_sndbuf_expand`` (tcp_input.c): send-buffer autotuning, 2 × cwnd × per-skb
  memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpasim.protocol import mss_for

#: ``TCP_RMEM_TO_WIN_SCALE``: ``scaling_ratio`` is a fraction in 1/256.
RMEM_TO_WIN_SCALE = 8
#: ``TCP_DEFAULT_SCALING_RATIO``: half the buffer is assumed payload until measured.
DEFAULT_SCALING_RATIO = 1 << (RMEM_TO_WIN_SCALE - 1)
#: ``SKB_DATA_ALIGN(sizeof(struct sk_buff))`` and ``(struct skb_shared_info)`` on x86-64.
SK_BUFF_SIZE = 256
SKB_SHARED_INFO_SIZE = 320
#: ``MAX_TCP_HEADER`` on x86-64 (``L1_CACHE_ALIGN(128 + MAX_HEADER)``).
MAX_TCP_HEADER = 320
#: ``TCP_SKB_MIN_TRUESIZE`` = 2048 + sizeof(struct sk_buff): the smallest skb charge.
SKB_MIN_TRUESIZE = 2048 + SK_BUFF_SIZE
#: ``SOCK_MIN_SNDBUF`` (two minimal skbs) and ``SOCK_MIN_RCVBUF`` (one).
SOCK_MIN_SNDBUF = 2 * SKB_MIN_TRUESIZE
SOCK_MIN_RCVBUF = SKB_MIN_TRUESIZE
#: ``TCP_MAX_WSCALE`` (RFC 7323) and the largest unscaled window field.
MAX_WSCALE = 14
U16_MAX = 65535
#: ``TCP_INIT_CWND``: segments; the send buffer is sized for at least this cwnd.
INIT_CWND = 10
#: ``INT_MAX / 2``: a request is capped so that doubling it cannot overflow.
INT_MAX_HALF = (2**31 - 1) // 2


def setsockopt_buf(request: int, core_max: int, floor: int) -> int:
    """``sk_sndbuf``/``sk_rcvbuf`` after ``setsockopt(SO_SNDBUF/SO_RCVBUF, request)``.

    ``core_max`` is ``net.core.wmem_max``/``rmem_max``; ``floor`` is
    ``SOCK_MIN_SNDBUF``/``SOCK_MIN_RCVBUF``."""
    val = min(request, core_max, INT_MAX_HALF)
    return max(2 * val, floor)


def win_from_space(space: int, ratio: int) -> int:
    """``__tcp_win_from_space``: the window ``space`` bytes of buffer memory can offer."""
    return (space * ratio) >> RMEM_TO_WIN_SCALE


def space_from_win(win: int, ratio: int) -> int:
    """``__tcp_space_from_win``: buffer memory needed to offer a window of ``win``."""
    return (win << RMEM_TO_WIN_SCALE) // ratio


def scaling_ratio(length: int, truesize: int) -> int:
    """``tcp_measure_rcv_mss``: ``skb->len << 8 / skb->truesize`` (a u8, at least 1)."""
    return min(255, max(1, (length << RMEM_TO_WIN_SCALE) // truesize))


def ilog2(n: int) -> int:
    return n.bit_length() - 1


def initial_window(
    space: int, mss: int, window_clamp: int, rmem_max: int, core_rmem_max: int
) -> tuple[int, int, int]:
    """``tcp_select_initial_window`` with window scaling agreed and no route metrics.

    ``space`` is ``tcp_full_space`` (the window the whole buffer offers);
    ``window_clamp`` 0 means none set.  Returns ``(rcv_wnd, window_clamp, wscale)``:
    the SYN's window (before the 16-bit field truncates it), the clamp and the
    scale shift, chosen for the largest buffer the socket could grow to."""
    clamp = window_clamp or (U16_MAX << MAX_WSCALE)
    space = min(clamp, space)
    if space > mss:
        space = space // mss * mss  # quantized to whole segments
    rcv_wnd = space
    space = max(space, rmem_max, core_rmem_max)
    space = min(space, clamp)
    wscale = min(max(ilog2(space) - 15, 0), MAX_WSCALE)
    return rcv_wnd, min(U16_MAX << wscale, clamp), wscale


def select_window(
    free_space: int,
    allowed_space: int,
    window_clamp: int,
    rcv_ssthresh: int,
    rcv_wnd: int,
    mss: int,
    wscale: int,
) -> int:
    """``__tcp_select_window`` without memory pressure: the window to offer now.

    ``free_space`` is ``tcp_space`` (window of the unused buffer memory),
    ``allowed_space`` ``tcp_full_space`` (window of the whole buffer), ``rcv_wnd``
    the window offered last."""
    full_space = min(window_clamp, allowed_space)
    mss = min(mss, full_space)
    if free_space < full_space >> 1:
        free_space = free_space >> wscale << wscale  # must not grow by the rounding
        # Below one segment or 1/16 of the buffer: offer nothing rather than
        # trickle (silly window avoidance).
        if free_space < allowed_space >> 4 or free_space < mss:
            return 0
    if free_space > rcv_ssthresh:
        free_space = rcv_ssthresh
    if wscale:
        # Rounded up so that the scaling does not lose the last bytes.
        return -(-free_space >> wscale) << wscale
    window = rcv_wnd
    # Whole segments; an offer within one segment of the free space is kept.
    if window <= free_space - mss or window > free_space:
        window = free_space // mss * mss
    elif mss == full_space and free_space > window + (full_space >> 1):
        window = free_space
    return window


def grow_window_incr(
    rcv_ssthresh: int, skb_len: int, skb_truesize: int, advmss: int, ratio: int, rmem_max: int
) -> int:
    """``tcp_grow_window`` increment of ``rcv_ssthresh`` for one received skb (before
    the cap by ``window_clamp`` and ``tcp_space``): two segments when the skb's
    memory is covered by its payload, otherwise ``__tcp_grow_window``'s search."""
    if win_from_space(skb_truesize, ratio) <= skb_len:
        incr = 2 * advmss
    else:
        truesize = win_from_space(skb_truesize, ratio) >> 1
        window = win_from_space(rmem_max, ratio) >> 1
        incr = 0
        while rcv_ssthresh <= window:
            if truesize <= skb_len:
                incr = 2 * advmss
                break
            truesize >>= 1
            window >>= 1
    return max(incr, 2 * skb_len) if incr else 0


def drs_rcvbuf(copied: int, space: int, advmss: int, ratio: int, rmem_max: int) -> int:
    """``tcp_rcv_space_adjust``: the receive buffer for ``copied`` bytes read in the
    last RTT when the previous RTT's were ``space`` (call only when copied > space).

    Twice the bytes per RTT (to survive a loss) plus 16 segments of cushion, grown
    further by the rate increase (the ACK now sent is for the next RTT, in which
    a slow-starting sender doubles), in buffer memory, at most ``tcp_rmem[2]``."""
    rcvwin = 2 * copied + 16 * advmss
    grow = rcvwin * (copied - space) // space
    rcvwin += 2 * grow
    return min(space_from_win(rcvwin, ratio), rmem_max)


def largest_window(request: int, core_rmem_max: int, truesize: int, mss: int) -> int:
    """The largest window a receiver with ``SO_RCVBUF = request`` offers in a bulk
    transfer: the ACK of a full segment is built while that segment (one
    ``truesize``) is still held, with ``rcv_ssthresh`` grown to the clamp."""
    rcvbuf = setsockopt_buf(request, core_rmem_max, SOCK_MIN_RCVBUF)
    first = win_from_space(rcvbuf, DEFAULT_SCALING_RATIO)  # the clamp at connect time
    wscale = initial_window(first, mss, first, core_rmem_max, core_rmem_max)[2]
    ratio = scaling_ratio(mss, truesize)
    clamp = win_from_space(rcvbuf, ratio)
    free = win_from_space(rcvbuf - truesize, ratio)
    return min(select_window(free, clamp, clamp, clamp, 0, mss, wscale), U16_MAX << wscale)


def sndbuf_per_mss(mss: int) -> int:
    """``tcp_sndbuf_expand``'s worst-case memory of one segment (no TSO/GSO: a
    power-of-two kmalloc'ed head holding headers, payload and shared info)."""
    head = mss + MAX_TCP_HEADER + SKB_SHARED_INFO_SIZE
    return (1 << (head - 1).bit_length()) + SK_BUFF_SIZE


def sndbuf_expand(mss: int, cwnd: int, reordering: int = 3, factor: int = 2) -> int:
    """``tcp_sndbuf_expand``: the send buffer wanted for ``cwnd`` segments
    (``factor`` is the congestion control's ``sndbuf_expand``, 2 by default: fast
    recovery needs about 1.7 windows of data, rounded up for a slow writer).
    The caller keeps the larger of this and the current buffer, at most
    ``tcp_wmem[2]``."""
    nr_segs = max(INIT_CWND, cwnd, reordering + 1)
    return factor * nr_segs * sndbuf_per_mss(mss)


@dataclass(frozen=True)
class DatagramBuffer:
    """A datagram socket's receive buffer: ``limit`` bytes of buffer memory, charged
    ``truesize`` per fragment under Linux's rules, or payload bytes exactly when
    ``fixed`` (cpasim's ``tcp.rmem``).  The socket-buffer keys of the host's ``tcp``
    section size every socket's buffers, as Linux's ``net.core`` sysctls do."""

    fixed: bool
    limit: int
    truesize: int


def datagram_buffer(tp) -> DatagramBuffer:
    """The receive buffer a UDP socket gets: cpasim's fixed ``tcp.rmem``, else a
    ``setsockopt(SO_RCVBUF)`` request, else ``net.core.rmem_default``."""
    if tp.rmem > 0:
        return DatagramBuffer(True, tp.rmem, tp.rx_truesize)
    if tp.rcvbuf:
        limit = setsockopt_buf(tp.rcvbuf, tp.core_rmem_max, SOCK_MIN_RCVBUF)
    else:
        limit = tp.core_rmem_default
    return DatagramBuffer(False, limit, tp.rx_truesize)


class SocketBuffers:
    """One socket's buffers: the sizes, the window offered and both autotuners.
    Env-free; the connection calls it on data, reads and ACKs.

    Each side follows Linux's rules unless cpasim's fixed buffer is set for it:
    ``tcp.wmem`` makes the send buffer exactly that many payload bytes,
    ``tcp.rmem`` makes the window the free part of that many bytes — no
    doubling, no per-skb memory, no autotuning on that side.  ``rx_truesize``
    is the memory the receive path charges for one full-sized segment
    (``skb->truesize``), which sets ``scaling_ratio``."""

    # Slots, as TcpConnection's: with many connections every segment meets a cold one.
    __slots__ = ("mss", "truesize", "rmem_max", "wmem_max", "seg_size", "snd_locked", "sndbuf")
    __slots__ += ("ratio", "fixed_rcv", "rmem", "window_clamp", "rcv_wnd", "syn_window")
    __slots__ += ("rcv_locked", "rcvbuf", "autotune_rcv", "wscale", "rcv_ssthresh")
    __slots__ += ("rcvq_space", "rcvq_seq", "rcvq_time", "rtt_ns", "rtt_seq", "rtt_time")
    __slots__ += ("measured",)

    def __init__(self, tp, mss: int, mss_clamp: int) -> None:
        self.mss = mss
        self.truesize = tp.rx_truesize
        self.rmem_max = tp.rmem_max
        self.wmem_max = tp.wmem_max
        self.seg_size = max(mss_clamp, mss)  # tcp_sndbuf_expand sizes skbs for the larger
        self._init_send(tp)
        self._init_receive(tp)

    def _init_send(self, tp) -> None:
        # tcp_init_sock, then setsockopt() as iperf3 -w does it (locking the size).
        self.snd_locked = bool(tp.wmem or tp.sndbuf)
        if tp.wmem:
            self.sndbuf = tp.wmem
        elif tp.sndbuf:
            self.sndbuf = setsockopt_buf(tp.sndbuf, tp.core_wmem_max, SOCK_MIN_SNDBUF)
        else:
            self.sndbuf = tp.wmem_default
            self.expand_sndbuf(tp.init_cwnd)  # tcp_init_buffer_space

    def _init_receive(self, tp) -> None:
        self.ratio = DEFAULT_SCALING_RATIO
        self.fixed_rcv = tp.rmem > 0
        if self.fixed_rcv:
            self.rmem = self.window_clamp = self.rcv_wnd = tp.rmem
            self.syn_window = tp.rmem
            return
        self.rcv_locked = tp.rcvbuf > 0
        if self.rcv_locked:
            self.rcvbuf = setsockopt_buf(tp.rcvbuf, tp.core_rmem_max, SOCK_MIN_RCVBUF)
        else:
            self.rcvbuf = tp.rmem_default
        self.autotune_rcv = tp.moderate_rcvbuf and not self.rcv_locked
        # tcp_connect_init: a locked buffer clamps the window to what it can offer.
        full = win_from_space(self.rcvbuf, self.ratio)
        clamp = full if self.rcv_locked else 0
        self.rcv_wnd, clamp, self.wscale = initial_window(
            full, self.mss, clamp, tp.rmem_max, tp.core_rmem_max
        )
        self.syn_window = min(self.rcv_wnd, U16_MAX)  # a SYN's window is never scaled
        # tcp_init_buffer_space (tcp_app_win's reserve is 0 at its default of 31).
        self.window_clamp = min(clamp, full)
        self.rcv_ssthresh = min(self.rcv_wnd, self.window_clamp)
        self.rcvq_space = min(self.rcv_ssthresh, self.rcv_wnd, INIT_CWND * self.mss)
        self.rcvq_seq = 0
        self.rcvq_time = 0.0
        self.rtt_ns = 0.0  # receiver's RTT estimate (tcp_rcv_rtt_measure), 0 = none
        self.rtt_seq = 0
        self.rtt_time: float | None = None
        self.measured = False  # scaling_ratio still the default

    def alloc(self, queued: int) -> int:
        """``sk_rmem_alloc``: buffer memory charged for ``queued`` payload bytes."""
        return queued * self.truesize // self.mss

    def window(self, queued: int) -> int:
        """The window to offer with ``queued`` payload bytes held (not yet read):
        ``__tcp_select_window``, at most what the 16-bit field carries at the
        agreed scale; with a fixed buffer, its free bytes."""
        if self.fixed_rcv:
            return self.rmem - queued
        free = win_from_space(self.rcvbuf - self.alloc(queued), self.ratio)
        allowed = win_from_space(self.rcvbuf, self.ratio)
        win = select_window(
            free,
            allowed,
            self.window_clamp,
            self.rcv_ssthresh,
            self.rcv_wnd,
            self.mss,
            self.wscale,
        )
        return min(win, U16_MAX << self.wscale)

    def set_window_clamp(self, val: int) -> None:
        """``tcp_set_window_clamp``: a lower clamp also lowers ``rcv_ssthresh``."""
        new = max(SOCK_MIN_RCVBUF // 2, val)
        if new < self.window_clamp:
            self.rcv_ssthresh = min(max(min(self.rcv_wnd, new), self.rcv_ssthresh), new)
        self.window_clamp = new

    def on_data(self, payload: int, queued: int, rcv_nxt: int, now: float) -> None:
        """A data segment arrived (``queued`` bytes now held, including it).
        Linux's receive side only."""
        mss = self.mss
        if not self.measured and payload >= mss:
            # tcp_measure_rcv_mss: the first full-sized segment sets the ratio.
            self.measured = True
            self.ratio = scaling_ratio(mss, self.truesize)
            self.set_window_clamp(win_from_space(self.rcvbuf, self.ratio))
            self.rcvq_space = min(self.rcvq_space, self.window_clamp)
        # tcp_rcv_rtt_measure: the time to receive one window's worth of data.
        if self.rtt_time is not None and rcv_nxt >= self.rtt_seq:
            sample = now - self.rtt_time
            if self.rtt_ns == 0 or sample < self.rtt_ns:
                self.rtt_ns = sample
        if self.rtt_time is None or rcv_nxt >= self.rtt_seq:
            self.rtt_seq = rcv_nxt + self.rcv_wnd
            self.rtt_time = now
        # tcp_grow_window (for skbs of at least 128 bytes).
        if payload >= 128:
            space = win_from_space(self.rcvbuf - self.alloc(queued), self.ratio)
            room = min(self.window_clamp, space) - self.rcv_ssthresh
            if room > 0:
                skb_truesize = -(-payload // mss) * self.truesize
                incr = grow_window_incr(
                    self.rcv_ssthresh, payload, skb_truesize, mss, self.ratio, self.rmem_max
                )
                self.rcv_ssthresh += min(room, incr)

    def on_read(self, copied_seq: int, now: float) -> None:
        """``tcp_rcv_space_adjust`` after a read: once per receiver RTT, grow the
        buffer to what the bytes read in the last RTT call for (unless locked).
        Linux's receive side only."""
        if self.rtt_ns == 0 or now - self.rcvq_time < self.rtt_ns:
            return
        copied = copied_seq - self.rcvq_seq
        if copied > self.rcvq_space:
            if self.autotune_rcv:
                rcvbuf = drs_rcvbuf(copied, self.rcvq_space, self.mss, self.ratio, self.rmem_max)
                if rcvbuf > self.rcvbuf:
                    self.rcvbuf = rcvbuf
                    self.window_clamp = win_from_space(rcvbuf, self.ratio)
            self.rcvq_space = copied
        self.rcvq_seq = copied_seq
        self.rcvq_time = now

    def expand_sndbuf(self, cwnd: int, factor: int = 2) -> int:
        """``tcp_sndbuf_expand`` for a cwnd of ``cwnd`` segments (``factor``: the
        congestion control's ``sndbuf_expand``); returns the bytes the send buffer
        grew by (0 if locked or big enough)."""
        if self.snd_locked:
            return 0
        want = min(sndbuf_expand(self.seg_size, cwnd, factor=factor), self.wmem_max)
        grow = want - self.sndbuf
        if grow <= 0:
            return 0
        self.sndbuf = want
        return grow


def syn_window(tp, mtu: int) -> int:
    """The window a host with ``tcp`` section ``tp`` offers in its handshake."""
    return SocketBuffers(tp, mss_for(mtu, tp.timestamps), mss_for(mtu, False)).syn_window
