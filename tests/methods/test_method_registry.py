"""The registry: every Method subclass in methods/ is registered and documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import methods
from methods import REGISTRY
from methods.base import Method, MethodParams


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


def test_expected_names():
    assert set(REGISTRY) == {"barlow_probe", "noise_probe", "simcse", "simcsepp", "whitenedcse"}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registered_method_is_documented(name):
    cls = REGISTRY[name]
    assert cls.name == name
    assert cls.description.strip() and "\n" not in cls.description
    assert cls.citation.strip()
    assert issubclass(cls.params_cls, MethodParams)
    assert cls.params_cls.__doc__ and "Attributes:" in cls.params_cls.__doc__
    for key in cls.params_cls.keys():  # noqa: SIM118 (a classmethod, not a dict)
        assert key in cls.params_cls.__doc__, f"{name}: parameter {key} is not documented"
    cls.params_cls().validate(768)  # defaults are valid on bert-base


def test_citations_name_the_papers():
    assert "ACL 2023" in REGISTRY["whitenedcse"].citation and "Zhuo" in REGISTRY["whitenedcse"].citation
    for name in ("simcsepp", "noise_probe", "barlow_probe"):
        assert "SimCSE++" in REGISTRY[name].citation and "EMNLP 2023" in REGISTRY[name].citation
