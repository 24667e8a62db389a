"""A trident-shaped timeline.h5 written without trident: a simulated 1F1B step (F = 1 unit,
B = 2 units, RECV waits where a stage waits for its neighbour, a DP all-reduce and the optimizer
at the end), replicated over tp and dp. Used to test the tools at sizes CI cannot run
(16 ranks x 64 micro-batches) and as a fixture-free smoke test."""
from pathlib import Path

import h5py
import numpy as np


def one_f_one_b(p, m):
    """Per stage, the 1F1B action list [(kind, microbatch)]."""
    lists = []
    for s in range(p):
        warmup = min(p - s - 1, m)
        actions = [("F", j) for j in range(warmup)]
        for i in range(m - warmup):
            actions += [("F", warmup + i), ("B", i)]
        actions += [("B", j) for j in range(m - warmup, m)]
        lists.append(actions)
    return lists


def simulate(p, m, unit=1e-3, f_cost=1.0, b_cost=2.0):
    """[(stage, kind, microbatch, t_start, t_end)] of one 1F1B step with RECV waits, in seconds."""
    lists = one_f_one_b(p, m)
    done = {}
    position = [0] * p
    free = [0.0] * p
    rows = []
    progress = True
    while progress:
        progress = False
        for s in range(p):
            while position[s] < len(lists[s]):
                kind, j = lists[s][position[s]]
                dep = (s - 1, "F", j) if kind == "F" else ((s + 1, "B", j) if s + 1 < p else (s, "F", j))
                if kind == "F" and s == 0:
                    ready = free[s]
                elif dep in done:
                    ready = done[dep]
                else:
                    break
                if ready > free[s] and not (kind == "B" and s + 1 == p):
                    rows.append((s, "RECV", j, free[s], ready))
                start = max(ready, free[s])
                end = start + unit * (f_cost if kind == "F" else b_cost)
                rows.append((s, kind, j, start, end))
                done[(s, kind, j)] = end
                free[s] = end
                position[s] += 1
                progress = True
    assert all(position[s] == len(lists[s]) for s in range(p)), "1F1B simulation deadlocked"
    finish = max(free)
    for s in range(p):
        rows.append((s, "ALLREDUCE_DP", -1, finish, finish + unit * 0.5))
        rows.append((s, "OPTIMIZER", -1, finish + unit * 0.5, finish + unit * 0.8))
    return rows


def write(path, tp=1, pp=4, dp=1, m=8, steps=2, unit=1e-3):
    """Writes a timeline at `path` (a run directory gets timeline.h5) and returns the file's path."""
    path = Path(path)
    if path.suffix != ".h5":
        path.mkdir(parents=True, exist_ok=True)
        path = path / "timeline.h5"
    world = tp * pp * dp
    step_rows = simulate(pp, m, unit)
    step_span = max(r[4] for r in step_rows) + unit
    columns = {k: [] for k in ("rank", "tp", "pp", "dp", "step", "kind", "microbatch", "chunk", "t_start", "t_end",
                               "bytes")}
    rng = np.random.default_rng(7)
    for step in range(1, steps + 1):
        offset = 10.0 + (step - 1) * step_span
        for rank in range(world):
            t, d, s = rank % tp, (rank // tp) % dp, rank // (tp * dp)
            jitter = float(rng.uniform(0, unit * 0.01))
            for stage, kind, j, t0, t1 in step_rows:
                if stage != s:
                    continue
                columns["rank"].append(rank)
                columns["tp"].append(t)
                columns["pp"].append(s)
                columns["dp"].append(d)
                columns["step"].append(step)
                columns["kind"].append(kind.encode())
                columns["microbatch"].append(j)
                columns["chunk"].append(0 if kind in ("F", "B") else -1)
                columns["t_start"].append(offset + t0 + jitter)
                columns["t_end"].append(offset + t1 + jitter)
                columns["bytes"].append(4096 if kind == "RECV" else 0)
    dtypes = {"kind": "S16", "t_start": np.float64, "t_end": np.float64, "bytes": np.int64}
    with h5py.File(path, "w") as f:
        for key, value in {"p": pp, "m": m, "tp": tp, "pp": pp, "dp": dp, "virtual_stages": 1, "schedule": "1f1b",
                           "schedule_kind": "1f1b", "predicted_bubble": (pp - 1) / (m + pp - 1), "emulated": 1,
                           "micro_batch_size": 1, "layers": pp, "d_model": 64, "heads": 4, "seq_len": 64,
                           "vocab": 256}.items():
            f.attrs[key] = value
        events = f.create_group("events")
        for key, values in columns.items():
            events.create_dataset(key, data=np.asarray(values, dtype=dtypes.get(key, np.int32)))
        st = f.create_group("steps")
        n = np.arange(1, steps + 1)
        st["step"] = n.astype(np.int64)
        for key in ("loss", "grad_norm", "mfu"):
            st[key] = np.zeros(steps)
        st["lr"] = 1e-3 * n
        st["step_time_s"] = np.full(steps, step_span)
        st["tokens_per_s"] = np.full(steps, 64 * m / step_span)
        st["bubble"] = np.full(steps, (pp - 1) / (m + pp - 1))
        st["peak_activation_bytes_per_stage"] = np.zeros((steps, pp), dtype=np.int64)
    return path
