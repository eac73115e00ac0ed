"""The verifiers v1 taskset id `passband-release`: verifiers imports tasksets and harnesses by top-level
package name. The code lives in engine.integrations.verifiers_taskset."""

from engine.integrations.verifiers_taskset import (
    PassbandChatHarness,
    PassbandChatHarnessConfig,
    PassbandEnv,
    PassbandEnvConfig,
    PassbandTaskset,
    PassbandTasksetConfig,
)

__all__ = [
    "PassbandChatHarness",
    "PassbandChatHarnessConfig",
    "PassbandEnv",
    "PassbandEnvConfig",
    "PassbandTaskset",
    "PassbandTasksetConfig",
]
