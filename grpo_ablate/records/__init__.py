"""What trials and races leave in their study, and its one reader: a trial's user attributes (trial_record), a
race's rounds and drops (race_record), and the GPU-hours trials spent (gpu_hours). Writers are study/ledger.py and
the trial itself; everything else reads through here."""
