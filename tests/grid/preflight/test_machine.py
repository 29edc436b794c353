"""The pre-flight's checks of one machine: each adds an ``ok`` line or a problem to the report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from harness.config.models import packaged_model_dir
from harness.evaluation.tasks import sts_files, stsb_dev_file, transfer_files
from harness.grid.options import ClusterOptions
from harness.grid.preflight import machine
from harness.grid.preflight.machine import Report, check_disk, check_gpus, check_model, needed_data_files


def test_the_report_keeps_its_lines_in_order_and_the_problems_apart() -> None:
    report = Report()
    report.ok("model random:tiny")
    report.problem("corpus file not found: x")
    report.note("no CUDA GPU here")
    assert report.lines == [
        "  ok       model random:tiny",
        "  PROBLEM  corpus file not found: x",
        "  note     no CUDA GPU here",
    ]
    assert report.problems == ["corpus file not found: x"]


def test_the_files_a_run_reads_follow_its_final_tasks(tmp_path: Path) -> None:
    senteval = tmp_path / "senteval"
    dev = stsb_dev_file(senteval)
    assert needed_data_files(senteval, {"none"}) == [dev]  # the dev evaluation's file only
    sts = needed_data_files(senteval, {"sts"})
    assert sts[0] == dev and set(sts) == {dev, *sts_files(senteval)} and len(sts) == len(set(sts))
    transfer = needed_data_files(senteval, {"transfer"})
    assert transfer == [dev, *transfer_files(senteval)]
    assert needed_data_files(senteval, {"all"}) == needed_data_files(senteval, {"sts", "transfer"})
    assert set(needed_data_files(senteval, {"all"})) == set(sts) | set(transfer)


def test_models_are_found_without_the_network(tmp_path: Path) -> None:
    report = Report()
    check_model("random:tiny", report)
    check_model("minilm", report)
    folder = tmp_path / "encoder"
    folder.mkdir()
    check_model(str(folder), report)  # no config.json
    (folder / "config.json").write_text(json.dumps({"hidden_size": 96, "vocab_size": 30522}))
    check_model(str(folder), report)  # no tokenizer files
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(packaged_model_dir() / name, folder / name)
    check_model(str(folder), report)
    assert report.lines[0] == "  ok       model random:tiny: random weights (tests only), hidden size 64"
    assert (
        report.lines[1].startswith("  ok       model minilm: packaged (")
        and "hidden size 384" in report.lines[1]
    )
    assert report.problems[0] == f"model {folder}: local folder without config.json"
    assert (
        report.problems[1].startswith(f"model {folder}: no tokenizer files (") and len(report.problems) == 2
    )
    assert report.lines[-1] == f"  ok       model {folder}: local folder {folder}, hidden size 96"


def test_the_disk_under_the_runs_folder_needs_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = Report()
    monkeypatch.setattr(machine, "CHECKPOINT_ROOM_BYTES", 0)
    check_disk(tmp_path / "not" / "made" / "yet", report)  # the nearest existing folder is measured
    assert report.problems == [] and report.lines[0].startswith(f"  ok       free disk under {tmp_path}/not")
    monkeypatch.setattr(machine, "CHECKPOINT_ROOM_BYTES", 1 << 62)
    check_disk(tmp_path, report)
    (problem,) = report.problems
    assert problem.startswith(f"free disk under {tmp_path}: ") and "checkpoints need room" in problem


def test_gpus_asked_for_on_a_machine_without_one_are_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    report = Report()
    check_gpus(ClusterOptions(), report)
    check_gpus(ClusterOptions(gpus_per_trial=0.0), report)
    assert report.lines == ["  note     no CUDA GPU here: trials run on the CPU"] * 2 and not report.problems
    check_gpus(ClusterOptions(gpus_per_trial=0.5), report)
    assert report.problems == ["--gpus-per-trial 0.5 is more than this machine's 0 GPU(s)"]


def test_more_gpus_than_this_machine_has_are_a_problem_unless_the_trials_run_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local grid's trials get this machine's GPUs: ``--gpus-per-trial 8`` on one GPU could never
    start. With ``--address`` the trials run on the cluster (this may be a CPU login node): no local
    check; the cluster's nodes are judged (:func:`~harness.grid.preflight.cluster.check_ray`)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA H200")
    report = Report()
    check_gpus(ClusterOptions(gpus_per_trial=1.0), report)
    assert report.lines == ["  ok       GPUs here: 1 (NVIDIA H200)"] and not report.problems
    check_gpus(ClusterOptions(gpus_per_trial=8.0), report)
    assert report.problems == ["--gpus-per-trial 8 is more than this machine's 1 GPU(s)"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    elsewhere = Report()
    check_gpus(ClusterOptions(address="10.0.0.1:6379", gpus_per_trial=8.0), elsewhere)
    assert elsewhere.lines == [] and not elsewhere.problems


def test_a_model_is_checked_as_every_command_checks_it(tmp_path: Path) -> None:
    report = Report()
    folder = tmp_path / "short"
    folder.mkdir()
    config = {"model_type": "bert", "hidden_size": 32, "vocab_size": 30522, "max_position_embeddings": 16}
    (folder / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(packaged_model_dir() / name, folder / name)
    check_model(str(folder), report, 16)  # within the positions, the tokenizer's 512 not
    check_model(str(tmp_path / "no" / "model"), report)
    assert len(report.problems) == 2 and report.problems[0].startswith(
        f"model {folder}: its tokenizer takes inputs of up to 512 tokens"
    )
    assert report.problems[1] == f"model path does not exist: {tmp_path / 'no' / 'model'}"


def test_the_models_a_method_loads_besides_are_checked_with_the_runs_own(config_root: Path) -> None:
    from tests.helpers import smoke_config

    plain = smoke_config(config_root, "dclr")  # complementary = initial: a copy, nothing loaded
    other = smoke_config(config_root, "dclr", params={"complementary": "/no/such/model"}, max_length=16)
    assert machine.longest_lengths([plain]) == {"random:tiny": 32}
    assert machine.longest_lengths([plain, other]) == {"random:tiny": 32, "/no/such/model": 16}


def test_what_the_runs_ask_of_their_corpus_is_a_problem_each(config_root: Path) -> None:
    from tests.helpers import smoke_config

    corpus = str(config_root / "corpus" / "nli-sentences.txt")
    fits = smoke_config(config_root, post_whiten="pca", post_whiten_sentences=65)
    many = smoke_config(config_root, post_whiten="pca", post_whiten_sentences=101)
    narrow = smoke_config(config_root, post_whiten="zca", post_whiten_sentences=64, seed=1)
    assert machine.corpus_fit_problems([fits], {corpus: 100}) == []
    problems = machine.corpus_fit_problems([fits, many, many.replace(seed=2), narrow], {corpus: 100})
    assert [p.split(":")[0] for p in problems] == [
        f"post_whiten_sentences 101 is more than the 100 sentences of corpus {corpus}",
        "post_whiten_sentences 64 is not more than the encoder's width 64",
    ]
    assert machine.corpus_fit_problems([many], {}) == []  # an unread corpus: its own problem


def test_the_trials_device_and_what_it_cannot_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    import harness.config.hardware as hw

    def cluster(**changes: object) -> SimpleNamespace:
        return SimpleNamespace(**{"address": None, "gpus_per_trial": None, "smoke": False, **changes})

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert machine.trial_device(cluster()) == "cuda"
    assert (
        machine.trial_device(cluster(gpus_per_trial=0.0))
        == machine.trial_device(cluster(smoke=True))
        == "cpu"
    )
    assert machine.trial_device(cluster(address="10.0.0.1:6379")) is None  # the nodes decide
    assert machine.trial_device(cluster(gpus_per_trial=1)) == "cuda"
    monkeypatch.setattr(hw, "native_bf16", lambda device=None: False)
    monkeypatch.setattr(hw, "compile_problem", lambda device: "no compiler")
    runs = [SimpleNamespace(precision="fp32", eval_precision="bf16")]
    (bf16,) = machine.trial_arithmetic_problems(runs, cluster(gpus_per_trial=1), False)
    assert bf16.startswith("trials on cuda: eval_precision bf16 on cuda: this CUDA GPU has no bf16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert machine.trial_device(cluster()) == "cpu"
    # GPUs asked of a machine without one: the GPU count's line says so, no GPU's arithmetic is judged
    assert machine.trial_device(cluster(gpus_per_trial=1)) is None
    assert machine.trial_arithmetic_problems(runs, cluster(gpus_per_trial=1), False) == []
    assert machine.trial_arithmetic_problems(runs, cluster(), None) == []  # CPU trials compute bf16
    assert machine.trial_arithmetic_problems(runs, cluster(), True) == [
        "trials on cpu: --compile on: no compiler; use --compile off"
    ]
    assert machine.trial_arithmetic_problems(runs, cluster(address="a:1"), True) == []
