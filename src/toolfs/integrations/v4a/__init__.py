"""V4A diffs, the format of OpenAI's ``apply_patch`` tool: parse and apply, no I/O.

A V4A update diff is a sequence of hunks::

    @@ class Greeter            <- optional anchors ("@@ <a line of the file>"), may stack
    @@     def greet(self):
         name = "world"         <- context (" "), deleted ("-") and added ("+") lines
    -    print("Hi")
    +    print("Hello", name)
    *** End of File             <- optional: the hunk's context ends the file

A created file's diff holds only ``+`` lines. The semantics follow the Agents SDK's
``agents.apply_diff`` wherever V4A leaves a point open (a created file has no final
newline unless the diff ends with an empty ``+`` line; a diff can add or remove the
final newline with an empty ``+``/``-`` line after the last line; an anchor already
passed by an earlier hunk does not move the search), and are stricter wherever the SDK
would guess:

* context is matched **exactly**, on the LF-normalised text (the SDK falls back to
  whitespace-insensitive matches and writes there; here such a match is only named in
  the error as a hint);
* a hunk without an anchor must be located uniquely: if its context also occurs later,
  before the next hunk (or the end of the file), it is ``ambiguous_match``; a hunk with
  an anchor takes the first match after its anchor, which is what ``@@`` asks for, unless
  the anchor occurs again before the next hunk and the hunk fits after that too
  (``ambiguous_match``: the SDK takes the first); a hunk of added lines only needs an
  anchor (or ``*** End of File``, or an empty file);
* an anchor already passed keeps the search where it is only when it continues the
  previous hunk's scope (a second hunk in the same function); one above that scope says
  nothing about where the hunk goes (the SDK writes at the context's next occurrence,
  possibly in another function) and is refused;
* an anchor that is not found, a header with line numbers (unified diff), a line with
  no ``' '``/``'-'``/``'+'`` prefix, or anything after the patch are errors, never
  skipped (blank lines before the first ``@@`` are no hunk and are dropped).

A ``no_match`` quotes the line that differs, from the file and from the diff: for a
match that differs only in whitespace or in Unicode form and typographic punctuation
(never used), or after the longest run of the hunk's lines that does match.

Bytes: matching happens on lines without their terminators, and only the lines a hunk
deletes or adds change; every other line keeps its bytes (CRLF, LF, a lone ``\\r`` in a
line). Added lines take the line ending of the lines they replace or follow (the file's
dominant one otherwise, the diff's in a file without any newline). A BOM is the
caller's business (:class:`toolfs.formats.text.Document`): this module sees text without it.

Cost: O(file + diff). Lines are interned to integers once and every search is a
Knuth-Morris-Pratt scan over those integers; hunks are located left to right, each scan
starting where the previous hunk ended, and the uniqueness check of a hunk covers only
the stretch up to the next hunk, so the scans add up to one pass over the file.
Messages and details are bounded (a few context lines, each clipped).

This package is that one format, in parts that each hold one step: :mod:`.parse` (the
grammar: an update diff's hunks, a created file's text, the ``*** Begin Patch``
envelope), :mod:`.search` (the file as interned lines and the Knuth-Morris-Pratt scans
over them), :mod:`.apply` (locating every hunk, then splicing) and :mod:`.mismatch` (what a
hunk that does not fit is told).
Everything public is imported from here.
"""

from toolfs.integrations.v4a.apply import PatchOutcome, apply_diff, apply_update
from toolfs.integrations.v4a.parse import (
    BEGIN_PATCH,
    END_OF_FILE,
    END_PATCH,
    MAX_HINT_LINES,
    MAX_SHOWN_CHARS,
    MAX_SHOWN_LINES,
    Chunk,
    DiffMode,
    FileOperation,
    Hunk,
    diff_lines,
    parse_create,
    parse_patch,
    parse_update,
)

__all__ = ["BEGIN_PATCH", "END_OF_FILE", "END_PATCH", "MAX_HINT_LINES", "MAX_SHOWN_CHARS",
           "MAX_SHOWN_LINES", "Chunk", "DiffMode", "FileOperation", "Hunk", "PatchOutcome",
           "apply_diff", "apply_update", "diff_lines", "parse_create", "parse_patch",
           "parse_update"]
