"""``harness claims``: a three-seed grid's claims end to end (JSON, Markdown, LaTeX, the forest plot),
from written records and from a real smoke grid; ``--correction none`` gives the verdicts each claim's
own interval gives, and the committed night and demo claims are those numbers; bad analysis flags are
one line; one forest plot per table, stale ones dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.reporting.figures import save_png_pdf
from harness.specs.cells import expand
from harness.specs.parse import load_table_spec
from harness.store.run_store import RunStore
from tests.helpers import NIGHT, REPO_ROOT, make_record, manifest_of, override_args, spec_text, write_spec


def test_claims_command_renders_a_three_seed_grid(corpus_root: Path, tmp_path: Path) -> None:
    data = corpus_root
    spec = load_table_spec(Path("tables/cpu_demo.toml"))
    plan = expand([spec], "smoke", seeds=3, data_root=data)
    store = RunStore(tmp_path / "runs")
    effects = {"SimCSE-BERT-base": 0.0, "WhitenedCSE-BERT-base": 1.0, "SimCSE++-BERT-base": -1.0}
    for key, effect in effects.items():
        for config in plan.cell("cpu_demo", key).configs:
            avg = 70.0 + 3.0 * (config.seed - 42) + effect + 0.01 * config.seed
            store.save(make_record(config, final={"sts": {"avg": avg}}, best_stsb_dev=avg))
    out = tmp_path / "claims"
    args = [
        "claims",
        "cpu_demo",
        "--profile",
        "smoke",
        "--runs-dir",
        str(store.root),
        "--data-dir",
        str(data),
    ]
    assert main([*args, "--out", str(out)]) == 0
    data_json = json.loads((out / "claims.json").read_text(encoding="utf-8"))
    by_better = {c["better"]: c for c in data_json["claims"]}
    whitened = by_better["WhitenedCSE-BERT-base"]
    assert whitened["n"] == 3 and whitened["seeds"] == [42, 43, 44] and whitened["verdict"] == "holds"
    assert whitened["mean"] == pytest.approx(1.0) and whitened["paper_delta"] == pytest.approx(78.78 - 76.25)
    assert by_better["SimCSE++-BERT-base"]["verdict"] == "reversed"
    md = (out / "claims.md").read_text(encoding="utf-8")
    assert "| holds |" in md and "| reversed |" in md
    tex = (out / "claims.tex").read_text(encoding="utf-8")
    assert tex.count("\\\\") >= 3 and "\\begin{tabular}" in tex
    assert (out / "claims_forest_cpu_demo.png").stat().st_size > 10_000
    assert (out / "claims_forest_cpu_demo.pdf").read_bytes().startswith(b"%PDF")

    # SimCSE++ Table 3 declares SimCSE++ > SimCSE again (BERT-base, and the SBERT-base analog that
    # runs on the same encoder here): the same runs, so repeats, not more evidence
    both = tmp_path / "both"
    assert main([*args[:2], "simcsepp_table3", *args[2:], "--out", str(both)]) == 0
    claims = json.loads((both / "claims.json").read_text(encoding="utf-8"))["claims"]
    repeats = {(c["spec"], c["better"]): c["same_as"] for c in claims if c["same_as"]}
    # the pair names the encoder that ran, the paper's rows beside it
    first = "cpu_demo: SimCSE++ > SimCSE (random tiny encoder, paper: BERT-base) on STS avg"
    assert repeats == {
        ("simcsepp_table3", "SimCSE++-BERT-base"): first,
        ("simcsepp_table3", "SimCSE++-SBERT-base"): first,
    }
    table3 = {c["better"]: c for c in claims if c["spec"] == "simcsepp_table3"}
    assert (
        table3["SimCSE++-SBERT-base"]["pair"] == "SimCSE++ > SimCSE (random tiny encoder, paper: SBERT-base)"
    )
    assert table3["SimCSE++-SBERT-base"]["paper_pair"] == "SimCSE++-SBERT-base > SimCSE-SBERT-base"
    assert {c["encoder"] for c in claims if c["n"]} == {"random tiny encoder"}
    md = (both / "claims.md").read_text(encoding="utf-8")
    assert "\nMeasured on random tiny encoder.\n" in md
    assert f"Totals over {len(claims) - 2} distinct comparisons: " in md and "| reversed (repeat) |" in md


SMOKE_CLAIMS_SPEC = spec_text(
    """
[[rows]]
label = "SimCSE-BERT-base"
method = "simcse"
paper = [76.85]

[[rows]]
label = "+DCL"
method = "simcsepp"
params = {off_dropout = false, m = 1.0}
paper = [79.39]

