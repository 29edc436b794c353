"""``harness data``: fetch the papers' data into a data root (``fetch``), or check what is there
(``check``). How and from where: :mod:`harness.config.fetch`."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = (
    "fetch the papers' data (SentEval, the 1M Wikipedia sentences) and build the CPU profiles' nli "
    "corpus into a data root, or check it (every profile's corpus too)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=("fetch", "check"), help="fetch (download what is missing) or check"
    )
    parser.add_argument(
        "datasets",
        nargs="*",
        default=["all"],
        metavar="DATASET",
        help="senteval, wiki1m, nli or all (default: all)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="the data root to fill (default: $HARNESS_DATA, else ./data)",
    )
    parser.add_argument(
        "--endpoint", default=None, help="a mirror of the Hugging Face hub (default: $HF_ENDPOINT or the hub)"
    )
    parser.add_argument("--cache-dir", default=None, help="the download cache (default: the hub library's)")
    parser.add_argument(
        "--snli-url",
        default=None,
        help="a mirror of SNLI 1.0's archive for the nli corpus (the same file: it is checked)",
    )


def run(args: argparse.Namespace) -> int:
    import os

    from harness.atomic import check_output_dir
    from harness.config.fetch import check_data, fetch, summary
    from harness.evaluation.tasks import sts_files

    root = Path(args.data_dir or os.environ.get("HARNESS_DATA") or "data").expanduser()
    if args.action == "check":
        results = check_data(root, args.datasets)
    else:
        check_output_dir(root, "data root")
        cache = Path(args.cache_dir).expanduser() if args.cache_dir else None
        results = fetch(
            root,
            args.datasets,
            endpoint=args.endpoint,
            cache_dir=cache,
            snli_url=args.snli_url,
            eval_files=lambda senteval: sts_files(senteval, all_splits=True),
        )
    for result in results:
        for problem in result.problems[:10]:
            print(f"  {result.name}: {problem}")
        if len(result.problems) > 10:
            print(f"  {result.name}: and {len(result.problems) - 10} more")
    print(summary(root, results))
    return 0 if all(r.ok for r in results) else 1
