"""Compact Graphviz views of a trace (Saidi 5.9), sized for a person to read.

Numbered instances of one state machine or queue (``tx:Link#17``, one per frame
on the wire; hundreds in a trace) are one node with a count, ``×N``: their
behaviour is the same, and a node each would make a picture nobody can read.

- ``high``: state machines (ellipses) and queues (boxes), clustered per system;
  an arrow SM→queue per producer, queue→SM per consumer, SM→SM per ``link``,
  labelled with op counts.
- ``global``: one cluster per state machine, one node per state (visits, time
  in it, its share of the critical path); arrows are transitions with counts.
  Dashed arrows join SMs that interact through a queue or a link.
- ``sm:SYS:SM``: the ``global`` view of one SM (all its instances) plus the
  queues and SMs it interacts with.

In every view the critical path is red: a node's fill darkens and its border
widens with its share of the path; an arrow the path took is red, wider the
more often. A legend under the graph says so.
"""

from __future__ import annotations

from collections import defaultdict

from cpasim.analysis.names import hint
from cpasim.analysis.report import INITIAL_STATE, AnalysisResult, Names
from cpasim.errors import CpasimError

_PATH = "#cb181d"  # on-path arrows and borders
_OFF = "#909090"  # everything else


def _q(text: str) -> str:
    # A newline centres the next line; a form feed ends a left-justified one.
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n").replace("\f", "\\l") + '"'


def _ns(x: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}ns"


def _heat(share: float) -> str:
    """White (off the path) to dark red (the whole path); any on-path share shows."""
    if share <= 0:
        return "#ffffff"
    f = 0.15 + 0.85 * min(1.0, share)
    r, g, b = (255 + (203 - 255) * f, 255 + (24 - 255) * f, 255 + (29 - 255) * f)
    return f"#{int(r):02x}{int(g):02x}{int(b):02x}"


def _pct(share: float) -> str:
    return "<0.1%" if share < 0.001 else f"{share:.1%}"


def _font(share: float) -> str:
    return "white" if share > 0.45 else "black"


class _Path:
    """On-path time and visits per name, summed over the trace's paths."""

    def __init__(self, result: AnalysisResult):
        paths = [result.path] if result.path is not None else list(result.connections.values())
        self.time: dict[str, float] = defaultdict(float)
        self.visits: dict[str, int] = defaultdict(int)
        self.length = 0.0
        for pr in paths:
            if not pr.reachable:
                continue
            self.length += pr.critical_path_ns or 0.0
            for n, t in pr.state_totals.items():
                self.time[n] += t
            for n, v in pr.state_visits.items():
                self.visits[n] += v

    def share(self, name: str) -> float:
        return self.time.get(name, 0.0) / self.length if self.length > 0 else 0.0


def _legend(what: str, path: _Path) -> str:
    return (
        f"{what}. Red = critical path ({_ns(path.length)}): fill and border grow with a "
        "node's share of it; red arrows are hand-overs the path took (wider = more often).\f"
        "×N = N numbered instances drawn as one node; arrow numbers count operations.\f"
    )


def to_dot(result: AnalysisResult, graph: str = "high") -> str:
    p = result.pass_state
    names = Names(p.key)
    path = _Path(result)
    if graph == "high":
        return _high(p, names, path)
    if graph == "global":
        return _global(p, names, path, None)
    if graph.startswith("sm:"):
        want = graph[3:]
        ids = {sm for sm in range(len(p.s_last)) if want in (names.sm(sm), names.base_sm(sm))}
        if not ids:
            known = sorted({names.base_sm(sm) for sm in range(len(p.s_last))})
            raise CpasimError(f"--graph {graph}: no state machine {want!r}; " + hint(want, known))
        return _global(p, names, path, names.base_sm(min(ids)))
    raise CpasimError(f"--graph {graph!r}: expected high, global or sm:SYS:SM")


def _ident(prefix: str, name: str, table: dict) -> str:
    """A stable dot identifier per name (names hold spaces and colons)."""
    if name not in table:
        table[name] = f"{prefix}{len(table)}"
    return table[name]


