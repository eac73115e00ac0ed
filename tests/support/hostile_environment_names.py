"""Where tests/support/hostile_tool_environment.py would leave its marks: named here so that a test can look for
them without importing the hostile module itself."""

HOSTILE_TOOL_ENVIRONMENT = "tests.support.hostile_tool_environment"
TOOL_MARKER = "/tmp/passband-hostile-tool-environment-ran"
TOOL_MARK = "__passband_hostile_tool_environment_ran_in__"
