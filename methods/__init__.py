"""The method registry: one literal, sorted mapping from name to method class.

Adding a method touches: its module here, this mapping, its docs entry in README.md, and its tests
(``tests/methods``). See CONTRIBUTING.md.
"""

from __future__ import annotations

from harness.errors import ConfigError, did_you_mean
from methods.arccse import ArcCSE
from methods.base import Method
from methods.consert import ConSERT
from methods.ct import ContrastiveTension
from methods.dclr import DCLR
from methods.isbert import ISBERT
from methods.mocose import MoCoSE
from methods.params import MethodParams
from methods.probes import BarlowProbe, NoiseProbe
from methods.promptbert import PromptBERT
from methods.scd import SCD
from methods.simcse import SimCSE
from methods.simcsepp import SimCSEpp
from methods.whitenedcse import WhitenedCSE

REGISTRY: dict[str, type[Method]] = {
    "arccse": ArcCSE,
    "barlow_probe": BarlowProbe,
    "consert": ConSERT,
    "ct": ContrastiveTension,
    "dclr": DCLR,
    "isbert": ISBERT,
    "mocose": MoCoSE,
    "noise_probe": NoiseProbe,
    "promptbert": PromptBERT,
    "scd": SCD,
    "simcse": SimCSE,
    "simcsepp": SimCSEpp,
    "whitenedcse": WhitenedCSE,
}


def get_method(name: str) -> type[Method]:
    """The class registered under ``name``; raise ConfigError naming the valid choices."""
    try:
        return REGISTRY[name]
    except KeyError:
        hint = did_you_mean(name, REGISTRY)
        raise ConfigError(f"unknown method {name!r}{hint}; registered: {', '.join(REGISTRY)}") from None


def build_params(name: str, overrides: dict[str, object] | None = None) -> MethodParams:
    """The method's typed parameters with ``overrides`` applied (unknown keys raise ConfigError)."""
    return get_method(name).params_cls.from_overrides(overrides or {}, method=name)


__all__ = ["REGISTRY", "Method", "MethodParams", "build_params", "get_method"]
