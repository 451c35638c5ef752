"""A link's rate from its words: what a sweep records of its inter-node link ('emulated veth bridge,
100mbit', 'HDR InfiniBand 200 Gb/s') and what an MLPerf systems JSON says of a node's fabric
(host_networking: 'Compute: 8x ConnectX-7 IB NDR 400Gb/s, Storage: 2x ...').

    link_rate("HDR InfiniBand 200 Gb/s")                        # 25e9 bytes/s each way
    node_link_rate("3.2 Tb/s total (8x 400Gb/s)")              # 400e9: one node's compute fabric
    node_link_reading("0 Gb/s")                                # (None, "names 0 Gb/s, no rate: left out")

Framework-free and on the library's low floor: the predictor (hvdbench.results.predict) scales its
rings by these rates, and the published logs' loader (hvdbench.results.mllog) warns where a systems
JSON's text gives none that can be right.
"""

from __future__ import annotations

import re

# Bits per unit of the rates a link's text may give: tc's (100mbit, 10gbit), and the usual ways of
# writing a link's speed (200 Gb/s, 100 Gbit/s, 25 GbE, 400Gbe, 10 Gbps, 400 Gb / Sec, 1e3 Gb/s), and a
# bare G before a network's name ('8 x 400G NDR'; a network's G is bits). Bytes: GB/s, MB/s.
_PREFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_NUMBER = r"(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
_RATE = re.compile(_NUMBER + r"\s*([kmgtKMGT])(bits?/s|bit|bps|b\s*/\s*(?i:s|sec)|b[eE]|B\s*/\s*(?i:s|sec)|Bps"
                   r"|(?=\s*(?i:NDR|HDR|EDR|XDR|IB\b|InfiniBand|Ethernet|RoCE)))(?![A-Za-z])", re.ASCII)
# InfiniBand's rates by name, per 4x port, where a part names no figure ('8x ConnectX-7 IB NDR').
_IB_RATE = {"EDR": 100e9 / 8, "HDR": 200e9 / 8, "NDR": 400e9 / 8, "XDR": 800e9 / 8}
_IB_NAME = re.compile(r"\b(EDR|HDR|NDR|XDR)\b")
# No node's fabric is past this (bytes/s each way: 800 Tb/s, a hundred times today's largest); a figure
# past it, or 0, is a misprint to leave out, never a rate to scale a prediction by.
ABSURD_RATE = 1e14

# A systems JSON's host_networking lists a node's fabrics, each as "8x ConnectX-7 IB NDR 400Gb/s", beside
# what does not carry the gradients (storage, management, north-south, PCIe figures), in parts split by
# commas, semicolons, "+" and " and " (not inside parentheses: '3.2 Tb/s total (8x 400Gb/s, RoCE)').
_NOT_COMPUTE = re.compile(r"storage|management|\bns\b|pcie|data bandwidth", re.IGNORECASE)
# A count of links before a rate ('8x ConnectX', '2xBF3', '8 x ConnectX', '8 × 400G', not 'x16' or
# 'gen4 x16') or right after one ('400Gb/s x 8').
_COUNT_BEFORE = re.compile(r"(?<![\w.])(\d+)\s*[x×](?=\s|[A-Z0-9])")
_COUNT_AFTER = re.compile(r"^\s*[x×]\s*(\d+)(?![\w.])")
_TOTAL = re.compile(r"\b(total|aggregate|aggregated|combined)\b", re.IGNORECASE)


def _rates(text: str) -> list[tuple[float, re.Match]]:
    """Every rate the text names, in bytes/s, with its match (a lower-case b is bits, an upper-case B
    bytes; a unit-less G before a network's name is bits)."""
    found = []
    for m in _RATE.finditer(text or ""):
        value = float(m.group(1)) * _PREFIX[m.group(2).lower()]
        found.append((value if m.group(3).startswith("B") else value / 8, m))
    return found


def link_rate(text: str) -> float | None:
    """The rate, in bytes/s each way, of a link's text as a sweep records it: 'emulated veth bridge,
    100mbit' -> 12.5e6, 'HDR InfiniBand 200 Gb/s' -> 25e9, '25 GbE' -> 3.125e9, '25 GB/s' -> 25e9; None
    where the text names no rate ('emulated veth bridge, unshaped', 'NVLink') or one no link has (0, or
    past ABSURD_RATE)."""
    rates = _rates(text)
    if not rates:
        return None
    return rates[0][0] if 0 < rates[0][0] <= ABSURD_RATE else None


def _split_parts(text: str) -> list[str]:
    """host_networking's parts: split at commas, semicolons, '+' and ' and ' outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")")
        if depth <= 0 and (c in ",;+" or text.startswith(" and ", i)):
            parts.append(text[start:i])
            i += 1 if c in ",;+" else 5
            start = i
            continue
        i += 1
    return [*parts, text[start:]]


def _part_rate(part: str) -> float | None:
    """One fabric part's bytes/s: each rate times the count of links written beside it (before it,
    in the text since the previous rate, or 'x N' right after it); a rate called the total is taken as
    it is. The largest reading wins ('3.2 Tb/s total (8x 400Gb/s)': 400e9 both ways)."""
    readings, last = [], 0
    for rate, m in _rates(part):
        before = _COUNT_BEFORE.findall(part[last:m.start()])
        after = _COUNT_AFTER.match(part[m.end():])
        just_before = part[max(last, m.start() - 16):m.start()]  # 'total 3.2 Tb/s', not 'total (8x 400Gb/s'
        total = _TOTAL.search(part[m.end():m.end() + 12]) or ("(" not in just_before and _TOTAL.search(just_before))
        count = 1 if total else int(after.group(1)) if after else int(before[-1]) if before else 1
        readings.append(rate * count)
        last = m.end()
    if not readings:  # 'IB NDR' with no figure: the name's rate per port
        named = _IB_NAME.search(part)
        if named:
            before = _COUNT_BEFORE.findall(part[:named.start()])
            readings.append(_IB_RATE[named.group(1)] * (int(before[-1]) if before else 1))
    return max(readings, default=None)


def node_link_reading(text: str) -> tuple[float | None, str]:
    """(bytes/s each way one node's compute fabric carries, or None; a note where the text names a rate
    that cannot be one). Of host_networking's parts that name a rate and not storage, management or
    PCIe, the largest count x rate ('Storage: 2x ConnectX-7 IB NDR 400Gb/s, Compute: 8x ConnectX-7 IB
    NDR 400Gb/s' -> 8 x 50e9 = 400e9; '4x ConnectX-7 IB NDR 400Gb/s + 200Gb/s Ethernet NIC' -> 200e9;
    '8 x 400G NDR', '400Gb/s x 8 ConnectX-7' and '3.2 Tb/s total (8x 400Gb/s)' -> 400e9); None where no
    part names one ('Ethernet, Infiniband')."""
    rates, bad = [], []
    for part in _split_parts(text or ""):
        if _NOT_COMPUTE.search(part):
            continue
        rate = _part_rate(part)
        if rate is None:
            continue
        (rates if 0 < rate <= ABSURD_RATE else bad).append(rate)
    if not rates and bad:
        return None, (f"names {bad[0] * 8 / 1e9:g} Gb/s, which no link carries (0, or past "
                      f"{ABSURD_RATE * 8 / 1e12:g} Tb/s): left out")
    return max(rates, default=None), ""


def node_link_rate(text: str) -> float | None:
    """node_link_reading's rate alone."""
    return node_link_reading(text)[0]
