"""Reading a trident run: its timeline.h5 (/steps, /events, root attributes; DESIGN.md "Timeline")
and the helpers every subcommand shares (errors, run names, step selection)."""
from pathlib import Path

import numpy as np

TIMELINE_FILE = "timeline.h5"

# The columns and attributes a trident timeline always has; anything else is optional.
STEP_COLUMNS = ("step", "loss", "lr", "grad_norm", "step_time_s", "tokens_per_s", "bubble")
EVENT_COLUMNS = ("rank", "tp", "pp", "dp", "step", "kind", "microbatch", "chunk", "t_start", "t_end")
ROOT_ATTRIBUTES = ("p", "m", "tp", "pp", "dp")

COMPUTE_KINDS = ("F", "B", "I", "W")
P2P_KINDS = ("SEND", "RECV")
# One event per kind and action: how long the action was blocked in them, from the first call.
TP_COLLECTIVE_KINDS = ("ALLREDUCE_TP", "ALLGATHER_TP", "REDUCE_SCATTER_TP")
CP_RING_KINDS = ("RING_CP",)  # ring attention's hops of an action, merged as the TP kinds
EP_ALLTOALL_KINDS = ("ALLTOALL_EP",)  # a mixture's expert-parallel all-to-alls of an action, likewise
DP_COLLECTIVE_KINDS = ("ALLREDUCE_DP", "ALLREDUCE_EMB")
OPTIMIZER_KINDS = ("OPTIMIZER",)
CHECKPOINT_WRITE, CHECKPOINT_BLOCKED = "CKPT_WRITE", "CKPT_BLOCKED"  # a save's data written; training stopped for it
# Waits that the schedule could not hide behind compute (a rank records them only while it waits).
COMMUNICATION_KINDS = P2P_KINDS + TP_COLLECTIVE_KINDS + CP_RING_KINDS + EP_ALLTOALL_KINDS + DP_COLLECTIVE_KINDS

WHAT_A_TIMELINE_HAS = ("a trident timeline has /steps, /events and the root attributes "
                       + ", ".join(ROOT_ATTRIBUTES) + " (written by `trident run` as <output.dir>/timeline.h5)")


def textbook_bubble(p, m):
    """(p − 1) / (m + p − 1): GPipe / 1F1B with p equal stages and m micro-batches."""
    return (p - 1) / (m + p - 1) if m + p - 1 > 0 else 0.0


class PostError(Exception):
    """A problem the user can fix: printed as one line `trident-post: error: ...`, exit `code`."""

    def __init__(self, message, code=2):
        super().__init__(message)
        self.code = code


def _h5py():
    try:
        import h5py
    except ImportError as e:  # pragma: no cover - Debian's python3-h5py is a dependency
        raise PostError(f"h5py is not importable ({e}): install python3-h5py (apt-get install python3-h5py)")
    return h5py


def attribute_value(value):
    """An HDF5 attribute as a plain Python value (bytes decoded, numpy scalars unwrapped)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        if value.shape == ():
            return attribute_value(value[()])
        return [attribute_value(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def decode_kinds(column):
    """The /events kind column (fixed-length bytes, or variable-length strings) as a numpy str array."""
    column = np.asarray(column)
    if column.dtype.kind == "S":
        return np.char.decode(column, "ascii")
    if column.dtype.kind == "U":
        return column
    return np.array([k.decode("ascii") if isinstance(k, bytes) else str(k) for k in column], dtype=str)


def _table(obj):
    """/steps or /events as {column: array}: a group of 1-D datasets or a compound dataset."""
    h5py = _h5py()
    if isinstance(obj, h5py.Group):
        return {name: np.asarray(obj[name][()]) for name in obj if isinstance(obj[name], h5py.Dataset)}
    if isinstance(obj, h5py.Dataset) and obj.dtype.names:
        data = obj[()]
        return {name: np.asarray(data[name]) for name in obj.dtype.names}
    return None


def resolve_timeline(path):
    """RUN may be a run directory (holding timeline.h5) or the timeline file itself."""
    p = Path(path)
    if not p.exists():
        raise PostError(f"{path}: no such run directory or file (give a trident run directory, i.e. the "
                        f"deck's output.dir, or its {TIMELINE_FILE})")
    if p.is_dir():
        if not (p / TIMELINE_FILE).is_file():
            raise PostError(f"{path}: directory holds no {TIMELINE_FILE}; is it a trident run directory "
                            f"(the deck's output.dir)?")
        return p / TIMELINE_FILE
    return p


def run_name(path):
    """The name a run is shown under: its run directory's name."""
    p = Path(path).resolve()
    return p.parent.name if p.is_file() else p.name


