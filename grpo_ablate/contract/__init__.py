"""The parent-child contract: everything that crosses from the study (parent) to a trial process (child).

- spec.py: `TrialSpec`, the trial plan the parent resolves once and the child executes (spec.json);
- result.py: `TrialResult`, what the parent learns about a finished trial;
- env.py: environment variable names, flags and log prefixes both sides use, and the environment a launcher
  must set before the child starts (`forced_environment`, a command trial's `command_env`);
- files.py: where a trial's trainer writes, and the readers of what a trial leaves that the parent reads back;
- checkpoints.py: a checkpoint as a sealed, verified unit (the child seals it; the parent verifies, carries it into a
  retry's folder and removes it) and the spec fingerprint that ties it to its trial;
- cadence.py: how often a trial saves a checkpoint (one rule for the child, the dry run and a command trial);
- command.py: a command trial's command line (the user's script with the trial as its overrides), which
  `plan --commands` shows and the command worker runs;
- metrics.py: a trial's headline metrics, computed from its metrics.jsonl and eval.jsonl alone.

A low floor (tests/test_layering.py): the contract imports nothing from trainer/, launch/, study/,
preflight/ or config/, and the child (trainer/) imports nothing above it.
"""
