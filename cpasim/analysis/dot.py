"""Compact Graphviz views of a trace (Saidi 5.9).

- ``high``: state machines (ellipses) and queues (boxes); an arrow SM→queue per
  producer, queue→SM per consumer, SM→SM per ``link``, labelled with op counts.
- ``global``: one node per distinct transition ``A→B`` of each SM (clustered
  per SM); an edge per state between the transition entering it and the one
  leaving it, labelled ``state``, visits, total time and time on the critical
  path; red grows with the state's time on the path, blue with its visits.
  Dashed edges join SMs that interact through a queue or a link.
- ``sm:SYS:SM``: the ``global`` view of one SM plus the queues and SMs it
  interacts with.
"""

from __future__ import annotations

from cpasim.analysis.report import AnalysisResult, Names
from cpasim.errors import CpasimError


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ns(x: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}ns"


def to_dot(result: AnalysisResult, graph: str = "high") -> str:
    p = result.pass_state
    names = Names(p.key)
    if graph == "high":
        return _high(p, names)
    if graph == "global":
        return _global(result, p, names, None)
    if graph.startswith("sm:"):
        want = graph[3:]
        ids = [sm for sm in range(len(p.s_last)) if names.sm(sm) == want]
        if not ids:
            known = ", ".join(sorted(names.sm(sm) for sm in range(len(p.s_last))))
            raise CpasimError(f"--graph {graph}: no state machine {want!r}; the trace has: {known}")
        return _global(result, p, names, ids[0])
    raise CpasimError(f"--graph {graph!r}: expected high, global or sm:SYS:SM")


def _high(p, names: Names) -> str:
    lines = ["digraph cpasim {", "  rankdir=LR;", "  node [fontsize=10];"]
    qops = sorted(p.queue_ops())
    used_sm = {sm for sm, _q2, _d, _n in qops} | {s for pair in p.links for s in pair}
    for sm in sorted(used_sm):
        lines.append(f"  sm{sm} [label={_q(names.sm(sm))}, shape=ellipse];")
    for q in sorted({q for _s, q, _d, _n in qops}):
        lines.append(f"  q{q} [label={_q(names.queue(q))}, shape=box];")
    for sm, q, direction, count in qops:
        a, b = (f"sm{sm}", f"q{q}") if direction == "in" else (f"q{q}", f"sm{sm}")
        lines.append(f"  {a} -> {b} [label={_q(str(count))}];")
    for (a, b), count in sorted(p.links.items()):
        lines.append(f"  sm{a} -> sm{b} [label={_q(f'link {count}')}, style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _global(result: AnalysisResult, p, names: Names, only: int | None) -> str:
    paths = [result.path] if result.path is not None else list(result.connections.values())
    on_path: dict[str, float] = {}
    for pr in paths:
        for name, time in pr.state_totals.items():
            on_path[name] = on_path.get(name, 0.0) + time
    edges = {}  # (sm, from, state, to) -> [visits, time]
    for sm, frm, state, to, visits, time in p.transition_counts():
        if only is None or sm == only:
            edges[(sm, frm, state, to)] = (visits, time)
    max_path = max(on_path.values(), default=0.0) or 1.0
    max_visits = max((v for v, _t in edges.values()), default=1) or 1
    lines = ["digraph cpasim {", "  node [fontsize=9, shape=box, style=rounded];"]
    by_sm: dict[int, set] = {}
    for sm, frm, state, to in edges:
        by_sm.setdefault(sm, set()).update({(frm, state), (state, to)})
    for sm, nodes in sorted(by_sm.items()):
        lines.append(f"  subgraph cluster_{sm} {{ label={_q(names.sm(sm))};")
        for a, b in sorted(nodes):
            label = "(first record)" if a == b == 0 else f"{names.state(a)} -> {names.state(b)}"
            lines.append(f"    t{sm}_{a}_{b} [label={_q(label)}];")
        lines.append("  }")
    for (sm, frm, state, to), (visits, time) in sorted(edges.items()):
        name = f"{names.base_sm(sm)}:{names.state(state)}"  # on-path totals merge instances
        crit = on_path.get(name, 0.0)
        red = int(255 * crit / max_path)
        blue = int(255 * visits / max_visits)
        label = f"{names.state(state)}\\n{visits} / {_ns(time)} / {_ns(crit)}"
        width = 1 + 3 * crit / max_path
        lines.append(
            f"  t{sm}_{frm}_{state} -> t{sm}_{state}_{to} "
            f'[label="{label}", color="#{red:02x}00{blue:02x}", penwidth={width:.2f}];'
        )
    # Interactions: producer SM → consumer SM per queue, and links.
    producers: dict[int, set] = {}
    consumers: dict[int, set] = {}
    for sm, q, direction, _count in p.queue_ops():
        (producers if direction == "in" else consumers).setdefault(q, set()).add(sm)
    anchor = {sm: f"t{sm}_{min(nodes)[0]}_{min(nodes)[1]}" for sm, nodes in by_sm.items()}
    extra = set()
    pairs = set()
    for q, prods in producers.items():
        for a in prods:
            for b in consumers.get(q, ()):
                if a != b and (only is None or only in (a, b)):
                    pairs.add((a, b, names.queue(q)))
    for a, b in p.links:
        if only is None or only in (a, b):
            pairs.add((a, b, "link"))
    for a, b, via in sorted(pairs):
        for sm in (a, b):
            if sm not in anchor:
                anchor[sm] = f"sm{sm}"
                extra.add(sm)
        lines.append(f"  {anchor[a]} -> {anchor[b]} [style=dashed, label={_q(via)}];")
    for sm in sorted(extra):
        lines.append(f"  sm{sm} [label={_q(names.sm(sm))}, shape=ellipse];")
    lines.append("}")
    return "\n".join(lines) + "\n"
