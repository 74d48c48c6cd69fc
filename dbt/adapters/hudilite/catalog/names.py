"""How names become folders under location_root: one plain folder name per part, lower case
(as Spark's catalog keys names, and dbt-spark stores them)."""

from __future__ import annotations

from typing import Tuple

from ..table import ConfigurationError


def canonical(schema: str, name: str) -> Tuple[str, str]:
    """How the catalog keys a name: lower case, as Spark's catalog does."""
    return schema.lower(), name.lower()


def folder_name(part: str, kind: str) -> str:
    """`part` as one folder name, or a ConfigurationError naming it."""
    if not part or part.startswith(".") or any(c in part for c in "/\\:\0"):
        raise ConfigurationError(f"{kind} {part!r} cannot be a folder under location_root: use a plain name "
                                 "(no '/', '\\', ':', no leading '.')")
    return part
