"""The ground floor: words and small pure rules every other package may use, importing nothing of the package above.

vocab (Arm, Outcome, file names), errors (StudyError, Problem), bounds (the value ranges a user may type),
schedule (a G schedule), space (the feasible (G, generation batch) arithmetic TRL accepts), cost (the run's
price in units of its steps: warmup steps, LR schedule), safe_read (reading a file a user names without following
what it should not), prompt_file (a prompts file), precision and attention (the trial's dtype and attention
rules, decided on the machine the trial runs on), children (how a child process finds this package).
"""
