"""Mistyped keys on the command line: name the nearest valid key.

Hydra rejects `trian.lr=1` with "Key 'trian' not in 'RunConfig'"; this module adds "did you mean
train.lr?" by matching the key (difflib) against the schema's dotted keys (`RunConfig` and the
dataclasses it nests) and the config groups. `precheck` runs before Hydra (sweep.py), so the
message with the nearest valid key is the first and only line, and an appended `+key` that the
schema does not know is refused too (Hydra would add it and train).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

CONF = Path(__file__).resolve().parents[2] / "conf"  # andrea/config/ -> the repository


def _unwrap(tp):
    """Optional[X] -> X; anything else unchanged."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _fields(cls) -> dict:
    return typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}


@lru_cache(maxsize=1)
def schema_keys() -> tuple[str, ...]:
    """Every dotted key of the run schema (inner nodes and leaves), e.g. train, train.lr."""
    from andrea.config.schema import RunConfig

    keys: list[str] = []

    def walk(cls, prefix: str) -> None:
        for name, tp in _fields(cls).items():
            key = f"{prefix}{name}"
            keys.append(key)
            inner = _unwrap(tp)
            if dataclasses.is_dataclass(inner):
                walk(inner, key + ".")

    walk(RunConfig, "")
    return tuple(keys)


@lru_cache(maxsize=1)
def config_groups() -> frozenset[str]:
    """The groups one picks an option of (`model=`, `size=`, `sweeps=`, ...)."""
    return frozenset(p.name for p in CONF.iterdir() if p.is_dir())


def _schema_node(key: str):
    """Walk `key` down RunConfig: (the type reached, the parts left below it). The type is None
    when a part is not a field of its dataclass; parts are left when a leaf or a free container
    (dict, list, Any) is reached first."""
    from andrea.config.schema import RunConfig

    cls, parts = RunConfig, key.split(".")
    for i, part in enumerate(parts):
        hints = _fields(cls)
        if part not in hints:
            return None, parts[i:]
        cls = _unwrap(hints[part])
        if not dataclasses.is_dataclass(cls):
            return cls, parts[i + 1 :]
    return cls, []


def is_known(key: str) -> bool:
    """False only when the key certainly is not in the schema (a field that does not exist
    below a dataclass); keys under a dict/list/Any field are accepted."""
    return key in config_groups() or _schema_node(key)[0] is not None


def nearest_key(key: str) -> Optional[str]:
    candidates = [*schema_keys(), *sorted(config_groups())]
    match = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    if not match:  # a typo in the group only: match the first part, keep the rest
        head, _, rest = key.partition(".")
        top = difflib.get_close_matches(
            head, [k for k in candidates if "." not in k], n=1, cutoff=0.6
        )
        if top and rest:
            fixed = f"{top[0]}.{rest}"
            match = (
                [fixed]
                if is_known(fixed)
                else difflib.get_close_matches(fixed, candidates, n=1, cutoff=0.6)
            )
    return match[0] if match else None


def _assignments(overrides: Iterable[str]):
    """(key, value) of each `key=value` override, appended ones (`+key`, `++key`) included: Hydra
    adds an unknown `+key` silently, so a typo there must be caught like any other.
    Flags, deleted (~) keys and hydra.* keys are Hydra's business."""
    for item in overrides:
        item = str(item)
        if "=" not in item or item.startswith(("~", "-")):
            continue
        key, value = (s.strip() for s in item.lstrip("+").split("=", 1))
        if not key.startswith("hydra"):
            yield key, value


def unknown_key_hints(overrides: Iterable[str]) -> list[str]:
    """One line per override whose key is not in the schema, with the nearest valid key."""
    lines = []
    for key, _ in _assignments(overrides):
        if "/" in key or is_known(key):
            continue
        near = nearest_key(key)
        lines.append(
            f"error: unknown key '{key}'"
            + (f" (did you mean {near}?)" if near else "; `python sweep.py --cfg job` lists them")
        )
    return lines


# S and N of Block AttnRes: exactly one may be set (andrea.config.resolve.block_size_of)
_BLOCK_KEYS = ("model.block_size", "model.n_blocks")


