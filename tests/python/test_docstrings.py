"""Every public name of the grist package says what it is, and every keyword its meaning and default.

The package is walked, not listed: `grist` and each public submodule (`grist.grain`,
`grist.jax`, `grist.tfds`, `grist.beam`, and any added later), their `__all__` or else their
non-underscore names defined in the package. For each:
- a function or class has a docstring of its own, and so has every public method and
  property a class of the package defines (C types included), unless a base class documents
  the same name (a protocol method such as Beam's `expand`);
- every parameter of its signature is explained: named in the docstring outside the
  signature line, and, when it has a default, that default is written in the docstring;
- grist.Loader's help lists every option of libgrist's table with its default, as `grist
  load --options` does (test_api.py holds the stubs, _grist.pyi, to the extension).
A submodule whose optional dependency is missing (apache_beam for grist.beam) is skipped.
"""
import importlib
import inspect
import pkgutil
import pydoc
import re

import pytest

import grist
from grist import _grist


def submodules():
    names = ["grist"]
    for info in pkgutil.iter_modules(grist.__path__):
        if not info.name.startswith("_"):
            names.append("grist." + info.name)
    return names


def load(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:  # an optional dependency (apache_beam, jax, ...), never grist itself
        if (e.name or "").startswith("grist"):
            raise
        pytest.skip("%s needs %s" % (name, e.name))


def public(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and (getattr(v, "__module__", "") or "").startswith("grist")]
    out = []
    for n in names:
        v = getattr(module, n)
        if inspect.isclass(v) or inspect.isroutine(v):
            out.append((n, v))
    return out


def own_doc(obj):
    doc = obj.__doc__ if inspect.isclass(obj) else inspect.getdoc(obj)
    return inspect.cleandoc(doc) if doc else ""


def full_doc(obj):
    """What help() shows of obj's own text: the class docstring and its __init__'s, if written."""
    doc = own_doc(obj)
    init = vars(obj).get("__init__") if inspect.isclass(obj) else None
    if init is not None and inspect.getdoc(init) and inspect.getdoc(init) not in doc:
        doc += "\n\n" + inspect.getdoc(init)
    return doc


def signature(obj):
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):  # a C type or function without __text_signature__
        return None


def body(doc, name):
    """The docstring less a leading signature paragraph 'name(...)' (the meaning must be elsewhere)."""
    paras = doc.split("\n\n")
    if paras and re.match(r"^(\w+\.)*%s\(" % re.escape(name), paras[0]):
        paras = paras[1:]
    return "\n\n".join(paras)


def default_texts(value):
    if value is None or isinstance(value, bool):
        return [repr(value)]
    if isinstance(value, str):
        return ['"%s"' % value, "'%s'" % value] + (["empty"] if value == "" else [])
    return [repr(value), str(value)]


def member_problems(cls):
    bad = []
    for klass in cls.__mro__:
        if not (klass.__module__ or "").startswith("grist"):
            continue
        for n, v in vars(klass).items():
            if n.startswith("_") or not (inspect.isroutine(v) or isinstance(v, property)
                                         or inspect.isgetsetdescriptor(v) or inspect.ismemberdescriptor(v)
                                         or isinstance(v, (staticmethod, classmethod))):
                continue
            if (getattr(v, "__doc__", None) or "").strip():
                continue
            documented = any((getattr(vars(b).get(n), "__doc__", None) or "").strip()
                             for b in cls.__mro__ if b is not klass and n in vars(b))
            if not documented:
                bad.append("%s.%s: no docstring" % (cls.__name__, n))
    return bad


def keyword_problems(name, obj):
    sig = signature(obj)
    if sig is None:
        return []
    doc = full_doc(obj)
    text = body(doc, name)
    bad = []
    for p in sig.parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if not re.search(r"(?<![\w.])%s(?!\w)" % re.escape(p.name), text):
            bad.append("%s: parameter %s is not explained" % (name, p.name))
        if p.default is not p.empty and not any(t in doc for t in default_texts(p.default)):
            bad.append("%s: the default of %s (%r) is not said" % (name, p.name, p.default))
    return bad


@pytest.mark.parametrize("modname", submodules())
def test_public_names_are_documented(modname):
    module = load(modname)
    assert own_doc(module), "%s has no module docstring" % modname
    names = public(module)
    assert names, "%s exports nothing" % modname
    problems = []
    for n, obj in names:
        if not own_doc(obj):
            problems.append("%s.%s: no docstring" % (modname, n))
            continue
        if inspect.isclass(obj):
            problems += member_problems(obj)
        problems += keyword_problems(n, obj)
    assert not problems, "%s:\n  %s" % (modname, "\n  ".join(problems))


def test_loader_help_lists_every_table_option_with_its_default():
    text = re.sub(r"(?m)^ \|  ?", "", pydoc.render_doc(grist.Loader, renderer=pydoc.plaintext))
    table = _grist.loader_options()
    assert {"batch_size", "seed", "read_ahead", "verify"} <= {o["name"] for o in table}
    bad = []
    for o in table:
        m = re.search(r"^\s*%s: (.*(?:\n\s{6,}.*)*)" % o["name"], text, re.M)
        if not m:
            bad.append("%s: not listed" % o["name"])
        elif o["help"].split()[0] not in m.group(1) or (o["default"] and o["default"] not in " ".join(m.group(1).split())):
            bad.append("%s: listed without its meaning or default: %r" % (o["name"], m.group(1)))
    assert not bad, "help(grist.Loader):\n  " + "\n  ".join(bad)

