"""``harness data fetch``: the papers' data into a data root, downloaded, verified and laid out.

Downloads go through ``huggingface_hub`` (:func:`huggingface_hub.hf_hub_download`): an interrupted
download resumes where it stopped, a file already in the cache is not downloaded again, and offline
(``HF_HUB_OFFLINE=1``, or a hub that does not answer) only the cache is read. The files come from
:data:`harness.config.datasets.HUB_REPO`, where SimCSE's own scripts fetch them (a mirror:
``endpoint``). Then each one is checked (:mod:`harness.config.datasets`) and put in the data root's
layout: ``senteval/`` unpacked from its archive, ``corpus/wiki1m_for_simcse.txt`` copied. ``nli``
is built instead (:mod:`harness.config.nli`): SNLI's archive downloaded from its authors' site (or a
mirror, ``snli_url``) into the cache, checked, and its dev and test sentences filtered against the
data root's ``senteval/`` (fetched first). Nothing in the data root is replaced by a file that fails
its check.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.atomic import atomic_folder, atomic_write, write_text
from harness.config.datasets import DATASETS, HUB_REPO, SENTEVAL_SHA256, Dataset, check_senteval, file_sha256
from harness.config.models import hub_offline
from harness.config.nli import (
    SET_SHA256,
    SNLI_SHA256,
    SNLI_URL,
    SPLITS,
    TARGET,
    build,
    check_corpus,
    evaluation_sentences,
    pairs_sentences,
)
from harness.config.nli import set_sha256 as sentences_sha256
from harness.errors import ConfigError, DataError, did_you_mean
from harness.removal import Shape

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@dataclass
class Fetched:
    """What happened to one dataset: ``ok`` with a detail, or a problem."""

    name: str
    ok: bool
    detail: str
    problems: list[str] = field(default_factory=list)


def check_names(names: Sequence[str]) -> list[str]:
    """The datasets asked for (``all`` = every one); an unknown name is a ConfigError with a hint."""
    if not names or "all" in names:
        return list(DATASETS)
    for name in names:
        if name not in DATASETS:
            raise ConfigError(
                f"unknown dataset {name!r}{did_you_mean(name, DATASETS)}; choose {', '.join(DATASETS)} or all"
            )
    return list(dict.fromkeys(names))


def check_data(data_root: Path, names: Sequence[str]) -> list[Fetched]:
    """Verify what the data root holds, without the network; with ``all``, every profile's corpus
    too (:func:`profile_corpora`), fetchable or not."""
    results = [_check(data_root, DATASETS[name]) for name in check_names(names)]
    if not names or "all" in names:
        results += profile_corpora(data_root)
    return results


def profile_corpora(data_root: Path) -> list[Fetched]:
    """Each profile's training corpus that no dataset here fetches: there and not empty, or missing
    (named with the profiles that train on it)."""
    from harness.config.profiles import PROFILES

    fetched = {d.target for d in DATASETS.values()}
    users: dict[str, list[str]] = {}
    for profile, settings in PROFILES.items():
        corpus = settings.get("corpus")
        if isinstance(corpus, str) and corpus not in fetched:
            users.setdefault(corpus, []).append(profile)
    out = []
    for corpus, profiles in users.items():
        path = data_root / corpus
        name = Path(corpus).stem
        if path.is_file() and path.stat().st_size > 0:
            out.append(Fetched(name, True, f"present, sha256 {file_sha256(path)[:12]}"))
            continue
        detail = (
            f"{path} not found: the corpus of the {', '.join(profiles)} profile(s), which `harness data "
            "fetch` cannot download (the data README says how it was built); any one-sentence-per-line "
            "file there, or --corpus FILE, will do"
        )
        out.append(Fetched(name, False, detail))
    return out


def fetch(
    data_root: Path,
    names: Sequence[str] = ("all",),
    *,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
    offline: bool | None = None,
    snli_url: str | None = None,
    eval_files: Callable[[Path], Sequence[Path]] | None = None,
    log: Callable[[str], None] = print,
) -> list[Fetched]:
    """Download (or take from the cache), check and lay out each dataset; return what happened.
    ``eval_files(senteval)``: the files the nli corpus is filtered against (the STS tasks' files)."""
    chosen = check_names(names)
    if offline is None:  # a mirror given by hand is asked; the hub only when it answers
        offline = _offline_by_setting() or (endpoint is None and hub_offline())
    results = []
    for name in chosen:
        dataset = DATASETS[name]
        present = _check(data_root, dataset)
        if present.ok:
            log(f"{name}: already in {data_root / dataset.target} ({present.detail})")
            results.append(present)
            continue
        if name == "nli":  # built, not copied
            if eval_files is None:
                raise ConfigError("the nli corpus is built against the STS tasks' files: pass eval_files")
            built = fetch_nli(data_root, eval_files, url=snli_url or SNLI_URL, cache_dir=cache_dir, log=log)
            results.append(built)
            continue
        source = endpoint or "the Hugging Face hub"
        log(f"{name}: fetching {dataset.filename} from {source} ({dataset.description})")
        try:
            downloaded, expected = _download(dataset, endpoint, cache_dir, offline)
        except Exception as exc:  # the hub library's errors: no network, a missing file, a refusal
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            where = "the hub is offline and it is not in the cache" if offline else first
            results.append(Fetched(name, False, f"not downloaded: {where}"))
            continue
        results.append(_lay_out(data_root, dataset, downloaded, expected))
    return results


def summary(data_root: Path, results: Sequence[Fetched]) -> str:
    """One line: everything in place and checked, or what is missing or wrong."""
    bad = [r for r in results if not r.ok]
    if not bad:
        return f"data root {data_root}: " + "; ".join(f"{r.name} {r.detail}" for r in results)
    return f"data root {data_root}: missing or wrong: " + "; ".join(f"{r.name}: {r.detail}" for r in bad)


def fetch_nli(
    data_root: Path,
    eval_files: Callable[[Path], Sequence[Path]],
    *,
    url: str = SNLI_URL,
    archive_sha256: str = SNLI_SHA256,
    set_sha256: str = SET_SHA256,
    cache_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> Fetched:
    """Build ``corpus/nli-sentences.txt`` (:mod:`harness.config.nli`): SNLI's archive from ``url``
    (or the cache), checked against ``archive_sha256``; its dev and test sentences less every
    sentence of ``eval_files(<data root>/senteval)``; the result checked against ``set_sha256``
    before it is written.
    A corpus already there is left alone, whatever it holds."""
    target = data_root / TARGET
    if target.exists():
        ok, detail = check_corpus(target, set_sha256)
        return Fetched("nli", ok, f"already there: {detail}")
    senteval = _check(data_root, DATASETS["senteval"])
    if not senteval.ok:
        return Fetched("nli", False, "needs senteval/ in the data root first (harness data fetch senteval)")
    log(f"nli: building {TARGET} from SNLI's dev and test splits ({url})")
    try:
        archive = _download_url(url, archive_sha256, cache_dir)
    except (OSError, ValueError) as exc:
        return Fetched("nli", False, f"SNLI's archive not downloaded: {exc}")
    try:
        with zipfile.ZipFile(archive) as zipped:
            lines = [line for member in SPLITS for line in zipped.read(member).decode("utf-8").splitlines()]
        sentences = build(pairs_sentences(lines), evaluation_sentences(eval_files(data_root / "senteval")))
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        return Fetched("nli", False, f"SNLI's archive could not be read: {exc}")
    if sentences_sha256(sentences) != set_sha256:
        return Fetched(
            "nli",
            False,
            f"the recipe gave {len(sentences):,} sentences that are not the expected set: not written",
        )
    write_text(target, "".join(f"{s}\n" for s in sentences))
    return Fetched("nli", True, f"built, the recipe's {len(sentences):,} sentences (verified)")


def _download_url(url: str, expected: str, cache_dir: Path | None) -> Path:
    """``url`` into the cache (kept there once it checks; a cached copy that checks is not
    downloaded again); ValueError when the file is not ``expected``."""
    import urllib.request

    cache = cache_dir or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / url.rstrip("/").rsplit("/", 1)[-1]
    if path.is_file() and file_sha256(path) == expected:
        return path
    digest = hashlib.sha256()
    with atomic_write(path, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
        if digest.hexdigest() != expected:  # raised inside: the file is not kept
            raise ValueError(f"{url}: sha256 {digest.hexdigest()[:12]} is not the expected {expected[:12]}")
    return path


def _offline_by_setting() -> bool:
    return any(os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on") for var in OFFLINE_VARS)


def _check(data_root: Path, dataset: Dataset) -> Fetched:
    target = data_root / dataset.target
    if dataset.name == "nli":
        ok, detail = check_corpus(target)
        return Fetched(dataset.name, ok, detail)
    if dataset.archive:
        checked = check_senteval(target)
        problems = [f"missing {name}" for name in checked.missing]
        problems += [f"differs from the validated copy: {name}" for name in checked.different]
        if checked.ok:
            return Fetched(dataset.name, True, f"{len(checked.verified)} files verified")
        total = len(SENTEVAL_SHA256)
        detail = f"{len(checked.missing)} of {total} files missing, {len(checked.different)} different"
        return Fetched(dataset.name, False, detail, problems)
    if not target.is_file():
        return Fetched(dataset.name, False, f"{target} not found")
    return Fetched(dataset.name, True, f"present, sha256 {file_sha256(target)[:12]}")


def _download(
    dataset: Dataset, endpoint: str | None, cache_dir: Path | None, offline: bool
) -> tuple[Path, str | None]:
    """The file in the hub library's cache, and the SHA-256 the hub gives for it (None: not given)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    expected = None
    if not offline:
        url = hf_hub_url(HUB_REPO, dataset.filename, repo_type="dataset", endpoint=endpoint)
        etag = get_hf_file_metadata(url, endpoint=endpoint).etag or ""
        expected = etag if _SHA256.match(etag) else None
    path = hf_hub_download(
        HUB_REPO,
        dataset.filename,
        repo_type="dataset",
        endpoint=endpoint,
        cache_dir=str(cache_dir) if cache_dir else None,
        local_files_only=offline,
    )
    return Path(path), expected


def _lay_out(data_root: Path, dataset: Dataset, downloaded: Path, expected: str | None) -> Fetched:
    digest = file_sha256(downloaded)
    if expected is not None and digest != expected:
        return Fetched(
            dataset.name, False, f"sha256 {digest[:12]} is not the hub's {expected[:12]}: not used"
        )
    target = data_root / dataset.target
    if not dataset.archive:
        with atomic_write(target, "wb") as out, downloaded.open("rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        how = "verified against the hub's" if expected else "the hub gave none to verify against"
        return Fetched(dataset.name, True, f"sha256 {digest[:12]} ({how})")
    with tempfile.TemporaryDirectory(dir=data_root, prefix=".fetch-") as tmp:
        _unpack(downloaded, Path(tmp))
        top = _task_root(Path(tmp))
        checked = check_senteval(top)
        if checked.missing:
            return Fetched(
                dataset.name,
                False,
                f"the archive lacks {len(checked.missing)} file(s) the evaluation reads: not used",
                [f"missing {name}" for name in checked.missing],
            )
        with atomic_folder(target, replace=_unpacked_shape(target, top)) as building:
            for child in top.iterdir():
                shutil.move(str(child), building / child.name)
    problems = [f"differs from the validated copy: {name}" for name in checked.different]
    detail = f"{len(checked.verified)} files verified"
    if problems:
        detail += f", {len(problems)} differ from the validated copy"
    return Fetched(dataset.name, not problems, detail, problems)


def _unpacked_shape(target: Path, top: Path) -> Shape:
    """What a fetch replaces: a folder holding only what the archive holds at its top (and SentEval's
    task folders); one holding anything else (a task the user added) stays, and the fetch says so."""
    tasks = {name.split("/", 1)[0] for name in SENTEVAL_SHA256}
    names = tuple(re.escape(n) for n in sorted(tasks | {child.name for child in top.iterdir()}))
    return Shape(f"{target.name} folder", re.escape(target.name), folder=True, holds=names)


def _unpack(archive: Path, into: Path) -> None:
    """Extract a tar archive, refusing members that would land outside ``into``."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if not (into / member.name).resolve().is_relative_to(into.resolve()):
                raise DataError(f"{archive.name}: member {member.name} lies outside the archive's folder")
        tar.extractall(into, filter="data")


def _task_root(unpacked: Path) -> Path:
    """The folder of the archive that holds the task folders (``STS/``, ``SICK/``, ...)."""
    for folder in [unpacked, *sorted(p for p in unpacked.rglob("*") if p.is_dir())]:
        if (folder / "STS").is_dir() and (folder / "SICK").is_dir():
            return folder
    raise DataError("the archive holds no SentEval task folders (STS/, SICK/)")
