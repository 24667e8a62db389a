"""Nodes of a private cluster as network namespaces on this machine: a bridge with the controller's
address, and per node a namespace joined to it by a veth pair, with its own address and host name
(a UTS namespace per daemon). Processes started with `command(node, ...)` see only their node's
network, so MPI between two nodes goes over TCP through the bridge, and `cut(node)` takes the node
off the network as an unplugged cable would (no reset reaches either side)."""
import subprocess
from dataclasses import dataclass
from pathlib import Path

SUBNET = "10.213.7"
BRIDGE = "trdbr0"
CONTROLLER_ADDRESS = f"{SUBNET}.254"


class NetnsUnavailable(Exception):
    """Namespaces or links cannot be made here (no privilege, no iproute2): the message says which."""


@dataclass
class Node:
    name: str     # host name inside the node, and its Slurm NodeName
    address: str  # its address on the bridge
    netns: str    # its network namespace
    link: str     # the bridge side of its veth pair: down = the node's cable is cut


def _ip(*args, check=True):
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetnsUnavailable(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


class NetnsNodes:
    def __init__(self, root, count=2):
        self.hosts = Path(root) / "hosts"  # the nodes' /etc/hosts
        # A directory that each node sees as its own (as /tmp is on real nodes): for the files of a
        # job step that two nodes would otherwise both create (PMIx's).
        self.local_dir = Path(root) / "node-local"
        self.nodes = [Node(f"tnode{i}", f"{SUBNET}.{i}", f"trident-tnode{i}", f"trdv{i}") for i in range(1, count + 1)]

    def create(self):
        self.destroy()  # what a killed earlier run left behind
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{CONTROLLER_ADDRESS}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for node in self.nodes:
            _ip("netns", "add", node.netns)
            _ip("link", "add", node.link, "type", "veth", "peer", "name", "eth0", "netns", node.netns)
            _ip("link", "set", node.link, "master", BRIDGE, "up")
            _ip("-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
            _ip("-n", node.netns, "link", "set", "eth0", "up")
            _ip("-n", node.netns, "link", "set", "lo", "up")
        self.local_dir.mkdir(parents=True, exist_ok=True)
        lines = ["127.0.0.1 localhost", f"{CONTROLLER_ADDRESS} trident-controller"]
        self.hosts.write_text("\n".join(lines + [f"{node.address} {node.name}" for node in self.nodes]) + "\n")

    def command(self, node, *argv):
        """argv run inside `node`: its network namespace, a UTS namespace named after it, and a mount
        namespace whose /etc/hosts names every node and whose `local_dir` is the node's own. (Not `ip
        netns exec`: it remounts /sys, which hides the cgroup file system slurmd needs.)"""
        own = self.local_dir.parent / f"local-{node.name}"
        own.mkdir(exist_ok=True)
        mounts = f"mount --bind {self.hosts} /etc/hosts && mount --bind {own} {self.local_dir}"
        return ["nsenter", f"--net=/run/netns/{node.netns}", "unshare", "--uts", "--mount", "sh", "-c",
                f'hostname {node.name} && {mounts} && exec "$@"', "sh", *argv]

    def cut(self, node):
        _ip("link", "set", node.link, "down")

    def reconnect(self, node):
        _ip("link", "set", node.link, "up")

    def destroy(self):
        for node in self.nodes:
            _ip("netns", "del", node.netns, check=False)
            _ip("link", "del", node.link, check=False)
        _ip("link", "del", BRIDGE, check=False)
