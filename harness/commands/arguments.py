"""Arguments shared by several subcommands.

The run-setting flags (``--max-steps``, ``--lr``, ...) are generated from the fields of
:class:`harness.config.settings.RunSettings`: the name gives the flag, the type its metavar (the value
stays text: the settings read and bound it, one rule per setting), a ``Literal`` its choices (shown
in the usage; the settings check them, so a bad one is one error line), and the class docstring's
``Attributes:`` entry its help. A new setting is a new flag of
``harness train`` and of the grid-like commands with no change here.
"""

from __future__ import annotations

import argparse
import re
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from harness.coerce import read_number
from harness.config.profiles import PROFILES
from harness.config.settings import AUTO_SETTINGS, OVERRIDABLE, RunSettings
from harness.errors import ConfigError, did_you_mean
from harness.grid.capacity import DEFAULT_LOST_NODE_WAIT_S
from harness.grid.options import ClusterOptions, GridOptions, parse_trial_resources

if typing.TYPE_CHECKING:
    from harness.stats.correction import Analysis


def closed_choice(what: str, choices: Sequence[str]) -> Any:
    """An argparse ``type`` for a flag with a closed set of values: a value outside ``choices`` is
    ``unknown <what> 'x' (did you mean 'y'?); choose one of a, b, c``, one error line (exit 2).

    Given with ``choices=`` too, so that the usage and ``--help`` list the values."""

    def check(value: str) -> str:
        if value not in choices:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {value!r}{did_you_mean(value, choices)}; choose one of {', '.join(choices)}"
            )
        return value

    check.__name__ = what  # argparse names the type in its own messages
    return check


def number(kind: type[int] | type[float]) -> Any:
    """An argparse ``type`` reading a count (``int``) or a number (``float``) in ASCII digits
    (:func:`harness.coerce.read_number`; argparse's ``int`` reads ``١٢``); ranges are the options'."""

    def read(text: str) -> int | float:
        try:
            return read_number(text, kind)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"expected {what} in ASCII digits, got {text!r}") from None

    read.__name__ = kind.__name__
    return read


def add_profile(parser: argparse.ArgumentParser, default: str | None = None, shown: str = "cpu") -> None:
    """``--profile``, closed to :data:`~harness.config.profiles.PROFILES`."""
    parser.add_argument(
        "--profile",
        default=default,
        type=closed_choice("profile", tuple(PROFILES)),
        choices=tuple(PROFILES),
        metavar="PROFILE",
        help=profile_help(shown),
    )


def profile_help(default: str = "cpu") -> str:
    """The ``--profile`` help: every profile (:data:`harness.config.profiles.PROFILES`), the default
    marked."""
    return "profile: " + " | ".join(f"{p} (default)" if p == default else p for p in PROFILES)


def add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data root laid out like shared/data (senteval/, corpus/); default: $HARNESS_DATA, "
        "then ./data, then ../shared/data",
    )


def parse_key_values(items: Sequence[str], flag: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}`` (``--set``, ``--override``); a malformed item raises
    :class:`ConfigError` naming ``flag``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def setting_help() -> dict[str, str]:
    """Each run setting's help text: its entry under ``Attributes:`` in the RunSettings docstring."""
    out: dict[str, str] = {}
    name = ""
    in_attributes = False
    for line in (RunSettings.__doc__ or "").splitlines():
        text = line.strip()
        if text == "Attributes:":
            in_attributes = True
            continue
        entry = re.match(r"(\w+): (.*)", text)
        if in_attributes and entry and len(line) - len(line.lstrip()) == 8:
            name = entry.group(1)
            out[name] = entry.group(2)
        elif in_attributes and name and text:
            out[name] += " " + text
    return {k: _plain(v) for k, v in out.items()}


def _plain(doc: str) -> str:
    """Docstring markup as plain help text (argparse %-formats help, so ``%`` is escaped)."""
    text = re.sub(r":\w+:`~?([^`]*)`", r"\1", doc).replace("``", "")
    return text.replace("%", "%%")


