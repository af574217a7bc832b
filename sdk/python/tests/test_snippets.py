"""The Python snippets of README.md and docs/ run as printed.

Each block marked ``<!-- snippet: NAME -->`` on the line before its fence
runs in its own interpreter against the real server, with the environment
it says it reads (AIRLOCK_URL, AIRLOCK_AGENT_TOKEN); a reviewer approves
what it asks. The quick-start runs twice: the second run finds its instance
by name and its call's outcome, and asks nothing. A Python block marked
neither to run nor ``<!-- not run: WHY -->`` fails the test.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from typing import Dict, List, Set, Tuple

from tests.support import PKG, REPO, ModuleServer

srv = ModuleServer()
setUpModule, tearDownModule = srv.start, srv.stop

_MARK = re.compile(r"^<!-- snippet: (.+?)(?: \(run by [^)]*\))? -->$")
_SKIP = re.compile(r"^<!-- not run: .+ -->$")


def python_snippets() -> List[Tuple[str, int, str, str]]:
    """(file, line, name, code) of every Python block in README.md and docs/; raises on an unmarked one."""
    files = [os.path.join(REPO, "README.md")]
    for d, _, names in os.walk(os.path.join(REPO, "docs")):
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    found, unmarked = [], []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        i = 0
        while i < len(lines):
            m = re.match(r"^```(\w+)\s*$", lines[i])
            if not m:
                i += 1
                continue
            end = lines.index("```", i + 1)
            if m.group(1) in ("python", "py"):
                before = lines[i - 1] if i > 0 else ""
                mark = _MARK.match(before)
                rel = os.path.relpath(f, REPO)
                if mark:
                    found.append((rel, i + 1, mark.group(1), "\n".join(lines[i + 1:end]) + "\n"))
                elif not _SKIP.match(before):
                    unmarked.append(f"{rel}:{i + 1}")
            i = end + 1
    if unmarked:
        raise AssertionError("Python blocks no test runs; mark each with <!-- snippet: NAME --> and run it, "
                             "or <!-- not run: WHY -->: " + ", ".join(unmarked))
    return found


def snippet(name: str) -> Tuple[str, int, str, str]:
    """The block called name; fails when there is none, or when its copies differ."""
    all_ = [s for s in python_snippets() if s[2] == name]
    if not all_:
        raise AssertionError(f"no Python block is marked <!-- snippet: {name} --> in README.md or docs/")
    for s in all_[1:]:
        if s[3] != all_[0][3]:
            raise AssertionError(f'the "{name}" snippet at {s[0]}:{s[1]} differs from the one at {all_[0][0]}:{all_[0][1]}')
    return all_[0]


class SnippetTest(unittest.TestCase):
    def run_snippet(self, code: str, work: str) -> Tuple[str, int]:
        """Runs code in work with the agent's environment; a reviewer approves what it asks. Returns (stdout, approvals)."""
        env: Dict[str, str] = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
        env.update(AIRLOCK_URL=srv.url, AIRLOCK_AGENT_TOKEN=srv.agent_token,
                   PYTHONPATH=PKG + os.pathsep + env.get("PYTHONPATH", ""))
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        approved: Set[str] = set()
        done = threading.Event()
        out: List[str] = []

        def collect() -> None:
            o, e = proc.communicate()
            out.extend([o, e])
            done.set()
        threading.Thread(target=collect, daemon=True).start()
        while not done.is_set():
            for r in srv.reviewer.list_requests(state="pending")["items"]:
                if r["id"] not in approved:
                    approved.add(r["id"])
                    srv.reviewer.approve(r["id"], "fine")
            done.wait(0.025)
        self.assertEqual(proc.returncode, 0, f"the snippet exited {proc.returncode}:\n{out[0]}\n{out[1]}")
        return out[0], len(approved)

    def test_every_python_block_is_marked(self) -> None:
        names = {s[2] for s in python_snippets()}
        self.assertIn("python quick-start", names)

    def test_quick_start_runs_as_printed_and_a_restart_asks_nothing(self) -> None:
        file, _, _, code = snippet("python quick-start")
        self.assertIn("README.md", [s[0] for s in python_snippets() if s[2] == "python quick-start"],
                      "the README prints the quick-start")
        work = tempfile.mkdtemp(prefix="airlock-py-snippet-")
        self.addCleanup(shutil.rmtree, work, True)
        out, approvals = self.run_snippet(code, work)
        self.assertIn("refunded 500 cents on A-17\n", out)
        self.assertEqual(approvals, 1)
        out, approvals = self.run_snippet(code, work)
        self.assertNotIn("refunded 500", out)
        self.assertIn("already used; it is not run again", out)
        self.assertEqual(approvals, 0, "the restart asked again")
        named = [i for i in srv.admin.list_instances() if i["name"] == "billing-agent"]
        self.assertEqual(len(named), 1, "the restart registered a second instance")
        reqs = srv.admin.list_requests(instance_id=named[0]["id"])["items"]
        self.assertEqual([(r["tool"], r["execution"]["status"]) for r in reqs], [("refund", "succeeded")])


if __name__ == "__main__":
    unittest.main()
