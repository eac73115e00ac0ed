import json

from django.core.management.base import BaseCommand

from curation.management.commands._registries import origin, registries_lines, registries_report
from curation.selectors import plugin_task_seeds
from engine.episodes import plugin_packages, plugins
from engine.episodes.plugin_check import plugin_check, plugin_seeds_check


class Command(BaseCommand):
    help = (
        "List the installed environment plug-ins (entry point group passband.environments): name, origin (built-in "
        "or the installed package and version), module, tools, tables, state checks and the packages its tools "
        "use, and every plug-in refused at discovery with the reason; then, when no names are given, every "
        "verifier kind, world provider and export format, built-in or installed, and the refused ones. "
        "--install installs each plug-in's own packages (its REQUIREMENTS lock) on this host, as a worker does on "
        "first use. --check also runs each plug-in (reset, snapshot, dump/load, the same world read in the "
        "sandbox) and resets it in the sandbox from every seed its tasks name. "
        "Exits 1 when something is refused, cannot be installed or fails its check."
    )

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="Only these environments (all, and the registries, by default).")
        parser.add_argument("--check", action="store_true", help="Run each plug-in once, in the sandbox too.")
        parser.add_argument(
            "--install", action="store_true", help="Install each plug-in's own packages (its lock) on this host."
        )
        parser.add_argument("--json", dest="as_json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, names: list[str], check: bool, install: bool, as_json: bool, **options):
        found = plugins.discover()
        wanted = names or list(found.plugins) + [item.name for item in found.refused]
        report: dict = {"plugins": [], "refused": [], "unknown": []}
        for name in wanted:
            if name in found.plugins:
                report["plugins"].append(_plugin_entry(found.plugins[name], check=check, install=install))
            refused = [item for item in found.refused if item.name == name]
            report["refused"] += [
                {
                    "name": item.name,
                    "entry_point": item.value,
                    "package": item.distribution,
                    "version": item.version,
                    "error": item.error,
                }
                for item in refused
            ]
            if name not in found.plugins and not refused:
                report["unknown"].append({"name": name, "error": plugins.unknown_message(name, found)})
        if not names:
            report["registries"] = registries_report()
        failed = (
            report["refused"]
            or report["unknown"]
            or any(entry.get("problems") or entry["packages"].get("error") for entry in report["plugins"])
            or any(registry["refused"] for registry in report.get("registries", {}).values())
        )
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            self._print(report, check=check)
        if failed:
            raise SystemExit(1)

    def _print(self, report: dict, *, check: bool) -> None:
        if report["plugins"]:
            self.stdout.write(f"Environment plug-ins (entry point group {plugins.GROUP}):")
        for entry in report["plugins"]:
            where = f"module {entry['module']}"
            if entry["class"]:
                where += f", class {entry['class']}: stateful, one process per episode"
            self.stdout.write(f"{entry['name']}  ({entry['origin']}, {where})")
            self.stdout.write(f"  tools: {', '.join(entry['tools'])}")
            self.stdout.write(f"  tables: {', '.join(entry['tables'])}")
            if entry["state_checks"]:
                self.stdout.write(f"  state checks: {', '.join(entry['state_checks'])}")
            for line in _packages_lines(entry["packages"]):
                self.stdout.write(f"  {line}")
            if check:
                problems = entry["problems"]
                seeds = ", ".join(str(seed) for seed in entry["task_seeds"]) or "none"
                steps = "its episode process" if entry["class"] else "dump/load"
                ran = f"reset, {steps}, the sandbox, the tasks' seeds: {seeds}"
                self.stdout.write(f"  check: ok ({ran})" if not problems else "  check: FAILED")
                for problem in problems:
                    self.stdout.write(f"    - {problem}")
        for item in report["refused"]:
            package = f"{item['package']} {item['version']}, " if item["package"] else ""
            self.stdout.write(f"REFUSED {item['name']}  ({package}entry point {item['entry_point']})")
            self.stdout.write(f"  {item['error']}")
        for item in report["unknown"]:
            self.stdout.write(f"UNKNOWN {item['name']}: {item['error']}")
        if not report["plugins"] and not report["refused"] and not report["unknown"]:
            self.stdout.write(f"No environment plug-ins installed (entry point group {plugins.GROUP}).")
        for line in registries_lines(report.get("registries", {})):
            self.stdout.write(line)


def _plugin_entry(plugin: plugins.Plugin, *, check: bool, install: bool) -> dict:
    """One plug-in's report: what it declares, its packages (installed first with ``install``) and, with
    ``check``, the problems its check found."""
    entry = {
        "name": plugin.name,
        "package": plugin.distribution,
        "version": plugin.version,
        "origin": origin(plugin.distribution, plugin.version) if plugin.distribution else "installed: unknown package",
        "module": plugin.module_name,
        "class": plugin.attribute,  # a stateful plug-in's class ("" for a module)
        "tools": list(plugin.tool_names),
        "tables": list(plugin.tables),
        "state_checks": list(plugin.state_checks),
        "packages": _packages(plugin, install=install),
    }
    if check:
        seeds = plugin_task_seeds(environment=plugin.name)
        entry["task_seeds"] = sorted(seeds)
        entry["problems"] = plugin_check(plugin.name) + plugin_seeds_check(plugin.name, seeds=seeds)
    return entry


def _packages(plugin: plugins.Plugin, *, install: bool) -> dict:
    """Its DEPENDENCIES and its lock: the lock's file, requirements and, on this host, its folder (None: not
    installed here); with ``install``, installed first (``error`` when that failed)."""
    packages: dict = {"dependencies": list(plugin.dependencies), "lock": None}
    if plugin.lock is None:
        return packages
    if install:
        try:
            plugin_packages.install(plugin)
        except plugin_packages.InstallFailed as error:
            packages["error"] = str(error)
    packages["lock"] = plugin_packages.lock_report(plugin)
    return packages


def _packages_lines(packages: dict) -> list[str]:
    lines = [f"dependencies (installed beside Passband): {', '.join(packages['dependencies'])}"]
    lines = lines if packages["dependencies"] else []
    lock = packages["lock"]
    if lock is not None:
        where = lock["installed_at"] or "not installed on this host yet (a worker installs it on first use; --install)"
        listed = ", ".join(lock["requirements"])
        lines.append(f"own packages ({lock['file']}, lock sha256 {lock['sha256'][:12]}): {listed}: {where}")
        lines += [
            f"  {package['name']}=={package['version']}  sha256 {', '.join(package['hashes'])}"
            for package in lock["packages"]
        ]
    if packages.get("error"):
        lines.append(f"install: FAILED: {packages['error']}")
    return lines
