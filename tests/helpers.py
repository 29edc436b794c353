"""Plain helpers the tests share (fixtures are in the ``conftest.py`` files).

Paths of the repository and its fixtures, small data roots, table specs, run records, the sentences
the method tests tokenise. LaTeX and browser pages: :mod:`tests.pages`; processes: :mod:`tests.processes`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch

from harness.encoder.model import SentenceEncoder
from harness.grid.capacity import Node
from harness.grid.options import ClusterOptions
from harness.store.record import SCHEMA_VERSION, new_record
from harness.store.run_config import RunConfig, resolve_config
from harness.store.run_store import RunStore

if TYPE_CHECKING:
    from harness.specs.claim import Claim
    from harness.stats.paired import ClaimResult

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
SPECS = FIXTURES / "specs"
SMOKE_SPEC = SPECS / "smoke_grid.toml"
"""The two-row smoke grid (SimCSE and SimCSE++ on the tiny encoder) most command tests plan."""
NIGHT = REPO_ROOT / "docs" / "night"
"""The replication night's committed records, specs, tables and claims."""
NIGHT_RECORDS = NIGHT / "runs" / "records"

# -- data roots --------------------------------------------------------------------------------------
CORPUS_TEXT = "".join(f"fixture sentence number {i} for the corpus.\n" for i in range(64))


def corpus_text(sentences: Iterable[str]) -> str:
    """``sentences`` one a line, each ended by a newline: the text of a corpus file."""
    return "".join(f"{s}\n" for s in sentences)


def make_corpus_root(folder: Path, text: str = CORPUS_TEXT) -> Path:
    """``folder`` holding only ``corpus/nli-sentences.txt`` (``text``; its content, hence the
    corpus id, never changes) and no SentEval data."""
    (folder / "corpus").mkdir(parents=True)
    (folder / "corpus" / "nli-sentences.txt").write_text(text, encoding="utf-8")
    return folder


def edit_json(path: Path, **changes: Any) -> None:
    """Set these keys of the JSON object in the file ``path``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
"""The files of the packaged encoder's tokenizer."""


def copy_packaged_tokenizer(folder: Path) -> None:
    """The packaged tokenizer's files (:data:`TOKENIZER_FILES`; stated length 512) copied into ``folder``."""
    from harness.config.models import packaged_model_dir

    for name in TOKENIZER_FILES:
        shutil.copy(packaged_model_dir() / name, folder / name)


STS15 = Path("STS") / "STS15-en-test"
"""STS15's folder in a SentEval data folder."""
STSB_DEV = Path("STS") / "STSBenchmark" / "sts-dev.csv"
"""The STS-B dev file (the dev evaluation's) in a SentEval data folder."""


def replace_line(path: Path, number: int, text: str) -> None:
    """Replace line ``number`` (from 1) of the text file ``path`` by ``text``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def make_data_root(
    folder: Path, senteval_from: Path | None = None, *, link: bool = False, corpus: str = CORPUS_TEXT
) -> Path:
    """``folder`` laid out like shared/data: ``corpus/nli-sentences.txt`` (``corpus``) and
    ``senteval/``: a copy of ``senteval_from`` (a writable one a test may break), a link to it
    (``link``: read-only by convention), or else empty."""
    make_corpus_root(folder, corpus)
    if senteval_from is None:
        (folder / "senteval").mkdir()
    elif link:
        (folder / "senteval").symlink_to(senteval_from)
    else:
        shutil.copytree(senteval_from, folder / "senteval")
    return folder


CONFIG_SENTENCES = [f"sentence number {i} is here ." for i in range(40)]
"""The corpus of the configuration tests' data root (``config_root``; its first 20: the wiki corpus)."""


def smoke_config(data_root: Path, method: str = "simcse", /, **overrides: Any) -> RunConfig:
    """The smoke profile's config of ``method`` (``params=`` among the overrides: its parameters)."""
    return resolve_config(method, overrides.pop("params", None), "smoke", overrides, data_root=data_root)


