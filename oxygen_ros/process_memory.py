"""A process's resident memory as Linux counts it (/proc/<pid>/status)."""

from pathlib import Path


def _status_bytes(pid: int, field: str) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((l for l in status.splitlines() if l.startswith(f"{field}:")), f"{field}: 0 kB")
    return int(line.split()[1]) * 1024


def rss_bytes(pid: int) -> int:
    """A running process's resident memory now (VmRSS; 0 once it is gone)."""
    return _status_bytes(pid, "VmRSS")


def peak_rss_bytes(pid: int) -> int:
    """A running process's peak resident memory (VmHWM; 0 once it is gone)."""
    return _status_bytes(pid, "VmHWM")


def restart_peak_rss() -> bool:
    """Start this process's peak resident memory over from what it holds now (Linux 4.0 and
    later; False where the kernel does not offer it): the peak of one piece of work run
    after another in the same process."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True
