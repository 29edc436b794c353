"""The report's provenance section: every run with its method, seed and scores, then every
provenance key once per distinct value, with the runs that share it.

Values read as words, not Python: ``none``, ``yes`` / ``no``, lists and mappings as JSON. The paths
of the machine that ran a record (its corpus, data root, checkpoint) are not shown: a path names
only its file (``…/nli-sentences.txt``), and ``config.corpus_id`` names the corpus by content.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

PROVENANCE_KEYS: tuple[str, ...] = ("code_version", "host", "config")
"""Record keys shown for every run besides every key of ``record["provenance"]``."""

_PATH = re.compile(r"^(/|~/|[A-Za-z]:[\\/])")
"""An absolute path (POSIX, home, Windows)."""


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def plural(count: int, word: str) -> str:
    """``1 table``, ``2 tables``, ``0 run records``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _scalar(value: Any) -> str:
    """A value in words: ``none``, ``yes`` / ``no``, a path by its file name only."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    if _PATH.match(text):
        return "\u2026/" + re.split(r"[\\/]", text.rstrip("/\\"))[-1]
    return text


def _plain(value: Any) -> Any:
    """``value`` with every path shortened (:func:`_scalar`), for JSON display."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str) and _PATH.match(value):
        return _scalar(value)
    return value


def _value(value: Any) -> str:
    if isinstance(value, Mapping | list | tuple):
        return f"<pre>{_esc(json.dumps(_plain(value), indent=2, sort_keys=True, default=str))}</pre>"
    return _esc(_scalar(value))


def _provenance_items(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's provenance block, its code_version and host (each once: the block's own are the
    record's) and every setting of its config as ``config.<name>``."""
    items: dict[str, Any] = {}
    provenance = record.get("provenance")
    if isinstance(provenance, Mapping):
        items.update(provenance)
    for key in PROVENANCE_KEYS:
        if key == "config" and isinstance(record.get(key), Mapping):  # one row per setting
            items.update((f"config.{k}", v) for k, v in record[key].items())
        elif key in record and record[key] != items.get(key, record[key]):
            items[f"record {key}"] = record[key]  # differs from the block's: both shown
        elif key in record:
            items[key] = record[key]
    return items


def _runs_text(ids: Sequence[str], total: int) -> str:
    if len(ids) == total:
        return f"all {plural(total, 'run')}" if total > 1 else f"<code>{_esc(ids[0])}</code>"
    return ", ".join(f'<a href="#run-{_esc(i)}"><code>{_esc(i)}</code></a>' for i in ids)


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "&ndash;"


def _run_row(record: Mapping[str, Any]) -> str:
    """One run: id, method, seed, status, best STS-B dev (at its step), final STS and transfer avg."""
    config = record.get("config") or {}
    final = record.get("final") or {}
    run_id = _esc(record.get("run_id"))
    status = _esc(_scalar(record.get("status")))
    step = record.get("best_step")
    dev = _score(record.get("best_stsb_dev")) + (f" (step {_esc(step)})" if step is not None else "")
    cells = [
        f"<td><code>{run_id}</code></td>",
        f"<td>{_esc(_scalar(config.get('method')))}</td>",
        f"<td>{_esc(_scalar(config.get('seed')))}</td>",
        f'<td class="status-{status}">{status}</td>',
        f"<td>{dev}</td>",
        *(f"<td>{_score((final.get(g) or {}).get('avg'))}</td>" for g in ("sts", "transfer")),
    ]
    return f'<tr id="run-{run_id}">' + "".join(cells) + "</tr>"


def provenance_html(records: Sequence[Mapping[str, Any]]) -> str:
    """Every run with its method, seed, status and scores, then every provenance key once per
    distinct value, with the runs that share it (``record["provenance"]`` and code_version, host,
    config)."""
    if not records:
        return "<p>No run records.</p>"
    ordered = sorted(records, key=lambda r: str(r.get("run_id")))
    head = ("run", "method", "seed", "status", "best STS-B dev", "STS avg", "transfer avg")
    runs = "".join(_run_row(r) for r in ordered)
    values: dict[str, dict[str, tuple[Any, list[str]]]] = {}
    for record in ordered:
        for key, value in _provenance_items(record).items():
            text = json.dumps(_plain(value), sort_keys=True, default=str)
            values.setdefault(key, {}).setdefault(text, (value, []))[1].append(str(record.get("run_id")))
    rows = []
    for key in sorted(values, key=lambda k: (k.startswith("config."), k)):  # the settings last
        for value, ids in values[key].values():
            shared = _runs_text(ids, len(ordered))
            rows.append(f"<tr><td>{_esc(key)}</td><td>{_value(value)}</td><td>{shared}</td></tr>")
    return (  # each in a scroll box of its own: a long value never widens the page
        '<div class="scroll"><table class="prov runs"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + f"</tr></thead><tbody>{runs}</tbody></table></div>"
        '<div class="scroll"><table class="prov"><thead><tr><th>key</th><th>value</th><th>runs</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


__all__ = ["PROVENANCE_KEYS", "plural", "provenance_html"]
