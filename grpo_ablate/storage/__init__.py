"""Where a study lives: an Optuna storage opened from a URL (store), the URL's kinds and masking (url), and the
journal file's lines, scanned and repaired before anything appends (journal)."""