def _interactions(p, names: Names):
    """``{(a, b, via): ops}`` between base SMs: producer→consumer per queue, and links."""
    prod: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cons: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for sm, q, direction, count in p.queue_ops():
        side = prod if direction == "in" else cons
        side[names.base_queue(q)][names.base_sm(sm)] += count
    out: dict[tuple, int] = defaultdict(int)
    for q, producers in prod.items():
        for a, n in producers.items():
            for b in cons.get(q, {}):
                if a != b:
                    out[(a, b, q)] += n
    for (a, b), count in p.links.items():
        out[(names.base_sm(a), names.base_sm(b), "link")] += count
    return prod, cons, out


def _edge_attrs(path: _Path, on_path_visits: int, max_visits: int, label: str) -> str:
    if on_path_visits:
        width = 2 + 4 * on_path_visits / max(1, max_visits)
        label += f"\n{on_path_visits} on path"
        return f"label={_q(label)}, color={_q(_PATH)}, fontcolor={_q(_PATH)}, penwidth={width:.1f}"
    return f"label={_q(label)}, color={_q(_OFF)}, fontcolor={_q(_OFF)}"


def _sm_shares(p, names: Names, path: _Path) -> dict[str, float]:
    shares: dict[str, float] = defaultdict(float)
    states = [INITIAL_STATE, *p.key.states]
    for base in {names.base_sm(sm) for sm in range(len(p.s_last))}:
        for s in states:
            shares[base] += path.share(f"{base}:{s}")
    return shares


