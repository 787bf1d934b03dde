# Regenerate tests/data/xpk_1.16.0_flags.json from an unpacked xpk 1.16.0 wheel (src at /tmp/xpk/src):
#   STUB=tabulate,ruamel,setuptools_scm,argcomplete,google.cloud.resourcemanager_v3,google.cloud.storage,docker,google.cloud.filestore_v1,google \
#     python tests/data/extract_xpk_flags.py  (then wrap the output with "source"/"xpk_version" keys)
# Missing third-party imports are stubbed: only argparse definitions are read.
import sys, importlib.abc, importlib.machinery, json, argparse
from unittest import mock
sys.path.insert(0, '/tmp/xpk/src')
import os; os.environ['XPK_VERSION_OVERRIDE'] = '1.16.0'
STUB = set(os.environ.get('STUB','tabulate').split(','))
class Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if not any(name == s or name.startswith(s + '.') for s in STUB): return None
        try:
            for f in sys.meta_path:
                if f is self: continue
                s = f.find_spec(name, path, target) if hasattr(f,'find_spec') else None
                if s: return None
        except Exception: pass
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        m = mock.MagicMock(); m.__path__ = []; m.__name__ = spec.name; m.__spec__ = spec; return m
    def exec_module(self, m): pass
sys.meta_path.append(Stub())
from xpk.parser.core import set_parser
p = argparse.ArgumentParser(prog='xpk'); set_parser(parser=p)
def sub(parser, name):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction): return a.choices[name]
cl = sub(p, 'cluster')
out = {}
for cmd in ('create', 'delete'):
    sp = sub(cl, cmd)
    flags = {}
    for a in sp._actions:
        if not a.option_strings or '-h' in a.option_strings: continue
        if isinstance(a, argparse._StoreTrueAction): kind = 'store_true'
        elif isinstance(a, argparse.BooleanOptionalAction): kind = 'boolean_optional'
        elif isinstance(a, argparse._StoreAction): kind = 'value'
        else: kind = type(a).__name__
        e = {"kind": kind}
        if a.required: e["required"] = True
        if kind == 'value':
            e["type"] = getattr(a.type, '__name__', None) or 'str'
            if a.nargs: e["nargs"] = a.nargs
            if a.choices: e["choices"] = list(a.choices)
        name = next(o for o in a.option_strings if not o.startswith('--no-')) if kind == 'boolean_optional' else a.option_strings[0]
        if len(a.option_strings) > 1: e["aliases"] = sorted(a.option_strings)
        flags[name] = e
    groups = [sorted(x.option_strings[0] for x in g._group_actions) for g in sp._mutually_exclusive_groups]
    req = [g.required for g in sp._mutually_exclusive_groups]
    out[cmd] = {"flags": dict(sorted(flags.items())), "mutually_exclusive": [{"flags": g, "required": r} for g, r in zip(groups, req)]}
print(json.dumps(out, indent=1))
