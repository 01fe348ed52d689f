"""The one choice of YAML loader (and dumper) for sidecars, their updates, deposits and config
files."""

from __future__ import annotations

import yaml

try:  # libyaml is ~10x faster than the pure-Python loader and ships in PyYAML's wheels
    SafeLoader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    SafeLoader = yaml.SafeLoader

try:  # the same for writing: a deposit or an import writes one sidecar per item
    SafeDumper = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    SafeDumper = yaml.SafeDumper


def dump_sidecar(data) -> str:
    """A sidecar's keys as the block YAML deposits, updates and imports write: keys in the
    order given, text as it is (no \\u escapes), no folding of long lines."""
    return yaml.dump(
        dict(data),
        Dumper=SafeDumper,
        default_flow_style=False,
        allow_unicode=True,
        sort_keys=False,
        width=4096,
    )
