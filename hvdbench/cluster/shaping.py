"""`tc` command lines that turn each node's veth into a slower, longer network link.

Each node gets a full-duplex "NIC" of the given rate: traffic *leaving* node k is shaped on the node's
end of its veth (inside the namespace), traffic *entering* it on the root-namespace end (hvd-vK), so
every node-to-node packet crosses the sender's transmit shaper and the receiver's receive shaper, each
at the given rate. The one-way delay is applied once, on the sender's side. Ranks on the same node talk
over loopback and stay unshaped, which is what makes scale-up and scale-out differ. For node k:

    tc -n hvd-nodek qdisc replace dev hvd-br root tbf rate 100mbit burst 65536 latency 50ms
    tc qdisc replace dev hvd-vk root tbf rate 100mbit burst 65536 latency 50ms
    # with a delay, the node side uses netem instead:
    tc -n hvd-nodek qdisc replace dev hvd-br root netem delay 100us rate 100mbit limit 100000

`--node-rate node3=100mbit` gives one node's link (both ends) its own rate in place of the
cluster's (a NIC that negotiated a lower rate); the cluster's one-way delay stays on it.

tbf is in every kernel with traffic control; netem (sch_netem) is needed only for a delay, and
`hvdbench cluster up --latency` says so clearly when the kernel lacks it.
"""

from hvdbench.cluster.blueprint import ClusterPlan, Node, Shaping, format_rate

_TBF_QUEUE = "50ms"        # how long a packet may wait in tbf's queue before it is dropped
_NETEM_LIMIT = "100000"    # packets netem may hold (its default of 1000 drops at high delay x rate)
NETEM_MISSING = "Specified qdisc kind is unknown"  # what tc says when sch_netem is not in the kernel


def _burst_bytes(rate_bit: int) -> int:
    # At least one 64 KiB GSO packet (veth passes those), and 1 ms of traffic at high rates.
    return max(65536, rate_bit // 8 // 1000)


def _tbf(rate_bit: int) -> list[str]:
    return ["tbf", "rate", format_rate(rate_bit), "burst", str(_burst_bytes(rate_bit)),
            "latency", _TBF_QUEUE]


def node_qdisc(shaping: Shaping) -> list[str]:
    """The qdisc (after `root`) on the node's transmit side, or [] when unshaped."""
    if shaping.delay_us is not None:
        argv = ["netem", "delay", f"{shaping.delay_us}us"]
        if shaping.rate_bit is not None:
            argv += ["rate", format_rate(shaping.rate_bit)]
        return argv + ["limit", _NETEM_LIMIT]
    if shaping.rate_bit is not None:
        return _tbf(shaping.rate_bit)
    return []


def host_qdisc(shaping: Shaping) -> list[str]:
    """The qdisc on the node's receive side (the root-namespace veth end), or [] when unshaped."""
    return _tbf(shaping.rate_bit) if shaping.rate_bit is not None else []


def shape_node(plan: ClusterPlan, node: Node) -> list[list[str]]:
    """The node's link at the cluster's shaping, or at its own rate (`--node-rate node3=100mbit`)."""
    steps, shaping = [], plan.node_shaping(node)
    if q := node_qdisc(shaping):
        steps.append(["tc", "-n", node.name, "qdisc", "replace", "dev", plan.bridge, "root"] + q)
    if q := host_qdisc(shaping):
        steps.append(["tc", "qdisc", "replace", "dev", node.host_veth, "root"] + q)
    return steps


def show_node_qdisc(plan: ClusterPlan, node: Node) -> list[str]:
    """The qdiscs on the node's transmit side, with their counters (`-s`: bytes, packets, drops)."""
    return ["tc", "-j", "-s", "-n", node.name, "qdisc", "show", "dev", plan.bridge]


def show_host_qdisc(node: Node) -> list[str]:
    """The qdiscs on the node's receive side (the root-namespace veth end), with their counters."""
    return ["tc", "-j", "-s", "qdisc", "show", "dev", node.host_veth]


def root_qdisc(qdiscs: list[dict]) -> dict | None:
    """The root qdisc of a device from `tc -j qdisc show` output, as tc printed it (rates in
    bytes/s, tbf's burst in bytes, netem's delay in seconds; with -s, the counters too)."""
    return next((q for q in qdiscs if q.get("root")), None)


def describe_qdiscs(qdiscs: list[dict]) -> str:
    """`tc -j qdisc show` output -> 'tbf rate 100Mbit' / 'netem delay 100us rate 1Gbit' / 'unshaped'."""
    q = root_qdisc(qdiscs) or {}
    kind, opts = q.get("kind"), q.get("options", {})
    if kind == "tbf":
        return f"tbf rate {_bits(opts.get('rate'))}"
    if kind == "netem":
        parts = ["netem"]
        delay = opts.get("delay", {})
        if isinstance(delay, dict) and delay.get("delay"):  # seconds
            parts.append(f"delay {delay['delay'] * 1e6:g}us")
        rate = opts.get("rate", {})
        if isinstance(rate, dict) and rate.get("rate"):
            parts.append(f"rate {_bits(rate['rate'])}")
        return " ".join(parts)
    return "unshaped"


def _bits(rate) -> str:
    # tc -j reports rates in bytes per second.
    return format_rate(int(rate) * 8) if isinstance(rate, (int, float)) else str(rate)
