"""``harness eval`` on a small copy of the STS data and the tiny random encoder: the output contract,
bf16, post-processing, and one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.evaluation.sts import STS_TASKS
from tests.helpers import STS15, TRANSFER_SCORES, replace_line


def test_eval_refuses_a_nan_gold_score_with_one_line(
    copied_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replace_line(copied_root / "senteval" / STS15 / "STS.gs.answers-forums.txt", 2, "nan")
    output = tmp_path / "out.json"
    args = [
        "eval",
        "--model",
        "random:tiny",
        "--tasks",
        "sts",
        "--data-dir",
        str(copied_root),
        "--output",
        str(output),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "STS.gs.answers-forums.txt:2: gold score 'nan' is not a finite number" in err[0]
    assert not output.exists()


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_writes_the_contract(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "new" / "folder" / "result.json"
    code, out, err = _run(
        [
            "--model",
            "random:tiny",
            "--tasks",
            "sts",
            "--data-dir",
            str(mini_data_root),
            "--output",
            str(output),
        ],
        capsys,
    )
    assert code == 0, err
    record = json.loads(output.read_text(encoding="utf-8"))
    assert "transfer" not in record
    assert list(record["sts"]) == [*STS_TASKS, "avg"]
    assert all(isinstance(v, float) for v in record["sts"].values())
    assert record["meta"]["pooler"] == "cls_before_pooler"
    assert record["meta"]["model"] == "random:tiny"
    assert "MSRpar" in record["details"]["sts"]["STS12"]
    assert "STS12" in out and "SICKRelatedness" in out and "avg" in out
    assert f"{record['sts']['STS13']:.2f}" in out
    assert record["meta"]["precision"] == "fp32"


def test_eval_bf16_is_recorded_and_close_to_fp32(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scores = {}
    for precision in ("fp32", "bf16"):
        output = tmp_path / f"{precision}.json"
        common = ["--model", "random:tiny", "--tasks", "sts", "--data-dir", str(mini_data_root)]
        code, _, err = _run([*common, "--precision", precision, "--output", str(output)], capsys)
        assert code == 0, err
        record = json.loads(output.read_text(encoding="utf-8"))
        assert record["meta"]["precision"] == precision
        scores[precision] = record["sts"]
    assert scores["fp32"] != scores["bf16"]  # bf16 really ran
    code, _out, err = _run(["--model", "random:tiny", "--precision", "fp64", "--output", "x.json"], capsys)
    assert code == 2 and "fp64" in err  # argparse's choices: exit 2 naming the value


def test_eval_all_groups_and_exact_batches(
    mini_data_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fake_transfer: list,
) -> None:
    output = tmp_path / "all.json"
    argv = [
        "--model",
        "random:tiny",
        "--pooler",
        "avg",
        "--data-dir",
        str(mini_data_root),
        "--output",
        str(output),
    ]
    code, out, err = _run([*argv, "--exact-batches", "--mode", "test"], capsys)
    assert code == 0, err
    record = json.loads(output.read_text(encoding="utf-8"))
    assert list(record)[:2] == ["sts", "transfer"]
    assert list(record["transfer"]) == [*TRANSFER_SCORES, "avg"]
    assert fake_transfer[0]["mode"] == "test"
    assert "MRPC" in out

    code, _, err = _run([*argv, "--tasks", "sts", "--output", str(tmp_path / "fast.json")], capsys)
    assert code == 0, err
    fast = json.loads((tmp_path / "fast.json").read_text(encoding="utf-8"))
    for task in STS_TASKS:
        assert fast["sts"][task] == pytest.approx(record["sts"][task], abs=0.02)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--pooler", "max"], "unknown pooler 'max'"),
        (["--tasks", "glue"], "unknown task group 'glue'"),
        (["--mode", "quick"], "unknown mode 'quick'"),
        (["--model", "./no/such/model"], "model path does not exist"),
    ],
)
def test_eval_user_errors(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    base = ["--model", "random:tiny", "--data-dir", str(mini_data_root), "--output", str(tmp_path / "r.json")]
    code, _, err = _run([*base, *argv], capsys)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_eval_missing_data(mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = str(tmp_path / "r.json")
    code, _, err = _run(["--data-dir", str(tmp_path / "nowhere"), "--output", output], capsys)
    assert code == 2
    assert "data directory not found" in err

    broken = tmp_path / "broken"
    shutil.copytree(mini_data_root, broken)
    (broken / "senteval" / "STS" / "STS14-en-test" / "STS.gs.images.txt").unlink()
    code, _, err = _run(["--data-dir", str(broken), "--tasks", "sts", "--output", output], capsys)
    assert code == 2
    assert "STS.gs.images.txt" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", ["zca", "flow"])
def test_eval_post_whitening(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    corpus = tmp_path / "whiten.txt"
    words = [
        "a",
        "man",
        "woman",
        "dog",
        "cat",
        "plays",
        "runs",
        "eats",
        "the",
        "on",
        "in",
        "guitar",
        "food",
        "park",
        "beach",
    ]
    corpus.write_text(
        "\n".join(" ".join(words[(i * k) % len(words)] for k in range(1, 7)) for i in range(300)) + "\n"
    )
    base = ["--model", "random:tiny", "--tasks", "sts", "--data-dir", str(mini_data_root)]
    plain, whitened = tmp_path / "plain.json", tmp_path / f"{kind}.json"
    assert _run([*base, "--output", str(plain)], capsys)[0] == 0
    code, _, err = _run(
        [*base, "--output", str(whitened), "--post-whiten", kind, "--whiten-corpus", str(corpus)], capsys
    )
    assert code == 0, err
    a = json.loads(plain.read_text())
    b = json.loads(whitened.read_text())
    assert b["meta"]["post_whiten"] == kind
    assert b["meta"]["whiten_sentences"] == 10000
    assert a["sts"]["avg"] != b["sts"]["avg"]  # the post-processing changed the embeddings' geometry


def test_eval_post_whitening_missing_corpus(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        [
            *["--model", "random:tiny", "--tasks", "sts", "--data-dir", str(mini_data_root)],
            *["--output", str(tmp_path / "x.json"), "--post-whiten", "pca", "--whiten-corpus", "nope.txt"],
        ],
        capsys,
    )
    assert code == 2
    assert "corpus file not found" in err and "Traceback" not in err


def test_eval_writes_non_finite_scores_as_null_and_says_so(
    mini_data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A degenerate encoder (constant embeddings) gives NaN correlations: strict JSON, one line, exit 1."""
    import torch

    from harness.jobs import evaluate as eval_job

    real = eval_job.encoder_functions

    def constant(*args: object, **kwargs: object) -> object:
        _, lengths = real(*args, **kwargs)  # type: ignore[arg-type]
        return (lambda sentences: torch.ones(len(sentences), 8)), lengths

    monkeypatch.setattr(eval_job, "encoder_functions", constant)
    output = tmp_path / "result.json"
    argv = ["--model", "random:tiny", "--tasks", "sts", "--data-dir", str(mini_data_root)]
    code, _, err = _run([*argv, "--output", str(output)], capsys)
    assert code == 1
    text = output.read_text(encoding="utf-8")
    assert "NaN" not in text and json.loads(text)["sts"]["STS12"] is None
    assert err.strip().splitlines()[-1].startswith("harness eval: error: scores that are not finite numbers")
