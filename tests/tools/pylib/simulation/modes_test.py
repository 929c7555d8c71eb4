"""tools/pylib/simulation/modes.py and policy.py: make() gives each mode its policy, and the
package's modules import one another without a cycle (the graph is read from every import
statement, those inside functions too, and every module imports first in a fresh interpreter)."""

import ast
import os
import subprocess
import sys
import unittest

from pylib import simulation
from pylib.simulation import elastic, modes, r2sp_mode
from pylib.simulation.engine import Simulation
from pylib.simulation.policy import Policy
from pylib.simulation.scenario import MODES, Scenario
import junit_main

PACKAGE = "pylib.simulation"
PACKAGE_DIR = os.path.dirname(os.path.abspath(simulation.__file__))

# What the policy modules import from the package: modes sits above every policy and no
# policy module imports it.
POLICY_EDGES = {
    "modes": {"elastic", "policy", "r2sp_mode"},
    "policy": set(),
    "elastic": {"policy"},
    "r2sp_mode": {"policy", "slots"},
}


def package_modules():
    """The package's module names (no __init__)."""
    return sorted(f[:-3] for f in os.listdir(PACKAGE_DIR)
                  if f.endswith(".py") and f != "__init__.py")


def _imported(node, names):
    """The package's modules that one import node names, of `names`."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:  # relative: from . import x, from .x import y
            base = node.module.split(".")[0] if node.module else None
            return {base} if base else {a.name for a in node.names} & names
        if node.module == PACKAGE:
            return {a.name for a in node.names} & names
        targets = [node.module or ""]
    elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
          and isinstance(node.args[0].value, str)
          and getattr(node.func, "attr", getattr(node.func, "id", None))
          in ("import_module", "__import__")):
        targets = [node.args[0].value]
    else:
        return set()
    out = set()
    for t in targets:
        if t.startswith(PACKAGE + "."):
            out.add(t[len(PACKAGE) + 1:].split(".")[0])
    return out & names


def imports_of(source, names):
    """(every package module that `source` imports anywhere, those imported at module level)."""
    tree = ast.parse(source)
    everywhere = set()
    for node in ast.walk(tree):
        everywhere |= _imported(node, names)
    top = set()
    for node in tree.body:
        top |= _imported(node, names)
    return everywhere, top


def import_graph():
    """{module: (package modules it imports anywhere, those imported at module level)}."""
    names = set(package_modules())
    graph = {}
    for name in names:
        with open(os.path.join(PACKAGE_DIR, name + ".py"), encoding="utf-8") as f:
            graph[name] = imports_of(f.read(), names)
    return graph


def find_cycle(edges):
    """A cycle of `edges` ({node: set of nodes}) as a list [a, b, ..., a], or None."""
    state = {}  # node -> 1 while on the path, 2 when done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


class MakeTest(unittest.TestCase):
    def test_every_mode_has_its_policy(self):
        expected = {"bsp": modes.Bsp, "ssp": modes.Ssp, "asp": modes.Asp,
                    "r2sp": r2sp_mode.R2sp, "easgd": elastic.Elastic, "eawild": elastic.Elastic}
        self.assertEqual(set(expected), set(MODES))
        for mode, cls in expected.items():
            sim = Simulation(Scenario(mode=mode, workers=2, iterations=2, skip=0))
            self.assertIs(type(sim.mode), cls, mode)
            self.assertIsInstance(sim.mode, Policy)
            policy = modes.make(sim.sc, sim)
            self.assertIs(type(policy), cls, mode)
            self.assertIs(policy.sim, sim)

    def test_policy_keeps_its_old_name(self):
        self.assertIs(modes.Policy, Policy)


class ImportGraphTest(unittest.TestCase):
    def test_the_policy_modules_edges(self):
        graph = import_graph()
        for name, expected in POLICY_EDGES.items():
            everywhere, top = graph[name]
            self.assertEqual(everywhere, expected, name)
            self.assertEqual(top, expected, f"{name} imports the package inside a function")

    def test_no_cycle(self):
        graph = import_graph()
        self.assertGreater(len(graph), len(POLICY_EDGES))
        self.assertIsNone(find_cycle({n: e for n, (e, _) in graph.items()}))

    def test_a_function_level_cycle_is_found(self):
        # A function-level import closing a loop counts as much as a module-level one.
        names = {"modes", "elastic", "policy"}
        modes_src = ("class Policy:\n    pass\n\n"
                     "def make():\n    from pylib.simulation import elastic\n")
        elastic_src = "from pylib.simulation.modes import Policy\n"
        everywhere, top = imports_of(modes_src, names)
        self.assertEqual((everywhere, top), ({"elastic"}, set()))
        edges = {"modes": everywhere, "elastic": imports_of(elastic_src, names)[0]}
        self.assertEqual(find_cycle(edges), ["elastic", "modes", "elastic"])
        self.assertIsNone(find_cycle({"modes": {"elastic", "policy"}, "elastic": {"policy"}}))

    def test_the_import_forms_read(self):
        names = {"a", "b", "c", "d", "e", "f"}
        src = ("import pylib.simulation.a\n"
               "from pylib.simulation.b import X\n"
               "from pylib.simulation import c, other\n"
               "from . import d\n"
               "def f():\n    importlib.import_module('pylib.simulation.e')\n"
               "    from .f import Y\n"
               "import json\nfrom collections import defaultdict\n")
        self.assertEqual(imports_of(src, names), (names, {"a", "b", "c", "d"}))

    def test_every_module_imports_first_in_a_fresh_interpreter(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for name in package_modules():
            with self.subTest(module=name):
                r = subprocess.run([sys.executable, "-c", f"import {PACKAGE}.{name}"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   universal_newlines=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout)


if __name__ == "__main__":
    junit_main.main()
