"""Shared setup for the backend tests: offline Hugging Face, and the repository root importable."""

import os
import sys
from pathlib import Path

# Set before transformers (and huggingface_hub) are imported: nothing may be downloaded.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# With --import-mode=importlib pytest puts nothing on sys.path; plain `pytest` (not `python -m
# pytest`) would then miss `calibration` and `tests.support`.
_REPOSITORY_ROOT = str(Path(__file__).resolve().parents[3])
if _REPOSITORY_ROOT not in sys.path:
    sys.path.insert(0, _REPOSITORY_ROOT)