def implied_overrides(overrides: Iterable[str]) -> list[str]:
    """Overrides the command line implies: `model.n_blocks=N` alone replaces the model config's
    default S (`model.block_size=null`), and `model.block_size=S` alone its default N. Both on
    the command line stay an error. (model=attnres_block model.n_blocks=8 was refused because
    the config's S = 4 was set too.) The keys are not in run directory names."""
    given = {key for key, _ in _assignments(overrides)}
    asked = [k for k in _BLOCK_KEYS if k in given]
    if len(asked) != 1:
        return []
    other = _BLOCK_KEYS[1 - _BLOCK_KEYS.index(asked[0])]
    return [f"{other}=null"]


@dataclasses.dataclass
class _Plan:
    plan: bool = False  # the schema's type of `plan`: OmegaConf reads "true", "yes", 1 ... into it


def plan_requested(overrides: Iterable[str]) -> bool:
    """Whether the command line sets `plan=true` (the last such override wins), its value read
    as Hydra assigns it to the schema's bool."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    asked = False
    for key, value in _assignments(overrides):
        values = _values(f"{key}={value}") if key == "plan" else None
        if not values or len(values) != 1:
            continue  # not plan, or a sweep over plan itself: the sweeper's business
        node = OmegaConf.structured(_Plan)
        try:
            OmegaConf.update(node, "plan", values[0], merge=True)
        except OmegaConfBaseException:
            continue  # precheck refuses it with its own line
        asked = bool(node.plan)
    return asked


def _picks_a_launcher(group: str, option: str) -> bool:
    """conf/<group>/<option>.yaml chooses a launcher in its defaults (`override
    /hydra/launcher: ...`): a cluster profile."""
    from omegaconf import OmegaConf

    path = CONF / group / f"{option}.yaml"
    if group in ("hydra", "") or not path.is_file():
        return False
    defaults = OmegaConf.to_container(OmegaConf.load(path)).get("defaults") or []
    return any(
        isinstance(d, dict) and any(str(k).endswith("/hydra/launcher") for k in d) for d in defaults
    )


def submits_jobs(overrides: Iterable[str]) -> list[str]:
    """The overrides that only a sweep honours: a launcher that submits jobs (`hydra/launcher=`
    other than basic, or a group option that picks one: a cluster profile) and runs per job
    (`launch.pack=` other than 1). In Hydra's run mode (no -m) the task runs here, ignoring
    them."""
    found = []
    for item in overrides:
        key, eq, value = str(item).lstrip("+").partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key.startswith(("~", "-")) or value in ("", "null"):
            continue
        if (
            (key == "hydra/launcher" and value != "basic")
            or (key == "launch.pack" and value != "1")
            or (key in config_groups() and _picks_a_launcher(key, value))
        ):
            found.append(str(item))
    return found


def group_options(group: str) -> list[str]:
    """The options of a config group: its conf/<group>/*.yaml, and for `model` the schemes that
    bring their entry themselves (a plug-in's `model_conf`, stored in Hydra's ConfigStore)."""
    names = {p.stem for p in (CONF / group).glob("*.yaml")}
    if group == "model":
        from andrea.model.residuals import registry

        names |= {s.name for s in registry.SCHEMES.values() if s.model_conf is not None}
    return sorted(names)


def _broken_model(group: str, option: str) -> str | None:
    """Why `model=<option>` is missing when a broken plug-in was to provide it, else None."""
    if group != "model":
        return None
    from andrea.model.residuals import registry

    return registry.unknown(option) if option in registry.BROKEN else None


def unknown_option_hints(overrides: Iterable[str]) -> list[str]:
    """One line per `group=option` whose option has no file (`size=tiny2`), with the nearest
    option; Hydra's own "Could not find 'size/tiny2'" came with exit 1 and no suggestion."""
    lines = []
    for key, value in _assignments(overrides):
        if key not in config_groups() or any(c in value for c in "()[]{}$*"):
            continue
        options = group_options(key)
        for v in (v.strip() for v in value.split(",")):
            if v in options or v in ("null", ""):
                continue
            broken = _broken_model(key, v)
            if broken:
                lines.append(f"error: {broken}")
                continue
            near = difflib.get_close_matches(v, options, n=1, cutoff=0.5)
            lines.append(
                f"error: {key}={v}: no such {key}"
                + (f" (did you mean {key}={near[0]}?)" if near else "")
                + f"; options: {', '.join(options)}"
            )
    return lines


def precheck(overrides: Iterable[str]) -> list[str]:
    """The errors the command line's overrides certainly hold, before Hydra composes anything:
    unknown keys (appended ones too), unknown group options and values of the wrong type. Found
    here, each is one `error:` line; found by Hydra, a type error came as Hydra's whole block
    (the message, the full key, the object type, the HYDRA_FULL_ERROR advice) and only then
    andrea's line."""
    overrides = list(overrides)
    unknown = unknown_key_hints(overrides)
    return (
        unknown
        + unknown_option_hints(overrides)
        + grammar_hints(overrides)
        + (wrong_type_hints(overrides) if not unknown else [])
    )


# Keys whose value is one path: a comma there is part of the path, never a sweep's separator.
PATH_KEYS = ("out_dir", "data.cache_dir", "data.tokenizer", "data.hf_name")
_SWEEP_FUNCTIONS = ("choice(", "range(", "interval(", "glob(")


def grammar_hints(overrides: Iterable[str]) -> list[str]:
    """One line per override Hydra's grammar refuses (its own report is four lines: the error,
    a caret, a link and the HYDRA_FULL_ERROR advice) or misreads: a path with a comma given to a
    one-path key is a sweep of two values there. Each line says how to quote the value, in a
    form that Hydra parses to the value meant and a POSIX shell passes unchanged."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    lines = []
    for item in (str(i) for i in overrides):
        if "=" not in item or item.startswith("-"):
            continue
        key, _, value = item.partition("=")
        try:
            parsed = parser.parse_override(item)
        except HydraException as e:
            lines.append(f"error: {item}: {_grammar_reason(key, value, e)}")
            continue
        bare = key.strip().lstrip("+~")
        if (
            bare in PATH_KEYS
            and parsed.is_sweep_override()
            and not value.strip().startswith(_SWEEP_FUNCTIONS)
        ):
            lines.append(
                f"error: {item}: Hydra reads each comma as a separator (a sweep over {bare}); a "
                f"path with a comma is one quoted value: {_shell_quoted(key, value) or QUOTING}"
            )
    return lines


QUOTING = "quote the value for Hydra inside the shell's quotes, e.g. \"out_dir='/data/my runs'\""


def _grammar_reason(key: str, value: str, error: Exception) -> str:
    """Why Hydra refused `value`, and what to write instead."""
    if ",," in value or value.rstrip().endswith(",") or value.lstrip().startswith(","):
        return (
            "an empty value between commas; a sweep is values separated by single commas, "
            "e.g. train.seed=0,1"
        )
    typed = _leaf_type(key.strip().lstrip("+~")) in (int, float, bool)
    fix = None if typed else _shell_quoted(key, value)
    reason = (
        "Hydra's override grammar takes only ASCII letters in an unquoted value"
        if not value.isascii()
        else f"Hydra's override grammar cannot read it ({str(error).splitlines()[0][:80]})"
    )
    if typed:  # a number or a boolean: quoting would make it a string
        return reason
    return f"{reason}; write it as {fix}" if fix else f"{reason}; {QUOTING}"


def _quoted(value: str) -> str:
    """The value quoted for Hydra: a string as one quoted string, a list [a,b] element by
    element (each already quoted element kept)."""

    def one(text: str) -> str:
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            return text
        return f'"{text}"' if "'" in text else f"'{text}'"

    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        return "[" + ",".join(one(e) for e in _split_top(v[1:-1]) if e.strip()) + "]"
    return one(v)


def _split_top(text: str) -> list[str]:
    """`text` split at its commas outside quotes."""
    parts, cur, quote = [], "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == ",":
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    return parts + [cur]


def _shell_quoted(key: str, value: str) -> str | None:
    """`"key='value'"`: the override with its value quoted for Hydra, inside the quotes a POSIX
    shell passes as one argument; None when Hydra would not parse even that."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    override = f"{key}={_quoted(value)}"
    try:
        OverridesParser.create().parse_override(override)
    except HydraException:
        return None
    if '"' not in override:
        return f'"{override}"'
    return f"'{override}'" if "'" not in override else None


def _leaf_type(key: str):
    """The declared type of a schema leaf (Optional unwrapped), or None if not a typed leaf."""
    cls, rest = _schema_node(key)
    return None if cls is None or rest or dataclasses.is_dataclass(cls) else cls


_TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _values(item: str):
    """The values Hydra would assign for one `key=value` override, parsed by Hydra's own
    grammar (1e-3 is a float, 1,2 a sweep of two ints, [1,2] a list); None when it cannot tell
    (a continuous sweep, or a line its grammar refuses, whose message Hydra gives itself)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        o = OverridesParser.create().parse_override(item)
    except HydraException:
        return None
    if o.is_sweep_override():
        return list(o.sweep_iterator()) if o.is_discrete_sweep() else None
    return [o.value()]


def wrong_type_hints(overrides: Iterable[str]) -> list[str]:
    """One line per override whose value the schema's type refuses (`train.lr=fast`), naming the
    key and the type it takes. Each value is parsed as Hydra parses it and assigned as Hydra
    assigns it (OmegaConf.update on the typed schema), so exactly the overrides Hydra refuses
    with "Error merging override" get a line, and no valid one does: precheck() runs this
    before Hydra."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from andrea.config.schema import RunConfig

    lines, nodes = [], {}
    for item in overrides:
        item = str(item)
        if "=" not in item or item.startswith(("~", "-")):
            continue
        key = item.split("=", 1)[0].strip().lstrip("+")
        if key.startswith("hydra") or key in config_groups() or "@" in key or "/" in key:
            continue
        tp = _leaf_type(key)
        if tp not in (int, float, bool, str):
            continue  # containers, enums and free nodes: Hydra's own message stands
        values = _values(item.lstrip("+"))
        for v in values or []:
            if isinstance(v, str) and "${" in v:
                continue  # an interpolation: its type is known once resolved
            parent, _, leaf = key.rpartition(".")
            if parent not in nodes:  # the leaf's own dataclass: RunConfig leaves `size` MISSING
                cls = _schema_node(parent)[0] if parent else RunConfig
                nodes[parent] = OmegaConf.structured(cls)
            try:
                OmegaConf.update(nodes[parent], leaf, v, merge=True)
            except OmegaConfBaseException:
                shown = item.split("=", 1)[1].strip() if len(values) == 1 else v
                lines.append(f"error: {key}={shown}: {key} takes {_TYPE_WORDS[tp]}")
    return lines


# Flags after which Hydra composes another config (whose out_dir this module cannot know) or
# runs nothing.
_NO_OUT_DIR_CHECK = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")
_NO_RUN = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion")


def out_dir_problem(overrides: Iterable[str]) -> Optional[str]:
    """An `error:` line when the run directories cannot be written: the command line's out_dir
    (else the default, runs/ under the current directory) lies below a file or in a folder
    that is not writable (permissions, a read-only file system). Checked before Hydra creates
    any folder, so no run starts, and none fails one by one; None for plan=true, which writes
    nothing."""
    overrides = [str(o) for o in overrides]
    if plan_requested(overrides) or any(o.split("=")[0] in _NO_RUN for o in overrides):
        return None
    given = [v for k, v in _assignments(overrides) if k == "out_dir"]
    if given:
        values = _values(f"out_dir={given[-1]}")
        if not values or len(values) != 1:
            return None  # a sweep over out_dir, or a value precheck refuses
        out_dir = str(values[0])
    elif any(o.split("=")[0] in _NO_OUT_DIR_CHECK for o in overrides):
        return None
    else:
        from andrea.config.schema import RunConfig

        out_dir = RunConfig.out_dir
    probe = Path(os.path.expanduser(out_dir)).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent  # the folder the missing ones would be created in
    if not probe.is_dir():
        return f"error: out_dir={out_dir}: {probe} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        why = "on a read-only file system" if read_only else "not writable by this user"
        return (
            f"error: out_dir={out_dir}: {probe} is {why}; nothing was launched: give "
            "out_dir=<a folder you can write>"
        )
    return None
