"""Liveness evidence from a process tree: is it visibly working?

CPU time alone is not progress (NCCL and busy loops spin); bytes read and
written, memory growing or shrinking, and a child running a command the tree
had not run before are. A child that repeats one (a wrapper's retry loop:
``until test -e ...; do sleep 1; done``) is not."""

from __future__ import annotations

from typing import Any

import psutil

# Changes smaller than these are noise (allocator jitter, /proc reads).
MIN_RSS_CHANGE = 4 << 20
MIN_IO_CHANGE = 64 << 10


class TreeSampler:
    def __init__(self, pid: int):
        self.pid = pid
        self._last: dict[str, Any] | None = None
        self._ran: set[str] = set()  # every command the tree has run

    def sample(self) -> dict[str, Any] | None:
        """The tree's counters, or None when the root is gone."""
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        rss = read = write = 0
        cpu = 0.0
        pids = []
        commands = set()
        for p in procs:
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    cpu += sum(p.cpu_times()[:2])
                    try:
                        io = p.io_counters()
                        read += io.read_chars
                        write += io.write_chars
                    except (psutil.AccessDenied, AttributeError):
                        pass
                    command = " ".join(p.cmdline())
                    if command:  # a zombie not yet reaped (a loop's last `sleep`) has none: no new command
                        commands.add(command)
                    pids.append(p.pid)
            except psutil.Error:
                continue
        return {"pids": sorted(pids), "commands": sorted(commands), "rss": rss, "read": read, "write": write,
                "cpu": round(cpu, 2), "gpu": _gpu_memory(set(pids))}

    def stopped(self) -> bool:
        """Whether the tree's root is stopped (SIGSTOP, Ctrl-Z, a debugger), its children with it."""
        try:
            return psutil.Process(self.pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
        except psutil.Error:
            return False

    def progress(self) -> dict[str, Any] | None:
        """A sample when it shows the tree working since the last one, else None."""
        now = self.sample()
        last, self._last = self._last, now
        return now if working(last, now, self._ran) else None


def working(last: dict[str, Any] | None, now: dict[str, Any] | None, ran: set[str]) -> bool:
    """Whether two samples of a process tree show it doing something; ``ran``,
    the commands it ran before (those in ``now`` are added)."""
    if now is None:
        return False
    new_command = not ran.issuperset(now.get("commands", ()))
    ran.update(now.get("commands", ()))
    if last is None:
        return False
    return (new_command or abs(now["rss"] - last["rss"]) >= MIN_RSS_CHANGE
            or now["read"] - last["read"] >= MIN_IO_CHANGE or now["write"] - last["write"] >= MIN_IO_CHANGE
            or abs((now["gpu"] or 0) - (last["gpu"] or 0)) >= MIN_RSS_CHANGE)



_nvml: Any = None


def _gpu_memory(pids: set[int]) -> int | None:
    """GPU memory the processes hold, when nvidia-ml-py is installed and sees a
    GPU. Inside a container NVML reports host pids, which match none of ours:
    then the memory used on the visible GPUs stands in (evidence, not blame)."""
    global _nvml
    if _nvml is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml = pynvml
        except Exception:  # not installed, no driver, no GPU: no GPU evidence
            _nvml = False
    if not _nvml:
        return None
    try:
        ours = device_total = 0
        for i in range(_nvml.nvmlDeviceGetCount()):
            handle = _nvml.nvmlDeviceGetHandleByIndex(i)
            device_total += _nvml.nvmlDeviceGetMemoryInfo(handle).used
            for proc in _nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid in pids and proc.usedGpuMemory:
                    ours += proc.usedGpuMemory
        return ours or device_total
    except _nvml.NVMLError:
        return None
