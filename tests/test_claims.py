"""Claims: spec claims match PAPER_TABLES.md, the statistics match scipy, verdicts and pairing are right,
and ``harness claims`` renders a 3-seed grid's claims end to end."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from paper_tables import PAPER_TABLES, parse_paper_tables
from scipy import stats
from spec_checks import check_claim_deltas

from harness.cli import main
from harness.errors import ConfigError
from harness.grid.plan import expand
from harness.reporting.statistics import (
    evaluate,
    minimum_detectable_difference,
    pair_by_seed,
    paired_power,
    seed_values,
    summarise,
    t_interval,
)
from harness.specs.claim import Claim
from harness.specs.find import load_table_specs
from harness.specs.parse import load_table_spec
from harness.store.record import new_record
from harness.store.run_store import RunStore

CORPUS_TEXT = "".join(f"claim fixture sentence {i} for the corpus.\n" for i in range(64))


@pytest.fixture(scope="module")
def paper() -> dict[str, list[dict[str, Any]]]:
    return parse_paper_tables(PAPER_TABLES.read_text(encoding="utf-8"))


# -- claims as data ---------------------------------------------------------------------------------
EXPECTED = {
    ("cpu_demo", "WhitenedCSE-BERT-base", "SimCSE-BERT-base"),
    ("cpu_demo", "SimCSE++-BERT-base", "SimCSE-BERT-base"),
    ("whitenedcse_table1", "WhitenedCSE-BERT-base", "SimCSE-BERT-base"),
    ("whitenedcse_table3", "Shuffled-Group-whitening", "Group-whitening"),
    ("whitenedcse_table3", "Group-whitening", "None (unsup. SimCSE)"),
    ("whitenedcse_table3", "None (unsup. SimCSE)", "ZCA-whitening"),
    ("whitenedcse_table3", "ZCA-whitening", "PCA-whitening"),
    ("whitenedcse_table5", "STS-Avg. [num_positives=3]", "STS-Avg. [num_positives=2]"),
    ("simcsepp_table1", "Neg. -Noise", "SimCSE"),
    ("simcsepp_table1", "SimCSE", "Pos. +Noise"),
    ("simcsepp_table1", "Pos. +Noise", "Pos. -Noise"),
    ("simcsepp_table2", "SimCSE-BERT-base", "+BarlowTwins (D=768)"),
    ("simcsepp_table2", "+704 artificial z", "+300 artificial z"),
    ("simcsepp_table3", "SimCSE++-BERT-base", "SimCSE-BERT-base"),
    ("simcsepp_table3", "+Off-Info", "SimCSE-BERT-base"),
    ("simcsepp_table3", "+DCL", "SimCSE-BERT-base"),
    ("simcsepp_table3", "SimCSE++-SBERT-base", "SimCSE-SBERT-base"),
    ("simcsepp_table4", "+DCL (NLI, tau_DCL = 0.05)", "+whitening (NLI)"),
    ("simcsepp_table5", "STS-B dev [m=0.9]", "STS-B dev [m=1.1]"),
    ("simcsepp_table5", "STS-B dev [lambda_dcl=0.1]", "STS-B dev [lambda_dcl=0.02]"),
    ("simcsepp_table5", "STS-B dev [tau_dcl=5]", "STS-B dev [tau_dcl=50]"),
}


def test_the_papers_claims_are_declared() -> None:
    declared = {(c.spec, c.better, c.worse) for s in load_table_specs() for c in s.claims}
    assert declared >= EXPECTED
    table4 = {(c.better, c.worse) for c in load_table_spec(Path("tables/whitenedcse_table4.toml")).claims}
    assert len(table4) == 8  # shuffled beats unshuffled at each of the 8 group counts


def test_every_paper_delta_equals_paper_tables(paper: dict[str, list[dict[str, Any]]]) -> None:
    checked = sum(check_claim_deltas(spec, paper) for spec in load_table_specs())
    assert checked >= 50


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ('better = "Group-whitening"\nworse = "Nope"', "'Nope' is not a run cell"),
        ('better = "Group-whitening"', "missing required key"),
        ('order = ["Group-whitening"]', "at least two cells"),
        ('best = "Group-whitening"', "not a sweep cell"),
        ('better = "Group-whitening"\nworse = "PCA-whitening"\ncolumn = "STS12"', "not a column"),
        ('better = "Group-whitening"\nworse = "PCA-whitening"\norder = ["a", "b"]', "exactly one of"),
        ('betterr = "Group-whitening"', "unknown key 'betterr'"),
    ],
)
def test_bad_claims_name_the_problem(tmp_path: Path, claims: str, message: str) -> None:
    spec = Path("tables/whitenedcse_table3.toml").read_text(encoding="utf-8").split("[[claims]]")[0]
    path = tmp_path / "t.toml"
    path.write_text(spec + "\n[[claims]]\n" + claims + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_table_spec(path)


def test_a_claim_on_a_quoted_row_is_refused(tmp_path: Path) -> None:
    text = Path("tables/simcsepp_table3.toml").read_text(encoding="utf-8").split("[[claims]]")[0]
    path = tmp_path / "t.toml"
    path.write_text(
        text + '\n[[claims]]\nbetter = "SimCSE-BERT-base"\nworse = "GloVe (avg.)"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"'GloVe \(avg.\)' is a quoted row"):
        load_table_spec(path)


# -- statistics -------------------------------------------------------------------------------------
DIFFS = [0.8, 1.9, -0.3, 1.2, 0.6]


def test_t_interval_matches_scipy() -> None:
    low, high = t_interval(DIFFS)
    ref = stats.t.interval(0.95, len(DIFFS) - 1, loc=np.mean(DIFFS), scale=stats.sem(DIFFS))
    assert (low, high) == pytest.approx(ref, rel=1e-12)
    # and the interval excludes 0 exactly when ttest_rel rejects at 5 %
    better, worse = np.array([70.0, 71.0, 69.5, 72.0, 70.4]), np.array([70.0, 71.0, 69.5, 72.0, 70.4]) - DIFFS
    p = stats.ttest_rel(better, worse).pvalue
    assert (low > 0) == (p < 0.05)
    s = summarise(DIFFS)
    assert (
        s.n == 5 and s.mean == pytest.approx(np.mean(DIFFS)) and s.sd == pytest.approx(np.std(DIFFS, ddof=1))
    )


def test_power_matches_a_monte_carlo_paired_t_test() -> None:
    sd, n = 0.84, 5
    mdd = minimum_detectable_difference(sd, n)
    assert mdd is not None and paired_power(mdd, sd, n) == pytest.approx(0.8, abs=1e-6)
    rng = np.random.default_rng(0)
    sims = rng.normal(mdd, sd, size=(40_000, n))
    t = sims.mean(axis=1) / (sims.std(axis=1, ddof=1) / np.sqrt(n))
    crit = stats.t.ppf(0.975, n - 1)
    assert float(np.mean(np.abs(t) > crit)) == pytest.approx(0.8, abs=0.01)
    # more seeds detect smaller differences
    mdd10 = minimum_detectable_difference(sd, 10)
    assert mdd10 is not None and mdd10 < mdd
    assert minimum_detectable_difference(sd, 1) is None and minimum_detectable_difference(0.0, 3) == 0.0


@pytest.mark.parametrize(
    ("diffs", "verdict"),
    [
        ([1.0, 1.2, 0.9, 1.1], "holds"),
        ([-1.0, -1.2, -0.9, -1.1], "reversed"),
        ([1.0, -1.2, 0.9, -1.1], "inconclusive"),
        ([0.5], "1 seed"),
        ([], "no data"),
    ],
)
def test_verdicts(diffs: list[float], verdict: str) -> None:
    assert summarise(diffs).verdict == verdict


def test_pairing_is_by_seed_not_by_order() -> None:
    # Seeds differ a lot from each other (data order, initialisation), the method effect is +0.5 on
    # every seed: paired, the claim holds; an unpaired comparison could not see it.
    base = {11: 70.0, 12: 74.0, 13: 66.0, 14: 72.0, 15: 68.0}
    better = {s: v + 0.5 + 0.01 * s for s, v in base.items()}
    worse = dict(base)
    worse[99] = 10.0  # a seed only one cell finished: dropped and reported
    records_b = [{"config": {"seed": s}, "final": {"sts": {"avg": v}}} for s, v in better.items()]
    records_w = [{"config": {"seed": s}, "final": {"sts": {"avg": v}}} for s, v in worse.items()]
    random.Random(0).shuffle(records_b)
    random.Random(1).shuffle(records_w)
    paired = pair_by_seed(seed_values(records_b, "sts", "avg"), seed_values(records_w, "sts", "avg"))
    assert paired.seeds == (11, 12, 13, 14, 15) and paired.unpaired == (99,)
    assert paired.diffs == pytest.approx([0.5 + 0.01 * s for s in paired.seeds])
    claim = Claim("t", "a", "b", "avg", 1.0, "a > b")
    assert (
        evaluate(
            claim, seed_values(records_b, "sts", "avg"), seed_values(records_w, "sts", "avg")
        ).summary.verdict
        == "holds"
    )
    unpaired = stats.ttest_ind(list(better.values()), list(base.values()))
    assert unpaired.pvalue > 0.5  # what an unpaired test would have said


# -- end to end ---------------------------------------------------------------------------------------
def _finished(config: Any, avg: float) -> dict[str, Any]:
    record = dict(new_record(config))
    record.update(status="finished", final={"sts": {"avg": avg}}, best_stsb_dev=avg)
    return record


def test_claims_command_renders_a_three_seed_grid(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "corpus" / "nli-sentences.txt").write_text(CORPUS_TEXT, encoding="utf-8")
    spec = load_table_spec(Path("tables/cpu_demo.toml"))
    plan = expand([spec], "smoke", seeds=3, data_root=data)
    store = RunStore(tmp_path / "runs")
    effects = {"SimCSE-BERT-base": 0.0, "WhitenedCSE-BERT-base": 1.0, "SimCSE++-BERT-base": -1.0}
    for key, effect in effects.items():
        for config in plan.cell("cpu_demo", key).configs:
            store.save(_finished(config, 70.0 + 3.0 * (config.seed - 42) + effect + 0.01 * config.seed))
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
    first = "cpu_demo: SimCSE++-BERT-base > SimCSE-BERT-base on STS avg"
    assert repeats == {
        ("simcsepp_table3", "SimCSE++-BERT-base"): first,
        ("simcsepp_table3", "SimCSE++-SBERT-base"): first,
    }
    md = (both / "claims.md").read_text(encoding="utf-8")
    assert f"Totals over {len(claims) - 2} distinct comparisons: " in md and "| reversed (repeat) |" in md


SMOKE_SPEC = """
cites = "SimCSE++ Table 3"
title = "Smoke claims"
scores = "stsb_dev"
columns = ["stsb_dev"]

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
"""


def test_a_real_three_seed_smoke_grid_renders_claims(tmp_path: Path, data_root: Path) -> None:
    spec = tmp_path / "smoke_claims.toml"
    spec.write_text(SMOKE_SPEC, encoding="utf-8")
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


@pytest.mark.parametrize("diffs", [(1.0, 1.5), (0.1, -0.2), (0.3, 0.1, 0.2)])
def test_few_seeds_give_a_finite_mdd(diffs: tuple[float, ...]) -> None:
    # scipy's noncentral t returns NaN at one degree of freedom for some noncentralities; two seeds
    # used to crash `harness claims` in the MDD search.
    summary = summarise(diffs)
    assert summary.mdd is not None and summary.sd is not None and np.isfinite(summary.mdd)
    assert paired_power(summary.mdd, summary.sd, len(diffs)) == pytest.approx(0.8, abs=1e-6)
    rng = np.random.default_rng(0)  # Monte Carlo check of the power at the MDD, df = n - 1
    n = len(diffs)
    samples = rng.normal(summary.mdd, summary.sd, size=(200_000, n))
    t = samples.mean(axis=1) / (samples.std(axis=1, ddof=1) / np.sqrt(n))
    crit = stats.t.ppf(0.975, n - 1)
    assert np.mean(np.abs(t) > crit) == pytest.approx(0.8, abs=0.01)


def test_the_power_falls_back_to_integration_where_scipy_gives_no_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = {(d, n): paired_power(d, 0.4, n) for d in (0.2, 1.0, 3.0) for n in (2, 3, 5)}
    monkeypatch.setattr(stats.nct, "sf", lambda *args, **kwargs: float("nan"))
    for (d, n), power in expected.items():
        assert paired_power(d, 0.4, n) == pytest.approx(power, abs=1e-7)


UNTRAINED_SPEC = """
cites = "SimCSE++ Table 3"
title = "A trained cell against one that does not train"
scores = "sts"
columns = ["avg"]

