"""Checks of the values a user types (devices, folders, input files), each one error line; the types
and bounds of the run settings (finite numbers, seeds, threads, steps) are
:mod:`harness.config.settings`' alone.

What an input file may be is defined once here (:func:`read_input_bytes`, :func:`read_input_text`):
a regular file (after links), readable, at most a bounded size, and for the text inputs UTF-8. Specs,
corpora and SentEval files are read through it by every command (check, grid, train, eval and the
reporters), so a FIFO is refused instead of waited on, a device instead of read without end, and the
commands agree on what they accept.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from harness.errors import ConfigError, DataError, HarnessError


def check_runs_dir(path: str | os.PathLike[str]) -> Path:
    """The runs folder a report reads (tables, claims, plots, report) must exist: a misspelt
    ``--runs-dir`` is one error line, not a report of ``--`` cells written over the last one. A
    folder without records is said on stderr (one line) and reported as it is."""

    folder = Path(path)
    if not folder.exists():
        raise ConfigError(
            f"runs folder {folder} does not exist (is --runs-dir spelt right?): nothing written"
        )
    if not folder.is_dir():
        raise ConfigError(f"runs folder {folder} is a file, not a folder")
    records = folder / "records"
    if not records.is_dir() or not any(records.glob("*.json")):
        print(f"warning: runs folder {folder} holds no run records: every cell shows --", file=sys.stderr)
    return folder


def check_device(device: str | None) -> None:
    """``--device`` must name a torch device this machine has (cpu, cuda, cuda:N, mps)."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device {device!r} is not a torch device (cpu, cuda, cuda:N, mps)") from None
    if dev.type == "cpu":
        return
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ConfigError(f"--device {device}: no CUDA GPU is available here (use --device cpu)")
        if dev.index is not None and dev.index >= count:
            raise ConfigError(
                f"--device {device}: this machine has {count} CUDA GPU(s) (cuda:0..cuda:{count - 1})"
            )
        return
    if dev.type == "mps":
        backend = getattr(torch.backends, "mps", None)
        if backend is None or not backend.is_available():
            raise ConfigError(f"--device {device}: MPS is not available here (use --device cpu)")
        return
    raise ConfigError(f"--device {device}: unsupported device type {dev.type!r} (cpu, cuda, cuda:N, mps)")


def check_arithmetic(device: str, precisions: Mapping[str, str], compile: bool | None = None) -> None:
    """What the run or evaluation asks of ``device`` (a checked one, :func:`check_device`) that it
    cannot compute: bf16 on a CUDA GPU without it, a compiled step torch.compile cannot build here
    (:func:`~harness.config.hardware.arithmetic_problems`); the first raised, before anything runs."""
    from harness.config.hardware import arithmetic_problems  # torch: only for the commands that run

    problems = arithmetic_problems(device, precisions, compile)
    if problems:
        raise ConfigError(problems[0])


def check_spec_paths(names: list[str], what: str = "table spec") -> None:
    """A spec given as a path must be an input file of UTF-8 text (:func:`read_input_text`)."""
    for name in names:
        path = Path(name)
        if not path.exists() and not path.is_symlink():
            continue  # a name in tables/ or a missing file: the spec loader says which
        if path.is_dir():
            raise ConfigError(f"{what} {path} is a folder, not a .toml file")
        read_input_text(path, what, SPEC_MAX_BYTES, ConfigError)


# -- input files ------------------------------------------------------------------------------------
SPEC_MAX_BYTES = 1 << 20
"""A table or plot spec is a few kilobytes; a larger file is not one."""
CORPUS_MAX_BYTES = 2 << 30
"""A training corpus: the papers' largest (1M Wikipedia sentences) is about 120 MB."""
DATA_MAX_BYTES = 256 << 20
"""A SentEval data file: the largest is a few megabytes."""

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe): reading it would wait for a writer"),
    (stat.S_ISCHR, "a character device: reading it might never end"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def check_input_file(
    path: str | os.PathLike[str], what: str, max_bytes: int, error: type[HarnessError] = DataError
) -> int:
    """Whether ``path`` may be read as an input file, without reading it: its size in bytes.

    Raises:
        error: as :func:`read_input_bytes`.
    """
    fd, size = _open_checked(Path(path), what, max_bytes, error)
    os.close(fd)
    return size


def read_input_bytes(
    path: str | os.PathLike[str], what: str, max_bytes: int, error: type[HarnessError] = DataError
) -> bytes:
    """The bytes of an input file: a regular file, readable, at most ``max_bytes``.

    The file is opened without blocking and checked on the open descriptor, so a FIFO put in its
    place is refused, never waited on; at most ``max_bytes`` + 1 bytes are ever read.

    Args:
        path: the file.
        what: what it is, for the message (``corpus``, ``table spec``, ``STS data file``, ...).
        max_bytes: the largest size it may have.
        error: the error class to raise (a :class:`~harness.errors.HarnessError`).

    Raises:
        error: one line naming ``what``, the path and the problem: not found, a folder, not a
            regular file (a FIFO, a device, a socket), too large, or unreadable.
    """
    where = Path(path)
    fd, _ = _open_checked(where, what, max_bytes, error)
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= max_bytes:  # bounded even if the file grows while it is read
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise error(f"{what} {where} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise error(f"{what} {where} is more than the {_size(max_bytes)} a {what} may hold")
    return b"".join(chunks)


def _open_checked(where: Path, what: str, max_bytes: int, error: type[HarnessError]) -> tuple[int, int]:
    """An open descriptor of ``where`` (without blocking: a FIFO is never waited on) once it proved a
    regular file of at most ``max_bytes``; and its size."""
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{what} not found: {where}") from None
    except IsADirectoryError:
        raise error(f"{what} {where} is a folder, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket
            raise error(f"{what} {where} is not a regular file but a socket: point it at a file") from None
        raise error(f"{what} {where} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{what} {where} is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            kind = next((text for test, text in _KINDS if test(info.st_mode)), "something else")
            raise error(f"{what} {where} is not a regular file but {kind}: point it at a file")
        if info.st_size > max_bytes:
            raise error(
                f"{what} {where} is {_size(info.st_size)}, more than the {_size(max_bytes)} a {what} may hold"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_input_text(
    path: str | os.PathLike[str], what: str, max_bytes: int, error: type[HarnessError] = DataError
) -> str:
    """:func:`read_input_bytes`, decoded as UTF-8 (a leading byte-order mark dropped; UTF-16, binary
    files and NUL bytes are named as such)."""
    data = read_input_bytes(path, what, max_bytes, error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{what} {path} is not valid UTF-8 (byte {exc.start}, line {line}){_encoding_hint(data)}"
        ) from None
    if "\x00" in text:  # valid UTF-8, but no text file holds NUL
        at = data.index(b"\x00")
        raise error(f"{what} {path} is not text (a NUL at byte {at}){_encoding_hint(data)}")
    return text.removeprefix("\ufeff")  # the byte-order mark some editors write is not text either


def _encoding_hint(data: bytes) -> str:
    """What the bytes look like instead: UTF-16 (a BOM, or every other byte zero) or binary."""
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (
        len(head) > 8 and head[1::2].count(0) > len(head) // 3
    ):
        return ": it looks like UTF-16; save it as UTF-8"
    if b"\x00" in head:
        return ": it looks like a binary file, not text"
    return ""


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file (after links): what may be opened without a check first."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