# -- table specs -------------------------------------------------------------------------------------
def spec_text(
    body: str, *, cites: str = "x", title: str = "x", scores: str = "sts", columns: str = '["avg"]'
) -> str:
    """A table spec's TOML: the four header keys (``columns`` in TOML), then ``body`` (rows, claims)."""
    return f'cites = "{cites}"\ntitle = "{title}"\nscores = "{scores}"\ncolumns = {columns}\n' + body


def write_spec(path: Path, text: str) -> Path:
    """The spec ``text`` written to ``path`` (UTF-8; its folder made where missing); that path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def manifest_of(folder: Path) -> dict[str, Any]:
    """A docs folder's ``manifest.json``: its specs, profile and overrides."""
    return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))


def override_args(overrides: dict[str, Any]) -> list[str]:
    """``--override key=value`` for each of ``overrides`` (a manifest's), as the commands take them."""
    return [a for k, v in overrides.items() for a in ("--override", f"{k}={v}")]


# -- evaluation --------------------------------------------------------------------------------------
TRANSFER_SCORES = {
    "MR": 70.0,
    "CR": 71.0,
    "SUBJ": 80.0,
    "MPQA": 81.0,
    "SST2": 72.0,
    "TREC": 60.0,
    "MRPC": 65.0,
}
"""The transfer accuracies the ``fake_transfer`` fixture's stand-in evaluation gives."""


