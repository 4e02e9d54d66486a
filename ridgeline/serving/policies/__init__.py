"""Scheduler policies, one module each; every module here registers its policy when
imported (:func:`ridgeline.serving.policy.register`), and this package imports them all, so
a new policy is one new file here (plus its test)."""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