def add_setting_flags(parser: Any, names: Iterable[str] = OVERRIDABLE) -> None:
    """One ``--<name>`` flag per run setting in ``names`` (dest ``setting_<name>``, default None)."""
    hints = typing.get_type_hints(RunSettings)
    docs = setting_help()
    for name in names:
        hint = hints[name]
        args = typing.get_args(hint)
        choices: list[str] | None = None
        if typing.get_origin(hint) is typing.Literal:
            choices = [*args, "auto"] if name in AUTO_SETTINGS else list(args)
            kind, metavar = closed_choice(name, choices), "{" + ",".join(choices) + "}"
        elif type(None) in args:  # optional: the text "none" is accepted, the settings coerce it
            kind, metavar = str, "N|none"
        else:  # the settings coerce and bound every value, typed or not (one rule per setting)
            kind, metavar = str, {int: "N", float: "X"}.get(hint, "TEXT")
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=f"setting_{name}",
            type=kind,
            default=None,
            choices=choices,
            metavar=metavar,
            help=docs.get(name),
        )


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The run settings the generated flags were given (only those given)."""
    out: dict[str, Any] = {}
    for name in OVERRIDABLE:
        value = getattr(args, f"setting_{name}", None)
        if value is not None:
            out[name] = value
    return out


def add_override_arguments(parser: argparse.ArgumentParser) -> None:
    """Run-setting overrides shared by grid, check, tables, claims, plots and report (they are part
    of the run ids): every setting but the seed (the grid's ``--seeds``), plus ``--override``."""
    group = parser.add_argument_group(
        "run overrides", "applied to every run; a row's own settings win; give tables/plots the same ones"
    )
    add_setting_flags(group, [n for n in OVERRIDABLE if n != "seed"])
    group.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any run setting as KEY=VALUE, e.g. --override warmup_steps=10 (repeatable)",
    )


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The override dict the flags describe (``--override`` items last: they win)."""
    return {**settings_from_args(args), **parse_key_values(getattr(args, "override", []) or [], "--override")}


def add_common_report_arguments(parser: argparse.ArgumentParser) -> None:
    """--profile, --runs-dir, --data-dir (grid, tables and plots)."""
    add_profile(parser)
    parser.add_argument("--runs-dir", default="runs", help="run store folder (default ./runs)")
    add_data_dir(parser)


def add_analysis_arguments(parser: argparse.ArgumentParser, *, as_written: bool = False) -> None:
    """``--family`` and ``--correction``: error control across claims (claims, tables, grid, report).

    With ``as_written`` (``harness report``) both default to what ``claims.json`` says."""
    from harness.stats.correction import DEFAULT_CORRECTION, DEFAULT_FAMILY, FAMILIES
    from harness.stats.paired import CORRECTIONS

    default = "as claims.json was written" if as_written else None
    parser.add_argument(
        "--family",
        choices=FAMILIES,
        default=None if as_written else DEFAULT_FAMILY,
        help="the claims whose p-values are adjusted together: each table's, each paper's, or all "
        f"rendered (default {default or DEFAULT_FAMILY})",
    )
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default=None if as_written else DEFAULT_CORRECTION,
        help="error control across claims: Holm (family-wise error rate), Benjamini-Hochberg (false "
        "discovery rate) or none; every output shows both verdicts "
        f"(default {default or DEFAULT_CORRECTION})",
    )


def add_effect_argument(parser: argparse.ArgumentParser) -> None:
    """``--effect``: the smallest difference worth deciding (ruled out, not enough seeds, power lines)."""
    from harness.stats.outcomes import DEFAULT_EFFECT

    parser.add_argument(
        "--effect",
        default=DEFAULT_EFFECT,
        metavar="E",
        help="the smallest difference you care about: score points (0.3) or a share of each claim's "
        f"paper delta (50%%): a claim whose interval lies inside +-E is ruled out; with --until-decided "
        "also whether the seeds can reach a verdict (default "
        f"{DEFAULT_EFFECT.replace('%', '%%')})",
    )


def analysis_from_args(args: argparse.Namespace, profile: str) -> Analysis:
    """The claims' analysis the flags ask for; the anytime-valid test where the runs folder's
    ``sequential.json`` (written by ``harness grid --until-decided`` under this profile) says the
    seeds were added until decided, with that grid's ``c``, effect and most seeds (so the claims say
    what the grid decided); else ``--effect``."""
    from harness.grid.rounds import read_sequential
    from harness.stats.correction import Analysis
    from harness.stats.outcomes import parse_effect

    state = read_sequential(args.runs_dir)
    design = (state or {}).get("design") or {}
    sequential = design.get("profile") == profile and design.get("test") == "sequential"
    c = design.get("mixture_c")
    effect = parse_effect(getattr(args, "effect", None))
    max_seeds = design.get("max_seeds") if sequential else None
    if sequential and isinstance(design.get("effect"), str):
        effect = parse_effect(design["effect"])
    return Analysis(
        correction=args.correction,
        family=args.family,
        sequential=sequential,
        effect=effect,
        max_seeds=max_seeds if isinstance(max_seeds, int) and max_seeds > 0 else None,
        **({"mixture_c": float(c)} if sequential and isinstance(c, int | float) else {}),
    )


def add_titles_argument(parser: argparse.ArgumentParser) -> None:
    """``--titles``: a title and caption inside each figure (off: a paper sets them in LaTeX)."""
    parser.add_argument(
        "--titles",
        action="store_true",
        help="draw each figure's title and caption inside it (default: none; the captions go to "
        "figures.tex / claims_figures.tex and the HTML report)",
    )


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the trials run: the Ray cluster, each trial's resources, Tune's storage and retries."""
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start Ray locally)")
    parser.add_argument(
        "--gpus-per-trial",
        type=number(float),
        default=None,
        help="GPUs per trial, fractions allowed (default 1 if any)",
    )
    parser.add_argument(
        "--cpus-per-trial", type=number(int), default=1, help="CPUs (and torch threads) per trial"
    )
    parser.add_argument(
        "--trial-resources",
        action="append",
        default=[],
        metavar="NAME=N",
        help="a custom Ray resource every trial asks for (repeatable), e.g. worker_node=1 to run trials "
        "only on the nodes started with --resources '{\"worker_node\": 1}'",
    )
    parser.add_argument(
        "--storage",
        default=None,
        help="Ray Tune's storage for curves, resume checkpoints and --save-model weights: a folder every "
        "node reaches, or a URI (s3://bucket/path, gs://...); default RUNS/tune (this machine only)",
    )
    parser.add_argument(
        "--max-failures",
        type=number(int),
        default=0,
        help="retries of a failed trial (a lost node): it resumes from its last checkpoint (default 0)",
    )
    parser.add_argument(
        "--lost-node-wait",
        type=number(float),
        default=DEFAULT_LOST_NODE_WAIT_S,
        metavar="SECONDS",
        help="when no alive node can take the waiting runs (their nodes were lost), wait this long for "
        "one to join, then stop: the waiting runs are marked interrupted (the same command resumes "
        f"them) and the grid exits 1 (default {DEFAULT_LOST_NODE_WAIT_S:.0f})",
    )


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """The flags of :func:`add_cluster_arguments` (and ``--smoke``), checked."""
    return ClusterOptions(
        address=getattr(args, "address", None),
        gpus_per_trial=getattr(args, "gpus_per_trial", None),
        cpus_per_trial=getattr(args, "cpus_per_trial", 1),
        trial_resources=parse_trial_resources(getattr(args, "trial_resources", None)),
        storage=getattr(args, "storage", None),
        max_failures=getattr(args, "max_failures", 0),
        smoke=bool(getattr(args, "smoke", False)),
        lost_node_wait=getattr(args, "lost_node_wait", DEFAULT_LOST_NODE_WAIT_S),
    )


