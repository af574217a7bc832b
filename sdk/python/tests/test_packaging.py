"""`pip install ./sdk/python` needs no package index: the build backend is in the folder.

The wheel the in-tree backend builds holds the package and correct
metadata, and installs and imports away from the source folder (with pip
when this Python has it, and by unpacking the wheel, which is all that
installing a pure-Python wheel does, in any case).
"""

import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

from tests.support import PKG


def backend():
    spec = importlib.util.spec_from_file_location("airlock_build", os.path.join(PKG, "_build", "airlock_build.py"))
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def imports_from(path: str) -> str:
    """Imports airlock in a fresh interpreter with only path added, from an unrelated folder; returns its __file__."""
    out = subprocess.run([sys.executable, "-c", "import airlock, sys; print(airlock.__file__); airlock.Gate; airlock.Client"],
                         env=dict(os.environ, PYTHONPATH=path), cwd=tempfile.gettempdir(),
                         check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return out.stdout.decode().strip()


class PackagingTest(unittest.TestCase):
    def test_wheel_from_the_in_tree_backend(self) -> None:
        b = backend()
        self.assertEqual(b.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            name = b.build_wheel(d)
            self.assertEqual(name, "airlock_sdk-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(d, name)) as zf:
                names = set(zf.namelist())
                for f in ("airlock/__init__.py", "airlock/client.py", "airlock/gate.py", "airlock/journal.py",
                          "airlock/errors.py", "airlock/verify.py", "airlock/py.typed", "airlock_sdk-0.1.0.dist-info/METADATA",
                          "airlock_sdk-0.1.0.dist-info/WHEEL", "airlock_sdk-0.1.0.dist-info/RECORD"):
                    self.assertIn(f, names)
                meta = zf.read("airlock_sdk-0.1.0.dist-info/METADATA").decode()
                self.assertIn("Name: airlock-sdk\n", meta)
                self.assertIn("Requires-Python: >=3.9\n", meta)
                self.assertIn("License: Apache-2.0\n", meta)
                # cryptography is optional: only the verify extra asks for it.
                self.assertIn('Provides-Extra: verify\nRequires-Dist: cryptography; extra == "verify"\n', meta)
                self.assertEqual(meta.count("Requires-Dist:"), 1)
                with open(os.path.join(PKG, "..", "..", "LICENSE"), "rb") as f:
                    self.assertEqual(zf.read("airlock_sdk-0.1.0.dist-info/LICENSE"), f.read())
                self.assertFalse(any("tests/" in n or "__pycache__" in n for n in names))
                target = os.path.join(d, "site")
                zf.extractall(target)
            self.assertEqual(imports_from(target), os.path.join(target, "airlock", "__init__.py"))
            sdist = b.build_sdist(d)
            with tarfile.open(os.path.join(d, sdist)) as tf:
                self.assertIn("airlock_sdk-0.1.0/LICENSE", tf.getnames())

    def test_pip_install_without_an_index(self) -> None:
        if importlib.util.find_spec("pip") is None:
            self.skipTest("this Python has no pip; the wheel test above installs by unpacking")
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                            "--disable-pip-version-check", "--target", d, PKG],
                           check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.assertEqual(imports_from(d), os.path.join(d, "airlock", "__init__.py"))


if __name__ == "__main__":
    unittest.main()
