"""job_scripts/cpu.sbatch on a real Slurm: a private one-node cluster (local_slurm.py) runs the
tiny deck on 8 tasks through srun --mpi=pmix. The run directory must hold a timeline and a
checkpoint with a falling loss; a job sent USR1 mid-run must checkpoint, requeue itself and end
with the uninterrupted run's losses, bit for bit, and so must a chain of two jobs whose first one is
sent USR1; a job whose allocation does not fit the deck's grid must fail before launch. When the
daemons cannot start here the tests skip and say why (SLURM UNAVAILABLE: ...)."""
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import REPO, TINY
from local_slurm import LocalSlurm, SlurmUnavailable

SCRIPT = REPO / "job_scripts" / "cpu.sbatch"
CHAIN = REPO / "job_scripts" / "chain"
STEPS = 60
OVERRIDES = ("--set", f"train.steps={STEPS}", "--set", "checkpoint.every=20")
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


def install_when_missing():
    if all(shutil.which(t) or Path("/usr/sbin", t).exists() for t in ("sbatch", "slurmctld", "slurmd", "munged")):
        return
    subprocess.run(["bash", str(REPO / "scripts" / "setup"), "--slurm", "--no-build"], check=True)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    install_when_missing()
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmUnavailable as e:
        cluster.stop()
        print(f"SLURM UNAVAILABLE: {e}")
        pytest.skip(f"SLURM UNAVAILABLE: {e}")
    # The 8 tasks share this machine's cores: ranks that wait must yield them (mpirun does this
    # by itself when it knows it oversubscribes; under srun Open MPI has to be told).
    cluster.env.update({"TRIDENT": os.environ["TRIDENT_EXE"], "TRIDENT_CPU_BIND": "none",
                        "OMPI_MCA_mpi_yield_when_idle": "1"})
    yield cluster
    cluster.cancel_all_jobs()
    cluster.stop()


def submit(slurm, workdir):
    workdir.mkdir()
    job = slurm.run("sbatch", "--parsable", f"--chdir={workdir}", f"--output={workdir}/job.out",
                    str(SCRIPT), str(TINY), "--set", f"output.dir={workdir}/run", *OVERRIDES).stdout.strip()
    return job.split(";")[0]


def job_output(workdir):
    path = workdir / "job.out"
    return path.read_text(errors="replace") if path.exists() else ""


def wait_until_finished(slurm, job, workdir, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        fields = slurm.job(job)
        if fields.get("JobState") in FINISHED:
            return fields
        time.sleep(1)
    pytest.fail(f"job {job} still {slurm.job(job).get('JobState')} after {timeout} s:\n{job_output(workdir)}")


def losses(run_dir):
    with h5py.File(run_dir / "timeline.h5", "r") as f:
        return np.asarray(f["steps"]["step"]), np.asarray(f["steps"]["loss"])


@pytest.fixture(scope="module")
def uninterrupted(slurm, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("jobs") / "uninterrupted"
    job = submit(slurm, workdir)
    return job, wait_until_finished(slurm, job, workdir), workdir


def test_cpu_sbatch_trains_the_tiny_deck(uninterrupted):
    job, fields, workdir = uninterrupted
    output = job_output(workdir)
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", output
    run_dir = workdir / "run"
    steps, loss = losses(run_dir)
    assert list(steps) == list(range(1, STEPS + 1))
    assert loss[-10:].mean() < loss[:10].mean() - 1.0, f"loss did not fall: {loss[:10]} ... {loss[-10:]}"
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    assert latest == f"step_{STEPS:08d}.h5" and (run_dir / "checkpoints" / latest).is_file()
    assert re.search(r"^\s+7\s+\S+\s+1\s+1\s+1$", output, re.MULTILINE), "rank 7 = (tp 1, pp 1, dp 1) in the layout"


def signal_at_step_10(slurm, job, workdir):
    deadline = time.time() + 300
    while time.time() < deadline and not re.search(r"^step +10/", job_output(workdir), re.MULTILINE):
        time.sleep(0.2)
    assert re.search(r"^step +10/", job_output(workdir), re.MULTILINE), f"job never reached step 10:\n{job_output(workdir)}"
    slurm.run("scancel", "--signal=USR1", job)


def assert_resumed_to_the_same_losses(output, run_dir, uninterrupted):
    match = re.search(r"resume\s+\S+step_(\d+)\.h5 \(step (\d+)", output)
    assert match, f"no job resumed from a checkpoint:\n{output}"
    assert 10 <= int(match.group(2)) < STEPS, f"checkpoint at step {match.group(2)}"
    steps, loss = losses(run_dir)
    reference_steps, reference_loss = losses(uninterrupted[2] / "run")
    assert list(steps) == list(reference_steps)
    np.testing.assert_array_equal(loss, reference_loss)


def test_usr1_checkpoints_requeues_and_finishes_with_the_same_loss(slurm, uninterrupted, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("jobs") / "signalled"
    job = submit(slurm, workdir)
    signal_at_step_10(slurm, job, workdir)
    fields = wait_until_finished(slurm, job, workdir)
    output = job_output(workdir)
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", output
    assert fields["Restarts"] == "1", f"expected one requeue:\n{output}"
    assert "trident checkpointed (exit 3); requeueing job" in output, output
    assert_resumed_to_the_same_losses(output, workdir / "run", uninterrupted)


def test_chain_runs_a_training_as_dependent_jobs(slurm, uninterrupted, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("jobs") / "chain"
    workdir.mkdir()
    env = {**slurm.env, "SBATCH_ARGS": f"--chdir={workdir} --output={workdir}/job.out"}
    proc = subprocess.run([str(CHAIN), "2", str(SCRIPT), str(TINY), "--set", f"output.dir={workdir}/run",
                           *OVERRIDES], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, second = re.search(r"submitted (\d+) (\d+) ", proc.stdout).groups()
    assert slurm.job(second)["Dependency"].startswith(f"afterany:{first}"), slurm.job(second)
    signal_at_step_10(slurm, first, workdir)
    fields = wait_until_finished(slurm, first, workdir)
    assert fields["JobState"] == "COMPLETED" and fields["Restarts"] == "0", job_output(workdir)
    assert wait_until_finished(slurm, second, workdir)["JobState"] == "COMPLETED", job_output(workdir)
    output = job_output(workdir)
    assert "the next job of the chain resumes" in output, output
    assert_resumed_to_the_same_losses(output, workdir / "run", uninterrupted)


def test_the_grid_is_checked_against_the_allocation(slurm, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("jobs") / "wrong-size"
    workdir.mkdir()
    job = slurm.run("sbatch", "--parsable", "--ntasks=4", f"--chdir={workdir}", f"--output={workdir}/job.out",
                    str(SCRIPT), str(TINY), "--set", f"output.dir={workdir}/run").stdout.strip()
    fields = wait_until_finished(slurm, job, workdir, timeout=120)
    output = job_output(workdir)
    assert fields["JobState"] == "FAILED" and fields["ExitCode"].startswith("2:"), output
    assert "needs 8 ranks" in output and "has 4 tasks" in output and "--ntasks=8" in output, output
    assert not (workdir / "run").exists(), "nothing may start before the check"
