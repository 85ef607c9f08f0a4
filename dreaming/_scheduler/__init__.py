"""The scheduler's parts; the public names are in `dreaming.scheduler`."""
