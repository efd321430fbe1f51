"""Fails when a lock file in requirements/ no longer matches its inputs (`make lock-check`, run by .ci/run).

Offline: it reads setup.cfg, requirements/tools.in and the three locks, and reaches no index. A lock is stale when a
dependency was added or removed (the lock's "# via parley (setup.cfg)" / "# via -r requirements/tools.in" set differs
from the inputs), when a pinned version falls outside its bound, or when a pin has no hash; and the test set is wrong
when it pins a runtime package to another version than the runtime lock (the test extra must not change what
production runs). `make lock` regenerates them."""
import configparser
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
REQ = ROOT / "requirements"


def read_lock(path):
    """{name: (version, hashed, {what pulled it in})} from a uv/pip-tools lock with hashes and annotations."""
    pins, current, in_via = {}, None, False
    for line in path.read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9._-]+)(\[[^\]]*\])?==([^\s;\\]+)", line)
        if pin:
            current = canonicalize_name(pin.group(1))
            pins[current] = [pin.group(3), False, set()]
            in_via = False
        elif current and "--hash=sha256:" in line:
            pins[current][1] = True
        elif current and (via := re.match(r"^\s+# via\s*(.*)$", line)):
            in_via = True
            if via.group(1):
                pins[current][2].add(via.group(1).strip())
        elif current and in_via and (more := re.match(r"^\s+#\s+(\S.*)$", line)):
            pins[current][2].add(more.group(1).strip())
        elif not line.strip() or not line.startswith(" "):
            in_via = False
    return pins


def input_requirements(lines):
    return [Requirement(line.split("#")[0].strip()) for line in lines if line.split("#")[0].strip()]


def check(lock_name, requirements, via):
    """The problems of one lock against the requirements it was compiled from."""
    path = REQ / lock_name
    if not path.exists():
        return [f"{lock_name} is missing"], {}
    pins = read_lock(path)
    problems = [f"{lock_name}: {name}=={version} has no --hash" for name, (version, hashed, _) in pins.items()
                if not hashed]
    wanted = {canonicalize_name(req.name): req for req in requirements}
    for name, req in wanted.items():
        if name not in pins:
            problems.append(f"{lock_name}: {req} is in the inputs but not in the lock")
        elif not req.specifier.contains(pins[name][0], prereleases=True):
            problems.append(f"{lock_name}: {name}=={pins[name][0]} is outside the input's bound {req}")
    direct = {name for name, (_, _, vias) in pins.items() if via in vias}
    for name in sorted(direct - set(wanted)):
        problems.append(f"{lock_name}: {name} was an input when the lock was made, and no longer is")
    return problems, pins


def main():
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    runtime = input_requirements(setup["options"]["install_requires"].splitlines())
    extras = setup["options.extras_require"]
    dev = runtime + input_requirements(extras["test"].splitlines() + extras["lint"].splitlines())
    tools = input_requirements((REQ / "tools.in").read_text().splitlines())

    problems, runtime_pins = check("runtime.txt", runtime, "parley (setup.cfg)")
    dev_problems, dev_pins = check("dev.txt", dev, "parley (setup.cfg)")
    tools_problems, _ = check("tools.txt", tools, "-r requirements/tools.in")
    problems += dev_problems + tools_problems
    for name, (version, _, _) in runtime_pins.items():
        if name in dev_pins and dev_pins[name][0] != version:
            problems.append(f"dev.txt pins {name}=={dev_pins[name][0]}, the runtime lock {version}: "
                            "the test set would change what production runs")
        elif name not in dev_pins:
            problems.append(f"dev.txt lacks the runtime package {name}=={version}")
    if problems:
        print("The lock files are stale (run `make lock` and commit requirements/):", file=sys.stderr)
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        return 1
    print(f"lock files match setup.cfg and requirements/tools.in ({len(runtime_pins)} runtime, {len(dev_pins)} dev "
          "packages, all hashed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
