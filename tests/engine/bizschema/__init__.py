"""A business component's migrations, as umt's records package would ship them (tests)."""
