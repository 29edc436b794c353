"""Arguments shared by several subcommands."""

from __future__ import annotations

import argparse


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root laid out like shared/data (senteval/, corpus/); default: $HARNESS_DATA, "
        "then ./data, then ../shared/data",
    )
