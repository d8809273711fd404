"""Names a package exports but loads on first use (PEP 562), so that `import dpcore` stays small:
a program that only calls collectives never loads the trainer or the cost model."""
import importlib


def exports(package, names):
    """A module __getattr__ for `package` that imports names[name] (a module relative to the
    package, ":attribute" for an attribute of it) on first use and keeps it in the package."""
    def __getattr__(name):
        where = names.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = where.partition(":")
        value = importlib.import_module(module, package)
        value = getattr(value, attribute) if attribute else value
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
