"""toolprune configuration: settings from the environment and the policy file."""