def unique_names(paths):
    """Run names for legends and table headers, made unique by prefixing parent directories."""
    names = [run_name(p) for p in paths]
    resolved = [Path(p).resolve() for p in paths]
    resolved = [r.parent if r.is_file() else r for r in resolved]
    depth = 1
    while len(set(names)) < len(names) and depth < 6:
        depth += 1
        names = ["/".join(r.parts[-depth:]) for r in resolved]
    if len(set(names)) < len(names):
        names = [f"{n} ({i + 1})" for i, n in enumerate(names)]
    return names


class Timeline:
    """A validated trident timeline, read whole into numpy arrays."""

    def __init__(self, path):
        self.path = resolve_timeline(path)
        self.name = run_name(path)
        h5py = _h5py()
        try:
            is_hdf5 = h5py.is_hdf5(str(self.path))
        except OSError as e:
            raise PostError(f"{self.path}: cannot read ({e.strerror or e})")
        if not is_hdf5:
            raise PostError(f"{self.path}: not an HDF5 file, so not a trident timeline ({WHAT_A_TIMELINE_HAS})")
        try:
            with h5py.File(self.path, "r") as f:
                self._read(f)
        except PostError:
            raise
        except (OSError, KeyError, ValueError) as e:
            raise PostError(f"{self.path}: cannot read the timeline ({e})")

    def _read(self, f):
        missing = [g for g in ("steps", "events") if g not in f]
        if missing:
            raise PostError(f"{self.path}: not a trident timeline: no {' or '.join('/' + g for g in missing)} "
                            f"({WHAT_A_TIMELINE_HAS})")
        self.attrs = {k: attribute_value(v) for k, v in f.attrs.items()}
        missing = [a for a in ROOT_ATTRIBUTES if a not in self.attrs]
        if missing:
            raise PostError(f"{self.path}: not a trident timeline: root attribute(s) {', '.join(missing)} missing "
                            f"({WHAT_A_TIMELINE_HAS})")
        self.steps = _table(f["steps"])
        self.events = _table(f["events"])
        for label, table, columns in (("/steps", self.steps, STEP_COLUMNS), ("/events", self.events, EVENT_COLUMNS)):
            if table is None:
                raise PostError(f"{self.path}: not a trident timeline: {label} is neither a group of columns nor a "
                                f"compound dataset")
            lacking = [c for c in columns if c not in table]
            if lacking:
                raise PostError(f"{self.path}: not a trident timeline: {label} lacks column(s) "
                                f"{', '.join(lacking)}")
        self.events["kind"] = decode_kinds(self.events["kind"])
        if "bytes" not in self.events:
            self.events["bytes"] = np.zeros(len(self.events["kind"]), dtype=np.int64)

    # ---- run description ----------------------------------------------------------------
    tp = property(lambda self: int(self.attrs["tp"]))
    pp = property(lambda self: int(self.attrs["pp"]))
    dp = property(lambda self: int(self.attrs["dp"]))
    cp = property(lambda self: int(self.attrs.get("cp", 1)))  # runs before context parallelism lack it
    ep = property(lambda self: int(self.attrs.get("ep", 1)))  # and runs before expert parallelism this
    p = property(lambda self: int(self.attrs["p"]))
    m = property(lambda self: int(self.attrs["m"]))

    @property
    def world_size(self):
        return self.tp * self.cp * self.pp * self.dp

    @property
    def v(self):
        return int(self.attrs.get("virtual_stages", 1))

    @property
    def schedule(self):
        return str(self.attrs.get("schedule_kind", self.attrs.get("schedule", "?")))

    @property
    def emulated(self):
        return bool(self.attrs.get("emulated", 0))

    @property
    def predicted_bubble(self):
        value = self.attrs.get("predicted_bubble")
        return None if value is None else float(value)

    @property
    def theory_bubble(self):
        return textbook_bubble(self.p, self.m)

    def grid_text(self):
        cp = f" x cp{self.cp}" if self.cp > 1 else ""
        ep = f" (ep{self.ep})" if self.ep > 1 else ""
        return f"tp{self.tp}{cp} x pp{self.pp} x dp{self.dp}{ep}"

    def describe(self):
        text = (f"{self.name}: schedule {self.schedule}, p {self.p}, m {self.m}"
                + (f", v {self.v}" if self.v > 1 else "") + f", {self.grid_text()} = {self.world_size} ranks")
        return text + (", emulated compute" if self.emulated else "")

    # ---- steps and events ---------------------------------------------------------------
    def step_numbers(self):
        return np.asarray(self.steps["step"]).astype(np.int64)

    def step_row(self, step):
        """Index of `step` in /steps, or None."""
        rows = np.nonzero(self.step_numbers() == step)[0]
        return int(rows[-1]) if len(rows) else None

    def medians_after(self, warmup, *columns):
        """{column: median over the steps after step `warmup`} of /steps columns."""
        lacking = [c for c in columns if c not in self.steps]
        if lacking:
            raise PostError(f"{self.path}: /steps lacks column(s) {', '.join(lacking)}")
        timed = self.step_numbers() > warmup
        if not timed.any():
            raise PostError(f"{self.path}: no steps after the {warmup} warm-up steps "
                            f"(steps recorded: {len(timed)})")
        return {c: float(np.median(np.asarray(self.steps[c])[timed], axis=0)) for c in columns}

    def event_steps(self):
        return sorted(int(s) for s in np.unique(self.events["step"]))

    def resolve_step(self, step):
        """`step`, checked to have events; None = the last step with events."""
        steps = self.event_steps()
        if not steps:
            raise PostError(f"{self.path}: /events is empty (events are flushed at checkpoints and at the end of a "
                            f"run; a run that stopped early may have none)")
        if step is None:
            return steps[-1]
        if step not in steps:
            raise PostError(f"{self.path}: step {step} has no events (steps with events: {_ranges(steps)})")
        return step

    def step_events(self, step):
        """The events of one step as {column: array}, ordered by rank, then t_start."""
        selected = np.nonzero(self.events["step"] == step)[0]
        order = np.lexsort((self.events["t_start"][selected], self.events["rank"][selected]))
        rows = selected[order]
        return {name: column[rows] for name, column in self.events.items()}

    def rank_coords(self):
        """{rank: (tp, pp, dp)} for every rank with events; the rest from the default order tp-cp-dp-pp."""
        coords = {}
        ev = self.events
        for r, t, p, d in zip(ev["rank"], ev["tp"], ev["pp"], ev["dp"]):
            coords.setdefault(int(r), (int(t), int(p), int(d)))
        for r in range(self.world_size):
            if r not in coords:
                replica = self.tp * self.cp
                coords[r] = (r % self.tp, r // (replica * self.dp), (r // replica) % self.dp)
        return coords

    def rank_labels(self):
        """{rank: "r5 tp1 pp0 dp1"}, with the rank's cp coordinate after tp where the run has context
        parallelism (the /events cp column; timelines from before it lack the column and the axis)."""
        coords, cp = self.rank_coords(), {}
        if self.cp > 1 and "cp" in self.events:
            for r, c in zip(self.events["rank"], self.events["cp"]):
                cp.setdefault(int(r), int(c))
        return {r: f"r{r} tp{tp}" + (f" cp{cp[r]}" if r in cp else "") + f" pp{pp} dp{dp}"
                for r, (tp, pp, dp) in coords.items()}


def _ranges(numbers):
    """[1, 2, 3, 5] -> '1-3, 5'."""
    parts, start, prev = [], None, None
    for n in numbers:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            parts.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = prev = n
    if start is not None:
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
    return ", ".join(parts)
