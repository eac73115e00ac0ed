import json

from django.core.management.base import BaseCommand

from curation.selectors import plugin_task_seeds
from engine.episodes import plugins
from engine.episodes.plugin_check import plugin_check, plugin_seeds_check


class Command(BaseCommand):
    help = (
        "List the installed environment plug-ins (entry point group passband.environments): name, package and "
        "version, module, tools, tables and state checks, and every plug-in refused at discovery with the reason. "
        "--check also runs each one (reset, snapshot, dump/load, the same world read in the sandbox) and resets "
        "it in the sandbox from every seed its tasks name. "
        "Exits 1 when a plug-in is refused or fails its check."
    )

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="Only these environments (all by default).")
        parser.add_argument("--check", action="store_true", help="Run each plug-in once, in the sandbox too.")
        parser.add_argument("--json", dest="as_json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, names: list[str], check: bool, as_json: bool, **options):
        found = plugins.discover()
        wanted = names or list(found.plugins) + [item.name for item in found.refused]
        report: dict = {"plugins": [], "refused": [], "unknown": []}
        for name in wanted:
            if name in found.plugins:
                plugin = found.plugins[name]
                entry = {
                    "name": plugin.name,
                    "package": plugin.distribution,
                    "version": plugin.version,
                    "module": plugin.module_name,
                    "class": plugin.attribute,  # a stateful plug-in's class ("" for a module)
                    "tools": list(plugin.tool_names),
                    "tables": list(plugin.tables),
                    "state_checks": list(plugin.state_checks),
                }
                if check:
                    seeds = plugin_task_seeds(environment=name)
                    entry["task_seeds"] = sorted(seeds)
                    entry["problems"] = plugin_check(name) + plugin_seeds_check(name, seeds=seeds)
                report["plugins"].append(entry)
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
        failed = report["refused"] or report["unknown"] or any(entry.get("problems") for entry in report["plugins"])
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            self._print(report, check=check)
        if failed:
            raise SystemExit(1)

    def _print(self, report: dict, *, check: bool) -> None:
        for entry in report["plugins"]:
            origin = f"{entry['package']} {entry['version']}".strip() or "unknown package"
            where = f"module {entry['module']}"
            if entry["class"]:
                where += f", class {entry['class']}: stateful, one process per episode"
            self.stdout.write(f"{entry['name']}  ({origin}, {where})")
            self.stdout.write(f"  tools: {', '.join(entry['tools'])}")
            self.stdout.write(f"  tables: {', '.join(entry['tables'])}")
            if entry["state_checks"]:
                self.stdout.write(f"  state checks: {', '.join(entry['state_checks'])}")
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
