"""Every residual scheme by name: `model=<name>` looks it up here, and nowhere else.

The built-in schemes are listed below, one line each, in a fixed order (the order of their
option fields in ModelConfig and of their FLOP terms). Schemes from other packages join through
the entry-point group `andrea.residuals`: an entry point names a `Scheme`, or a list of them
(docs/residual_schemes.md), and is loaded the first time the registry is read. A plug-in that
fails to load or clashes with a scheme already there is skipped with one warning.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from importlib import metadata
from typing import Any

from andrea.model.residuals import attnres, denseformer, mhc, prenorm
from andrea.model.residuals.scheme import Scheme
from andrea.run import provenance

ENTRY_POINTS = "andrea.residuals"

BUILT_IN: tuple[Scheme, ...] = (
    prenorm.BASELINE,
    attnres.FULL,
    attnres.BLOCK,
    denseformer.DENSEFORMER,
    mhc.MHC,
    mhc.MHC_LITE,
)


class SchemeError(ValueError):
    """A plug-in scheme that cannot join the registry (a clash of names or options)."""


@dataclasses.dataclass(frozen=True)
class Broken:
    """A plug-in left out of the registry: which distribution, which entry point, and why."""

    dist: str
    entry_point: str
    reason: str

    def remedy(self) -> str:
        return (
            f"the residual-scheme plug-in {self.dist} ({self.entry_point}, entry-point group "
            f"{ENTRY_POINTS}) is broken: {self.reason}; fix it, or remove it: "
            f"pip uninstall {self.dist}"
        )


def _dist_name(ep) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "(unknown distribution)"


def _load(ep, taken: dict[str, Scheme]) -> list[Scheme]:
    """The schemes of one entry point, checked against those `taken` so far; SchemeError (or
    whatever its import raises) when it cannot join."""
    obj = ep.load()
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    names: set[str] = set()
    for s in items:
        if not isinstance(s, Scheme):
            raise SchemeError(f"it gave {type(s).__name__}, not an andrea Scheme")
        if s.name in taken or s.name in names:
            raise SchemeError(f"its scheme {s.name!r} has the name of another scheme")
        names.add(s.name)
    _check_options([*taken.values(), *items])
    return items


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a plug-in scheme comes from: its distribution and the module its entry point names."""

    dist: str
    version: str | None
    module: str


def _build(
    origins: dict[str, Origin] | None = None,
) -> tuple[dict[str, Scheme], dict[str, Broken]]:
    """The built-in schemes, then each plug-in that loads and fits; a plug-in that does not is
    skipped with one warning (one broken package must not stop every command) and remembered
    under its entry point's name, so that asking for it is refused with the reason. `origins`
    gets each plug-in scheme's Origin."""
    schemes: dict[str, Scheme] = {}
    for s in BUILT_IN:
        if s.name in schemes:
            raise SchemeError(f"two residual schemes are named {s.name!r}")
        schemes[s.name] = s
    _check_options(schemes.values())
    broken: dict[str, Broken] = {}
    for ep in sorted(metadata.entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        try:
            items = _load(ep, schemes)
        except Exception as e:  # noqa: BLE001 - any failure of a foreign package's import
            why = f"{type(e).__name__}: {e}" if not isinstance(e, SchemeError) else str(e)
            b = Broken(_dist_name(ep), f"{ep.name} = {ep.value}", why.splitlines()[0])
            if ep.name not in schemes:
                broken[ep.name] = b
            print(f"warning: skipped {b.remedy()}", file=sys.stderr)
            continue
        schemes.update((s.name, s) for s in items)
        if origins is not None:
            dist = getattr(ep, "dist", None)
            origin = Origin(_dist_name(ep), dist.version if dist is not None else None, ep.module)
            origins.update((s.name, origin) for s in items)
    return schemes, broken


def _check_options(schemes) -> None:
    """Schemes may share an option (mhc and mhc_lite: mhc_streams) only with the same default."""
    seen: dict[str, tuple[Any, str]] = {}
    for s in schemes:
        for f in s.option_fields():
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            if f.name in seen and seen[f.name][0] != default:
                raise SchemeError(
                    f"option {f.name} of {s.name} has default {default!r}, but "
                    f"{seen[f.name][1]} declares it with {seen[f.name][0]!r}"
                )
            seen.setdefault(f.name, (default, s.name))


ORIGINS: dict[str, Origin] = {}
SCHEMES, BROKEN = _build(ORIGINS)
NAMES: tuple[str, ...] = tuple(SCHEMES)


def unknown(name: str) -> str:
    """Why `name` is no scheme: a broken plug-in's reason and remedy, or the known names."""
    if name in BROKEN:
        return f"model={name} is unavailable: {BROKEN[name].remedy()}"
    return f"no residual scheme named {name!r}; known: {', '.join(NAMES)}"


def plugins_of(name: str) -> list[dict]:
    """The installed plug-ins the scheme `name` comes from, as a run records them (name, version,
    digest of the source, andrea.run.provenance): [] for a built-in scheme."""
    origin = ORIGINS.get(name)
    return [] if origin is None else [provenance.plugin(origin.dist, origin.version, origin.module)]


def get(name: str) -> Scheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(unknown(name)) from None


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    type: Any  # resolved (not the string a `from __future__ import annotations` module holds)
    default: Any


def option_fields() -> list[Option]:
    """The options of every scheme, each once, in registry order: ModelConfig's and the Hydra
    schema's `model.<option>` fields."""
    out: dict[str, Option] = {}
    for s in SCHEMES.values():
        if s.options is None:
            continue
        hints = typing.get_type_hints(s.options)
        for f in s.option_fields():
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            out.setdefault(f.name, Option(f.name, hints[f.name], default))
    return list(out.values())


def option_defaults() -> dict[str, Any]:
    return {o.name: o.default for o in option_fields()}


def owners(option: str) -> list[str]:
    """The schemes that declare `option`."""
    return [s.name for s in SCHEMES.values() if option in s.option_names()]


def flop_terms() -> list[str]:
    """Every scheme's FLOP terms, each once, in registry order (FlopsBreakdown's keys)."""
    out: dict[str, None] = {}
    for s in SCHEMES.values():
        out.update(dict.fromkeys(s.flop_terms))
    return list(out)


def mixing_prefixes() -> tuple[str, ...]:
    """The state_dict prefixes of the schemes' own parameters (`depth.`, `dwa.`, `mhc.` ...)."""
    return tuple(dict.fromkeys(f"{s.attribute}." for s in SCHEMES.values() if s.attribute))


def is_mixing_parameter(name: str) -> bool:
    """True for a parameter (as `ANDREA.named_parameters()` names it) that belongs to a residual
    scheme's depth mixing rather than to an embedding, a sublayer or the final norm. Optimizers
    that treat such small, scale-sensitive parameters apart (Muon's AdamW group) use this."""
    return name.startswith(mixing_prefixes())


def label_suffix(values: dict) -> str:
    """The label suffix of a model's option values ('' at the defaults), by its scheme."""
    name = values.get("name", values.get("residual"))
    scheme = SCHEMES.get(name) if name is not None else None
    return scheme.label_suffix(values) if scheme is not None else ""