def blobs(n: int, d: int, c: int, seed: int, noise: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points around ``c`` random centres in ``d`` dimensions (seeded), and their labels: a
    classification problem for the transfer classifier."""
    rng = np.random.RandomState(seed)
    centers = rng.randn(c, d)
    y = rng.randint(0, c, n)
    x = (centers[y] + noise * rng.randn(n, d)).astype(np.float32)
    return x, y


# -- the training loop with stand-in evaluators -----------------------------------------------------
DEV_SENTENCES = [
    "a man is playing a guitar .",
    "a man plays the guitar .",
    "a woman is slicing an onion .",
    "the cat sleeps on the sofa .",
]
"""The four sentences :func:`fake_dev_eval` and :func:`fake_final` embed."""
TRAIN_CORPUS = [
    f"the {w} number {i} walks to the {v} ."
    for i, (w, v) in enumerate(zip(["dog", "cat"] * 40, ["park", "shop"] * 40))
]
"""The 80-sentence corpus of the training-loop tests (the ``train_root`` fixture)."""
DOG_CORPUS = [f"the dog number {i} walks to the park ." for i in range(80)]
"""An 80-sentence corpus of one shape (the run tests' ``fake_dev_root``; its first 40: a method's)."""


def fake_dev_eval(
    data_root: Path, token_lengths: Any = None
) -> Callable[[Callable[[list[str]], np.ndarray]], dict[str, float]]:
    """A stand-in for the STS-B dev evaluation: deterministic scores from the embeddings of
    :data:`DEV_SENTENCES` (so that the training-loop tests exercise the loop, not the evaluator)."""

    def dev_eval(embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        x = embed(list(DEV_SENTENCES)).astype(np.float64)
        assert x.shape[0] == len(DEV_SENTENCES)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        sq = ((x[:, None] - x[None]) ** 2).sum(-1)
        iu = np.triu_indices(len(x), 1)
        return {
            "stsb_dev": float(100 * (x[0] @ x[1] - x[2] @ x[3])),
            "align": float(sq[0, 1]),
            "uniform": float(np.log(np.exp(-2 * sq[iu]).mean())),
        }

    return dev_eval


def dev_scores(x: np.ndarray) -> dict[str, float]:
    """A stand-in dev evaluation's scores of :data:`DEV_SENTENCES`' embeddings ``x`` (align, uniform 0)."""
    x = x.astype(np.float64) / np.linalg.norm(x, axis=1, keepdims=True)
    return {"stsb_dev": float(100 * (x[0] @ x[1] - x[2] @ x[3])), "align": 0.0, "uniform": 0.0}


def fake_final(
    embed: Callable[[list[str]], np.ndarray], data_root: Path, tasks: str, mode: str
) -> dict[str, Any]:
    """A stand-in for the final evaluation: one "STSB" score from :data:`DEV_SENTENCES`."""
    x = embed(list(DEV_SENTENCES))
    return {"sts": {"STSB": float(x[0] @ x[1]), "avg": float(x[0] @ x[1])}, "tasks": tasks, "mode": mode}


def final_with(value: float) -> Callable[..., dict[str, Any]]:
    """A stand-in final evaluation whose STSB score (and average) is ``value``."""

    def final(embed: Any, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        return {"sts": {"STS12": 70.0, "STSB": value, "avg": value}, "sts_tasks": ["STS12", "STSB"]}

    return final


# -- run records -------------------------------------------------------------------------------------
def make_record(run: RunConfig | str, status: str = "finished", **fields: Any) -> dict[str, Any]:
    """A run record with ``status`` and ``fields``: for a config, every schema key of
    :func:`~harness.store.record.new_record`; for a bare run id, only the keys the store reads."""
    if isinstance(run, str):
        return {"schema_version": SCHEMA_VERSION, "run_id": run, "status": status, "config": {}, **fields}
    record = dict(new_record(run))
    record.update(status=status, **fields)
    return record


def sts_record(config: RunConfig, avg: float, **fields: Any) -> dict[str, Any]:
    """A finished record of ``config`` whose STS-B score, STS average and best dev score are ``avg``."""
    return make_record(config, final={"sts": {"STSBenchmark": avg, "avg": avg}}, best_stsb_dev=avg, **fields)


def smoke_simcse_config(data_root: Path) -> RunConfig:
    """The first seed's config of the smoke grid's SimCSE row, on the smoke profile."""
    from harness.specs.cells import expand
    from harness.specs.parse import load_table_spec

    plan = expand([load_table_spec(SMOKE_SPEC)], "smoke", seeds=1, data_root=data_root)
    return plan.cell("smoke_grid", "SimCSE-BERT-base").configs[0]


# -- stand-ins for train_run -------------------------------------------------------------------------
def fake_train(config: RunConfig, data_root: Path, store: RunStore, *, avg: float = 42.0, **_: Any) -> Any:
    """A stand-in for :func:`~harness.run.training.train_run`: saves the record "running", then
    "finished" with STS avg ``avg``; or as ``<data root>/behaviour.json`` says for this run id:
    "raise" (a failed run) or "exit" (the worker dies, no Python cleanup).

    (The data root, not the store: a Ray trial's store is its own folder, its records go to the driver.)
    """
    behaviour_file = Path(data_root) / "behaviour.json"
    behaviour = (
        json.loads(behaviour_file.read_text()).get(config.run_id(), "ok") if behaviour_file.exists() else "ok"
    )
    record = make_record(config, "running")
    store.save(record)  # "running", as train_run does first
    if behaviour == "raise":
        raise RuntimeError("planned failure")
    if behaviour == "exit":
        os._exit(3)  # no Python cleanup: the trial body cannot record anything
    record.update(status="finished", final={"sts": {"avg": avg}}, best_stsb_dev=40.0)
    store.save(record)
    return record


def timed_train(config: RunConfig, data_root: Path, store: RunStore, **_: Any) -> Any:
    """Finishes after 3 s and notes when it ran (``span-<run id>.json`` in the data root)."""
    start = time.time()
    time.sleep(3.0)
    (Path(data_root) / f"span-{config.run_id()}.json").write_text(json.dumps([start, time.time()]))
    record = make_record(config, final={"sts": {"avg": 42.0}}, best_stsb_dev=40.0)
    store.save(record)
    return record


SMOKE_CLUSTER = ClusterOptions(smoke=True)
"""A local Ray with the smoke resources (one CPU per trial)."""


# -- claims ----------------------------------------------------------------------------------------
def claim_result(claim: Claim, diffs: list[float], *, sequential: bool = False, **fields: Any) -> ClaimResult:
    """``claim``'s result from seed-paired differences ``diffs`` against 0 (``sequential``: seeds added)."""
    from harness.stats.paired import ClaimResult, pair_by_seed, summarise
    from harness.stats.sequential import sequential_summary

    paired = pair_by_seed(dict(enumerate(diffs)), dict.fromkeys(range(len(diffs)), 0.0))
    summary = sequential_summary(paired.diffs) if sequential else summarise(paired.diffs)
    return ClaimResult(claim, paired, summary, **fields)


# -- the command line --------------------------------------------------------------------------------
def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """What a refused command wrote to stderr: one line and no traceback (asserted); that line."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def error_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What a command wrote to stderr, without its warnings: its lines (no traceback, asserted)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [ln for ln in err.splitlines() if not ln.startswith("warning: ")]


def check_argv(root: Path, runs: Path, *extra: str) -> list[str]:
    """``harness check`` of the smoke grid on the smoke profile, with these data and runs folders."""
    return [
        "check",
        str(SMOKE_SPEC),
        "--profile",
        "smoke",
        "--data-dir",
        str(root),
        "--runs-dir",
        str(runs),
        *extra,
    ]


# -- tables and reports -----------------------------------------------------------------------------
GOLDEN = FIXTURES / "golden"
UPDATE_ENV = "HARNESS_UPDATE_GOLDEN"
"""Set HARNESS_UPDATE_GOLDEN=1 to rewrite the golden files from the current renderer."""


def finished_record(config: RunConfig, scores: dict[str, float], status: str = "finished") -> dict[str, Any]:
    """A record of ``config`` with these final STS ``scores`` (kept only when finished) and a
    three-point trajectory (steps 0, 2, 4)."""
    return make_record(
        config,
        status,
        final={"sts": dict(scores)} if status == "finished" else {},
        best_step=4,
        best_stsb_dev=scores.get("STSBenchmark", scores.get("avg")),
        trajectory=[
            {
                "step": s,
                "loss": 1.0 / (s + 1),
                "stsb_dev": 50.0 + s,
                "align": 0.2 + 0.01 * s,
                "uniform": -1.0 - 0.1 * s,
            }
            for s in (0, 2, 4)
        ],
        error=None if status == "finished" else "boom",
    )


def fill_store(store: RunStore, data_root: Path) -> None:
    """Records for the fixture specs under the smoke profile, from tests/fixtures/report_scores.json."""
    from harness.specs.cells import expand
    from harness.specs.parse import load_table_spec

    scores = json.loads((FIXTURES / "report_scores.json").read_text(encoding="utf-8"))
    for name in ("report_rows", "report_sweep"):
        spec = load_table_spec(SPECS / f"{name}.toml")
        plan = expand([spec], "smoke", seeds=1, data_root=data_root)
        for key, entries in scores[name].items():
            base = plan.cell(spec.name, key).configs[0]
            for i, entry in enumerate(entries):
                store.save(finished_record(base.replace(seed=base.seed + i), entry))
    # a failed and an interrupted run must not show up in any table
    rows = load_table_spec(SPECS / "report_rows.toml")
    dcl = expand([rows], "smoke", seeds=1, data_root=data_root).cell("report_rows", "+DCL").configs[0]
    store.save(finished_record(dcl, {"STS12": 99.0, "STSBenchmark": 99.0, "avg": 99.0}, status="failed"))
    store.save(finished_record(dcl.replace(seed=dcl.seed + 1), {"avg": 99.0}, status="running"))


def filled_store(folder: Path) -> tuple[RunStore, Path]:
    """A store at ``folder/runs`` with the fixture records, and its corpus-only data root ``folder/data``."""
    data_root = make_corpus_root(folder / "data")
    store = RunStore(folder / "runs")
    fill_store(store, data_root)
    return store, data_root


def fixture_tables(folder: Path) -> list[Any]:
    """The two fixture specs' tables built under the smoke profile from :func:`filled_store` in ``folder``."""
    from harness.reporting.tables.build import build_tables
    from harness.specs.parse import load_table_spec

    store, data_root = filled_store(folder)
    specs = [load_table_spec(SPECS / "report_rows.toml"), load_table_spec(SPECS / "report_sweep.toml")]
    return build_tables(specs, store, "smoke", data_root=data_root)


def check_golden(name: str, text: str) -> None:
    """``text`` equals the golden file ``tests/fixtures/golden/<name>`` (rewritten with
    HARNESS_UPDATE_GOLDEN=1)."""
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"golden file {path} missing: run with {UPDATE_ENV}=1 to create it")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from its golden file ({UPDATE_ENV}=1 updates)"
    )


