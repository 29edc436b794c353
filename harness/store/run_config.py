"""One run's configuration: the settings plus a method and its typed parameters, and the run id."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.config.settings import SETTING_FIELDS, RunSettings, digest, jsonable, resolve_settings
from harness.errors import ConfigError
from harness.postprocess.flow import reading_of
from methods import MethodParams, build_params, get_method

if TYPE_CHECKING:
    from methods.params import MethodParams

NOT_IN_ID: frozenset[str] = frozenset({"profile", "corpus", "final_tasks"})
"""Fields that do not affect training: a label, a machine-specific path (``corpus_id`` is in), and
which final tasks are scored (a grid asks each run for what the tables using it need; a finished
record lacking a part a table needs is run again)."""


@dataclass(frozen=True, kw_only=True)
class RunConfig(RunSettings):
    """The fully resolved configuration of one run: :class:`RunSettings` plus the method.

    Every construction checks the parameters (:meth:`~methods.params.MethodParams.validate`), as it
    checks the settings: a config is valid whatever built it (:func:`resolve_run`, :meth:`from_dict`
    of a stored record, :meth:`replace`), and nothing downstream checks them again.

    Attributes:
        method: registered method name.
        params: the method's complete, typed parameters (defaults included).
        width: (init only, not a field) the encoder's hidden size when the builder knows it
            (:func:`resolve_run`): the parameters are then checked against it too. None (a stored
            record read back): the checks that hold under every encoder.
        checked: (init only) the parameters of the config a copy is made from (:meth:`replace`): when
            ``params`` is that very record, it was checked already and is not checked again.
    """

    method: str
    params: MethodParams
    width: dataclasses.InitVar[int | None] = None
    checked: dataclasses.InitVar[MethodParams | None] = None

    def __post_init__(self, width: int | None, checked: MethodParams | None) -> None:
        if not self.method:
            raise ConfigError("method must not be empty")
        cls = get_method(self.method).params_cls
        if isinstance(self.params, Mapping):
            object.__setattr__(self, "params", build_params(self.method, dict(self.params)))
        elif not isinstance(self.params, cls):
            raise ConfigError(
                f"{self.method}: params must be {cls.__name__}, got {type(self.params).__name__}"
            )
        super().__post_init__()
        if self.params is not checked:
            self.params.validate(width)

    def __hash__(self) -> int:
        return hash(self.run_id())

    # -- ids ------------------------------------------------------------------------------------
    def id_fields(self, *, with_seed: bool = True) -> dict[str, Any]:
        """The result-affecting fields that the run id hashes."""
        out = {k: v for k, v in self.to_dict().items() if k not in NOT_IN_ID}
        if not with_seed:
            out.pop("seed")
        return out

    def run_id(self) -> str:
        """``<method>-<12 hex>``: a hash of every result-affecting field, seed included."""
        return f"{self.method}-{digest(self.id_fields())}"

    def config_id(self) -> str:
        """Like :meth:`run_id` without the seed, so that tables can aggregate seeds (a record keeps it
        as ``group_id``, the schema's name)."""
        return f"{self.method}-{digest(self.id_fields(with_seed=False))}"

    # -- (de)serialisation: the store and Ray boundaries ----------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field (``params`` as a sorted dict)."""
        out = {"method": self.method, "params": jsonable(self.params.to_dict())}
        out.update(self.settings_dict())
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild a config from :meth:`to_dict`; unknown keys raise :class:`ConfigError`."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown run-config field(s) {', '.join(map(repr, unknown))}")
        values: dict[str, Any] = {k: (dict(v) if k == "params" else v) for k, v in data.items()}
        return cls(**values)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with some fields changed, validated again: its settings, and its parameters unless
        they are this config's own record (new ones without the width)."""
        return dataclasses.replace(self, checked=self.params, **changes)


CONFIG_FIELDS: tuple[str, ...] = ("method", "params", *SETTING_FIELDS)


def resolve_run(
    method: str,
    params: Mapping[str, Any] | MethodParams | None,
    settings: RunSettings,
    **changes: Any,
) -> RunConfig:
    """Add a method and its parameters to resolved settings: the typed, validated :class:`RunConfig`.

    A typed record (a table spec's, built when the spec was loaded) is used as it is. The
    :class:`RunConfig` built here checks it (:meth:`~methods.params.MethodParams.validate`) once,
    against the encoder's width: the one check that needs the width, on the record's way into a run;
    nothing downstream checks it again. The width is looked up once per ``settings``
    (:attr:`RunSettings.hidden_size`).

    Args:
        method: registered method name.
        params: parameter overrides (strings are coerced to the field types) or a typed record.
        settings: from :func:`resolve_settings`.
        changes: settings to change for this run only (e.g. ``seed``), validated with the rest.

    Raises:
        ConfigError: unknown method or parameter (with a hint), a bad value, or parameters that do not
            suit the encoder (more whitening groups than it has channels, ...).
        ModelLoadError: the encoder's hidden size cannot be found (see
            :func:`harness.config.models.hidden_size_of`).
    """

    record = params if isinstance(params, MethodParams) else build_params(method, dict(params or {}))
    values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(RunSettings)}
    values.update(changes)
    if str(values["post_whiten"]).startswith("flow"):  # a flow halves the channels: d must suit it
        reading_of(str(values["post_whiten"])).validate(settings.hidden_size)
    return RunConfig(method=method, params=record, width=settings.hidden_size, **values)


def resolve_config(
    method: str,
    params: Mapping[str, Any] | None = None,
    profile: str = "cpu",
    overrides: Mapping[str, Any] | None = None,
    data_root: Path | None = None,
) -> RunConfig:
    """:func:`resolve_settings` then :func:`resolve_run`: one run from names and overrides."""
    return resolve_run(method, params, resolve_settings(profile, overrides, data_root))