[[rows]]
label = "BERT-base (first-last avg.)"
method = "simcse"
overrides = {max_steps = 0, eval_pooler = "avg_first_last"}
paper = [56.70]

[[rows]]
label = "SimCSE-BERT-base"
method = "simcse"
paper = [76.25]

[[claims]]
better = "SimCSE-BERT-base"
worse = "BERT-base (first-last avg.)"
"""


def test_an_untrained_cell_stands_against_every_seed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "corpus" / "nli-sentences.txt").write_text(CORPUS_TEXT, encoding="utf-8")
    spec_path = tmp_path / "untrained.toml"
    spec_path.write_text(UNTRAINED_SPEC, encoding="utf-8")
    plan = expand([load_table_spec(spec_path)], "smoke", seeds=3, data_root=data)
    untrained = plan.cell("untrained", "BERT-base (first-last avg.)").configs
    assert len(untrained) == 1  # runs once, whatever --seeds says
    store = RunStore(tmp_path / "runs")
    store.save(_finished(untrained[0], 60.0))
    trained = {42: 70.0, 43: 71.0, 44: 75.0}
    for config in plan.cell("untrained", "SimCSE-BERT-base").configs:
        store.save(_finished(config, trained[config.seed]))
    out = tmp_path / "claims"
    args = ["claims", str(spec_path), "--profile", "smoke", "--runs-dir", str(store.root)]
    assert main([*args, "--data-dir", str(data), "--out", str(out)]) == 0
    claim = json.loads((out / "claims.json").read_text(encoding="utf-8"))["claims"][0]
    assert claim["seeds"] == [42, 43, 44] and claim["diffs"] == [10.0, 11.0, 15.0]
    low, high = t_interval([10.0, 11.0, 15.0])
    assert claim["ci95"] == pytest.approx([low, high]) and claim["verdict"] == "holds"
