"""Sandbox: each worker a separate, isolated, killable process with limits."""
