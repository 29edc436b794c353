"""Show that a change leaves the committed outputs byte for byte as they are.

Two checks, both meant to run before and after a refactor:

* ``python scripts/outputs_check.py docs``: renders every committed table, claim and plot under
  docs/ (the demo's, the night's, the until-decided claims) again from the committed records into a
  temporary folder and compares each file with the committed one, byte for byte. Exit 1 names the
  files that differ or are missing.
* ``python scripts/outputs_check.py digest DIR --out FILE`` writes the sha-256 of every file under DIR
  (e.g. ``results/`` after ``make run``), leaving out what states when or how long (records' and
  reports' timings are not outputs of the code's arithmetic); ``... digest DIR --against FILE``
  compares a second run's folder with it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.cli import main as harness  # noqa: E402

DOCS = ROOT / "docs"
# Files whose bytes carry wall times, dates or host facts: compared by name only.
VOLATILE = {".log", ".html"}


def _overrides(manifest: dict) -> list[str]:
    return [a for k, v in manifest["overrides"].items() for a in ("--override", f"{k}={v}")]


def _run(args: list[str]) -> None:
    with contextlib.redirect_stdout(sys.stderr):
        code = harness(args)
    if code != 0:
        raise SystemExit(f"outputs_check: `harness {' '.join(args)}` failed")


def _render_docs(out: Path, data_dir: str | None) -> list[tuple[Path, Path]]:
    """Render into ``out``; return (fresh folder, committed folder) pairs to compare."""
    data = ["--data-dir", data_dir] if data_dir else []
    pairs: list[tuple[Path, Path]] = []
    for name in ("demo", "night"):
        folder = DOCS / name
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        common = ["--profile", manifest["profile"], *_overrides(manifest), "--runs-dir", str(folder / "runs")]
        _run(["tables", *manifest["specs"], *common, *data, "--out", str(out / name / "tables")])
        _run(["plots", *common, *data, "--out", str(out / name / "plots")])
        pairs += [(out / name / sub, folder / sub) for sub in ("tables", "claims", "plots")]

    night = DOCS / "night"
    until = night / "until-decided"
    store = out / "until-decided-store"
    (store / "records").mkdir(parents=True)
    for folder in (night / "runs" / "records", *sorted(until.glob("records*"))):
        for path in folder.glob("*.json"):
            shutil.copy2(path, store / "records" / path.name)
    shutil.copy2(until / "sequential.json", store / "sequential.json")
    manifest = json.loads((night / "manifest.json").read_text(encoding="utf-8"))
    args = ["claims", *manifest["specs"], "--profile", manifest["profile"], *_overrides(manifest)]
    _run([*args, "--runs-dir", str(store), *data, "--out", str(out / "until-decided" / "claims")])
    pairs.append((out / "until-decided" / "claims", until / "claims"))
    return pairs


def _compare(fresh: Path, committed: Path) -> list[str]:
    problems = []
    names = {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
    names |= {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
    for name in sorted(names):
        a, b = fresh / name, committed / name
        if not a.is_file():
            problems.append(f"not rendered: {b.relative_to(ROOT)}")
        elif not b.is_file():
            problems.append(f"rendered but not committed: {b.relative_to(ROOT)}")
        elif a.read_bytes() != b.read_bytes():
            problems.append(f"differs: {b.relative_to(ROOT)}")
    return problems


def check_docs(data_dir: str | None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        pairs = _render_docs(Path(tmp), data_dir)
        problems = [p for fresh, committed in pairs for p in _compare(fresh, committed)]
        count = sum(1 for _, committed in pairs for p in committed.rglob("*") if p.is_file())
    for line in problems:
        print(line)
    print(f"outputs_check: {count} committed files rendered again, {len(problems)} differ")
    return 1 if problems else 0


def _digests(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(folder))
        volatile = path.suffix in VOLATILE or "/records/" in f"/{name}" or "/tune/" in f"/{name}"
        out[name] = "present" if volatile else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def digest(folder: Path, out: Path | None, against: Path | None) -> int:
    digests = _digests(folder)
    if out is not None:
        out.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"outputs_check: {len(digests)} files of {folder} digested into {out}")
    if against is None:
        return 0
    before = json.loads(against.read_text(encoding="utf-8"))
    problems = []
    for k in sorted(set(before) | set(digests)):
        if before.get(k) != digests.get(k):
            where = "only after" if k not in before else "only before" if k not in digests else "differs"
            problems.append(f"{where}: {k}")
    for line in problems:
        print(line)
    same = sum(1 for k in digests if before.get(k) == digests[k])
    print(f"outputs_check: {same} of {len(before)} files as before, {len(problems)} differ")
    return 1 if problems else 0


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    docs = sub.add_parser("docs", help="render docs/ again and compare with the committed files")
    docs.add_argument("--data-dir", default=None)
    dig = sub.add_parser("digest", help="digest a results folder, or compare it with a digest")
    dig.add_argument("folder", type=Path)
    dig.add_argument("--out", type=Path, default=None)
    dig.add_argument("--against", type=Path, default=None)
    args = parser.parse_args()
    if args.what == "docs":
        return check_docs(args.data_dir)
    return digest(args.folder, args.out, args.against)


if __name__ == "__main__":
    sys.exit(cli())
