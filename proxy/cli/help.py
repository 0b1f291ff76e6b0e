"""Help texts of the ``toolprune`` command line: defaults shown, and options that override a
``TOOLPRUNE_*`` setting say which one and its built-in default."""

from __future__ import annotations

import argparse

from config.settings import Settings


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults-showing formatter, minus the noise: no "(default: None)" for an
    option without a default, nor "(default: False)" for a switch. Descriptions are printed
    as written (paragraphs and examples kept)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def from_setting(field: str) -> str:
    """``"(default: $TOOLPRUNE_<FIELD>, else <built-in default>)"`` for the option that
    overrides setting ``field`` of :class:`config.settings.Settings`; KeyError when there
    is no such setting."""
    default = Settings.model_fields[field].default
    shown = "unset" if default is None else default
    return f"(default: ${Settings.model_config['env_prefix']}{field.upper()}, else {shown})"
