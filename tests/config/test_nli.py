"""harness.config.nli and ``harness data fetch nli``: the recipe gives the shared corpus's sentences,
a built corpus is checked by its set of sentences, and the fetch runs end to end against a loopback
server holding a small stand-in of SNLI's archive."""

from __future__ import annotations

import http.server
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import nli
from harness.config.fetch import check_data, fetch_nli
from harness.evaluation.tasks import sts_files


def _eval_files(senteval: Path) -> list[Path]:
    return sts_files(senteval, all_splits=True)


def test_the_recipe_keeps_every_shared_sentence_and_names_their_set(data_root: Path) -> None:
    shared = (data_root / nli.TARGET).read_text(encoding="utf-8").splitlines()
    held_out = nli.evaluation_sentences(_eval_files(data_root / "senteval"))
    assert len(held_out) > 40_000  # STS12-16, STS-B and SICK
    built = nli.build(shared, held_out)
    assert len(built) == len(shared) == nli.SENTENCES  # the filter removes none of them
    assert nli.set_sha256(built) == nli.SET_SHA256 == nli.set_sha256(reversed(shared))
    # an evaluation sentence, however it is cased and punctuated, is removed
    sick = (data_root / "senteval" / "SICK" / "SICK_train.txt").read_text(encoding="utf-8").splitlines()[1]
    sentence = sick.split("\t")[1]
    assert nli.build([sentence.upper() + " !", "Nothing like it ."], held_out) == ["Nothing like it ."]


def test_a_corpus_is_checked_by_its_sentences_not_their_order(data_root: Path, tmp_path: Path) -> None:
    shared = (data_root / nli.TARGET).read_text(encoding="utf-8").splitlines()
    reordered = tmp_path / "reordered.txt"
    reordered.write_text("".join(f"{s}\n" for s in nli.ordered(shared)), encoding="utf-8")
    assert nli.check_corpus(reordered)[0] and nli.check_corpus(data_root / nli.TARGET)[0]
    reordered.write_text("".join(f"{s}\n" for s in shared[:-1]), encoding="utf-8")
    ok, detail = nli.check_corpus(reordered)
    assert not ok and "not the recipe's 25,374 sentences" in detail
    assert [r.ok for r in check_data(data_root, ["nli"])] == [True]


PAIRS = {
    "dev": [
        ("A violinist tunes a cello on a ferry .", "Someone prepares an instrument."),
        ("A violinist tunes a cello on a ferry .", "The ferry is empty."),
    ],
    "test": [
        ("Two herons stand in a flooded car park .", "Birds wait in the rain."),
        ("Two herons stand in a flooded car park .", ""),
    ],
}


def _stand_in(held: str) -> bytes:
    """A zip laid out as SNLI 1.0's, with a few pairs; one hypothesis is an evaluation sentence."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for split, pairs in PAIRS.items():
            rows = [{"sentence1": a, "sentence2": b, "gold_label": "neutral"} for a, b in pairs]
            rows.append({"sentence1": "Two herons stand in a flooded car park .", "sentence2": held})
            zipped.writestr(f"snli_1.0/snli_1.0_{split}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return buffer.getvalue()


@pytest.fixture
def server(data_root: Path) -> Iterator[tuple[str, bytes]]:
    held = (data_root / "senteval" / "STS" / "STSBenchmark" / "sts-dev.csv").read_text(encoding="utf-8")
    archive = _stand_in(held.splitlines()[0].split("\t")[5])
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            if self.path != "/snli/snli_1.0.zip":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(archive)))
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/snli/snli_1.0.zip", archive
    finally:
        httpd.shutdown()
        thread.join()


def _root(tmp_path: Path, data_root: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "senteval").symlink_to(data_root / "senteval")
    return root


def test_fetch_nli_builds_the_corpus_from_a_served_archive(
    server: tuple[str, bytes], tmp_path: Path, data_root: Path
) -> None:
    import hashlib

    url, archive = server
    root = _root(tmp_path, data_root)
    expected = [
        "A violinist tunes a cello on a ferry .",
        "Someone prepares an instrument.",
        "The ferry is empty.",
    ]
    expected += [
        "Two herons stand in a flooded car park .",
        "Birds wait in the rain.",
    ]  # the STS-B sentence is not there
    digest, recipe = hashlib.sha256(archive).hexdigest(), nli.set_sha256(expected)
    done = fetch_nli(
        root,
        _eval_files,
        url=url,
        cache_dir=tmp_path / "cache",
        archive_sha256=digest,
        set_sha256=recipe,
        log=lambda _line: None,
    )
    assert done.ok, done.detail
    assert (root / nli.TARGET).read_text(encoding="utf-8") == "".join(f"{s}\n" for s in nli.ordered(expected))
    again = fetch_nli(
        root, _eval_files, url=url, cache_dir=tmp_path / "cache", archive_sha256=digest, set_sha256=recipe
    )
    assert again.ok and again.detail.startswith("already there")
    # a file that is not the archive it claims to be is refused, and nothing is written
    (root / nli.TARGET).unlink()
    wrong = fetch_nli(root, _eval_files, url=url, cache_dir=tmp_path / "other", archive_sha256="0" * 64)
    assert not wrong.ok and "sha256" in wrong.detail and not (root / nli.TARGET).exists()
    # the recipe's result is checked too
    other = fetch_nli(root, _eval_files, url=url, cache_dir=tmp_path / "cache", archive_sha256=digest)
    assert not other.ok and "not the expected set" in other.detail and not (root / nli.TARGET).exists()
    # without the evaluation sets there is nothing to filter against
    bare = tmp_path / "bare"
    bare.mkdir()
    refused = fetch_nli(
        bare, _eval_files, url=url, cache_dir=tmp_path / "cache", archive_sha256=digest, set_sha256=recipe
    )
    assert "senteval" in refused.detail


def test_the_command_refuses_a_mirror_that_serves_another_file(
    server: tuple[str, bytes], tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _archive = server
    root = _root(tmp_path, data_root)
    args = [
        "data",
        "fetch",
        "nli",
        "--data-dir",
        str(root),
        "--snli-url",
        url,
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "nli: SNLI's archive not downloaded" in out and "is not the expected" in out
    assert not (root / nli.TARGET).exists()
