"""README.md and docs/*.md against what they describe: the committed records, the code, the files.

* README.md's `make run` table quotes the committed demo records (``docs/demo``) and the replication
  night's (``docs/night``): the demo records render again to the committed tables and claims, and
  every number of the README's table is what they give.
* docs/correctness.md quotes SentEval's own STS numbers as ``harness/evaluation/reference.py`` keeps them.
* Every relative link, and every repository path a page names in backticks, exists; every
  ``#anchor`` is a heading of its page.
* docs/speed.md quotes the cost and memory models' constants as the code has them.
* README.md stays a product page (no dated run logs: those live in docs/), and no code comment or
  docstring carries a dated measurement (it points to the record or benchmark instead).
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
from pathlib import Path

from harness.cli import main
from harness.evaluation.reference import SENTEVAL_STS_MINILM
from tests.doc_numbers import claim_cells, demo_averages
from tests.helpers import NIGHT, REPO_ROOT, manifest_of, override_args

README = REPO_ROOT / "README.md"
DEMO = REPO_ROOT / "docs" / "demo"
PAGES = [
    README,
    REPO_ROOT / "CONTRIBUTING.md",
    REPO_ROOT / "tables" / "README.md",
    *sorted((REPO_ROOT / "docs").glob("*.md")),
    NIGHT / "README.md",
    NIGHT / "zen4_check" / "README.md",
]
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
CLAIMS = ("WhitenedCSE beats SimCSE on STS avg", "SimCSE++ beats SimCSE on STS avg")


def _rows(text: str) -> dict[str, list[str]]:
    """First cell -> the cells of every Markdown table row of ``text``."""
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return {
        cells[0]: cells for cells in ([c.strip() for c in r.strip().strip("|").split(" | ")] for r in rows)
    }


def _render(records_dir: Path, manifest: dict, data_root: Path, out: Path) -> tuple[str, str]:
    overrides = override_args(manifest["overrides"])
    args = ["tables", *manifest["specs"], "--profile", manifest["profile"], *overrides]
    args += ["--runs-dir", str(records_dir), "--data-dir", str(data_root), "--out", str(out / "tables")]
    assert main(args) == 0
    return (out / "tables" / "tables.md").read_text(encoding="utf-8"), (
        out / "claims" / "claims.md"
    ).read_text(encoding="utf-8")


def test_the_readme_make_run_table_is_what_the_committed_records_give(
    data_root: Path, tmp_path: Path
) -> None:
    manifest = manifest_of(DEMO)
    # pinned, so that the run ids do not depend on whether this CPU has native bf16 ("auto")
    assert manifest == {
        "specs": ["cpu_demo"],
        "profile": "demo",
        "overrides": {"precision": "bf16", "eval_precision": "bf16"},
    }
    records = [json.loads(p.read_text(encoding="utf-8")) for p in (DEMO / "runs" / "records").glob("*.json")]
    assert len(records) == 9 and all(r["status"] == "finished" for r in records)  # 3 methods x 3 seeds
    tables, claims = _render(DEMO / "runs", manifest, data_root, tmp_path)
    assert tables == (DEMO / "tables" / "tables.md").read_text(encoding="utf-8")
    assert claims == (DEMO / "claims" / "claims.md").read_text(encoding="utf-8")

    night_tables = (NIGHT / "tables" / "tables.md").read_text(
        encoding="utf-8"
    )  # test_replication_numbers pins these
    night_claims = (NIGHT / "claims" / "claims.md").read_text(encoding="utf-8")
    demo, night = demo_averages(tables), demo_averages(night_tables)
    section = README.read_text(encoding="utf-8").split("## What `make run` gives", 1)[1].split("\n## ", 1)[0]
    quoted = _rows(section)
    for method, (paper, mean, sd) in demo.items():
        _paper, night_mean, night_sd = night[method]
        assert quoted[method] == [method, paper, f"{mean} ± {sd}", f"{night_mean} ± {night_sd}"], method
    for claim in CLAIMS:
        paper, measured = claim_cells(claims, "cpu_demo", claim)
        night_paper, night_measured = claim_cells(night_claims, "cpu_demo", claim)
        assert paper == night_paper
        assert quoted[claim] == [claim, paper, measured, night_measured], claim
    untrained = f"the untrained encoder scores {SENTEVAL_STS_MINILM['avg']:.2f}"
    assert untrained in " ".join(section.split())

    page = (REPO_ROOT / "docs" / "demo.md").read_text(
        encoding="utf-8"
    )  # it quotes the rendered rows as they are
    section = page.split("## The table and the claims\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        r for r in section.splitlines() if r.startswith("| ") and not r.startswith(("| Model |", "| table |"))
    ]
    assert len(rows) == 6 + len(CLAIMS)
    assert all(row in tables.splitlines() or row in claims.splitlines() for row in rows), rows


def test_the_correctness_page_quotes_senteval_as_the_reference_keeps_it() -> None:
    text = " ".join((REPO_ROOT / "docs" / "correctness.md").read_text(encoding="utf-8").split())
    names = {
        "STS12": "STS12",
        "STS13": "STS13",
        "STS14": "STS14",
        "STS15": "STS15",
        "STS16": "STS16",
        "STSBenchmark": "STS-B",
        "SICKRelatedness": "SICK-R",
        "avg": "avg",
    }
    quoted = ", ".join(f"{names[task]} {score:.2f}" for task, score in SENTEVAL_STS_MINILM.items())
    assert f"gives {quoted}: SentEval's numbers" in text, quoted


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^(    |\t).*$", "", text, flags=re.MULTILINE)  # code blocks hold no headings
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def test_every_link_and_named_path_of_the_pages_exists() -> None:
    broken = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue  # an external address
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target}")
            elif anchor and (file.suffix != ".md" or anchor not in _anchors(file)):
                broken.append(f"{page.relative_to(REPO_ROOT)}: {target} (no such heading)")
        for name in re.findall(r"`([\w./-]+\.(?:py|md|toml|json|png))`", text):  # from the root or the page
            if "/" not in name or name.startswith(("../", "results/", "runs/")):
                continue  # a file name alone, outside the repository, or what a command writes
            if not (REPO_ROOT / name).exists() and not (page.parent / name).exists():
                broken.append(f"{page.relative_to(REPO_ROOT)}: `{name}`")
    assert not broken, broken


def test_the_readme_is_a_product_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "README.md is the product page: run logs and notes go to docs/"
    assert not DATE.findall(text), "a dated measurement belongs in a docs/ page, not in README.md"


def _comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    out = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):  # docstrings, and the strings documenting an attribute
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.append((node.lineno, node.value.value))
    return out


def test_no_code_comment_or_docstring_carries_a_dated_measurement() -> None:
    dated = []
    for folder in ("harness", "methods", "benchmarks", "tests"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            for line, text in _comments_and_docstrings(path.read_text(encoding="utf-8")):
                if DATE.search(text):
                    dated.append(f"{path.relative_to(REPO_ROOT)}:{line}")
    assert not dated, f"point to the record or benchmark (docs/speed.md) instead of dating a number: {dated}"


def test_the_speed_page_quotes_the_constants_the_code_uses() -> None:
    """docs/speed.md explains where the cost and memory models' constants come from: the same values."""
    from harness.grid.plan import memory, unit_costs

    text = " ".join((REPO_ROOT / "docs" / "speed.md").read_text(encoding="utf-8").split())
    step, sts, _source = unit_costs.BUILTIN[("cpu", "minilm", "bf16")]
    assert f"the bf16 SimCSE step {step} s and the bf16 final STS pass {sts['bf16']} s" in text
    assert f"the fp32 STS pass, {sts['fp32']} s," in text
    assert f"`DEV_EVAL_SHARE` = {unit_costs.DEV_EVAL_SHARE}:" in text
    assert unit_costs.TRANSFER_PER_STS == 415 / 49.8 and "`TRANSFER_PER_STS` = 415 / 49.8:" in text
    assert unit_costs.TRANSFER_FIT_S == {"fasttest": 12.3 * 454.8 / 230.0, "test": 454.8}
    assert "test mode 454.8 s; fasttest 12.3 s with two workers times" in text and "(454.8 / 230.0)" in text
    assert f"`STS_PER_STEP` = {unit_costs.STS_PER_STEP:.0f}:" in text
    assert memory._ROW_TOKEN_BYTES["minilm"] == 120 * 1024 and "rounded up to 120 KB" in text
    assert memory._BASE_BYTES["minilm"] == 2 * memory.GB and "is therefore 2 GB" in text
    assert memory._MARGIN == 1.15 and "the estimate adds 15 % for the allocator" in text