[[claims]]
better = "+DCL"
worse = "SimCSE-BERT-base"
""",
    cites="SimCSE++ Table 3",
    title="Smoke claims",
    scores="stsb_dev",
    columns='["stsb_dev"]',
)


def test_a_real_three_seed_smoke_grid_renders_claims(tmp_path: Path, data_root: Path) -> None:
    spec = write_spec(tmp_path / "smoke_claims.toml", SMOKE_CLAIMS_SPEC)
    runs, out = tmp_path / "runs", tmp_path / "claims"
    common = ["--profile", "smoke", "--runs-dir", str(runs), "--data-dir", str(data_root)]
    assert main(["grid", str(spec), *common, "--seeds", "3", "--override", "final_tasks=none"]) == 0
    records = RunStore(runs).records()
    assert len(records) == 6 and all(r["status"] == "finished" for r in records)
    assert main(["claims", str(spec), *common, "--override", "final_tasks=none", "--out", str(out)]) == 0
    claim = json.loads((out / "claims.json").read_text(encoding="utf-8"))["claims"][0]
    assert claim["n"] == 3 and claim["seeds"] == [42, 43, 44]
    assert claim["verdict"] in ("holds", "reversed", "inconclusive") and claim["mdd80"] is not None
    assert claim["paper_delta"] == pytest.approx(79.39 - 76.85)


# -- the correction of the verdicts (--correction, --family, --effect) ---------------------------------
def _render(folder: str, tmp_path: Path, data_root: Path, *extra: str) -> dict:
    manifest = manifest_of(REPO_ROOT / "docs" / folder)
    overrides = override_args(manifest["overrides"])
    out = tmp_path / folder
    args = ["claims", *manifest["specs"], "--profile", manifest["profile"], *overrides, *extra]
    args += ["--runs-dir", str(REPO_ROOT / "docs" / folder / "runs"), "--data-dir", str(data_root)]
    assert main([*args, "--out", str(out)]) == 0
    return {
        "md": (out / "claims.md").read_text(encoding="utf-8"),
        "json": json.loads((out / "claims.json").read_text()),
    }


def _rows(md: str) -> list[list[str]]:
    return [
        line.split(" | ")
        for line in md.splitlines()
        if line.startswith("| ") and not line.startswith("| table")
    ]


@pytest.mark.parametrize("folder", ["night", "demo"])
def test_correction_none_gives_each_claims_own_verdict_and_the_committed_numbers(
    folder: str, tmp_path: Path, data_root: Path
) -> None:
    fresh = _render(folder, tmp_path, data_root, "--correction", "none")
    committed = (REPO_ROOT / "docs" / folder / "claims" / "claims.md").read_text(encoding="utf-8")
    for row in fresh["json"]["claims"]:
        assert row["verdict_corrected"] == row["verdict"] and row["p_adjusted"] == row["p"]
    new, old = _rows(fresh["md"]), _rows(committed)
    assert len(new) == len(old)
    for a, b in zip(new, old, strict=True):  # interval, seeds, verdict, p and MDD as committed
        assert a[:9] == b[:9] and a[-1] == b[-1]
        raw = a[7].removesuffix(" (repeat)")
        if raw == "inconclusive":  # not decided: ruled out where the interval lies inside +-E
            assert a[10] in ("ruled out", "inconclusive")
        else:
            assert a[10] == raw  # no correction: the verdict stands
    # the committed claims (Holm per table) decide a subset of what the intervals decide
    data = json.loads((REPO_ROOT / "docs" / folder / "claims" / "claims.json").read_text(encoding="utf-8"))
    assert data["analysis"]["correction"] == "holm" and data["analysis"]["family"] == "table"
    for row in data["claims"]:
        if row["verdict_corrected"] in ("holds", "reversed"):
            assert row["verdict_corrected"] == row["verdict"]


def test_bad_analysis_flags_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "runs").mkdir()
    args = ["claims", "cpu_demo", "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "out")]
    assert main([*args, "--effect", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--effect" in err[0]
    assert main([*args, "--correction", "bonferroni"]) == 2  # argparse's one line, returned as exit 2
    assert re.search(r"--correction: invalid choice: 'bonferroni'", capsys.readouterr().err)


# -- one forest plot per table -------------------------------------------------------------------------
def test_claims_writes_one_forest_plot_per_table_and_drops_stale_ones(
    tmp_path: Path, data_root: Path
) -> None:
    manifest = manifest_of(NIGHT)
    overrides = override_args(manifest["overrides"])
    out = tmp_path / "claims"
    out.mkdir()
    import matplotlib.pyplot as plt

    save_png_pdf(plt.figure(), out / "claims_forest")  # the one big figure of earlier versions
    args = ["claims", "cpu_demo", "whitenedcse_table4", "--profile", "night", *overrides]
    args += ["--runs-dir", str(NIGHT / "runs"), "--data-dir", str(data_root), "--out", str(out)]
    assert main(args) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "captions.json",
        "claims.json",
        "claims.md",
        "claims.tex",
        "claims_figures.tex",
        "claims_forest_cpu_demo.pdf",
        "claims_forest_cpu_demo.png",
        "claims_forest_whitenedcse_table4.pdf",
        "claims_forest_whitenedcse_table4.png",
    ]
    figures = (out / "claims_figures.tex").read_text(encoding="utf-8")
    picture = r"\besidethisfile{claims_forest_whitenedcse_table4.pdf}"  # found beside the file
    assert r"\includegraphics[width=\textwidth]{" + picture + "}" in figures
    assert set(json.loads((out / "captions.json").read_text(encoding="utf-8"))) == {
        "claims_forest_cpu_demo",
        "claims_forest_whitenedcse_table4",
    }
