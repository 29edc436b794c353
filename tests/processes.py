"""Process helpers shared by the tests that start and stop real drivers and Ray heads."""

from __future__ import annotations

from pathlib import Path


def session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid`` (what a driver or a Ray head started and left behind)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(entry.name))
    return out
