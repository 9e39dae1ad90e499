#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The repository stands alone: every source file carries its licence line, nothing cites files
that are not in the repository or tracker issue numbers, and every path the READMEs and docs/
name exists. Each failure is printed as FILE:LINE: what is wrong.

usage: tests/repo_hygiene_test.py [--root DIR] [unittest options]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SPDX = "SPDX-License-Identifier:"
SOURCE_EXTENSIONS = (".cpp", ".hpp", ".c", ".py", ".cmake")
# Citations of material outside the repository. Built from parts so that this file does not
# match itself.
OUTSIDE_NAMES = ["DESIGN" + ".md", "VHOST-NOTES" + ".md", "SCENARIOS" + ".md", "STYLE" + ".md", ".." + "/shared"]
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
# Repository paths as READMEs and docs write them: `ws/core/ring.hpp`, `bench/compare --huge`.
PATH_PREFIXES = ("ws", "app", "docs", "tests", "bench", "scripts")
PATH_IN_TEXT = re.compile(r"(?<![\w./<>-])((?:%s)/[\w./*<>+-]*)" % "|".join(PATH_PREFIXES))
BACKQUOTED = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files():
    """Paths (relative to ROOT) of the files git tracks, or of every file when ROOT is not a git
    checkout (a source tarball): build trees and .git left out."""
    if shutil.which("git") and os.path.exists(os.path.join(ROOT, ".git")):
        r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, text=True)
        if r.returncode == 0:
            return sorted(p for p in r.stdout.split("\0") if p and os.path.isfile(os.path.join(ROOT, p)))
    out = []
    for base, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
        out += [os.path.relpath(os.path.join(base, f), ROOT) for f in files]
    return sorted(out)


def read_lines(path):
    with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def is_script(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read(2) == b"#!"


def needs_licence_line(path):
    """Source files: C++, C, Python, CMake, and the scripts (scripts/*, bench/*, .ci/run, anything
    with a shebang); not fuzz seeds, docs or data."""
    if path.startswith("fuzz/corpus/") or path.endswith((".md", ".json")):
        return False
    name = os.path.basename(path)
    return (path.endswith(SOURCE_EXTENSIONS) or name == "CMakeLists.txt" or path.startswith(("scripts/", "bench/"))
            or path == ".ci/run" or is_script(path))


def markdown_docs(files):
    return [p for p in files if os.path.basename(p) == "README.md" or (p.startswith("docs/") and p.endswith(".md"))]


def path_exists(path):
    """Whether a repository path as a doc writes it names something: a glob matches at least one
    file, a placeholder (`ws/drivers/<name>/`) has its leading folders."""
    path = path.rstrip(".,:;")
    if "<" in path:
        path = path[:path.index("<")]
        path = path[:path.rfind("/") + 1] if "/" in path else path
    if "*" in path:
        return bool(glob.glob(os.path.join(ROOT, path)))
    return os.path.exists(os.path.join(ROOT, path))


def paths_named(line):
    """Repository paths in a line's backquoted spans (and in whole lines of fenced code)."""
    for span in BACKQUOTED.findall(line):
        yield from PATH_IN_TEXT.findall(span)


class RepoHygiene(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = tracked_files()

    def report(self, problems, what):
        if problems:
            self.fail("{} ({}):\n{}".format(what, len(problems), "\n".join(problems)))

    def test_every_source_file_has_a_licence_line(self):
        problems = []
        for path in self.files:
            if needs_licence_line(path) and not any(SPDX in line for line in read_lines(path)[:3]):
                problems.append("{}:1: no '{} BSD-3-Clause' line in the first 3 lines".format(path, SPDX))
        self.report(problems, "source files without a licence line")

    def test_nothing_cites_files_outside_the_repository_or_issue_numbers(self):
        problems = []
        for path in self.files:
            for number, line in enumerate(read_lines(path), 1):
                for name in OUTSIDE_NAMES:
                    if name in line:
                        problems.append("{}:{}: cites '{}', which is not in the repository: {}".format(
                            path, number, name, line.strip()))
                m = ISSUE_NUMBER.search(line)
                if m:
                    problems.append("{}:{}: cites '{}' (say what it is, or cite a doc in docs/): {}".format(
                        path, number, m.group(0), line.strip()))
        self.report(problems, "citations of outside files or issue numbers")

    def test_paths_in_readmes_and_docs_exist(self):
        problems = []
        for path in markdown_docs(self.files):
            here = os.path.dirname(path)
            fenced = False
            for number, line in enumerate(read_lines(path), 1):
                if line.lstrip().startswith("```"):
                    fenced = not fenced
                    continue
                named = list(PATH_IN_TEXT.findall(line)) if fenced else list(paths_named(line))
                for p in named:
                    if not path_exists(p):
                        problems.append("{}:{}: `{}` does not exist".format(path, number, p))
                for target in LINK.findall(line):
                    if re.match(r"[a-z]+:", target) or target.startswith("#"):
                        continue  # a URL or an anchor in the same page
                    target = target.split("#")[0]
                    if not os.path.exists(os.path.normpath(os.path.join(ROOT, here, target))):
                        problems.append("{}:{}: link ({}) does not exist".format(path, number, target))
        self.report(problems, "paths named in READMEs and docs/ that do not exist")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--root")
    args, rest = parser.parse_known_args()
    if args.root:
        ROOT = os.path.abspath(args.root)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
