"""The `ip` command lines that build and remove the cluster's network, and the checks made before.

Every function returns argv lists (or text); hvdbench.cluster.runner runs them. The commands below,
for node k of cluster `hvd` on 10.213.0.0/24, are exactly:

    ip link add hvd-br type bridge ; ip addr add 10.213.0.1/24 dev hvd-br ; ip link set hvd-br up
    ip netns add hvd-nodek
    ip link add hvd-vk type veth peer name hvd-br netns hvd-nodek
    ip link set hvd-vk master hvd-br up
    ip -n hvd-nodek link set lo up
    ip -n hvd-nodek addr add 10.213.0.(k+1)/24 dev hvd-br ; ip -n hvd-nodek link set hvd-br up
    ip -n hvd-nodek route add default via 10.213.0.1
"""

import ipaddress
from pathlib import Path

from hvdbench.cluster.blueprint import ClusterPlan, Node

NETNS_ETC = Path("/etc/netns")  # `ip netns exec NS` bind-mounts each file of /etc/netns/NS over /etc's

# /etc/netns/<node>/resolv.conf. A node reaches no name server (its default route leads to the host,
# which forwards nothing), so a name or address its hosts file lacks would wait out the resolver's
# timeouts: torch's TCPStore looks up each client's IPv4-mapped address (::ffff:10.213.0.3), and
# that took 10 s a client, 20 s of every three-node rendezvous. Nothing listens on port 53 of the
# node's own loopback: such a lookup fails at once.
NODE_RESOLV_TEXT = ("# written by `hvdbench cluster up`; removed by `hvdbench cluster down`. An emulated node has\n"
                    "# no name server: its names are in its hosts file, and other lookups fail at once.\n"
                    "nameserver 127.0.0.1\n")


def bridge_up(plan: ClusterPlan) -> list[list[str]]:
    return [["ip", "link", "add", plan.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{plan.gateway}/{plan.prefixlen}", "dev", plan.bridge],
            ["ip", "link", "set", plan.bridge, "up"]]


def netns_add(node: Node) -> list[str]:
    return ["ip", "netns", "add", node.name]


def node_link_up(plan: ClusterPlan, node: Node) -> list[list[str]]:
    """The veth pair into the bridge, the node's address and its default route via the bridge (so the
    launcher in the root namespace, at any of its addresses, is reachable from the node)."""
    ns = ["ip", "-n", node.name]
    return [["ip", "link", "add", node.host_veth, "type", "veth", "peer", "name", plan.bridge,
             "netns", node.name],
            ["ip", "link", "set", node.host_veth, "master", plan.bridge, "up"],
            ns + ["link", "set", "lo", "up"],
            ns + ["addr", "add", f"{node.address}/{plan.prefixlen}", "dev", plan.bridge],
            ns + ["link", "set", plan.bridge, "up"],
            ns + ["route", "add", "default", "via", plan.gateway]]


def netns_del(name: str) -> list[str]:
    return ["ip", "netns", "del", name]


def netns_pids(name: str) -> list[str]:
    return ["ip", "netns", "pids", name]


def link_del(name: str) -> list[str]:
    return ["ip", "link", "del", name]


def list_netns() -> list[str]:
    return ["ip", "-j", "netns", "list"]


def list_links() -> list[str]:
    return ["ip", "-j", "link", "show"]


def list_addrs() -> list[str]:
    return ["ip", "-j", "addr", "show"]


def list_routes() -> list[str]:
    return ["ip", "-j", "route", "show", "table", "all"]


def subnet_conflicts(subnet: str, addrs: list[dict], routes: list[dict]) -> list[str]:
    """What on this machine already uses addresses in `subnet`, from `ip -j addr` and `ip -j route`
    output: ['eth0 has 10.213.0.5/24', 'route 10.213.0.0/16 dev eth0', ...] (empty: free)."""
    net = ipaddress.ip_network(subnet)
    found = []
    for link in addrs:
        for a in link.get("addr_info", []):
            if a.get("family") != "inet":
                continue
            iface = ipaddress.ip_interface(f"{a['local']}/{a.get('prefixlen', 32)}")
            if iface.network.overlaps(net):
                found.append(f"{link.get('ifname', '?')} has {iface}")
    for r in routes:
        dst = r.get("dst")
        if not dst or dst == "default" or ":" in dst or r.get("type") in ("broadcast", "multicast", "anycast"):
            continue
        if r.get("type") == "local" and "/" not in dst:
            continue  # the kernel's own entry for a local address, already named above
        try:
            rnet = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if rnet.overlaps(net) and rnet.prefixlen > 0:
            found.append(f"route {dst}" + (f" dev {r['dev']}" if r.get("dev") else ""))
    return list(dict.fromkeys(found))


def name_conflicts(plan: ClusterPlan, netns: list[dict], links: list[dict]) -> list[str]:
    """Namespaces and interfaces this plan would create that already exist."""
    have_ns = {n.get("name") for n in netns}
    have_links = {link.get("ifname") for link in links}
    taken = [f"network namespace {n.name}" for n in plan.nodes if n.name in have_ns]
    taken += [f"interface {i}" for i in [plan.bridge] + [n.host_veth for n in plan.nodes] if i in have_links]
    return taken


def node_hosts_text(plan: ClusterPlan, node: Node) -> str:
    """/etc/netns/<node>/hosts: localhost and every node's name. A node's own name maps to its bridge
    address, not to loopback, so what MPI and Gloo advertise from its hostname is reachable."""
    lines = ["# written by `hvdbench cluster up`; removed by `hvdbench cluster down`",
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{n.address}\t{n.name}" for n in plan.nodes]
    return "\n".join(lines) + "\n"
