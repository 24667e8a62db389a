"""job_scripts/ without a cluster: every script parses, has a usage text that says how to adapt it,
and refuses to run outside a job. gpu-multinode.sbatch (no GPUs here) runs against stand-ins for
srun and scontrol that record what they were asked: the launch line, the NCCL environment, the
GPU count check, the requeue on exit 3 and the bounded retries on exit 4."""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, TINY

SCRIPTS = REPO / "job_scripts"
BATCH_SCRIPTS = ("cpu.sbatch", "gpu-multinode.sbatch")

STAND_INS = {
    # srun: record the arguments and the NCCL variables, exit as told.
    "srun": '#!/bin/bash\necho "srun $*" >> "$RECORD"\nenv | grep "^NCCL_" | sort >> "$RECORD"\nexit "${SRUN_EXIT:-0}"\n',
    # scontrol: the job's original script and comment for `show job`, a record for anything else.
    "scontrol": '#!/bin/bash\nif [ "$1 $2" = "show job" ]; then echo "JobId=$3 Command=$SUBMITTED_SCRIPT WorkDir=/x Comment=${JOB_COMMENT:-(null)}"; '
                'else echo "scontrol $*" >> "$RECORD"; fi\n',
}


@pytest.mark.parametrize("name", BATCH_SCRIPTS + ("chain",))
def test_script_parses_and_explains_itself(name):
    script = SCRIPTS / name
    assert os.access(script, os.X_OK), f"{name} is not executable"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "Usage:" in usage.stdout and "Adapting it to a site" in usage.stdout, usage.stdout
    assert not any(line.startswith(("#SBATCH", "set -euo")) for line in usage.stdout.splitlines()), usage.stdout


@pytest.mark.parametrize("name", BATCH_SCRIPTS)
def test_batch_script_refuses_to_run_outside_slurm(name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(["bash", str(SCRIPTS / name)], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "not inside a Slurm job" in proc.stderr and "sbatch" in proc.stderr, proc.stderr


def fake_job(tmp_path, gpus_per_node, **extra):
    """Runs gpu-multinode.sbatch as Slurm would on 2 nodes x 4 tasks; returns (process, record)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in STAND_INS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    record = tmp_path / "record.txt"
    record.write_text("")
    copy = tmp_path / "slurm_script"  # slurmd runs a copy, away from trident-job.sh
    copy.write_text((SCRIPTS / "gpu-multinode.sbatch").read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NCCL_"))}
    env.update({"PATH": f"{bin_dir}:{env['PATH']}", "RECORD": str(record),
                "SUBMITTED_SCRIPT": str(SCRIPTS / "gpu-multinode.sbatch"), "TRIDENT": os.environ["TRIDENT_EXE"],
                "SLURM_JOB_ID": "42", "SLURM_SUBMIT_DIR": str(tmp_path), "SLURM_NTASKS": "8",
                "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "4", "SLURM_GPUS_ON_NODE": str(gpus_per_node),
                "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_CPUS_PER_TASK": "16", **extra})
    proc = subprocess.run(["bash", str(copy), str(TINY)], capture_output=True, text=True, env=env, cwd=tmp_path)
    return proc, record.read_text()


def test_gpu_script_launches_one_task_per_gpu(tmp_path):
    site = tmp_path / "site.env"
    site.write_text("export NCCL_SOCKET_IFNAME=ib0\nexport NCCL_IB_HCA=mlx5_0\n")
    proc, record = fake_job(tmp_path, 4, TRIDENT_SITE_ENV=str(site))
    assert proc.returncode == 0, proc.stderr
    launch = record.splitlines()[0].split()
    assert launch[:1] == ["srun"] and "--mpi=pmix" in launch and "--gpu-bind=none" in launch
    assert "--cpu-bind=cores" in launch and "--ntasks-per-node=4" in launch
    assert launch[-3:] == [os.environ["TRIDENT_EXE"], "run", str(TINY)]
    assert "NCCL_SOCKET_IFNAME=ib0" in record and "NCCL_IB_HCA=mlx5_0" in record
    assert "NCCL_DEBUG" not in record, "NCCL_DEBUG only on request"
    assert "requeue" not in record


def test_gpu_script_sets_nccl_debug_on_request(tmp_path):
    proc, record = fake_job(tmp_path, 4, TRIDENT_NCCL_DEBUG="INFO")
    assert proc.returncode == 0, proc.stderr
    assert "NCCL_DEBUG=INFO" in record


def test_gpu_script_refuses_more_tasks_than_gpus(tmp_path):
    proc, record = fake_job(tmp_path, 2)
    assert proc.returncode == 2, proc.stderr
    assert "4 tasks per node but 2 GPUs per node" in proc.stderr and "--gpus-per-node=4" in proc.stderr
    assert "srun" not in record, "nothing may launch"


@pytest.mark.parametrize("requeue,expected", [("1", "scontrol requeue 42"), ("0", None)])
def test_exit_3_requeues_unless_chained(tmp_path, requeue, expected):
    proc, record = fake_job(tmp_path, 4, SRUN_EXIT="3", TRIDENT_REQUEUE=requeue)
    assert proc.returncode == 0, proc.stderr
    if expected:
        assert expected in record and "requeueing job 42" in proc.stdout
    else:
        assert "requeue" not in record and "the next job of the chain resumes" in proc.stdout


def test_a_failed_run_fails_the_job(tmp_path):
    proc, record = fake_job(tmp_path, 4, SRUN_EXIT="1")
    assert proc.returncode == 1 and "requeue" not in record


@pytest.mark.parametrize("comment,retried", [("(null)", 1), ("trident-retries:1", 2)])
def test_lost_peer_requeues_and_counts_the_retry(tmp_path, comment, retried):
    proc, record = fake_job(tmp_path, 4, SRUN_EXIT="4", JOB_COMMENT=comment)
    assert proc.returncode == 0, proc.stderr
    assert f"scontrol update JobId=42 Comment=trident-retries:{retried}" in record, record
    assert "scontrol requeue 42" in record and f"retry {retried} of 2" in proc.stdout, proc.stdout


def test_lost_peer_ends_the_job_after_the_last_retry(tmp_path):
    proc, record = fake_job(tmp_path, 4, SRUN_EXIT="4", JOB_COMMENT="trident-retries:2")
    assert proc.returncode == 4 and "requeue" not in record, record
    assert "after 2 retries" in proc.stderr and "resubmit" in proc.stderr, proc.stderr


def test_lost_peer_in_a_chain_leaves_the_resume_to_the_next_job(tmp_path):
    proc, record = fake_job(tmp_path, 4, SRUN_EXIT="4", TRIDENT_REQUEUE="0")
    assert proc.returncode == 4 and "requeue" not in record and "next job of the chain" in proc.stdout
