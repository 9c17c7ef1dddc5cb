"""A technique playbook: short notes of our own on GPU techniques (when they apply, the steps,
the pitfalls that make model-written versions wrong or slow, how to verify), chosen per problem
and profile (`select.choose`) and added to the search's prompts (`notes.render`)."""

from kernelsearch.playbook.notes import Note, load_notes, render
from kernelsearch.playbook.select import Choice, Facts, choose, facts, serves

__all__ = ["Choice", "Facts", "Note", "choose", "facts", "load_notes", "render", "serves"]
