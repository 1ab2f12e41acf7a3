"""Fast tests (tier 1): the store on both engines, the CLI through CliRunner, pure rules."""