# -- Ray nodes (the capacity watch) -----------------------------------------------------------------
class Clock:
    """A clock that moves only when a test sets ``now`` (the capacity watch's and the callback's)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


HEAD = Node("h" * 56, "127.0.0.1", {"CPU": 1.0, "memory": 4e9})
"""A Ray head node as the capacity watch sees it."""
WORKER = Node("w" * 56, "127.0.0.1", {"CPU": 1.0, "memory": 4e9, "worker_node": 1.0})
"""A worker node offering ``worker_node=1`` (the resource the trials are pinned to)."""
NEED = {"CPU": 1.0, "memory": 1e9, "worker_node": 1.0}
"""What a trial pinned to a worker node needs."""


# -- methods -----------------------------------------------------------------------------------------
SENTS = [
    "a man is playing a guitar .",
    "two dogs run on the beach .",
    "the stock market fell sharply today .",
    "a woman is slicing an onion .",
    "children play football in the park after school .",
    "the cat sleeps .",
]
"""The short sentences the method tests tokenise with the tiny encoder (lengths 4 to 10 words)."""


def cos(a: list[float], b: list[float]) -> float:
    """The cosine of two vectors given as lists (0 where one is zero): the slow references' own."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / na / nb if na > 0 and nb > 0 else 0.0


