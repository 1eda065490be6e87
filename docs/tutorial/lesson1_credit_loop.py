"""Lesson 1: a pipeline with a credit loop, its critical path, and "one more credit".

A sender may have only ``credits`` items in flight: it takes a credit before it
sends, and the credit comes back only after the item crossed the link, was
consumed, and its acknowledgement was processed.  Four stages, each a SimPy
process; the queues between them are cpasim's traced SimPy primitives, so the
run records the annotations cpasim's analyzer reads.

What the lesson shows:

1. the critical path of the run and which stages it runs through;
2. the *resource loop*: the path keeps going back from the last stage to the
   first through the credits (``rx:Ack->tx:App[tx:Credits]``);
3. the what-if "one more credit" predicted from the recorded graph alone
   (``capacity={"tx:Credits": 1}``), then checked by re-running the pipeline with
   one more credit; and the same for up to four more.  With two credits the
   path runs round the whole loop (each stage's share is its part of the 10 ns
   round); with three, the acknowledgement stage (4 ns per item) carries almost
   all of it, and more credits buy almost nothing: the prediction says so
   before any re-run does.

Run:  python docs/tutorial/lesson1_credit_loop.py [OUT_DIR]   (default out/tutorial)
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import simpy  # noqa: E402

import cpasim  # noqa: E402

STAGES = [("tx", "App", 2.0), ("tx", "Link", 3.0), ("rx", "App", 1.0), ("rx", "Ack", 4.0)]


def pipeline(credits: int, items: int = 200) -> cpasim.Tracer:
    """Run the pipeline with ``credits`` credits; the tracer holds its annotations."""
    env = simpy.Environment()
    tracer = cpasim.Tracer.in_memory(env)
    credit = cpasim.TracedContainer(env, tracer, "tx", "Credits", init=credits)
    wire = cpasim.TracedStore(env, tracer, "tx", "Wire")
    inbox = cpasim.TracedStore(env, tracer, "rx", "Inbox")
    acks = cpasim.TracedStore(env, tracer, "rx", "Acks")

    def stage(system, name, work_ns, take, give):
        sm = tracer.sm(system, name)  # a state machine: its states go into the trace
        for _ in range(items):
            sm.begin("wait")
            yield take(sm)
            sm.begin("work")
            yield env.timeout(work_ns)
            yield give(sm)

    takes = [lambda sm: credit.get(1, sm), wire.get, inbox.get, acks.get]
    gives = [
        lambda sm: wire.put("item", sm),
        lambda sm: inbox.put("item", sm),
        lambda sm: acks.put("ack", sm),
        lambda sm: credit.put(1, sm),
    ]
    for (system, name, work_ns), take, give in zip(STAGES, takes, gives, strict=True):
        env.process(stage(system, name, work_ns, take, give))
    env.run()
    tracer.close()
    return tracer


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    base = cpasim.analyze(pipeline(credits=2), "tx:App", "rx:App")
    print(f"critical path with 2 credits: {base.critical_path_ns:.0f} ns")
    for m in base.most_critical:  # base.to_frame() gives this table as a DataFrame
        print(f"  {m['name']:14} {m['share']:6.1%} of the path, {m['time_ns']:.0f} ns")
    for loop in base.loops:
        print(f"resource loop: {loop['edge']} taken {loop['count']} times")

    more = [0, 1, 2, 3, 4]
    predicted = [
        cpasim.analyze(
            pipeline(credits=2), "tx:App", "rx:App", capacity={"tx:Credits": k} if k else None
        )
        for k in more
    ]
    rerun = [cpasim.analyze(pipeline(credits=2 + k), "tx:App", "rx:App") for k in more]
    for k, p, r in zip(more, predicted, rerun, strict=True):
        error = abs(p.critical_path_ns - r.critical_path_ns) / r.critical_path_ns
        print(
            f"{2 + k} credits: predicted {p.critical_path_ns:.0f} ns, "
            f"re-run {r.critical_path_ns:.0f} ns ({error:.1%}), "
            f"most critical {p.most_critical[0]['name']} ({p.most_critical[0]['share']:.0%})"
        )

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [m["name"] for m in base.most_critical]
    one_more = {m["name"]: m["share"] for m in predicted[1].most_critical}
    y = range(len(names))
    shares = [m["share"] for m in base.most_critical]
    left.barh([i + 0.2 for i in y], shares, 0.4, label="2 credits")
    left.barh([i - 0.2 for i in y], [one_more.get(n, 0) for n in names], 0.4, label="3 (predicted)")
    left.set_yticks(list(y), names)
    left.invert_yaxis()
    left.set_xlabel("share of the critical path")
    left.set_title("Where the critical path runs")
    left.legend(loc="lower right")

    credits = [2 + k for k in more]
    right.plot(credits, [p.critical_path_ns for p in predicted], "o-", label="predicted from 2")
    right.plot(credits, [r.critical_path_ns for r in rerun], "x--", ms=9, label="re-run")
    right.set_xticks(credits)
    right.set_xlabel("credits")
    right.set_ylabel("critical path (ns) for 200 items")
    right.set_title("What-if: more credits")
    right.legend()
    loops = ", ".join(f"{lp['edge']} ({lp['count']}×)" for lp in base.loops)
    fig.suptitle(f"Resource loop with 2 credits: {loops}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "lesson1_credit_loop.png", dpi=110)
    print(f"wrote {out / 'lesson1_credit_loop.png'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("out/tutorial"))
