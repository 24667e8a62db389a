"""A private one-node Slurm for the tests: munged, slurmctld and slurmd started as root from
Debian's packages with their own configuration, key, ports and state under one directory, so
they never touch a site's Slurm. The client commands see it through SLURM_CONF."""
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")


class SlurmUnavailable(Exception):
    """The daemons could not be started on this machine (the reason is the message)."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_conf(root, host, cpus, memory_mb, munge_socket):
    return f"""# One-node Slurm for trident's tests (tests/slurm/local_slurm.py)
ClusterName=trident-test
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again once its credential expired (cred_expire, 120 s by default).
AuthInfo=socket={munge_socket},cred_expire=10
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
# The tests run more ranks than this machine has cores (as mpirun --oversubscribe does).
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class LocalSlurm:
    def __init__(self, root, cpus=8):
        self.root = Path(root)
        self.cpus = cpus
        self.processes = []
        self.env = dict(os.environ)

    def start(self):
        for tool in DAEMONS + ("sbatch", "squeue", "scontrol", "scancel"):
            if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
                raise SlurmUnavailable(f"{tool} is not installed")
        for d in ("state", "spool", "munge"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        munge_socket = self.root / "munge" / "munge.socket"
        host = socket.gethostname().split(".")[0]
        memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2
        conf = self.root / "slurm.conf"
        conf.write_text(slurm_conf(self.root, host, self.cpus, memory_mb, munge_socket))
        self.env["SLURM_CONF"] = str(conf)
        self._daemon(["munged", "--force", f"--key-file={key}", f"--socket={munge_socket}",
                      f"--pid-file={self.root}/munge/munged.pid", f"--log-file={self.root}/munge/munged.log",
                      f"--seed-file={self.root}/munge/munged.seed", "--foreground"],
                     ready=lambda: munge_socket.exists())
        self._daemon(["slurmctld", "-D", "-i", "-f", str(conf)], ready=self._controller_answers)
        self._daemon(["slurmd", "-D", "-f", str(conf)], ready=self._node_idle)

    def _daemon(self, cmd, ready, timeout=30):
        log = open(self.root / f"{cmd[0]}.stdout", "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.processes.append(proc)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if proc.poll() is not None:
                raise SlurmUnavailable(f"{cmd[0]} exited with {proc.returncode}: {self.log_tail(cmd[0])}")
            if ready():
                return
            time.sleep(0.3)
        raise SlurmUnavailable(f"{cmd[0]} did not become ready in {timeout} s: {self.log_tail(cmd[0])}")

    def log_tail(self, daemon, lines=15):
        text = []
        for name in (f"{daemon}.stdout", f"{daemon}.log", f"munge/{daemon}.log"):
            path = self.root / name
            if path.exists():
                text += path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(text)

    def run(self, *cmd, check=True, timeout=60):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def _controller_answers(self):
        ping = self.run("scontrol", "ping", check=False)
        return ping.returncode == 0 and "UP" in ping.stdout

    def _node_idle(self):
        out = self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip()
        return out.startswith("idle")

    def job(self, job_id):
        """`scontrol show job` as {key: value}, or {} once the controller forgot the job."""
        proc = self.run("scontrol", "-o", "show", "job", str(job_id), check=False)
        fields = {}
        for item in proc.stdout.split():
            key, _, value = item.partition("=")
            fields.setdefault(key, value)
        return fields

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
