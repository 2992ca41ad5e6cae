"""Region markers in generated source: which component rendered the code that follows, and its
config's plain fields, so a kernel reads as the composition it came from (and a template change
shows up as a readable diff of the golden sources in tests/golden/)."""
from __future__ import annotations

import dataclasses

_WIDTH = 160


def plain_fields(cfg) -> str:
    """``name=value`` of a config's int / bool / str fields (nested configs are their own regions)."""
    if not dataclasses.is_dataclass(cfg):
        return ""
    parts = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if isinstance(value, (bool, int, str)) and not isinstance(value, type):
            parts.append(f"{f.name}={int(value) if isinstance(value, bool) else value}")
    text = " ".join(parts)
    return text if len(text) <= _WIDTH else text[:_WIDTH - 3] + "..."


def region(level: str, component, cfg=None, extra: str = "") -> str:
    """``/* == level: ComponentClass (name) fields == */``."""
    cls = type(component)
    name = getattr(component, "name", "")
    label = f"{cls.__name__}" + (f" '{name}'" if name and name != cls.__name__ else "")
    fields = " ".join(x for x in (plain_fields(cfg) if cfg is not None else "", extra) if x)
    return f"/* == {level}: {label}{': ' + fields if fields else ''} == */"
