"""Every scaling law by name: `analysis.fit --law NAME` looks it up here, and nowhere else.

The built-ins (`BUILT_IN`) come first, in a fixed order. Laws from other packages join
through the entry-point group `andrea.laws`, loaded the first time the registry is read, as
residual schemes join through `andrea.residuals`: an entry point names a `Law` or a list of them,

    [project.entry-points."andrea.laws"]
    mylaw = "mypackage.laws:MY_LAW"

A `Law` needs its name, inputs, parameters with bounds, an initial grid and `log_predict`
(`analysis.fits.laws`); the generic Huber fit and the bootstrap come with the protocol.
"""

from __future__ import annotations

from importlib import metadata

from analysis.fits.chinchilla import CHINCHILLA
from analysis.fits.law_forms import DATA_CONSTRAINED, FARSEER
from analysis.fits.laws import Law
from analysis.fits.powerlaw import IRREDUCIBLE, POWER

ENTRY_POINTS = "andrea.laws"
BUILT_IN = (POWER, IRREDUCIBLE, CHINCHILLA, FARSEER, DATA_CONSTRAINED)
# The laws the fit table holds (its columns A, alpha and E): the C power law by default, with an
# irreducible term under --irreducible. Any other --law is reported after the table.
TABLED = (POWER, IRREDUCIBLE)
DEFAULT = POWER.name


def table_law(irreducible: bool = False) -> Law:
    """The C law of the fit table: `power`, or `irreducible` (--irreducible)."""
    return IRREDUCIBLE if irreducible else POWER


def tabled(law: Law) -> bool:
    """Whether the fit table can hold `law` (else it is reported beside the table's)."""
    return law in TABLED


class LawRegistryError(ValueError):
    """A plug-in law that cannot join the registry (not a Law, or a clash of names)."""


def _plugins() -> list[Law]:
    found: list[Law] = []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        obj = ep.load()
        for law in list(obj) if isinstance(obj, (list, tuple)) else [obj]:
            if not isinstance(law, Law):
                raise LawRegistryError(
                    f"entry point {ep.name} = {ep.value} ({ENTRY_POINTS}) "
                    f"gave {type(law).__name__}, not an andrea Law"
                )
            found.append(law)
    return found


def build(extra=()) -> dict[str, Law]:
    laws: dict[str, Law] = {}
    for law in (*BUILT_IN, *_plugins(), *extra):
        if law.name in laws or law.name == "auto":
            raise LawRegistryError(
                f"two scaling laws are named {law.name!r}"
                if law.name != "auto"
                else "'auto' is reserved for --law auto"
            )
        laws[law.name] = law
    return laws


_LAWS: dict[str, Law] | None = None


def laws() -> dict[str, Law]:
    global _LAWS
    if _LAWS is None:
        _LAWS = build()
    return _LAWS


def names() -> tuple[str, ...]:
    return tuple(laws())


def get(name: str) -> Law:
    try:
        return laws()[name]
    except KeyError:
        raise ValueError(
            f"no scaling law named {name!r}; known: {', '.join(names())}, auto"
        ) from None


def usable(inputs) -> list[Law]:
    """The laws whose inputs the points record (`inputs`: the names present)."""
    have = set(inputs)
    return [law for law in laws().values() if set(law.inputs) <= have]