def assert_close_at_scale(
    actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-4, scale: float | None = None
) -> None:
    """Every element of ``actual`` within ``rel * scale`` of ``expected``; ``scale`` defaults to the
    largest magnitude in ``expected``.

    For sums computed in another order (another batch shape, another processor's kernels): their
    rounding is bounded by the magnitude of what was summed, not of the result, so an element that
    cancels to near zero can differ by more than any elementwise relative tolerance allows. A
    gradient's terms pass through the whole backward pass: give the largest gradient of the model as
    ``scale`` (a LayerNorm's input gradient, or a key bias's, whose exact value is 0, is all
    cancellation).
    """
    if scale is None:
        scale = float(expected.detach().abs().max()) if expected.numel() else 0.0
    torch.testing.assert_close(actual, expected, rtol=0.0, atol=rel * scale + 1e-12)


def threshold_between(values: torch.Tensor, quantile: float = 0.5, margin: float = 1e-6) -> float:
    """A threshold halfway across the widest gap between neighbouring ``values`` among the splits that
    leave between ``quantile - 0.25`` and ``quantile + 0.25`` of them below, so that no value lies
    within ``margin`` of it.

    A threshold set at a data value (a median, say) puts that value on the boundary, where the
    rounding of the processor's kernels decides its side; ``tests/system/test_repository_rules.py``
    sends every data-derived threshold of the tests through here.
    """
    v = torch.sort(values.detach().flatten().double()).values
    n = len(v)
    # a split after v[k] leaves (k + 1) / n of the values below
    ks = [k for k in range(n - 1) if abs((k + 1) / n - quantile) <= 0.25]
    if not ks:
        raise ValueError(f"{n} values leave no split near the {quantile} quantile")
    k = max(ks, key=lambda k: float(v[k + 1] - v[k]))
    if float(v[k + 1] - v[k]) / 2 <= margin:
        raise ValueError(f"the widest gap near the {quantile} quantile is {float(v[k + 1] - v[k]):.3g}")
    return float(v[k] + v[k + 1]) / 2


def checked_params(name: str, hidden: int = 64, **overrides: Any) -> Any:
    """Method ``name``'s typed parameters from ``overrides`` (as ``--set`` gives them), validated for
    an encoder of width ``hidden``."""
    from methods import build_params

    params = build_params(name, overrides)
    params.validate(hidden)
    return params


def make_method(name: str, hidden: int, **overrides: Any) -> Any:
    """Method ``name`` with these parameters for width ``hidden``; its heads initialised alike for
    every method (seed 123)."""
    from methods import REGISTRY, build_params

    torch.manual_seed(123)  # the same MLP head initialisation for every method
    return REGISTRY[name](build_params(name, overrides), hidden)


