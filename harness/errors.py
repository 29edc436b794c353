"""User-facing errors.

Every mistake a user can make (an unknown method, a misspelt key, a missing data file, ...) raises a
subclass of :class:`HarnessError`. The command line prints its message as one line and exits with
status 2, without a traceback. Programming errors are left as ordinary exceptions.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class HarnessError(Exception):
    """Base class of every error caused by user input or the user's environment."""


class ConfigError(HarnessError, ValueError):
    """A bad configuration value: unknown name, misspelt key, out-of-range parameter."""


class DataError(HarnessError):
    """Missing or malformed data files (evaluation tasks or training corpus)."""


class ModelLoadError(HarnessError):
    """An encoder that cannot be loaded (missing path, hub unreachable, not an encoder)."""


class TrainingError(HarnessError):
    """A run that cannot go on (NaN loss, singular whitening, ...); the message names the step."""


class GridLockedError(HarnessError):
    """The runs folder is in use by another grid (the message names the holder)."""


def did_you_mean(name: object, choices: Iterable[object]) -> str:
    """`` (did you mean 'x'?)`` naming the closest of ``choices`` to ``name``, or ``""`` if none is close.

    The one spelling hint of every "unknown ..." message (methods, parameters, settings, spec keys,
    run ids): append it right after the bad name.
    """
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
