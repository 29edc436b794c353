"""Native-bf16 detection and ``precision = "auto"``: resolved from CPU flags, deterministic, in the id."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import harness.config.hardware as hw
from harness.config.settings import resolve_settings
from harness.store.run_config import resolve_config


@pytest.fixture
def fake_cpu(monkeypatch: pytest.MonkeyPatch):
    """Set this 'machine's' CPU flags; no CUDA."""

    def set_flags(*flags: str) -> None:
        monkeypatch.setattr(hw, "cpu_flags", lambda: frozenset(flags))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return set_flags


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("avx2", "fma"), "fp32"),
        (("avx2", "avx512f", "avx512_vnni"), "fp32"),
        (("avx2", "avx512f", "avx512_bf16"), "bf16"),
        (("amx_tile", "amx_bf16"), "bf16"),
        ((), "fp32"),
    ],
)
def test_auto_precision_follows_native_bf16_flags(fake_cpu, flags: tuple[str, ...], expected: str) -> None:
    fake_cpu(*flags)
    assert hw.cpu_native_bf16() == (expected == "bf16")
    assert hw.auto_precision() == expected


def test_cpu_profiles_resolve_auto_to_a_concrete_precision_in_the_id(fake_cpu, data_root: Path) -> None:
    fake_cpu("avx512_bf16")
    native = resolve_config("simcse", None, "cpu", data_root=data_root)
    assert native.precision == "bf16" and native.eval_precision == "fp32"
    fake_cpu("avx2")
    emulated = resolve_config("simcse", None, "cpu", data_root=data_root)
    assert emulated.precision == "fp32"
    assert native.run_id() != emulated.run_id()  # a different precision is a different run
    assert resolve_settings("smoke", {"precision": "AUTO"}, data_root=data_root).precision == "fp32"
    assert resolve_settings("paper", require_corpus=False).precision == "tf32"  # no auto: the same on any box


def test_flags_and_model_are_read_from_proc_cpuinfo() -> None:
    import platform

    if platform.machine() in ("x86_64", "AMD64") and Path("/proc/cpuinfo").is_file():
        assert {"sse2", "fpu"} <= hw.cpu_flags()  # every x86-64 has these
    assert hw.cpu_model() and hw.cpu_model() != "unknown"


def test_cpu_id_names_the_first_processors_family_model_and_stepping(monkeypatch: pytest.MonkeyPatch) -> None:
    info = (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\n"
    )
    for fn in (hw.cpu_id, hw.cpu_model):
        fn.cache_clear()
    monkeypatch.setattr(hw, "_cpuinfo", lambda: info)
    try:
        assert hw.cpu_id() == "family 25 model 17 stepping 1"  # "model name" is not "model"
        assert hw.cpu_description() == "AMD EPYC (family 25 model 17 stepping 1)"
        hw.cpu_id.cache_clear()
        arm = (
            "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
            "CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\nprocessor\t: 1\n\n"
            "Hardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
        )
        monkeypatch.setattr(hw, "_cpuinfo", lambda: arm)
        assert hw.cpu_id() == "implementer 0x41 part 0xd0c variant 0x3 revision 1"  # not the board's "Model"
        hw.cpu_id.cache_clear()
        monkeypatch.setattr(hw, "_cpuinfo", lambda: "")  # not Linux: nothing listed
        assert hw.cpu_id() == "" and hw.cpu_description() == hw.cpu_model()
    finally:
        for fn in (hw.cpu_id, hw.cpu_model):
            fn.cache_clear()


def test_night_is_cpu_with_bf16_final_tasks_where_native(fake_cpu, data_root: Path) -> None:
    fake_cpu("avx512_bf16")
    cpu, night = (resolve_settings(p, data_root=data_root) for p in ("cpu", "night"))
    assert (night.precision, night.eval_precision) == ("bf16", "bf16") and cpu.eval_precision == "fp32"
    differ = {k for k, v in cpu.settings_dict().items() if night.settings_dict()[k] != v}
    assert differ == {"eval_precision", "profile"}
    fake_cpu("avx2")  # without native bf16 the two profiles plan the very same runs
    a, b = (resolve_config("simcse", None, p, data_root=data_root) for p in ("cpu", "night"))
    assert a.run_id() == b.run_id()


def test_auto_precision_is_resolved_for_the_runs_device(fake_cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cpu("avx2")  # a CPU without native bf16 ...
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # ... beside a GPU with it
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert hw.auto_precision() == hw.auto_precision("cuda") == "bf16"  # the default device: the GPU
    assert hw.auto_precision("cpu") == "fp32"  # --device cpu trains on this CPU
    assert hw.auto_precision("mps") == "fp32"
    cpu = resolve_settings("cpu", require_corpus=False, device="cpu")
    gpu = resolve_settings("cpu", require_corpus=False, device="cuda")
    assert (cpu.precision, gpu.precision) == ("fp32", "bf16")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert hw.auto_precision("cuda") == "fp32" and hw.default_device() == "cuda"


def test_arithmetic_problems_name_the_setting_and_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hw, "native_bf16", lambda device=None: str(device).startswith("cpu"))
    monkeypatch.setattr(hw, "compile_problem", lambda device: None)
    assert hw.arithmetic_problems("cuda", {"precision": "bf16", "eval_precision": "bf16"}, False) == [
        f"{name} bf16 on cuda: this CUDA GPU has no bf16 (torch.cuda.is_bf16_supported() is False, so "
        f"autocast refuses it); set {name} to fp16 or fp32"
        for name in ("precision", "eval_precision")
    ]
    assert hw.arithmetic_problems("cpu", {"precision": "bf16"}, True) == []


def test_compile_problem_asks_for_inductors_tools_here() -> None:
    assert hw.compile_problem("mps") is None  # not judged here
    assert hw.compile_problem("cpu") is None  # this machine has a C++ compiler (the tests compile)


def test_compile_problem_does_not_judge_without_torchs_private_helpers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another torch release may move inductor's helpers: the check then says nothing, never a traceback."""
    import sys

    monkeypatch.setitem(sys.modules, "torch._inductor.cpp_builder", None)  # its import raises ImportError
    assert hw.compile_problem("cpu") is None and hw.compile_problem("cuda") is None
