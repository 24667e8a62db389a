"""job_scripts/cpu.sbatch on a private two-node Slurm whose nodes are network namespaces on this
machine (netns_nodes.py: own address, host name and slurmd each; munge and the file system shared).
A pp 2 job runs one stage per node, its messages over TCP, and the rank layout shows both hosts.
Cutting the second node's link mid-run must end the run within schedule.timeout_s with the
watchdog's message naming the peer on the other host, leave no trident running, and requeue the job
(exit 4); once the link is back the job resumes from `latest` to the uninterrupted run's losses, bit
for bit. Skips (SLURM UNAVAILABLE: ...) where namespaces or the daemons cannot be made."""
import os
import re
import subprocess
import time

import pytest

from conftest import TINY
from local_slurm import LocalSlurm, SlurmUnavailable
from netns_nodes import NetnsNodes, NetnsUnavailable
from test_slurm import SCRIPT, install_when_missing, job_output, losses, wait_until_finished

STEPS = 300
EVERY = 50
TIMEOUT_S = 5
OVERRIDES = [f"--set={key}={value}" for key, value in (
    ("parallel.tp", 1), ("parallel.pp", 2), ("parallel.dp", 1), ("train.steps", STEPS), ("checkpoint.every", EVERY),
    ("schedule.timeout_s", TIMEOUT_S), ("checkpoint.timeout_s", TIMEOUT_S))]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    install_when_missing()
    root = tmp_path_factory.mktemp("two-nodes")
    network = NetnsNodes(root)
    slurm = LocalSlurm(root, cpus=2, network=network)
    try:
        network.create()
        slurm.start()
    except (NetnsUnavailable, SlurmUnavailable) as e:
        slurm.stop()
        network.destroy()
        print(f"SLURM UNAVAILABLE: {e}")
        pytest.skip(f"SLURM UNAVAILABLE: {e}")
    # TCP between the nodes even where Open MPI could find another way; ranks that wait yield
    # the cores they share.
    slurm.env.update({"TRIDENT": os.environ["TRIDENT_EXE"], "TRIDENT_CPU_BIND": "none",
                      "OMPI_MCA_btl": "self,tcp", "OMPI_MCA_mpi_yield_when_idle": "1"})
    yield slurm, network
    for node in network.nodes:
        network.reconnect(node)
    slurm.cancel_all_jobs()
    slurm.stop()
    network.destroy()


def submit(slurm, workdir):
    workdir.mkdir()
    job = slurm.run("sbatch", "--parsable", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", f"--chdir={workdir}",
                    f"--output={workdir}/job.out", str(SCRIPT), str(TINY), f"--set=output.dir={workdir}/run",
                    *OVERRIDES).stdout.strip()
    return job.split(";")[0]


def wait_for(condition, what, workdir, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return time.time()
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen in {timeout} s:\n{job_output(workdir)}")


def trident_processes():
    return subprocess.run(["pgrep", "-af", f"{os.environ['TRIDENT_EXE']} run"], capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def uninterrupted(cluster, tmp_path_factory):
    slurm, _ = cluster
    workdir = tmp_path_factory.mktemp("jobs") / "uninterrupted"
    job = submit(slurm, workdir)
    return wait_until_finished(slurm, job, workdir, timeout=300), workdir


def test_one_stage_per_node(uninterrupted):
    fields, workdir = uninterrupted
    output = job_output(workdir)
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", output
    assert re.search(r"^\s+0\s+tnode1\s+0\s+0\s+0$", output, re.MULTILINE), f"rank 0 on tnode1, pp 0:\n{output}"
    assert re.search(r"^\s+1\s+tnode2\s+0\s+1\s+0$", output, re.MULTILINE), f"rank 1 on tnode2, pp 1:\n{output}"
    steps, _ = losses(workdir / "run")
    assert list(steps) == list(range(1, STEPS + 1))


def test_a_cut_link_ends_the_run_and_the_requeued_job_resumes(cluster, uninterrupted, tmp_path_factory):
    slurm, network = cluster
    workdir = tmp_path_factory.mktemp("jobs") / "cut"
    job = submit(slurm, workdir)
    latest = workdir / "run" / "checkpoints" / "latest"
    wait_for(latest.exists, "the first checkpoint", workdir)
    network.cut(network.nodes[1])
    cut = time.time()
    # The first rank to give up is on tnode1 (tnode2's output cannot reach the job's file).
    noticed = wait_for(lambda: "watchdog" in job_output(workdir), "the watchdog's message", workdir, timeout=60)
    network.reconnect(network.nodes[1])
    output = job_output(workdir)
    assert noticed - cut < TIMEOUT_S + 3, f"noticed {noticed - cut:.1f} s after the cut:\n{output}"
    assert re.search(r"world rank 0\b[^\n]*watchdog: [^\n]*(world rank 1 on tnode2|world ranks 0 on tnode1, 1 on tnode2)",
                     output), f"the message must name the peer on tnode2:\n{output}"
    wait_for(lambda: "requeueing job" in job_output(workdir), "the requeue", workdir)
    assert not trident_processes(), f"a rank outlived the failed run: {trident_processes()}"
    assert "a peer stopped answering (exit 4)" in job_output(workdir)

    fields = wait_until_finished(slurm, job, workdir, timeout=300)
    output = job_output(workdir)
    assert fields["JobState"] == "COMPLETED" and fields["ExitCode"] == "0:0", output
    assert fields["Restarts"] == "1", f"expected one requeue:\n{output}"
    match = re.search(r"resume\s+\S+step_\d+\.h5 \(step (\d+)", output)
    assert match and EVERY <= int(match.group(1)) < STEPS, f"the requeued job did not resume mid-run:\n{output}"
    steps, loss = losses(workdir / "run")
    reference_steps, reference_loss = losses(uninterrupted[1] / "run")
    assert list(steps) == list(reference_steps)
    assert (loss == reference_loss).all(), f"losses differ from the uninterrupted run's: {loss} vs {reference_loss}"
