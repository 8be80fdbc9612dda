"""The first line of a plug-in's test module: skip without the plug-in, fail under CI."""

from __future__ import annotations

import os


def require_plugin(scheme: str, package: str) -> None:
    """Skip the calling test module when the plug-in that provides `model=<scheme>` is not
    installed, naming the command that installs it; under CI=true (where every plug-in is
    installed) fail instead. Call it before importing anything of the plug-in."""
    import pytest

    from andrea.model.residuals import registry

    if scheme in registry.SCHEMES:
        return
    why = (
        f"the {package} plug-in is not installed: `make env` installs it, or "
        f"`.venv/bin/python -m pip install -e plugins/{package}`"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (under CI=true a missing plug-in fails)", pytrace=False)
    pytest.skip(why, allow_module_level=True)