def bound_method(name: str, encoder: SentenceEncoder, **overrides: Any) -> Any:
    """:func:`make_method` for ``encoder``'s width, bound to ``encoder``."""
    method = make_method(name, encoder.hidden_size, **overrides)
    method.bind(encoder)
    return method


def loss_and_grads(
    method: Any,
    encoder: SentenceEncoder,
    batch: dict[str, torch.Tensor],
    seed: int = 7,
    *,
    trainable_only: bool = False,
) -> tuple[Any, list[torch.Tensor]]:
    """``method``'s loss output on ``batch`` (dropout from ``seed``) and each gradient (0 where none)."""
    from harness.encoder.training_encode import TrainingEncode

    encoder.zero_grad(set_to_none=True)
    method.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    out = method.compute_loss(TrainingEncode(encoder), batch, step=0)
    out.loss.backward()
    # trainable_only: none of a frozen sub-module's parameters (DCLR's complementary encoder)
    own = method.trainable_parameters() if trainable_only else list(method.parameters())
    params = list(encoder.parameters()) + own
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    return out, grads


def assert_same(a: tuple[Any, list[torch.Tensor]], b: tuple[Any, list[torch.Tensor]]) -> None:
    """Two :func:`loss_and_grads` results are equal (loss and every gradient, up to float rounding)."""
    (out_a, grads_a), (out_b, grads_b) = a, b
    torch.testing.assert_close(out_a.loss, out_b.loss, rtol=1e-5, atol=1e-6)
    assert len(grads_a) == len(grads_b)
    for ga, gb in zip(grads_a, grads_b):
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-6)


class FakeEncode:
    """An EncodeFn without an encoder: random features for each row (cheap tests of the wiring);
    ``calls`` lists each call's rows and dropout switch."""

    def __init__(self, hidden_size: int, seed: int = 0) -> None:
        self.hidden_size = hidden_size
        self.gen = torch.Generator().manual_seed(seed)
        self.calls: list[tuple[int, bool]] = []

    def __call__(
        self, batch: dict[str, torch.Tensor], *, dropout: bool = True, encoder: Any = None
    ) -> torch.Tensor:
        n = batch["input_ids"].shape[0]
        self.calls.append((n, dropout))
        return torch.randn(n, self.hidden_size, generator=self.gen).requires_grad_(True)


def no_dropout(module: torch.nn.Module) -> None:
    """Every dropout of ``module`` set to 0 (the float64 comparisons with the released code's loops)."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.Dropout):
            sub.p = 0.0


def fake_batch(b: int) -> dict[str, torch.Tensor]:
    """A batch of ``b`` three-token rows (for :class:`FakeEncode`)."""
    return {
        "input_ids": torch.zeros(b, 3, dtype=torch.long),
        "attention_mask": torch.ones(b, 3, dtype=torch.long),
    }


def record_widths(encoder: Any) -> list[int]:
    """``encoder.features`` replaced by a spy that notes each call's padded width; the list it fills."""
    widths: list[int] = []
    original = encoder.features

    def spy(
        batch: dict[str, torch.Tensor], pooler: str = "cls_before_pooler", *, compiled: bool = False
    ) -> torch.Tensor:
        widths.append(int(batch["attention_mask"].shape[1]))
        return original(batch, pooler)

    encoder.features = spy
    return widths


# -- the encoder -------------------------------------------------------------------------------------
EMBED_SENTS = ["a man is playing a guitar .", "", "two dogs run on the beach and bark loudly at the waves ."]
"""Three sentences of very different lengths, one of them empty (the encoder tests embed these)."""
TOKEN_SENTS = [
    "a man is playing a guitar .",
    "the cat sleeps .",
    "two dogs run on the beach and bark loudly at the waves .",
    "children play football in the park .",
]
"""Four sentences whose token-level features the encoder tests compare."""


def reference_states(encoder: SentenceEncoder, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's own forward, eval mode: its last hidden state, padding zeroed."""
    was = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            hidden = encoder.model(**batch).last_hidden_state
    finally:
        encoder.train(was)
    return hidden * batch["attention_mask"].unsqueeze(-1)
