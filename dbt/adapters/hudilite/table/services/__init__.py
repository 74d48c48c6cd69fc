"""Table services and table management: cleaning, archival, clustering, savepoints and
restore, validation, and the runner that schedules them after each write (`maintenance`)."""
