"""What benchmarks/gpu_check.sh needs to know before it starts: the Python, numpy, pytest and
torch it found, whether that torch sees a CUDA device, and which. Prints one line each and
writes them to ``$OUT/environment.json`` when OUT is set.

Exit status: 0 when a CUDA torch is usable, 3 when torch is missing, 4 when it has no CUDA
device (the script then stops: the check is about the GPU), 5 when numpy or pytest is missing.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def main() -> int:
    info: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform()}
    status = 0
    for name in ("numpy", "pytest"):
        try:
            info[name] = importlib.import_module(name).__version__
        except ImportError:
            info[name] = None
            status = 5
    try:
        import torch
    except ImportError:
        info["torch"] = None
        status = status or 3
    else:
        info["torch"] = torch.__version__
        info["torch_cuda_build"] = torch.version.cuda
        info["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(0)
            info["device_count"] = torch.cuda.device_count()
        else:
            status = status or 4
    for key, value in info.items():
        print(f"{key}: {value}")
    if status == 3:
        print("torch is not installed: pip install torch (a CUDA build), then rerun")
    elif status == 4:
        print("this torch sees no CUDA device (a CPU build, or no driver): nothing to check")
    elif status == 5:
        print("numpy and pytest are needed: pip install -e .[dev]")
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "environment.json").write_text(json.dumps(info, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main())
