"""A private Slurm for the tests: munged, slurmctld and one slurmd per node started as root from
Debian's packages with their own configuration, key, ports and state under one directory, so
they never touch a site's Slurm. The client commands see it through SLURM_CONF. One node is this
machine on loopback; several are network namespaces (netns_nodes.py), one slurmd in each, sharing
the controller, munge and the file system."""
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import netns_nodes

DAEMONS = ("munged", "slurmctld", "slurmd")


class SlurmUnavailable(Exception):
    """The daemons could not be started on this machine (the reason is the message)."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(root, controller, nodes, cpus, memory_mb, munge_socket):
    """controller: (host, address); nodes: (name, address) pairs."""
    node_lines = "\n".join(f"NodeName={name} NodeAddr={address} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN"
                            for name, address in nodes)
    return f"""# Private Slurm for trident's tests (tests/slurm/local_slurm.py)
ClusterName=trident-test
SlurmctldHost={controller[0]}({controller[1]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again once its credential expired (cred_expire, 120 s by default).
AuthInfo=socket={munge_socket},cred_expire=10
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
# A requeued job waits for a scheduling pass once eligible: every 5 s rather than 30.
SchedulerParameters=bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
# The tests run more ranks than this machine has cores (as mpirun --oversubscribe does).
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
{node_lines}
PartitionName=test Nodes={",".join(name for name, _ in nodes)} Default=YES MaxTime=INFINITE State=UP
"""


class LocalSlurm:
    """`network`: a NetnsNodes whose nodes (created) become the cluster's, else this machine is its one node."""

    def __init__(self, root, cpus=8, network=None):
        self.root = Path(root)
        self.cpus = cpus
        self.network = network
        self.processes = []
        self.env = dict(os.environ)

    def start(self):
        for tool in DAEMONS + ("sbatch", "squeue", "scontrol", "scancel"):
            if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
                raise SlurmUnavailable(f"{tool} is not installed")
        for d in ("state", "munge"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        munge_socket = self.root / "munge" / "munge.socket"
        host = socket.gethostname().split(".")[0]
        if self.network:
            controller = (host, netns_nodes.CONTROLLER_ADDRESS)
            nodes = [(node.name, node.address) for node in self.network.nodes]
        else:
            controller = (host, "127.0.0.1")
            nodes = [(host, "127.0.0.1")]
        for name, _ in nodes:
            (self.root / "spool" / name).mkdir(parents=True, exist_ok=True)
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2 // len(nodes)
        conf = self.root / "slurm.conf"
        conf.write_text(slurm_conf(self.root, controller, nodes, self.cpus, memory_mb, munge_socket))
        self.env["SLURM_CONF"] = str(conf)
        if self.network:
            (self.root / "mpi.conf").write_text(f"PMIxCliTmpDirBase={self.network.local_dir}\n")
        self._daemon(["munged", "--force", f"--key-file={key}", f"--socket={munge_socket}",
                      f"--pid-file={self.root}/munge/munged.pid", f"--log-file={self.root}/munge/munged.log",
                      f"--seed-file={self.root}/munge/munged.seed", "--foreground"],
                     ready=lambda: munge_socket.exists())
        self._daemon(["slurmctld", "-D", "-i", "-f", str(conf)], ready=self._controller_answers)
        if self.network:
            for node in self.network.nodes:
                self._daemon(self.network.command(node, "slurmd", "-D", "-f", str(conf)), ready=lambda: True,
                             name=f"slurmd.{node.name}")
        else:
            self._daemon(["slurmd", "-D", "-f", str(conf)], ready=lambda: True, name=f"slurmd.{host}")
        self._wait(self._nodes_idle, "the nodes did not all come up idle", "slurmd")

    def _daemon(self, cmd, ready, name=None):
        name = name or cmd[0]
        log = open(self.root / f"{name}.stdout", "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.processes.append(proc)
        self._wait(ready, f"{name} did not become ready", name, proc)

    def _wait(self, ready, failure, name, proc=None, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc is not None and proc.poll() is not None:
                raise SlurmUnavailable(f"{name} exited with {proc.returncode}: {self.log_tail(name)}")
            if ready():
                return
            time.sleep(0.3)
        raise SlurmUnavailable(f"{failure} in {timeout} s: {self.log_tail(name)}")

    def log_tail(self, daemon, lines=15):
        text = []
        for path in sorted(self.root.glob(f"{daemon}*.stdout")) + sorted(self.root.glob(f"{daemon}*.log")) + \
                [self.root / "munge" / f"{daemon}.log"]:
            if path.exists():
                text += [f"{path.name}:"] + path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(text)

    def run(self, *cmd, check=True, timeout=60):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def _controller_answers(self):
        ping = self.run("scontrol", "ping", check=False)
        return ping.returncode == 0 and "UP" in ping.stdout

    def _nodes_idle(self):
        states = self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.split()
        return len(states) == (len(self.network.nodes) if self.network else 1) and all(s == "idle" for s in states)

    def job(self, job_id):
        """`scontrol show job` as {key: value}, or {} once the controller forgot the job."""
        proc = self.run("scontrol", "-o", "show", "job", str(job_id), check=False)
        fields = {}
        for item in proc.stdout.split():
            key, _, value = item.partition("=")
            fields.setdefault(key, value)
        return fields

    def cancel_all_jobs(self, timeout=30):
        """Kills what runs and drops what waits, then waits until the queue is empty."""
        self.run("scancel", "--full", "--signal=KILL", "--state=RUNNING", check=False)
        self.run("scancel", "--state=PENDING", check=False)
        deadline = time.time() + timeout
        while time.time() < deadline and self.run("squeue", "-h", check=False).stdout.strip():
            time.sleep(0.5)

    def stop(self):
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.processes.clear()
