"""A PEP 517 build backend for the airlock package, standard library only.

It builds a pure-Python wheel of the airlock/ folder (and an sdist), so
`pip install ./sdk/python` works with no package index to fetch a build
backend from. Name and version come from pyproject.toml's [project] table,
read with a few lines below because tomllib is Python 3.11+.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "airlock"


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("[project]", 1)[1].split("\n[", 1)[0]
    fields = dict(re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', table, re.M))
    return (fields["name"], fields["version"], fields.get("description", ""), fields.get("requires-python", ""),
            fields.get("license", ""))


def _license():
    """The licence's text: the sdist's own copy, or the repository's LICENSE two folders up.

    A package that names a licence carries its text, so a build without it fails.
    """
    for path in (os.path.join(HERE, "LICENSE"), os.path.join(HERE, "..", "..", "LICENSE")):
        if os.path.exists(path):
            with open(path, "rb") as f:
                return f.read()
    raise FileNotFoundError("LICENSE: not in " + HERE + " nor at the repository's root; build from a full checkout")


def _files():
    for root, dirs, files in os.walk(os.path.join(HERE, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".typed")):
                full = os.path.join(root, f)
                yield full, os.path.relpath(full, HERE).replace(os.sep, "/")


def _extras():
    """[project.optional-dependencies] as (extra, [requirement, ...]) pairs: one line per extra, a list of strings."""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    if "[project.optional-dependencies]" not in text:
        return []
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return [(name, re.findall(r'"([^"]+)"', reqs)) for name, reqs in re.findall(r'^([\w-]+)\s*=\s*\[([^\]]*)\]', table, re.M)]


def _metadata():
    name, version, summary, requires, licence = _project()
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {summary}\n"
    if licence:
        meta += f"License: {licence}\n"
    if requires:
        meta += f"Requires-Python: {requires}\n"
    for extra, reqs in _extras():
        meta += f"Provides-Extra: {extra}\n"
        meta += "".join(f'Requires-Dist: {r}; extra == "{extra}"\n' for r in reqs)
    return name, version, meta


def _dist_info(name, version):
    return f"{name.replace('-', '_')}-{version}.dist-info"


def _wheel(wheel_directory, editable):
    name, version, meta = _metadata()
    dist = name.replace("-", "_")
    info = _dist_info(name, version)
    path = os.path.join(wheel_directory, f"{dist}-{version}-py3-none-any.whl")
    records = []

    def add(zf, arc, data):
        zf.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append(f"{arc},sha256={digest},{len(data)}")

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if editable:
            add(zf, f"{dist}.pth", (HERE + "\n").encode())
        else:
            for full, arc in _files():
                with open(full, "rb") as f:
                    add(zf, arc, f.read())
        add(zf, f"{info}/METADATA", meta.encode())
        add(zf, f"{info}/LICENSE", _license())
        add(zf, f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: airlock_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        records.append(f"{info}/RECORD,,")
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
    return os.path.basename(path)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    name, version, meta = _metadata()
    base = f"{name.replace('-', '_')}-{version}"
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as tf:
        def add(arc, data):
            ti = tarfile.TarInfo(f"{base}/{arc}")
            ti.size, ti.mtime, ti.mode = len(data), 0, 0o644
            tf.addfile(ti, io.BytesIO(data))
        for full, arc in _files():
            with open(full, "rb") as f:
                add(arc, f.read())
        for extra in ("pyproject.toml", "_build/airlock_build.py"):
            with open(os.path.join(HERE, extra), "rb") as f:
                add(extra, f.read())
        add("LICENSE", _license())
        add("PKG-INFO", meta.encode())
    return os.path.basename(path)
