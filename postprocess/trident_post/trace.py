"""`trident-post trace RUN -o trace.json`: the timeline as Chrome trace event JSON, which Perfetto
(https://ui.perfetto.dev) and chrome://tracing open. One process per rank (pid = rank, named with
its tp/pp/dp coordinates and sorted by pipeline stage), one thread per stream so that no two events
overlap on a track: compute (F, B, I, W), pipeline p2p (SEND, RECV), TP collectives (ALLREDUCE_TP,
ALLGATHER_TP, REDUCE_SCATTER_TP), the CP ring (RING_CP), the EP all-to-alls (ALLTOALL_EP),
DP collectives (ALLREDUCE_DP, ALLREDUCE_EMB), optimizer, checkpoints (CKPT_BLOCKED: training
stopped for a save; CKPT_WRITE: its data written, under checkpoint.async beside the next steps). Every event is a complete event (ph "X")
with ts and dur in microseconds; ts counts from the earliest event written."""
import json
import sys

import numpy as np

from .timeline import (CHECKPOINT_BLOCKED, CHECKPOINT_WRITE, COMPUTE_KINDS, CP_RING_KINDS, DP_COLLECTIVE_KINDS,
                       EP_ALLTOALL_KINDS, OPTIMIZER_KINDS, P2P_KINDS, TP_COLLECTIVE_KINDS, PostError, Timeline)

HELP = "Chrome trace event JSON (Perfetto): pid = rank, one tid per stream, microseconds"

# tid -> (stream name, kinds); "other" catches kinds a newer trident may add.
STREAMS = (
    (1, "compute", COMPUTE_KINDS),
    (2, "pipeline p2p", P2P_KINDS),
    (3, "TP collectives", TP_COLLECTIVE_KINDS),
    (4, "DP collectives", DP_COLLECTIVE_KINDS),
    (5, "optimizer", OPTIMIZER_KINDS),
    (6, "CP ring", CP_RING_KINDS),
    (7, "EP all-to-all", EP_ALLTOALL_KINDS),
    (8, "checkpoint: training stopped", (CHECKPOINT_BLOCKED,)),
    (9, "checkpoint: data written", (CHECKPOINT_WRITE,)),
)
OTHER_TID = 10


def tid_of(kind):
    for tid, _, kinds in STREAMS:
        if kind in kinds:
            return tid
    return OTHER_TID


def add_parser(subparsers):
    p = subparsers.add_parser("trace", help=HELP, description=__doc__.split("\n\n")[0].replace("`", ""),
                              epilog="Example: trident-post trace runs/tiny -o trace.json --step 5")
    p.add_argument("run", metavar="RUN", help="run directory (the deck's output.dir) or its timeline.h5")
    p.add_argument("-o", "--output", metavar="FILE.json", required=True, help="trace file to write ('-' = stdout)")
    p.add_argument("--step", type=int, action="append", default=None,
                   help="only this step (repeatable; default: every step with events)")
    p.set_defaults(func=run)
    return p


def event_name(kind, microbatch, chunk, v):
    if microbatch < 0:
        return kind
    name = f"{kind}{microbatch}"
    return name + f".{chunk}" if v > 1 and chunk >= 0 else name


def build_trace(tl, steps=None):
    """The trace as a dict {traceEvents: [...], displayTimeUnit, otherData}."""
    ev = tl.events
    if steps:
        for s in steps:
            tl.resolve_step(s)
        rows = np.nonzero(np.isin(ev["step"], steps))[0]
    else:
        rows = np.arange(len(ev["kind"]))
    t0 = float(ev["t_start"][rows].min()) if len(rows) else 0.0
    coords = tl.rank_coords()
    events = []
    used = {}
    order = sorted(coords, key=lambda r: (coords[r][1], coords[r][2], coords[r][0], r))
    names = tl.rank_labels()
    for sort_index, r in enumerate(order):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": names[r]}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": sort_index}})
    kinds, rank, step = ev["kind"], ev["rank"], ev["step"]
    mb, chunk, t_start, t_end, nbytes = ev["microbatch"], ev["chunk"], ev["t_start"], ev["t_end"], ev["bytes"]
    v = tl.v
    for i in rows:
        kind = str(kinds[i])
        tid = tid_of(kind)
        r = int(rank[i])
        used.setdefault(r, set()).add(tid)
        args = {"step": int(step[i]), "microbatch": int(mb[i]), "chunk": int(chunk[i])}
        if int(nbytes[i]):
            args["bytes"] = int(nbytes[i])
        events.append({"ph": "X", "name": event_name(kind, int(mb[i]), int(chunk[i]), v), "cat": kind,
                       "pid": r, "tid": tid, "ts": (float(t_start[i]) - t0) * 1e6,
                       "dur": (float(t_end[i]) - float(t_start[i])) * 1e6, "args": args})
    names = {tid: name for tid, name, _ in STREAMS}
    names[OTHER_TID] = "other"
    for r in sorted(used):
        for tid in sorted(used[r]):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": names[tid]}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid,
                           "args": {"sort_index": tid}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run": tl.name, "timeline": str(tl.path), "t0_s": t0, "schedule": tl.schedule,
                          "p": tl.p, "m": tl.m, "grid": tl.grid_text(),
                          "steps": sorted(int(s) for s in np.unique(step[rows]))}}


def run(args):
    tl = Timeline(args.run)
    trace = build_trace(tl, args.step)
    n = sum(1 for e in trace["traceEvents"] if e["ph"] == "X")
    if args.output == "-":
        json.dump(trace, sys.stdout)
        sys.stdout.write("\n")
        return 0
    try:
        with open(args.output, "w") as f:
            json.dump(trace, f)
    except OSError as e:
        raise PostError(f"cannot write {args.output}: {e.strerror or e}")
    print(f"{args.output}: {n} events of {tl.describe()}; open it in https://ui.perfetto.dev")
    return 0
