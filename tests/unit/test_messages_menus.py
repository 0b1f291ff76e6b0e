"""A client's deferred-tool menu, a system message inside ``messages`` (Claude Code with
``ENABLE_TOOL_SEARCH``), moved to the end of ``system`` (proxy/apis/messages/menus.py)."""

from __future__ import annotations

from proxy.apis.messages.menus import menus_in_system

MENU = "Deferred tools, fetch them with ToolSearch:\nmcp__forge__open_ticket\n" \
       "mcp__forge__close_ticket\nmcp__forge__list_tickets"
ASK = {"role": "user", "content": [{"type": "text", "text": "Open a ticket"}]}


def test_a_menu_message_moves_to_the_end_of_system_whole() -> None:
    system = [{"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}}]
    menu = {"role": "system", "content": MENU}
    moved, messages = menus_in_system(system, [ASK, menu], ["Bash", "ToolSearch"])
    assert moved == [*system, {"type": "text", "text": MENU}]
    assert messages == [ASK]
    as_string, _ = menus_in_system("You are a coding agent.", [ASK, menu], [])
    assert as_string == [{"type": "text", "text": "You are a coding agent."},
                         {"type": "text", "text": MENU}]
    alone, _ = menus_in_system(None, [ASK, menu], [])
    assert alone == [{"type": "text", "text": MENU}]


def test_other_system_messages_and_menus_of_known_tools_stay() -> None:
    note = {"role": "system", "content": "The user prefers short answers."}
    known = {"role": "system", "content": MENU}
    names = ["mcp__forge__open_ticket", "mcp__forge__close_ticket", "mcp__forge__list_tickets"]
    messages = [ASK, note, known]
    system, kept = menus_in_system("s", messages, names)
    assert (system, kept) == ("s", messages) and kept is messages