def grid_options(args: argparse.Namespace) -> GridOptions:
    """What ``harness grid`` (or ``harness check``) was asked, as one typed record."""
    return GridOptions(
        specs=tuple(args.specs),
        profile=args.profile,
        runs_dir=args.runs_dir,
        data_dir=args.data_dir,
        seeds=args.seeds if args.seeds is not None else first_seeds(args),
        overrides=overrides_from_args(args),
        claims_only=bool(getattr(args, "claims_only", False)),
        dry_run=bool(getattr(args, "dry_run", False)),
        retry_failed=not getattr(args, "skip_failed", False),
        save_model=bool(getattr(args, "save_model", False)),
        cluster=cluster_options(args),
        track=tuple(getattr(args, "track", None) or ()),
        tracking_uri=getattr(args, "tracking_uri", None),
        compile=compile_choice(getattr(args, "compile", "auto")),
    )


def first_seeds(args: argparse.Namespace) -> int:
    """``--seeds`` when not given: 1, or the first round of ``--until-decided``."""
    from harness.grid.rounds import FIRST_SEEDS

    return FIRST_SEEDS if getattr(args, "until_decided", False) else 1


COMPILE_CHOICES = ("auto", "on", "off")


def add_compile_argument(parser: argparse.ArgumentParser | Any) -> None:
    """``--compile auto|on|off``: the compiled training forward (auto: on a GPU only)."""
    parser.add_argument(
        "--compile",
        default="auto",
        choices=COMPILE_CHOICES,
        help="compile the training forward with torch.compile (CUDA graphs on a GPU): auto = on a GPU only, "
        "where it is faster; not part of the run id",
    )


def compile_choice(value: str) -> bool | None:
    """``auto`` -> None (decided by the device), ``on`` -> True, ``off`` -> False."""
    return None if value == "auto" else value == "on"
