"""The registry: every Method subclass in methods/ is registered and documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import methods
from harness.errors import ConfigError
from methods import REGISTRY, get_method
from methods.base import Method
from methods.params import MethodParams


def defined_methods() -> dict[str, type[Method]]:
    """Concrete Method subclasses (those that set their own ``name``) defined in methods/*.py."""
    found: dict[str, type[Method]] = {}
    for info in pkgutil.iter_modules(methods.__path__):
        module = importlib.import_module(f"methods.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Method) and obj.__module__ == module.__name__ and "name" in vars(obj):
                found[obj.name] = obj
    return found


def test_every_method_class_is_registered_under_its_name():
    found = defined_methods()
    assert found == REGISTRY


def test_registry_is_sorted():
    assert list(REGISTRY) == sorted(REGISTRY)


def test_the_registry_has_at_least_the_papers_methods():
    # at least: a new method is added by its four files (CONTRIBUTING.md), not by editing this list
    assert set(REGISTRY) >= {"barlow_probe", "noise_probe", "simcse", "simcsepp", "whitenedcse"}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_method_is_documented(name):
    cls = REGISTRY[name]
    assert cls.name == name
    assert cls.description.strip() and "\n" not in cls.description
    assert cls.citation.strip()
    assert issubclass(cls.params_cls, MethodParams)
    docs = "\n".join(c.__doc__ or "" for c in cls.params_cls.__mro__)
    for key in cls.params_cls.keys():  # noqa: SIM118 (a classmethod, not a dict)
        assert f"{key}:" in docs, f"{name}: parameter {key} is not documented"
    for hidden in (64, 384, 768, 1024):  # defaults train on every shipped encoder and the papers'
        cls.params_cls().validate(hidden)
        cls(cls.params_cls(), hidden)


def test_shared_fields_are_declared_once():
    # temperature and mlp live in one base record, not redeclared per method.
    from methods.params import ContrastiveParams

    for cls in REGISTRY.values():
        assert issubclass(cls.params_cls, ContrastiveParams)
        for key in ("temperature", "mlp"):
            assert key not in vars(cls.params_cls).get("__annotations__", {}), (cls.name, key)


def test_switches_are_self_described():
    switches = {name: set(cls.params_cls.switches()) for name, cls in REGISTRY.items()}
    assert {"reading", "positive_source", "l2_form", "whitening_grad", "running_stats"} <= switches[
        "whitenedcse"
    ]
    assert {"m_placement", "dcl_reduction"} <= switches["simcsepp"]
    assert "k_independent" in switches["noise_probe"] and "correlation" in switches["barlow_probe"]
    assert switches["simcse"] == set()


def test_citations_name_the_papers():
    assert "ACL 2023" in REGISTRY["whitenedcse"].citation and "Zhuo" in REGISTRY["whitenedcse"].citation
    for name in ("simcsepp", "noise_probe", "barlow_probe"):
        assert "SimCSE++" in REGISTRY[name].citation and "EMNLP 2023" in REGISTRY[name].citation


def test_unknown_method_suggests():
    with pytest.raises(ConfigError, match=r"unknown method 'simcs'.*did you mean 'simcse'"):
        get_method("simcs")
