"""A process tree's resident memory, open file descriptors and CPU time, read from
``/proc`` (Linux), for benchmarks that measure a server they started."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def rss_and_fds(pid: int) -> tuple[float, int]:
    """Resident MiB and open fds, summed over ``pid``'s process tree."""
    rss_pages, fds = 0, 0
    for member in process_tree(pid):
        try:
            with open(f"/proc/{member}/statm") as statm:
                rss_pages += int(statm.read().split()[1])
            fds += len(os.listdir(f"/proc/{member}/fd"))
        except (OSError, ValueError, IndexError):
            continue
    return rss_pages * PAGE_SIZE / 2**20, fds


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds so far, summed over ``pid``'s process tree (0 for None)."""
    ticks = 0
    for member in process_tree(pid) if pid is not None else []:
        try:
            with open(f"/proc/{member}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14, 15)
        except (OSError, ValueError, IndexError):
            continue
    return ticks / CLOCK_TICKS


@dataclass
class Peak:
    rss_mib: float = 0.0
    fds: int = 0


async def sample_peak(pid: int | None, peak: Peak, stop: asyncio.Event) -> None:
    while pid is not None and not stop.is_set():
        rss, fds = rss_and_fds(pid)
        peak.rss_mib, peak.fds = max(peak.rss_mib, rss), max(peak.fds, fds)
        try:
            async with asyncio.timeout(0.25):
                await stop.wait()
        except TimeoutError:
            pass