def _high(p, names: Names, path: _Path) -> str:
    prod, cons, _pairs = _interactions(p, names)
    sm_inst: dict[str, int] = defaultdict(int)
    for sm in range(len(p.s_last)):
        sm_inst[names.base_sm(sm)] += 1
    q_inst: dict[str, int] = defaultdict(int)
    for q in range(len(p.key.queues)):
        q_inst[names.base_queue(q)] += 1
    used = {b for side in (prod, cons) for users in side.values() for b in users}
    used |= {names.base_sm(s) for pair in p.links for s in pair}
    shares = _sm_shares(p, names, path)
    ids: dict[str, str] = {}
    lines = [
        "digraph cpasim {",
        "  newrank=true; nodesep=0.15; ranksep=0.5;",
        "  node [fontsize=10, style=filled, fillcolor=white];",
        "  edge [fontsize=8];",
        f"  label={_q(_legend('State machines (ellipses) and queues (boxes)', path))};",
        "  labeljust=l; fontsize=10;",
    ]
    systems: dict[str, list[str]] = defaultdict(list)
    for base in sorted(used):
        sys, short = base.split(":", 1)
        share = shares.get(base, 0.0)
        label = short + (f" ×{sm_inst[base]}" if sm_inst[base] > 1 else "")
        if share > 0:
            label += f"\n{_pct(share)} of path"
        width = 1 + 4 * share
        systems[sys].append(
            f"    {_ident('sm', base, ids)} [label={_q(label)}, shape=ellipse, "
            f"fillcolor={_q(_heat(share))}, fontcolor={_font(share)}, penwidth={width:.1f}, "
            f"color={_q(_PATH if share > 0 else 'black')}];"
        )
    for base in sorted(set(prod) | set(cons)):
        sys, short = base.split(":", 1)
        label = short + (f" ×{q_inst[base]}" if q_inst[base] > 1 else "")
        systems[sys].append(f"    {_ident('q', base, ids)} [label={_q(label)}, shape=box];")
    for sys, body in sorted(systems.items()):
        lines.append(f"  subgraph cluster_{len(lines)} {{ label={_q(sys)}; style=rounded;")
        lines += body
        lines.append("  }")
    # On-path visits of each SM→queue and queue→SM arrow, from the path's hand-overs.
    into: dict[tuple, int] = defaultdict(int)
    outof: dict[tuple, int] = defaultdict(int)
    via_link: dict[tuple, int] = defaultdict(int)
    for name, visits in path.visits.items():
        if "->" not in name or not name.endswith("]"):
            continue
        a, rest = name.split("->", 1)
        b, via = rest[:-1].split("[", 1)
        if via == "link":
            via_link[(a, b)] += visits
        else:
            into[(a, via)] += visits
            outof[(via, b)] += visits
    top = max([*into.values(), *outof.values(), *via_link.values(), 1])
    for q, producers in sorted(prod.items()):
        for a, n in sorted(producers.items()):
            attrs = _edge_attrs(path, into.get((a, q), 0), top, str(n))
            lines.append(f"  {ids[a]} -> {ids[q]} [{attrs}];")
    for q, consumers in sorted(cons.items()):
        for b, n in sorted(consumers.items()):
            attrs = _edge_attrs(path, outof.get((q, b), 0), top, str(n))
            lines.append(f"  {ids[q]} -> {ids[b]} [{attrs}];")
    links: dict[tuple, int] = defaultdict(int)
    for (a, b), count in p.links.items():
        links[(names.base_sm(a), names.base_sm(b))] += count
    for (a, b), n in sorted(links.items()):
        attrs = _edge_attrs(path, via_link.get((a, b), 0), top, f"link {n}")
        lines.append(f"  {ids[a]} -> {ids[b]} [{attrs}, style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _global(p, names: Names, path: _Path, only: str | None) -> str:
    """States per SM, clustered by host.  An SM's ``(initial)`` state is left out (it
    is where the trace found the SM, no state it works in), and so are the SMs the
    path never touched (``global``: the legend counts them)."""
    visits, time, moves, inst = _state_counts(p, names, only)
    _prod, _cons, pairs = _interactions(p, names)
    on_path = _handovers_on_path(path)
    by_sm: dict[str, list] = defaultdict(list)
    for base, state in visits:
        by_sm[base].append(state)
    left_out = _drop_off_path(by_sm, names, path, on_path) if only is None else 0
    ids: dict = {}
    what = (
        "States of the state machines on the critical path, by host (dashed: hand-overs the "
        "path took; every hand-over is in --graph high"
        + (f"; {left_out} state machines off the path not drawn" if left_out else "")
        + ")"
        if only is None
        else f"States of {only} and who it exchanges with (dashed)"
    )
    lines = [
        "digraph cpasim {",
        "  newrank=true; compound=true; nodesep=0.2; ranksep=0.3;",
        '  node [fontsize=9, shape=box, style="rounded,filled", fillcolor=white];',
        "  edge [fontsize=8];",
        f"  label={_q(_legend(what + '; solid arrows are transitions', path))};",
        "  labeljust=l; fontsize=10;",
    ]
    anchor: dict[str, str] = {}
    cluster: dict[str, str] = {}
    hosts: dict[str, list[str]] = defaultdict(list)
    for base in sorted(by_sm):
        hosts[base.split(":", 1)[0]].append(base)
    for host, bases in sorted(hosts.items()):
        lines.append(
            f"  subgraph cluster_host_{len(cluster)} {{ label={_q(host)}; style=dashed; "
            "fontsize=12;"
        )
        for base in bases:
            cluster[base] = f"cluster_{len(cluster)}"
            n = len(inst[base])
            title = base.split(":", 1)[1] + (f" ×{n}" if n > 1 else "")
            lines.append(
                f"  subgraph {cluster[base]} {{ label={_q(title)}; style=rounded; fontsize=10;"
            )
            lines += _sm_states(base, by_sm[base], visits, time, names, path, ids, anchor)
            lines.append("  }")
        lines.append("  }")
    for (base, frm, state), n in sorted(moves.items()):
        if base in by_sm:
            lines.append(
                f"  {ids[(base, frm)]} -> {ids[(base, state)]} "
                f"[label={_q(str(n))}, color={_q(_OFF)}];"
            )
    lines += _exchanges(pairs, on_path, by_sm, only, path, anchor, cluster, ids)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _state_counts(p, names: Names, only: str | None):
    """Per base SM: each state's visits and time, transition counts ``frm ->
    state``, and the SM's instances."""
    visits: dict[tuple, int] = defaultdict(int)
    time: dict[tuple, float] = defaultdict(float)
    moves: dict[tuple, int] = defaultdict(int)
    inst: dict[str, set] = defaultdict(set)
    for sm, frm, state, _to, n, t in p.transition_counts():
        base = names.base_sm(sm)
        inst[base].add(sm)
        if (only is not None and base != only) or state == 0:
            continue
        visits[(base, state)] += n
        time[(base, state)] += t
        if frm != 0:
            moves[(base, frm, state)] += n
    for base, frm, _state in list(moves):
        visits.setdefault((base, frm), 0)
    return visits, time, moves, inst


def _handovers_on_path(path: _Path) -> dict[tuple, int]:
    """``(producer, consumer, via) -> visits`` of the hand-overs the path took."""
    on_path: dict[tuple, int] = defaultdict(int)
    for name, v in path.visits.items():
        if "->" in name and name.endswith("]"):
            a, rest = name.split("->", 1)
            b, via = rest[:-1].split("[", 1)
            on_path[(a, b, via)] += v
    return on_path


def _drop_off_path(by_sm: dict, names: Names, path: _Path, on_path: dict) -> int:
    """Leave out of ``by_sm`` the SMs the path neither spent time in nor handed
    over through; returns how many."""
    touched = {sm for (a, b, _via) in on_path for sm in (a, b)}
    left_out = 0
    for base in list(by_sm):
        if base not in touched and not any(
            path.share(f"{base}:{names.state(s)}") > 0 for s in by_sm[base]
        ):
            del by_sm[base]
            left_out += 1
    return left_out


def _sm_states(base, states, visits, time, names: Names, path: _Path, ids, anchor) -> list[str]:
    """The nodes of SM ``base``'s states; notes in ``anchor`` the one hand-overs
    meet (the state with most of the path, or most time)."""
    best = max(
        states,
        key=lambda s: (path.share(f"{base}:{names.state(s)}"), time[(base, s)], -s),
    )
    lines = []
    for state in sorted(states):
        sname = names.state(state)
        share = path.share(f"{base}:{sname}")
        label = f"{sname}\n{visits[(base, state)]}× {_ns(time[(base, state)])}"
        if share > 0:
            label += f"\n{_pct(share)} of path"
        node = _ident("s", (base, state), ids)
        if state == best:
            anchor[base] = node
        lines.append(
            f"    {node} [label={_q(label)}, fillcolor={_q(_heat(share))}, "
            f"fontcolor={_font(share)}, penwidth={1 + 4 * share:.1f}, "
            f"color={_q(_PATH if share > 0 else 'black')}];"
        )
    return lines


def _exchanges(pairs, on_path, by_sm, only, path: _Path, anchor, cluster, ids) -> list[str]:
    """Interactions with other SMs: between their clusters, or an ellipse when not
    drawn.  The whole-trace view draws only the hand-overs the path took (all of
    them are in ``high``); a one-SM view draws every interaction of that SM."""
    if only is None:
        shown = {
            k: n for k, n in pairs.items() if on_path.get(k) and k[0] in by_sm and k[1] in by_sm
        }
    else:
        shown = {k: n for k, n in pairs.items() if only in k[:2]}
    top = max([*on_path.values(), 1])
    lines = []
    for (a, b, via), n in sorted(shown.items()):
        for base in (a, b):
            if base not in anchor:
                anchor[base] = _ident("o", base, ids)
                lines.append(f"  {anchor[base]} [label={_q(base)}, shape=ellipse];")
        attrs = _edge_attrs(path, on_path.get((a, b, via), 0), top, f"{via} {n}")
        # Drawn between the SMs' boxes; no constraint=false: with clusters it makes dot
        # fail ("trouble in init_rank").
        ends = "".join(
            f", {end}={cluster[sm]}" for end, sm in (("ltail", a), ("lhead", b)) if sm in cluster
        )
        if a == b:
            ends = ""  # an SM handing over to itself: a loop on its anchor
        lines.append(f"  {anchor[a]} -> {anchor[b]} [{attrs}, style=dashed{ends}];")
    return lines
