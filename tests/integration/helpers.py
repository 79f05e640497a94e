"""Shared pieces of the integration tests."""

from __future__ import annotations

from pathlib import Path


def wandb_offline_env(root: Path) -> dict[str, str]:
    """Environment for a real ``wandb.init`` writing offline runs under ``root``: no network, no
    git or code capture, nothing written to the real home directory."""
    return {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(root),
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "HOME": str(root),
    }
