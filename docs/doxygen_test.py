#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Builds the API reference with every doxygen warning an error (WARN_AS_ERROR =
FAIL_ON_WARNINGS): an undocumented public declaration or a broken reference fails, listing each.
Without doxygen: skipped (exit 77), or failed when the environment variable CI is set."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--doxyfile", required=True)
    p.add_argument("--output", required=True, help="directory for this run's HTML")
    args = p.parse_args()
    doxygen = shutil.which("doxygen")
    if doxygen is None:
        message = "doxygen is not installed (scripts/install-deps installs it)"
        if os.environ.get("CI"):
            sys.exit("FAIL: " + message)
        print("SKIP: " + message)
        sys.exit(77)
    with open(args.doxyfile) as f:
        config = f.read()
    # The project's settings, then this run's: its own output, warnings fatal but all listed.
    config += f"\nOUTPUT_DIRECTORY = {args.output}\nWARN_AS_ERROR = FAIL_ON_WARNINGS\n"
    os.makedirs(args.output, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".Doxyfile", delete=False) as f:
        f.write(config)
        path = f.name
    try:
        run = subprocess.run([doxygen, path], capture_output=True, text=True, timeout=110)
    finally:
        os.unlink(path)
    output = (run.stdout + run.stderr).strip()
    if run.returncode != 0 or "warning:" in output or "error:" in output:
        print(output)
        sys.exit(f"FAIL: doxygen exit code {run.returncode}; every warning above is an error")
    index = os.path.join(args.output, "html", "index.html")
    if not os.path.exists(index):
        sys.exit("FAIL: doxygen wrote no " + index)
    print("doxygen: no warnings; reference in " + os.path.dirname(index))


if __name__ == "__main__":
    main()
