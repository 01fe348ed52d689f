"""The one choice of YAML loader for sidecars, their updates, deposits and config files."""

from __future__ import annotations

import yaml

try:  # libyaml is ~10x faster than the pure-Python loader and ships in PyYAML's wheels
    SafeLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    SafeLoader = yaml.SafeLoader
