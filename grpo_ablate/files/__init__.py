"""The files the tool writes into a study's folder and reads back: probe.json, advise.json, and
the reader summary.json shares. Pure data (no torch, no optuna), beside `space`: config, plan and
study setup read them without importing the commands that write them (preflight, report).

Every file is read through one schema-validated reader (files/reader.py): a truncated file, a
mistyped field, or a file written for another study, model or hardware is an exit-2 error that
names the path and the fix, never a silent default or a traceback.

    python -c "from grpo_ablate.files.probe_file import probe_path; print(probe_path('runs/tiny-cpu'))"
"""
