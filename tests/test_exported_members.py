"""The Python API: every name firedup exports is importable from it, documented,
and presented as firedup's (its modules are private, as httpx keeps its own)."""

import importlib.util
import pkgutil

import firedup


def test_all_exports_are_importable_documented_and_firedups():
    assert firedup.__all__ == sorted(firedup.__all__, key=str.casefold)
    for name in firedup.__all__:
        member = getattr(firedup, name)
        assert member.__module__ == "firedup", name
        assert (member.__doc__ or "").strip(), f"{name} has no docstring"


def test_no_exported_name_is_also_a_module():
    """firedup.launch is the function: no module firedup.launch shadows it, or is shadowed by it."""
    modules = {m.name for m in pkgutil.iter_modules(firedup.__path__)}
    assert not modules & set(firedup.__all__)
    for name in firedup.__all__:
        assert importlib.util.find_spec(f"firedup.{name}") is None, name


def test_public_names_of_the_package_are_exported():
    """What ``import firedup`` shows without an underscore is in __all__, but for
    its subpackages and the modules behind the command line."""
    import types

    shown = {n for n, v in vars(firedup).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert shown == set(firedup.__all__)
